"""Superseded letters in the console: the letter page and the list row link the task that made the
letter moot; the open list and the groups count them apart; a bulk preview says it leaves them out."""

import pytest
from django.test import Client
from django.urls import reverse

from deadletters.models import DeadLetterStatus
from reports.models import TaskStatus
from tests.conftest import operators_group
from tests.factories import make_dead_letter, make_task


@pytest.fixture
def console(db, django_user_model):
    user = django_user_model.objects.create_user("alice", "a@example.invalid", "pw-123456789", is_staff=True)
    user.groups.add(operators_group())
    client = Client()
    client.force_login(user)
    return client


def test_the_superseding_task_is_linked_and_the_letter_counted_apart(console):
    done = make_task(status=TaskStatus.DONE)
    open_one = make_dead_letter()
    moot = make_dead_letter(status=DeadLetterStatus.SUPERSEDED, superseded_by=done)
    task_url = reverse("console:task-detail", args=[done.public_id])

    page = console.get(reverse("console:deadletter-detail", args=[moot.pk])).content.decode()
    assert f'href="{task_url}"' in page

    listed = console.get(reverse("console:deadletter-list"))
    assert [letter.pk for letter in listed.context["page"].items] == [open_one.pk]
    assert "1 superseded, not shown" in listed.content.decode()
    row = console.get(reverse("console:deadletter-list") + "?status=superseded").content.decode()
    assert f'href="{task_url}"' in row

    groups = console.get(reverse("console:deadletter-groups")).content.decode()
    assert "1 superseded, not shown" in groups

    form = {"action": "replay", "scope": "filter", "filter_qs": "status=all"}
    preview = console.post(reverse("console:bulk-preview"), form)
    assert preview.context["preview"].count == 1
    assert "1 superseded letter is left out" in preview.content.decode()
    included = console.post(reverse("console:bulk-preview"), {**form, "include_superseded": "1"})
    assert included.context["preview"].count == 2
    assert 'name="include_superseded" value="1"' in included.content.decode()  # carried to the start
