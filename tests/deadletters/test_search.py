"""Search and the fingerprint filter: identifiers the console shows round-trip (an 8-character
task id, a full task id, `13` and `#13`, a 10- or 12-character fingerprint), the API finds what
the console finds, and each lookup is answered from an index (EXPLAIN on PostgreSQL; the same
statements' SQLite plans show what SQLite does with them)."""

import json
import uuid

import pytest
from django.db import connection
from django.http import QueryDict

from deadletters.filters import (
    InvalidFilter,
    filtered_dead_letters,
    parse_dead_letter_filters,
    search_condition,
)
from deadletters.models import DeadLetter
from reports.models import ReportTask, TaskStatus
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db


def letter_with(task_id: str, message: str, **fields):
    task = make_task(public_id=uuid.UUID(task_id), status=TaskStatus.DEAD, attempt=3)
    return make_dead_letter(task=task, error_message=message, **fields)


def found(query: str) -> set[int]:
    filters = parse_dead_letter_filters(QueryDict(query))
    return set(filtered_dead_letters(filters).values_list("pk", flat=True))


@pytest.fixture
def three():
    return (
        letter_with("3f2a9c1e-0000-4000-8000-000000000001", "connection refused to host-42"),
        letter_with("3f2a9c1e-0000-4000-8000-000000000002", "Timeout after 30 s"),
        letter_with("77aa0000-0000-4000-8000-000000000003", "bad parameter 'region' = 13"),
    )


def test_what_the_console_shows_finds_the_letter(three):
    a, b, c = three

    assert found(f"q={str(a.task.public_id)[:8]}") == {a.pk, b.pk}  # the list shows 8 characters
    assert found(f"q={str(a.task.public_id)[:13]}") == {a.pk, b.pk}  # dashes are fine
    assert found(f"q={a.task.public_id}") == {a.pk}
    assert found(f"q={str(a.task.public_id).upper()}") == {a.pk}
    assert found(f"q=%23{c.pk}") == {c.pk}  # "#13"
    assert found(f"q=%23 {c.pk}") == {c.pk}
    assert found(f"q={c.pk}") == {c.pk}
    assert found("q=HOST-42") == {a.pk}
    assert found("q=region' = 13") == {c.pk}
    assert found("q=ti") == set()  # two characters that are no id find nothing


def test_a_number_finds_the_letter_with_that_id_and_messages_containing_it(three):
    a, b, c = three
    other = make_dead_letter(error_message=f"exit code {c.pk:03d}9")

    assert found(f"q={c.pk:03d}") == {c.pk, other.pk}
    assert found(f"q=%23{c.pk:03d}") == {c.pk}


def test_a_fingerprint_prefix_matches_every_letter_of_that_cause(three):
    a, b, c = three
    again = make_dead_letter(error_message="connection refused to host-7")  # same cause as a
    assert again.fingerprint == a.fingerprint

    for width in (10, 12, 40):
        assert found(f"status=all&fingerprint={a.fingerprint[:width]}") == {a.pk, again.pk}
    assert found(f"fingerprint={a.fingerprint[:12].upper()}") == {a.pk, again.pk}
    with pytest.raises(InvalidFilter, match="8 to 40 hex characters"):
        found(f"fingerprint={a.fingerprint[:7]}")
    with pytest.raises(InvalidFilter, match="fingerprint"):
        found("fingerprint=zzzzzzzzzz")


def test_the_api_search_finds_what_the_console_finds(three, token_client):
    a, b, c = three

    def api(query: str) -> set[int]:
        response = token_client.get(f"/report/task/dead-letters?{query}")
        assert response.status_code == 200, response.content
        return {row["id"] for row in response.json()["results"]}

    for query in (f"q={str(a.task.public_id)[:8]}", f"q=%23{c.pk}", "q=host-42", f"q={a.task.public_id}"):
        assert api(query) == found(query)
    assert api(f"fingerprint={a.fingerprint[:12]}") == {a.pk}
    assert token_client.get("/report/task/dead-letters?fingerprint=abc").status_code == 400
    too_long = token_client.get("/report/task/dead-letters?q=" + "x" * 201)
    assert too_long.status_code == 400 and too_long.json()["field"] == "q"


# --- plans -----------------------------------------------------------------------------------

ROWS = 10_000


