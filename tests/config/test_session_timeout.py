"""Signed-in sessions end after SESSION_IDLE_TIMEOUT without a request and SESSION_ABSOLUTE_TIMEOUT
after sign-in, for the console and for API calls made with the session."""

import pytest
from django.contrib.auth.models import Permission

from config.session_timeout import SEEN, STARTED

pytestmark = pytest.mark.django_db

PAGE = "/console/"


@pytest.fixture
def signed_in(client, django_user_model):
    user = django_user_model.objects.create_user("ops", password="pw-123456789", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_deadletter"))
    client.force_login(user)
    assert client.get(PAGE).status_code == 200
    return client


def _shift(client, **seconds_ago):
    """Move the session's recorded times into the past, as if that much time had gone by."""
    session = client.session
    for key, ago in seconds_ago.items():
        session[key] = session[key] - ago
    session.save()


def _signed_out(response) -> bool:
    return response.status_code == 302 and response["Location"].startswith("/console/login/")


def test_a_session_idle_past_the_timeout_is_signed_out(signed_in, settings):
    assert settings.SESSION_IDLE_TIMEOUT == 8 * 3600
    _shift(signed_in, **{SEEN: 8 * 3600 - 120, STARTED: 8 * 3600 - 120})
    assert signed_in.get(PAGE).status_code == 200  # still within: and that request was activity
    _shift(signed_in, **{SEEN: 8 * 3600 + 1})
    assert _signed_out(signed_in.get(PAGE))
    assert "_auth_user_id" not in signed_in.session
    assert _signed_out(signed_in.get(PAGE))


def test_an_active_session_still_ends_at_the_absolute_cap(signed_in, settings):
    settings.SESSION_ABSOLUTE_TIMEOUT = 24 * 3600
    _shift(signed_in, **{STARTED: 24 * 3600 - 60})
    assert signed_in.get(PAGE).status_code == 200
    _shift(signed_in, **{STARTED: 61})
    assert _signed_out(signed_in.get(PAGE))


def test_api_calls_with_an_expired_session_are_401(signed_in):
    _shift(signed_in, **{SEEN: 9 * 3600})
    response = signed_in.get("/report/task/dead-letters")
    assert response.status_code == 401


def test_the_session_cookie_lives_no_longer_than_the_cap(settings):
    assert settings.SESSION_COOKIE_AGE == settings.SESSION_ABSOLUTE_TIMEOUT == 24 * 3600
