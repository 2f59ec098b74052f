"""The audit log: who did what to which dead letter or task, from where, and why.

Written by the services only, in the transaction of the change it records, never edited.
`client_ip` is the one place that decides which address an entry records, for the console
and the API alike."""

import ipaddress

from django.conf import settings
from django.utils.translation import gettext as _

from deadletters.models import AuditEntry
from reports.wording import verb_word

REASON_MAX = 2000


class ReasonRequired(ValueError):
    """DEADLETTER_REQUIRE_REASON is on and an operator acted without saying why."""

    def __init__(self, action: str):
        self.action = action
        bulk, _space, verb = action.rpartition(" ")
        values = {"verb": verb_word(verb)}
        if bulk:
            message = _("a reason is required for a bulk %(verb)s (DEADLETTER_REQUIRE_REASON)") % values
        else:
            message = _("a reason is required to %(verb)s (DEADLETTER_REQUIRE_REASON)") % values
        super().__init__(message)


def require_reason(*, action: str, reason: str | None) -> None:
    """Refuse an operator's replay, archive or discard without a reason when the setting asks for one.
    Called by the services themselves, so no face (console, API, bulk) can skip it."""
    if settings.DEADLETTER_REQUIRE_REASON and not (reason or "").strip():
        raise ReasonRequired(action)


def record_audit(
    *,
    action: str,
    actor: str = "",
    source: str = "console",
    ip_address: str | None = None,
    task=None,
    dead_letter=None,
    item_count: int = 1,
    reason: str = "",
    details: dict | None = None,
) -> AuditEntry:
    return AuditEntry.objects.create(
        action=action,
        actor=actor[:150],
        source=source[:20],
        ip_address=ip_address,
        task=task,
        dead_letter=dead_letter,
        item_count=item_count,
        reason=reason[:REASON_MAX],
        details=details or {},
    )


def client_ip(request) -> str | None:
    """REMOTE_ADDR, or the address the N-th trusted proxy appended to X-Forwarded-For when
    CONSOLE_TRUSTED_PROXY_COUNT=N says there are proxies in front (the left end is client input).
    The header counts only when the direct peer is in CONSOLE_TRUSTED_PROXIES: anyone reaching the
    web server itself could write it."""
    candidate = _address(request.META.get("REMOTE_ADDR"))
    proxies = settings.CONSOLE_TRUSTED_PROXY_COUNT
    if proxies and candidate is not None and any(candidate in net
                                                 for net in settings.CONSOLE_TRUSTED_PROXIES):
        hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]
        if len(hops) >= proxies:
            candidate = _address(hops[-proxies])
    return str(candidate) if candidate is not None else None


def _address(raw: str | None):
    try:
        return ipaddress.ip_address(raw) if raw else None
    except ValueError:
        return None
