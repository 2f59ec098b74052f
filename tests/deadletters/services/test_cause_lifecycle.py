"""A cause marked "fixed in the next release": the first housekeeper that runs under another
RELEASE_NAME replays its open letters with the bulk runs' canary, once even when two race
(tests/deadletters/alerts/test_lifecycle_alerts.py: the regression that may follow)."""

import threading

import pytest
from django.db import connection

from deadletters.models import AuditEntry, BulkAction
from deadletters.selectors.causes import cause_lifecycles
from deadletters.services.cause_lifecycle import CauseError, cause_mark_fixed, release_replay_fixed_causes
from tests.conftest import make_death

pytestmark = pytest.mark.django_db(transaction=True)


def race(duty, callers: int = 2) -> list:
    """`callers` threads call `duty` at the same moment, as two housekeepers would."""
    start, results, errors = threading.Barrier(callers), [], []

    def call():
        try:
            start.wait(10)
            results.append(duty())
        except Exception as exc:  # surfaced below: a thread's failure must fail the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=call) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    return results


def test_the_next_release_replays_a_fixed_cause_once_with_a_canary_whoever_races(settings, redis_conn):
    settings.RELEASE_NAME = "2026.11.1"
    letters = [make_death(message=f"ledger locked '{i}'") for i in range(3)]
    make_death(message="another cause")
    fingerprint = letters[0].fingerprint
    settings.RELEASE_NAME = ""
    with pytest.raises(CauseError) as refused:
        cause_mark_fixed(fingerprint=fingerprint, actor="alice")
    assert refused.value.field == "release"
    settings.RELEASE_NAME = "2026.11.1"
    cause, changed = cause_mark_fixed(fingerprint=fingerprint, actor="alice")
    assert changed and cause_mark_fixed(fingerprint=fingerprint, actor="bob") == (cause, False)
    assert release_replay_fixed_causes() == "nothing"  # still the release it was marked under
    assert cause_lifecycles([fingerprint])[fingerprint]["fixed"]["state"] == "marked"

    settings.RELEASE_NAME = "2026.11.2"
    results = race(release_replay_fixed_causes)

    assert sorted(results) == ["1 fixed cause(s) replayed under 2026.11.2", "nothing"]
    [bulk] = BulkAction.objects.all()
    assert (bulk.action, bulk.status, bulk.total, bulk.canary_size) == ("replay", "pending", 3, 3)
    assert (bulk.actor, bulk.source) == ("alice", "system")
    assert bulk.filters["filter"]["fingerprint"] == fingerprint
    [entry] = AuditEntry.objects.filter(action="cause_release_replay")
    assert (entry.actor, entry.source, entry.item_count) == ("alice", "system", 3)
    assert entry.details["on_behalf_of"] == "alice" and entry.details["marked_under"] == "2026.11.1"
    assert AuditEntry.objects.filter(action="bulk_replay", actor="alice", source="system").count() == 1
    assert release_replay_fixed_causes() == "nothing"
    fixed = cause_lifecycles([fingerprint])[fingerprint]["fixed"]
    assert (fixed["state"], fixed["fixed_in"]) == ("released", "2026.11.2")
    assert fixed["marked_under"] == "2026.11.1"
