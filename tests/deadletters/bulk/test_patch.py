"""Bulk edit-and-replay (deadletters.bulk.patch): one params patch over a whole selection, each task's
patched params validated by its kind; the refused are skipped with their reasons, the others replayed
with their new params; the patch kept on the run and in the audit; a preview that changes nothing."""

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from deadletters.bulk.control import start_bulk_action
from deadletters.bulk.patch import apply_params_patch, parse_params_patch, preview_params_patch
from deadletters.bulk.selection import InvalidBulkRequest, build_selection
from deadletters.models import AuditEntry, BulkAction, BulkActionStatus, DeadLetter, DeadLetterStatus
from reports.models import ReportTask, TaskStatus
from reports.services.submission import params_digest
from tests.deadletters.bulk.test_actions import run

pytestmark = pytest.mark.django_db

# Every string value's October becomes November: October the 31st has no November twin.
PATCH = {"set": {"format": "xlsx"}, "replace": {"*": {"from": "2026-10", "to": "2026-11"}}}


def sales_letters(n: int, *, invalid: int) -> tuple[list[int], list[int]]:
    """n dead sales_summary tasks with a letter each (bulk_create); the last `invalid` ask for
    2026-10-31, which PATCH turns into a day that does not exist. Returns (valid, invalid) letter ids."""
    now = timezone.now()

    def params(i: int) -> dict:
        day = 31 if i >= n - invalid else 1 + i % 30
        return {"format": "csv", "group_by": "region", "date_from": f"2026-10-{day:02d}",
                "date_to": f"2026-10-{max(day, 30)}"}

    tasks = ReportTask.objects.bulk_create(
        ReportTask(kind="sales_summary", params=params(i), status=TaskStatus.DEAD, attempt=3, max_attempts=3,
                   timeout_seconds=300, finished_at=now)
        for i in range(n)
    )
    letters = DeadLetter.objects.bulk_create(
        DeadLetter(task_id=t.pk, kind=t.kind, params=t.params, error_type="requests.HTTPError",
                   error_message="404 for October", attempts=3, fingerprint="f" * 40)
        for t in tasks
    )
    ids = [letter.pk for letter in letters]
    return ids[: n - invalid], ids[n - invalid:]


def test_a_patch_over_a_thousand_letters_replays_the_valid_with_new_params_and_refuses_ten():
    valid, invalid = sales_letters(1000, invalid=10)
    selection = build_selection(action="replay", scope="filter", filter_qs="kind=sales_summary")

    preview = preview_params_patch(selection, parse_params_patch(PATCH), can_see=True)
    assert (preview.checked, preview.changed, preview.invalid) == (1000, 990, 10)
    assert [r["dead_letter"] for r in preview.refusals] == invalid
    assert ["date_from", "must be a date YYYY-MM-DD"] in preview.refusals[0]["reasons"]
    first = preview.sample[0]
    assert len(preview.sample) == 5 and first["dead_letter"] == valid[0]
    assert first["before"] == {"format": "csv", "date_from": "2026-10-01", "date_to": "2026-10-30"}
    assert first["after"] == {"format": "xlsx", "date_from": "2026-11-01", "date_to": "2026-11-30"}
    assert ReportTask.objects.filter(status=TaskStatus.DEAD).count() == 1000  # the preview changed nothing

    bulk, _ = start_bulk_action(selection=selection, actor="alice", ip_address="10.0.0.9", reason="moved",
                                rate_per_second=1000, pause_threshold=1.0, params_patch=PATCH)
    assert run(bulk) == BulkActionStatus.COMPLETED
    bulk.refresh_from_db()
    counts = (bulk.total, bulk.processed, bulk.succeeded, bulk.refused, bulk.skipped)
    assert counts == (1000, 1000, 990, 10, 0)
    assert bulk.params_patch == PATCH
    assert [r["dead_letter"] for r in bulk.refusals] == invalid
    assert all(["date_from", "must be a date YYYY-MM-DD"] in r["reasons"] for r in bulk.refusals)

    replayed = ReportTask.objects.filter(dead_letters__in=valid)
    assert set(replayed.values_list("status", flat=True)) == {TaskStatus.PENDING}
    assert {(t.params["format"], t.params["date_from"][:7]) for t in replayed} == {("xlsx", "2026-11")}
    kept = ReportTask.objects.filter(dead_letters__in=invalid)
    assert set(kept.values_list("status", flat=True)) == {TaskStatus.DEAD}
    assert {t.params["date_from"] for t in kept} == {"2026-10-31"}
    assert set(DeadLetter.objects.filter(pk__in=invalid).values_list("status", flat=True)) == {
        DeadLetterStatus.OPEN}

    started = AuditEntry.objects.get(action="bulk_replay")
    assert started.details["params_patch"] == PATCH and started.item_count == 1000
    entries = AuditEntry.objects.filter(action="replay", details__bulk=str(bulk.public_id))
    assert entries.count() == 990
    assert entries.get(dead_letter_id=valid[0]).details["params_diff"] == {
        "before": {"format": "csv", "date_from": "2026-10-01", "date_to": "2026-10-30"},
        "after": {"format": "xlsx", "date_from": "2026-11-01", "date_to": "2026-11-30"},
    }


