"""A bulk replay leaves superseded letters out (counted apart in its preview) unless it asks for them."""

import pytest

from deadletters.bulk.control import start_bulk_action
from deadletters.bulk.runner import run_bulk_action
from deadletters.bulk.selection import build_selection, preview_bulk_action, selection_of
from deadletters.models import DeadLetter, DeadLetterStatus
from reports.models import TaskStatus
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db


def test_a_bulk_replay_of_the_cause_skips_superseded_letters_unless_asked():
    done = make_task(status=TaskStatus.DONE)
    open_one = make_dead_letter()
    moot = make_dead_letter(status=DeadLetterStatus.SUPERSEDED, superseded_by=done)
    cause = f"status=all&fingerprint={open_one.fingerprint}"

    skipping = build_selection(action="replay", scope="filter", filter_qs=cause)
    preview = preview_bulk_action(selection=skipping)
    assert (preview.count, preview.superseded) == (1, 1)
    bulk, _ = start_bulk_action(selection=skipping, actor="alice", ip_address=None, rate_per_second=1000)
    run_bulk_action(bulk.pk, sleep=lambda seconds: None)
    assert DeadLetter.objects.get(pk=open_one.pk).status == DeadLetterStatus.REPLAYED
    assert DeadLetter.objects.get(pk=moot.pk).status == DeadLetterStatus.SUPERSEDED

    asking = build_selection(action="replay", scope="selected", ids=[moot.pk], include_superseded=True)
    assert preview_bulk_action(selection=asking).count == 1
    bulk, _ = start_bulk_action(selection=asking, actor="alice", ip_address=None, rate_per_second=1000)
    assert selection_of(bulk).include_superseded  # the runner reads back what was asked
    run_bulk_action(bulk.pk, sleep=lambda seconds: None)
    assert DeadLetter.objects.get(pk=moot.pk).status == DeadLetterStatus.REPLAYED
