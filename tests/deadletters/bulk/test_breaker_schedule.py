"""Bulk replays and a kind's circuit breaker (deadletters/bulk/schedule.py): a replay that waits for
the breaker starts (by the scheduled-runs duty) once it is closed, and a breaker that opens pauses
the replays still to make into its kind."""

import pytest

from deadletters.bulk.control import start_bulk_action
from deadletters.bulk.schedule import promote_due_bulk_actions, start_after_breaker
from deadletters.bulk.selection import InvalidBulkRequest, build_selection
from deadletters.models import AuditEntry, BulkActionStatus
from reports.services.breakers import breaker_set
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db


def letters_of(kind: str, n: int = 2) -> None:
    for _ in range(n):
        make_dead_letter(task=make_task(kind=kind, status="dead", attempt=3))


def replay(kind: str, **plan) -> dict:
    selection = build_selection(action="replay", scope="filter", filter_qs=f"kind={kind}")
    return dict(selection=selection, actor="op", ip_address=None, **plan)


def test_a_replay_waiting_on_a_breaker_starts_once_it_closes(upstream_kind):
    letters_of("http_export")
    breaker_set(kind="http_export", action="hold", actor="op")
    bulk, created = start_after_breaker(kind="http_export", **replay("http_export", canary=1))
    assert created and (bulk.status, bulk.after_breaker_of) == ("scheduled", "http_export")

    assert promote_due_bulk_actions() == []
    breaker_set(kind="http_export", action="close", actor="op")
    assert promote_due_bulk_actions() == [bulk.pk]
    assert promote_due_bulk_actions() == []
    bulk.refresh_from_db()
    assert bulk.status == BulkActionStatus.PENDING and bulk.canary_size == 1
    assert AuditEntry.objects.filter(action="bulk_scheduled_start", source="system").count() == 1


def test_only_a_replay_waits_for_a_kind_with_a_breaker(upstream_kind):
    letters_of("probe")
    for kind, action in (("probe", "replay"), ("http_export", "archive")):
        selection = build_selection(action=action, scope="filter", filter_qs="kind=probe")
        with pytest.raises(InvalidBulkRequest) as refused:
            start_after_breaker(kind=kind, selection=selection, actor="op", ip_address=None)
        assert refused.value.field == "after_breaker_of"


def test_an_opening_breaker_pauses_the_replays_into_its_kind(upstream_kind):
    letters_of("http_export")
    letters_of("probe")
    into, _ = start_bulk_action(**replay("http_export"))
    elsewhere, _ = start_bulk_action(**replay("probe"))

    breaker_set(kind="http_export", action="open", actor="")
    into.refresh_from_db()
    elsewhere.refresh_from_db()
    assert (into.status, into.paused_reason) == ("paused", "Paused by circuit breaker of http_export.")
    assert elsewhere.status == BulkActionStatus.PENDING
    paused = AuditEntry.objects.get(action="bulk_pause")
    assert (paused.source, paused.details["bulk"]) == ("system", str(into.public_id))
