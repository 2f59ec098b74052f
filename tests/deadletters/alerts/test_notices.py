"""Cards for what went wrong with a bulk run, each with the link to act on it: a replay that paused
itself because its replays died again, a canary that failed, a scheduled run that could not start.
Driven through the bulk code itself; one card each on every channel."""

import pytest

from deadletters.alerts.sender import send_due_alerts
from deadletters.bulk.canary import decide_canaries
from deadletters.models import BulkAction, BulkActionStatus
from tests.deadletters.alerts.conftest import CONSOLE
from tests.deadletters.bulk.test_actions import letters, run, start
from tests.deadletters.bulk.test_canary import canary_tasks, die_again, waiting_canary

pytestmark = pytest.mark.django_db(transaction=True)


def cards(fake) -> list[dict]:
    send_due_alerts()
    send_due_alerts()  # a second pass has nothing more to say
    return [hit.body for hit in fake.accepted]


def test_a_bulk_replay_that_paused_itself_sends_one_card(channels, settings, redis_conn):
    fakes = channels(webhook={})
    settings.BULK_REPLAY_PAUSE_MIN_SAMPLE = 2
    letters(10)
    bulk = start("replay", rate=2, pause_threshold=0.5)
    assert run(bulk, slice_seconds=1) == "continued"
    for task in canary_tasks(bulk):  # every replay so far died again
        die_again(task)

    assert run(bulk) == BulkActionStatus.PAUSED

    [card] = cards(fakes["webhook"])
    assert card["title"] == "Bulk replay paused itself"
    assert card["lines"][0].endswith("replayed tasks died again (100%, threshold 50%).")
    assert card["links"] == [{"label": "Open the run", "url": f"{CONSOLE}/console/bulk/{bulk.public_id}/"}]


def test_a_failed_canary_sends_one_card(channels, redis_conn):
    fakes = channels(webhook={})
    bulk, _ = waiting_canary(10, k=5, share=0.8)
    first, second, *_ = canary_tasks(bulk)
    die_again(first)
    die_again(second, error_type="KeyError", message="'region'")

    assert decide_canaries() == [(bulk.pk, "failed")]

    [card] = cards(fakes["webhook"])
    assert card["title"] == "Canary failed: bulk replay stopped"
    assert card["lines"][0] == "Of 5 canary replays 0 succeeded and 2 died again; 4 needed."
    assert card["links"][0]["url"] == f"{CONSOLE}/console/bulk/{bulk.public_id}/"


def test_a_scheduled_run_that_could_not_start_sends_one_card(channels, redis_conn):
    fakes = channels(webhook={})
    letters(3)
    bulk = start("replay")
    # A stored selection the runner cannot read (as an older version might have written it).
    BulkAction.objects.filter(pk=bulk.pk).update(
        start_at=bulk.created_at, filters={**bulk.filters, "max_id": "x"}
    )

    with pytest.raises(ValueError):
        run(bulk)

    assert BulkAction.objects.get(pk=bulk.pk).status == BulkActionStatus.FAILED
    [card] = cards(fakes["webhook"])
    assert card["title"] == "Scheduled bulk replay could not start"
    assert card["links"][0]["url"] == f"{CONSOLE}/console/bulk/{bulk.public_id}/"
