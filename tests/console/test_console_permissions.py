"""Who may open each console page: anonymous -> login (next kept), non-staff or no permission -> 403."""

from urllib.parse import quote

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from deadletters.models import AuditEntry
from reports.models import TaskStatus
from tests.conftest import operators_group
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db

PAGES = [
    # (name, url template, permission the page needs)
    ("dashboard", "/console/", "deadletters.view_deadletter"),
    ("list", "/console/dead-letters/?status=all", "deadletters.view_deadletter"),
    ("groups", "/console/dead-letters/groups/", "deadletters.view_deadletter"),
    ("detail", "/console/dead-letters/{letter}/", "deadletters.view_deadletter"),
    ("traceback", "/console/dead-letters/{letter}/traceback.txt",
     ("deadletters.view_deadletter", "deadletters.view_params")),
    ("task-state", "/console/tasks/{task}/state/", "deadletters.view_deadletter"),
    ("audit", "/console/audit/", "deadletters.view_auditentry"),
    ("task-list", "/console/tasks/", "reports.view_reporttask"),
    ("task-detail", "/console/tasks/{task}/", "reports.view_reporttask"),
    ("task-output", "/console/tasks/{done}/output", "reports.view_reporttask"),
]


@pytest.fixture
def urls(media_root):
    letter = make_dead_letter()
    AuditEntry.objects.create(actor="x", action="replay", dead_letter=letter)
    done = make_task(status=TaskStatus.DONE, output_file="out/r.csv")
    (media_root / "out").mkdir(parents=True)
    (media_root / "out" / "r.csv").write_text("x\n")
    return {
        name: template.format(letter=letter.id, task=letter.task.public_id, done=done.public_id)
        for name, template, _ in PAGES
    }


def make_user(username, *, staff=True, perms=(), operator=False, active=True):
    user = get_user_model().objects.create_user(
        username, "", "pw-123456789", is_staff=staff, is_active=active
    )
    if operator:
        user.groups.add(operators_group())
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


@pytest.mark.parametrize("name", [p[0] for p in PAGES])
def test_anonymous_is_sent_to_login_with_next(client, urls, name):
    url = urls[name]
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"/console/login/?next={quote(url, safe='/')}"


def test_anonymous_htmx_poll_redirects_the_whole_tab_to_login(client, urls):
    response = client.get(
        urls["dashboard"],
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL="http://testserver/console/dead-letters/?kind=probe",
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/console/login/?next=/console/dead-letters/%3Fkind%3Dprobe"


@pytest.mark.parametrize("name", [p[0] for p in PAGES])
def test_non_staff_gets_403_even_with_permissions(client, urls, name):
    user = make_user("civilian", staff=False, operator=True)
    client.force_login(user)
    response = client.get(urls[name])
    assert response.status_code == 403
    assert "403" in response.content.decode() and "Operators" in response.content.decode()


@pytest.mark.parametrize("name", [p[0] for p in PAGES])
def test_staff_without_permission_gets_403(client, urls, name):
    client.force_login(make_user("bare-staff"))
    assert client.get(urls[name]).status_code == 403


@pytest.mark.parametrize("name,perm", [(p[0], p[2]) for p in PAGES])
def test_staff_with_only_another_permission_gets_403(client, urls, name, perm):
    needed = {perm} if isinstance(perm, str) else set(perm)
    pages = {"deadletters.view_deadletter", "deadletters.view_auditentry", "reports.view_reporttask"}
    others = pages - needed
    client.force_login(make_user("partial", perms=others))
    assert client.get(urls[name]).status_code == 403
    client.force_login(make_user("exact", perms=needed))
    assert client.get(urls[name]).status_code == 200


@pytest.mark.parametrize("name", [p[0] for p in PAGES])
def test_operator_may_open_every_page(client, urls, name):
    client.force_login(make_user("op", operator=True))
    response = client.get(urls[name])
    assert response.status_code == 200
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]


def test_superuser_who_is_not_staff_is_refused(client, urls):
    user = get_user_model().objects.create_superuser("root", "", "pw-123456789")
    user.is_staff = False
    user.save()
    client.force_login(user)
    assert client.get(urls["dashboard"]).status_code == 403