def test_a_patched_task_carries_the_digest_of_its_new_params():
    """Supersession matches reports by params_digest: a patched task is the new report, as after an
    edited single replay, not the old one."""
    sales_letters(3, invalid=0)
    selection = build_selection(action="replay", scope="filter", filter_qs="kind=sales_summary")
    bulk, _ = start_bulk_action(selection=selection, actor="alice", ip_address="10.0.0.9", reason="moved",
                                rate_per_second=1000, pause_threshold=1.0, params_patch=PATCH)
    assert run(bulk) == BulkActionStatus.COMPLETED
    tasks = ReportTask.objects.filter(kind="sales_summary")
    assert tasks.count() == 3
    assert all(t.params_digest == params_digest(t.kind, t.params, t.owner_id) for t in tasks)


@pytest.mark.parametrize(
    "given, named",
    [
        ("[1, 2]", "JSON object"),
        ("{not json", "JSON object"),
        ({}, "JSON object"),
        ({"rename": {"a": "b"}}, "of set, replace or remove"),
        ({"set": ["a"]}, "set must name 1 to 20 params"),
        ({"set": {}}, "set must name"),
        ({"set": {f"k{i}": 1 for i in range(21)}}, "set must name"),
        ({"set": {"a b": 1}}, "set must name"),
        ({"set": {"url": "x" * 2001}}, "text of at most 2000 characters"),
        ({"set": {"n": float("inf")}}, "set must name"),
        ({"set": {"n": [1]}}, "set must name"),
        ({"remove": "region"}, "remove must list"),
        ({"remove": [5]}, "remove must list"),
        ({"replace": {"url": {"from": "", "to": "x"}}}, "replace must name"),
        ({"replace": {"url": {"from": "a"}}}, "replace must name"),
        ('{"set": {"region": "\\u0000"}}', "NUL"),
    ],
)
def test_a_malformed_patch_is_refused_naming_the_field(given, named):
    with pytest.raises(InvalidBulkRequest) as refused:
        parse_params_patch(given)
    assert refused.value.field == "params_patch" and named in refused.value.message


def test_the_patch_language_removes_then_sets_then_replaces():
    patch = parse_params_patch('{"remove": ["b"], "set": {"c": "old-x"}, '
                               '"replace": {"*": {"from": "old", "to": "new"}}}')
    assert apply_params_patch({"a": "old-a", "b": 1, "n": 5}, patch) == {"a": "new-a", "n": 5, "c": "new-x"}


def test_only_a_replay_takes_a_patch():
    sales_letters(2, invalid=0)
    selection = build_selection(action="archive", scope="filter", filter_qs="")
    with pytest.raises(InvalidBulkRequest) as refused:
        start_bulk_action(selection=selection, actor="a", ip_address=None, reason="x", params_patch=PATCH)
    assert refused.value.field == "params_patch"
    assert not BulkAction.objects.exists()


def test_the_shell_checks_a_patch_in_a_dry_run_and_refuses_a_malformed_one():
    sales_letters(4, invalid=1)
    out = io.StringIO()

    call_command("replay_deadletters", "--kind", "sales_summary", "--patch", json.dumps(PATCH), "--dry-run",
                 stdout=out)

    assert "the patch changes the params of 3 of the 4 tasks checked; 1 would be refused" in out.getvalue()
    assert "refused: date_from: must be a date YYYY-MM-DD" in out.getvalue()
    with pytest.raises(CommandError, match="--patch must be a JSON object"):
        call_command("replay_deadletters", "--kind", "sales_summary", "--patch", "format=xlsx")
    assert not BulkAction.objects.exists()
