"""Who is calling: a bearer API token, or a console (staff) session with CSRF.

`api_endpoint` wraps every API view: method check, authentication, the token's scope or the session
user's permission, CSRF for session POSTs (never for bearer-token POSTs: a token is not sent by
browsers on their own), and turns ApiError into the JSON error format.

A token without the operator scope sees only its own tasks, batches and dead letters
(`ApiClient.owner_filter`); another client's answer 404, as an unknown id does, so a token cannot
even learn that they exist.
"""

from dataclasses import dataclass
from functools import wraps

from django.contrib.auth.models import AbstractBaseUser
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import translation
from django.utils.cache import add_never_cache_headers
from django.views.decorators.csrf import csrf_exempt

from api.errors import ApiError, api_error_response
from api.language import api_language
from reports.kinds import get_kind
from reports.models import ApiScope, ApiToken
from reports.services.tokens import authenticate_token

UNSAFE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
# What a session user needs where a token needs the `submit` scope, and the `operator` scope's
# operator-only kinds (the other scopes name their permission on each endpoint).
SUBMIT_PERMISSION = "reports.add_reporttask"
OPERATOR_KINDS_PERMISSION = "reports.submit_operator_kinds"
VIEW_PARAMS_PERMISSION = "deadletters.view_params"
REPLAY_EDIT_PERMISSION = "deadletters.replay_edited_deadletter"  # edited replays, params patches
BEARER_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="report-api"'}


@dataclass(frozen=True)
class ApiClient:
    kind: str  # "token" or "session"
    name: str
    token: ApiToken | None = None
    user: AbstractBaseUser | None = None

    @property
    def actor(self) -> str:
        return f"token:{self.name}" if self.kind == "token" else self.name

    @property
    def is_operator(self) -> bool:
        """Sessions are staff (their permissions decide); tokens need the operator scope."""
        return self.token is None or self.token.is_operator

    @property
    def may_submit_operator_kinds(self) -> bool:
        if self.token is not None:
            return self.token.is_operator
        return self.user is not None and self.user.has_perm(OPERATOR_KINDS_PERMISSION)

    @property
    def can_see_params(self) -> bool:
        """Whether params and tracebacks show unmasked (reports.kinds.masking.params_for_display): a
        client's own tasks always; everyone's with the `params` scope or the session's permission."""
        if self.token is not None:
            return not self.token.is_operator or self.token.has_scope(ApiScope.PARAMS)
        return self.user is not None and self.user.has_perm(VIEW_PARAMS_PERMISSION)

    @property
    def budget_holder(self) -> ApiToken | AbstractBaseUser | None:
        """Whose submit and replay budgets a request spends: the token's, or the session user's."""
        return self.token if self.token is not None else self.user

    @property
    def owner_filter(self) -> ApiToken | None:
        """The owner every task, batch and dead letter this client reads must have; None: anyone's."""
        return None if self.is_operator else self.token


class _CsrfCheck(CsrfViewMiddleware):
    def _reject(self, request, reason):
        return reason


def _csrf_failure(request) -> str | None:
    check = _CsrfCheck(lambda req: None)
    check.process_request(request)
    return check.process_view(request, None, (), {})


def authenticate(request, *, permission: str | None, scope: str | None = None) -> ApiClient:
    header = request.headers.get("Authorization")
    if header is not None:
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != "bearer" or not raw.strip():
            raise ApiError(401, "the Authorization header must be 'Bearer <token>'", headers=BEARER_CHALLENGE)
        token = authenticate_token(raw.strip())
        if token is None:
            raise ApiError(401, "invalid or revoked API token", headers=BEARER_CHALLENGE)
        if scope and not token.has_scope(scope):
            raise ApiError(403, f"this API token lacks the scope '{scope}'")
        return ApiClient(kind="token", name=token.name, token=token)

    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        raise ApiError(
            401,
            "authentication required: an API token (Authorization: Bearer ...) or a console session",
            headers=BEARER_CHALLENGE,
        )
    if not user.is_active or not user.is_staff:
        raise ApiError(403, "the console session belongs to a user who is not staff")
    if request.method in UNSAFE_METHODS:
        reason = _csrf_failure(request)
        if reason:
            raise ApiError(403, f"CSRF check failed: {reason}")
    if permission and not user.has_perm(permission):
        raise ApiError(403, f"the console user lacks the permission {permission}")
    return ApiClient(kind="session", name=user.get_username(), user=user)


def refuse_operator_only_kinds(client: ApiClient, kinds) -> None:
    """The probe is an operator's canary: a token without the operator scope, or a session user
    without OPERATOR_KINDS_PERMISSION, may not submit it (whatever the batch it hides in). Unknown
    kinds are left to validation (a 422)."""
    if client.may_submit_operator_kinds:
        return
    needs = ("an API token with the operator scope" if client.token
             else f"the permission {OPERATOR_KINDS_PERMISSION}")
    for kind in kinds:
        report_kind = get_kind(kind) if isinstance(kind, str) else None
        if report_kind is not None and report_kind.operator_only:
            raise ApiError(403, f"the {kind} kind needs {needs}", "kind")


def api_endpoint(
    *, methods: tuple[str, ...], scope: str | None = None, permission: str | dict | None = None,
    public: bool = False,
):
    """Decorate an API view; `scope` is what a token needs, `permission` what a session user needs
    (or a dict of them by method)."""

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            with translation.override(api_language(request)):
                return answer(request, *args, **kwargs)

        def answer(request, *args, **kwargs):
            try:
                if request.method not in methods:
                    raise ApiError(
                        405,
                        f"method {request.method} is not allowed here",
                        headers={"Allow": ", ".join(methods)},
                    )
                if not public:
                    needs = permission.get(request.method) if isinstance(permission, dict) else permission
                    request.api_client = authenticate(request, permission=needs, scope=scope)
                response = view(request, *args, **kwargs)
            except ApiError as exc:
                response = api_error_response(exc)
            add_never_cache_headers(response)
            return response

        return csrf_exempt(wrapper)

    return decorate
