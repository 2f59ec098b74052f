"""Who may open which console page: one decorator for every console view (pages and actions).

`console_view(permission=...)` = login required (with `next`) + active staff + the permission
+ `never_cache`. Someone without the right gets templates/403.html (PermissionDenied), never a 500.
"""

from collections.abc import Callable, Iterable
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.views.decorators.cache import never_cache
from django_htmx.http import HttpResponseClientRedirect

VIEW_PERMISSION = "deadletters.view_deadletter"
REPLAY_PERMISSION = "deadletters.replay_deadletter"
# Replaying with edited params also needs this one (the Operators group has it).
REPLAY_EDIT_PERMISSION = "deadletters.replay_edited_deadletter"
ARCHIVE_PERMISSION = "deadletters.archive_deadletter"
TASK_VIEW_PERMISSION = "reports.view_reporttask"
# Without it params show their keys with masked values, and tracebacks (which quote them) are hidden.
VIEW_PARAMS_PERMISSION = "deadletters.view_params"
AUDIT_VIEW_PERMISSION = "deadletters.view_auditentry"
BULK_VIEW_PERMISSION = "deadletters.view_bulkaction"
BATCH_VIEW_PERMISSION = "reports.view_reportbatch"


def _login_redirect(request):
    if getattr(request, "htmx", False):
        # An htmx request from an expired session: send the whole browser tab to the login page
        # and come back to the page the operator was looking at, not to the partial's URL.
        next_path = request.htmx.current_url_abs_path or "/console/"
        login = redirect_to_login(next_path)
        return HttpResponseClientRedirect(login["Location"])
    return redirect_to_login(request.get_full_path())


def can_use_console(user, permission: str | Iterable[str] | None = VIEW_PERMISSION) -> bool:
    if not (user.is_authenticated and user.is_active and user.is_staff):
        return False
    if not permission:
        return True
    perms = (permission,) if isinstance(permission, str) else tuple(permission)
    return user.has_perms(perms)


def console_view(permission: str | Iterable[str] | None = VIEW_PERMISSION) -> Callable:
    """Decorate a console view: anonymous -> login (next kept); no staff/permission -> 403.

    `permission` may also be a tuple of permissions (all required) or None (staff only).
    """

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            user = request.user
            if not user.is_authenticated:
                return _login_redirect(request)
            if not can_use_console(user, permission):
                raise PermissionDenied("You do not have permission to use this part of the console.")
            return view(request, *args, **kwargs)

        return never_cache(wrapped)

    return decorator
