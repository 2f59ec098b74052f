"""API token workflow: create (the raw token is shown once) with its scopes, list, revoke, authenticate.

Only the SHA-256 of a token is stored. Authentication hashes what the client sent and
looks the hash up by its unique index, so no comparison on the secret itself leaks timing.
"""

import hashlib
import secrets
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from reports.models import ApiScope, ApiToken

# An API token's last_used_at is written at most this often (seconds), not on every request.
TOUCH_SECONDS = 60

_ACTIVE_BY_HASH = f"SELECT * FROM {ApiToken._meta.db_table} WHERE token_hash = %s AND revoked_at IS NULL"

TOKEN_PREFIX = "rpt_"
NAME_MAX = 100
# A client that submits reports and fetches its own results; replay and operator are opt-in.
DEFAULT_SCOPES = (ApiScope.SUBMIT, ApiScope.READ)


class TokenNameTaken(Exception):
    pass


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def clean_scopes(scopes) -> list[str]:
    """The scopes in their canonical order; ValueError naming an unknown one or a lone operator."""
    chosen = set(scopes)
    unknown = sorted(chosen - set(ApiScope.values))
    if unknown:
        raise ValueError(f"unknown scope {unknown[0]!r}; the scopes are {', '.join(ApiScope.values)}")
    if chosen == {ApiScope.OPERATOR}:
        raise ValueError(
            "operator widens submit, read and replay to every client's tasks; give at least one of them")
    return [scope for scope in ApiScope.values if scope in chosen]


def create_api_token(*, name: str, scopes=DEFAULT_SCOPES) -> tuple[ApiToken, str]:
    """Return the new token row and the raw token; the raw token is not kept anywhere."""
    name = name.strip()
    if not name or len(name) > NAME_MAX or not name.isprintable():
        raise ValueError(f"a token name is 1 to {NAME_MAX} printable characters")
    scopes = clean_scopes(scopes)
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            token = ApiToken.objects.create(
                name=name, token_hash=hash_token(raw), prefix=raw[:12], scopes=scopes
            )
    except IntegrityError:
        raise TokenNameTaken(f"an API token named {name!r} already exists") from None
    return token, raw


def revoke_api_token(*, name: str) -> bool:
    """Revoke by name; False when no active token has that name. Revoking twice is harmless."""
    return bool(ApiToken.objects.filter(name=name, revoked_at=None).update(revoked_at=timezone.now()))


def authenticate_token(raw: str) -> ApiToken | None:
    if not raw or len(raw) > 200:
        return None
    # Every API request asks this: a raw query (by the unique index) spares the ORM's compiling it.
    token = next(iter(ApiToken.objects.raw(_ACTIVE_BY_HASH, [hash_token(raw)])), None)
    if token is None:
        return None
    now = timezone.now()
    stale = now - timedelta(seconds=TOUCH_SECONDS)
    if token.last_used_at is None or token.last_used_at <= stale:
        # Conditional, so a burst of requests writes the row once, not once each.
        ApiToken.objects.filter(Q(last_used_at=None) | Q(last_used_at__lte=stale), pk=token.pk).update(
            last_used_at=now
        )
        token.last_used_at = now
    return token
