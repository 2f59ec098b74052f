"""The Tasks page's search: id prefix, kind, status, client and text in the params."""

import pytest
from django.test import Client

from reports.models import TaskStatus
from reports.services.tokens import create_api_token
from tests.conftest import operators_group
from tests.factories import make_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user(
        "olga", "olga@example.invalid", "pw-123456789", is_staff=True
    )
    user.groups.add(operators_group())
    client = Client()
    client.force_login(user)
    return client


def shown(operator, **query) -> set[str]:
    page = operator.get("/console/tasks/", query).content.decode()
    return {tid for tid in page.split('title="')[1:] for tid in [tid.split('"')[0]] if len(tid) == 36}


def test_each_filter_narrows_the_list(operator):
    token = create_api_token(name="billing", scopes=["submit"])[0]
    mine = make_task(kind="sales_summary", params={"region": "north-east"}, owner=token)
    console = make_task(
        kind="sales_summary", params={"region": "south"}, submitted_by="olga", status=TaskStatus.DONE
    )
    other = make_task(kind="probe", params={"region": "north-west"})

    assert shown(operator, id=str(mine.public_id)[:8]) == {str(mine.public_id)}
    assert shown(operator, id=str(mine.public_id)[:13]) == {str(mine.public_id)}  # with its dash
    assert shown(operator, client="billing") == {str(mine.public_id)}
    assert shown(operator, client="olga") == {str(console.public_id)}
    assert shown(operator, params="NORTH") == {str(mine.public_id), str(other.public_id)}
    assert shown(operator, params="north", kind="sales_summary") == {str(mine.public_id)}
    assert shown(operator, status="done") == {str(console.public_id)}


def test_a_malformed_id_prefix_is_named_and_ignored(operator):
    task = make_task()
    page = operator.get("/console/tasks/", {"id": "zz-not-hex"}).content.decode()
    assert "is not the start of a task id" in page and str(task.public_id) in page
