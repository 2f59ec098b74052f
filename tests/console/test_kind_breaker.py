"""A kind's circuit breaker on its console page (templates/console/_kind_breaker.html): shown,
held and closed by an operator with the permission of pausing a kind, audited; a threshold out of
bounds is a 400 naming the field; resuming a kind the breaker paused closes the breaker. The
command line's `manage.py breaker` does the same."""

import pytest
from django.core.management import CommandError, call_command

from deadletters.models import AuditEntry
from reports.models import KindBreaker, PausedKind
from tests.console.test_console_permissions import make_user

pytestmark = pytest.mark.django_db

URL = "/console/kinds/http_export/breaker/"


def state() -> str:
    return KindBreaker.objects.get(kind="http_export").state


def test_an_operator_holds_the_breaker_and_resuming_the_kind_closes_it(client, upstream_kind):
    client.force_login(make_user("op", operator=True))
    page = client.get("/console/kinds/http_export/").content.decode()
    assert "Circuit breaker" in page and 'value="hold"' in page

    assert client.post(URL, {"action": "hold", "reason": "vendor maintenance"}).status_code == 302
    assert state() == "held" and PausedKind.objects.filter(kind="http_export").exists()
    assert client.post("/console/kinds/http_export/resume/").status_code == 302
    assert state() == "closed" and not PausedKind.objects.exists()
    entries = list(AuditEntry.objects.order_by("pk").values_list("action", "actor", "source"))
    assert entries == [("breaker_held", "op", "console"), ("resume_kind", "op", "console")]


def test_a_threshold_out_of_bounds_is_refused_naming_it(client, upstream_kind):
    client.force_login(make_user("op", operator=True))
    refused = client.post(URL, {"action": "open", "failures_to_open": "0"})
    assert refused.status_code == 400 and "failures_to_open" in refused.content.decode()
    assert state() == "closed" and not AuditEntry.objects.exists()


def test_the_breaker_needs_the_permission_of_pausing_a_kind(client, upstream_kind):
    client.force_login(make_user("viewer", perms={"reports.view_reportbatch"}))
    assert client.post(URL, {"action": "open"}).status_code == 403
    assert state() == "closed"


def test_the_command_opens_and_closes_it(upstream_kind, capsys):
    call_command("breaker", "http_export", "open", "--probes-to-close", "4")
    assert (state(), KindBreaker.objects.get().probes_to_close) == ("open", 4)
    with pytest.raises(CommandError, match="probes_to_close"):
        call_command("breaker", "http_export", "--probes-to-close", "0")
    call_command("breaker", "http_export", "close")
    assert state() == "closed"
    assert [entry.source for entry in AuditEntry.objects.all()] == ["cli", "cli"]