def many_letters() -> None:
    tasks = ReportTask.objects.bulk_create(
        ReportTask(
            kind="probe", params={}, status=TaskStatus.DEAD, attempt=3, max_attempts=3, timeout_seconds=9
        )
        for _ in range(ROWS)
    )
    DeadLetter.objects.bulk_create(
        (
            DeadLetter(
                task=task,
                kind="probe",
                error_type="requests.exceptions.ConnectionError",
                error_message=f"connection refused to host-{i % 997}",
                # Rows as wide as real ones (a traceback each), so a scan costs what it really does.
                traceback='Traceback (most recent call last):\n  File "reports/jobs.py", line 70\n' * 16,
                attempts=3,
                fingerprint=f"{i % 50:040x}",
            )
            for i, task in enumerate(tasks)
        ),
        batch_size=2000,
    )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")


def plan_of(qs) -> str:
    if connection.vendor == "postgresql":
        return qs.explain(format="json")
    return qs.explain()


def test_each_search_is_answered_from_an_index():
    many_letters()
    some_task = ReportTask.objects.order_by("pk")[ROWS // 2]
    letter = DeadLetter.objects.get(task=some_task)
    page = ("-created_at", "-id")
    plans = {
        "text": plan_of(
            filtered_dead_letters(parse_dead_letter_filters({"q": "host-42"})).order_by(*page)[:51]
        ),
        "letter id": plan_of(
            filtered_dead_letters(parse_dead_letter_filters({"q": f"#{letter.pk}"})).order_by(*page)[:51]
        ),
        "task prefix": plan_of(
            ReportTask.objects.filter(
                public_id__gte=uuid.UUID(str(some_task.public_id)[:8] + "-0000-0000-0000-000000000000"),
                public_id__lte=uuid.UUID(str(some_task.public_id)[:8] + "-ffff-ffff-ffff-ffffffffffff"),
            ).values_list("pk", flat=True)
        ),
        "task prefix letters": plan_of(
            filtered_dead_letters(parse_dead_letter_filters({"q": str(some_task.public_id)[:8]})).order_by(
                *page
            )[:51]
        ),
        "fingerprint prefix": plan_of(
            filtered_dead_letters(parse_dead_letter_filters({"fingerprint": f"{7:040x}"[:12]})).order_by(
                *page
            )[:51]
        ),
    }
    assert found(f"q={str(some_task.public_id)[:8]}") >= {letter.pk}

    if connection.vendor == "postgresql":
        assert '"Index Name": "dl_error_message_trgm"' in plans["text"], plans["text"]
        assert "Seq Scan" not in plans["text"]
        assert '"Index Name": "deadletters_deadletter_pkey"' in plans["letter id"], plans["letter id"]
        assert '"Index Name": "reports_reporttask_public_id_key"' in plans["task prefix"], plans[
            "task prefix"
        ]
        assert '"Index Name": "deadletters_deadletter_task_id' in plans["task prefix letters"], plans[
            "task prefix letters"
        ]
        # 1 row in 50 has the prefix: walking the newest-first index and checking it is as good
        # as a range on the fingerprint index; the planner may pick either, never a table scan.
        assert '"Index Name": "dl_' in plans["fingerprint prefix"], plans["fingerprint prefix"]
        for name, shown in plans.items():
            assert "Seq Scan" not in shown, (name, json.loads(shown))
    else:
        # SQLite: ids and prefixes use their indexes; message text is a scan of the table (the
        # README says what scale SQLite's search is for).
        assert "INTEGER PRIMARY KEY" in plans["letter id"], plans["letter id"]
        assert "public_id" in plans["task prefix"] and "INDEX" in plans["task prefix"], plans["task prefix"]
        # (SQLite walks the status index newest first and checks the prefix: an index either way)
        assert "USING INDEX" in plans["fingerprint prefix"], plans["fingerprint prefix"]
        assert "SCAN" in plans["text"] or "dl_status_created" in plans["text"], plans["text"]


@pytest.mark.parametrize("text", ["¹", "#¹²", "٣٤٥"])
def test_digits_of_other_scripts_are_text_not_ids(text):
    """Unicode digits pass str.isdigit() and \\d but not int(): they were a 500 on the API's search."""
    assert list(DeadLetter.objects.filter(search_condition(text))) == []
