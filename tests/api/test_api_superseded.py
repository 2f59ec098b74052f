"""Superseded letters through the API: listed apart (`status=superseded`) with the task that made
them moot, and left out of a bulk replay unless `include_superseded`."""

import json

import pytest

from deadletters.models import DeadLetterStatus
from reports.models import TaskStatus
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db


def test_superseded_letters_in_the_list_and_a_bulk_replay(token_client):
    done = make_task(status=TaskStatus.DONE)
    open_one = make_dead_letter()
    moot = make_dead_letter(status=DeadLetterStatus.SUPERSEDED, superseded_by=done)

    listed = token_client.get("/report/task/dead-letters").json()["results"]
    assert [(row["id"], row["status"], row["superseded_by"]) for row in listed] == [
        (open_one.pk, "open", None)]
    apart = token_client.get("/report/task/dead-letters?status=superseded").json()["results"]
    assert [(row["id"], row["superseded_by"]) for row in apart] == [(moot.pk, str(done.public_id))]
    refused = token_client.get("/report/task/dead-letters?status=archived")
    assert (refused.status_code, refused.json()["field"]) == (400, "status")

    def dry_run(**extra):
        body = {"action": "replay", "filter": {"status": "all"}, "dry_run": True, **extra}
        return token_client.post("/report/bulk/start", json.dumps(body), content_type="application/json")

    assert dry_run().json() == {"dry_run": True, "count": 1, "superseded": 1}
    assert dry_run(include_superseded=True).json() == {"dry_run": True, "count": 2, "superseded": 0}
    bad = dry_run(include_superseded="yes")
    assert (bad.status_code, bad.json()["field"]) == (422, "include_superseded")
