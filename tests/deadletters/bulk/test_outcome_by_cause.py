"""A bulk replay's outcome by cause: for each cause of the letters it replayed, how many tasks were
replayed, are done and died again, after real workers ran the replays (some succeed, some die
again), in the service, the API's bulk status and the console's bulk page."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from api.openapi import openapi_document
from deadletters.bulk.control import start_bulk_action
from deadletters.bulk.selection import build_selection
from deadletters.bulk.watch import CauseOutcome, replay_outcome, replay_outcome_by_cause
from deadletters.models import BulkAction, BulkActionStatus, DeadLetter
from reports.models import ReportTask, TaskStatus
from reports.services.tokens import create_api_token
from tests.api.test_api_contract import validate
from tests.conftest import operators_group, wait_until
from tests.factories import make_dead_letter, make_task

SUCCEEDS = {"fail_attempts": 0}
FAILS = {"fail_attempts": 99}  # a transient failure on every attempt: with one attempt, dead again


def dead_letter(message: str, params: dict) -> DeadLetter:
    task = make_task(kind="probe", params=params, status=TaskStatus.DEAD, attempt=3,
                     finished_at=timezone.now())
    return make_dead_letter(task=task, error_message=message)


@pytest.mark.django_db(transaction=True)
def test_outcome_by_cause_after_real_workers_ran_the_replays(start_worker, fast_retries, django_user_model):
    fast_retries.REPORT_MAX_ATTEMPTS = 1
    fixed = [dead_letter("orders API unreachable", SUCCEEDS) for _ in range(3)]
    broken = [dead_letter("region missing", FAILS) for _ in range(2)]
    mixed = [dead_letter("disk full", SUCCEEDS), dead_letter("disk full", FAILS)]
    bulk, _ = start_bulk_action(
        selection=build_selection(action="replay", scope="filter", filter_qs=""),
        actor="alice",
        ip_address=None,
        reason="upstream fixed",
        rate_per_second=1000,
        pause_threshold=0,  # this test wants every replay to run, however many die again
    )
    for _ in range(2):
        start_worker()

    wait_until(
        lambda: BulkAction.objects.filter(pk=bulk.pk, status=BulkActionStatus.COMPLETED).exists(),
        timeout=60,
        message="the bulk replay to complete",
    )
    replayed_tasks = [letter.task_id for letter in (*fixed, *broken, *mixed)]
    wait_until(
        lambda: ReportTask.objects.filter(pk__in=replayed_tasks,
                                          status__in=(TaskStatus.DONE, TaskStatus.DEAD)).count()
        == len(replayed_tasks),
        timeout=90,
        message="every replayed task to be done or dead again",
    )

    causes, limited = replay_outcome_by_cause(bulk)

    assert not limited
    assert causes == [
        CauseOutcome(fixed[0].fingerprint, "reports.errors.TransientError", replayed=3, done=3, died_again=0),
        *sorted(
            [
                CauseOutcome(broken[0].fingerprint, "reports.errors.TransientError",
                             replayed=2, done=0, died_again=2),
                CauseOutcome(mixed[0].fingerprint, "reports.errors.TransientError",
                             replayed=2, done=1, died_again=1),
            ],
            key=lambda cause: cause.fingerprint,
        ),
    ]
    outcome = replay_outcome(bulk)
    assert sum(c.replayed for c in causes) == outcome.replayed == 7
    assert sum(c.died_again for c in causes) == outcome.died_again == 3
    assert all(c.unfinished == 0 for c in causes)

    # The API's bulk status says the same, as its document describes it.
    _, raw = create_api_token(name="ops", scopes=("read", "operator"))
    answer = Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get(f"/report/bulk/{bulk.public_id}/status").json()
    validate(openapi_document(), {"$ref": "#/components/schemas/BulkStatus"}, answer)
    assert answer["outcome_by_cause_limited"] is False
    outcomes = answer["outcome_by_cause"]
    assert {c["fingerprint"]: (c["replayed"], c["done"], c["died_again"]) for c in outcomes} == {
        fixed[0].fingerprint: (3, 3, 0),
        broken[0].fingerprint: (2, 0, 2),
        mixed[0].fingerprint: (2, 1, 1),
    }

    # And the console's bulk page, in a table of its own.
    user = get_user_model().objects.create_user("alice", "a@example.invalid", "pw-123456789", is_staff=True)
    user.groups.add(operators_group())
    console = Client()
    console.force_login(user)
    page = console.get(f"/console/bulk/{bulk.public_id}/").content.decode()
    table = page.split("Outcome by cause", 1)[1].split("</table>", 1)[0]
    assert table.count("<tr class=") == 3
    row = re.search(rf"<tr[^>]*>(?:(?!</tr>).)*{mixed[0].fingerprint[:10]}.*?</tr>", table, flags=re.S)[0]
    assert 'data-label="Replayed">2<' in row and 'data-label="Done">1<' in row
    assert 'data-label="Died again">1<' in row
