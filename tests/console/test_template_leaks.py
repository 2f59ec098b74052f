"""No console page shows template source: a `{# ... #}` spanning lines is not a comment to Django
(only `{% comment %}` is), and it reaches the operator as text."""

import pytest
from django.contrib.auth import get_user_model

from deadletters.models import BulkAction, DeadLetter, DeadLetterStatus
from deadletters.services.replay import replay_dead_letter
from reports.models import ReportBatch
from tests.conftest import operators_group
from tests.system.test_browser_pages import seed_realistic

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def every_console_page(letters) -> list[tuple[str, dict]]:
    letter = letters[0]
    replayed = DeadLetter.objects.filter(status=DeadLetterStatus.REPLAYED).first()
    bulk = BulkAction.objects.get()
    batch = ReportBatch.objects.get()
    pages = [
        "/console/",
        "/console/dead-letters/",
        "/console/dead-letters/?status=all",
        "/console/dead-letters/?kind=nothing",
        "/console/dead-letters/?created_from=yesterday",
        "/console/dead-letters/groups/",
        f"/console/dead-letters/{letter.pk}/",
        f"/console/dead-letters/{replayed.pk}/",
        f"/console/dead-letters/{letter.pk}/replay/",
        f"/console/dead-letters/{letter.pk}/replay/edit/",
        f"/console/dead-letters/{letter.pk}/discard/",
        f"/console/dead-letters/{replayed.pk}/replay/",
        "/console/tasks/",
        f"/console/tasks/{letter.task.public_id}/",
        f"/console/tasks/{replayed.task.public_id}/",
        "/console/audit/",
        "/console/bulk/",
        f"/console/bulk/{bulk.public_id}/",
        "/console/batches/",
        f"/console/batches/{batch.public_id}/",
        "/console/kinds/",
        "/console/dead-letters/999999/",
    ]
    partials = [
        "/console/",
        "/console/dead-letters/?status=all",
        "/console/dead-letters/groups/",
        f"/console/tasks/{replayed.task.public_id}/state/",
        f"/console/batches/{batch.public_id}/progress/",
    ]
    return [(path, {}) for path in pages] + [(path, HTMX) for path in partials]


def test_no_console_page_shows_template_source(client):
    letters = seed_realistic()
    replay_dead_letter(dead_letter_id=letters[1].pk, actor="operator", ip_address=None)
    BulkAction.objects.create(action="archive", status="completed", total=2, processed=2, succeeded=2,
                              actor="op")
    leaks = {}
    for path in ("/console/login/",):
        body = client.get(path).content.decode()
        leaks[path] = [marker for marker in ("{#", "{%", "#}", "%}") if marker in body]
    user = get_user_model().objects.create_user("op", "op@example.invalid", "pw-op-12345", is_staff=True)
    user.groups.add(operators_group())
    client.force_login(user)
    pages = every_console_page(letters)
    for path, headers in pages:
        response = client.get(path, **headers)
        assert response.status_code in (200, 400, 404, 409), (path, response.status_code)
        body = response.content.decode()
        leaks[f"{path} {'(htmx)' if headers else ''}"] = [m for m in ("{#", "{%", "#}", "%}") if m in body]
    # A staff account without the console's permissions gets the 403 page.
    client.force_login(get_user_model().objects.create_user("viewer", is_staff=True))
    body = client.get("/console/").content.decode()
    leaks["403"] = [m for m in ("{#", "{%", "#}", "%}") if m in body]
    assert {path: found for path, found in leaks.items() if found} == {}
    assert len(leaks) == len(pages) + 2


BIDI_CONTROLS = {  # the marks, embeddings, overrides and isolates
    "\u061c", "\u200e", "\u200f",
    *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A)),
}


def test_no_console_page_lets_a_client_batch_name_reorder_what_it_shows(client):
    """A client names its batch; a right-to-left override in the name would turn the text after
    it around on the operator's screen. The console shows such characters as their escapes."""
    letters = seed_realistic()
    replay_dead_letter(dead_letter_id=letters[1].pk, actor="operator", ip_address=None)
    BulkAction.objects.create(
        action="archive", status="completed", total=2, processed=2, succeeded=2, actor="op"
    )
    batch = ReportBatch.objects.get()
    ReportBatch.objects.filter(pk=batch.pk).update(name="invoice\u202egpj.exe\u2066x\u2069\u200f")
    user = get_user_model().objects.create_user("op", "op@example.invalid", "pw-op-12345", is_staff=True)
    user.groups.add(operators_group())
    client.force_login(user)
    pages = every_console_page(letters) + [
        (f"/console/dead-letters/?status=all&batch={batch.public_id}", {}),
        (f"/console/tasks/?batch={batch.public_id}", {}),
    ]
    shown = {}
    for path, headers in pages:
        body = client.get(path, **headers).content.decode()
        shown[path] = sorted({f"U+{ord(char):04X}" for char in body if char in BIDI_CONTROLS})
    assert {path: chars for path, chars in shown.items() if chars} == {}
    assert "invoice\\u202egpj.exe" in client.get("/console/batches/").content.decode()
