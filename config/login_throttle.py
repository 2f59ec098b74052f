"""The login throttle's counting (django-axes, AXES_HANDLER): failures count per (username, client
address) pair, against AXES_FAILURE_LIMIT, and per client address, against the higher
AXES_ADDRESS_FAILURE_LIMIT. A username alone is never locked: whoever knows an operator's name
could otherwise lock that operator out from everywhere. Failures while locked are not recorded
(AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT=False), so knocking on a locked door does not keep
it locked: the cool-off runs from the failure that locked it."""

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_failure_limit
from django.conf import settings
from django.db.models import Sum


def _failures(attempts) -> int:
    return attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0


class PairAndAddressHandler(AxesDatabaseHandler):
    def get_failures(self, request, credentials: dict | None = None) -> int:
        """The pair's failures, or, once the address passed its own limit, at least the pair limit:
        axes compares this one number with AXES_FAILURE_LIMIT, at login and after each failure."""
        pair, address = (_failures(attempts) for attempts in self.get_user_attempts(request, credentials))
        if address >= settings.AXES_ADDRESS_FAILURE_LIMIT:
            return max(pair, get_failure_limit(request, credentials))
        return pair
