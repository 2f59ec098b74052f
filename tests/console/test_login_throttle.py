"""Login brute force: django-axes locks a (username, client address) pair after AXES_FAILURE_LIMIT
failed logins, and a client address after AXES_ADDRESS_FAILURE_LIMIT (console and admin alike),
until the cool-off passes or an operator unlocks it. A username alone is never locked."""

import ipaddress
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db.models import F
from django.utils import timezone

pytestmark = pytest.mark.django_db

PASSWORD = "right-password-1"
LOGIN = "/console/login/"


@pytest.fixture
def staff():
    model = get_user_model()
    return {name: model.objects.create_user(name, "", PASSWORD, is_staff=True)
            for name in ("alice", "bob", "carol")}


def _post(client, username, password, *, path=LOGIN, **meta):
    client.logout()
    return client.post(path, {"username": username, "password": password}, **meta)


def _logged_in(response) -> bool:
    return response.status_code == 302 and "_auth_user_id" in response.wsgi_request.session


def _assert_locked(response):
    assert response.status_code == 429
    body = " ".join(response.content.decode().split())
    assert "Too many failed sign-ins" in body and "Try again in 15 minutes" in body
    assert 'class="topbar"' in body  # the console's layout, not a bare text answer
    assert "_auth_user_id" not in response.wsgi_request.session


def test_25_wrong_passwords_then_the_right_one_does_not_log_in(client, staff):
    for n in range(25):
        response = _post(client, "alice", f"guess-{n}")
        assert response.status_code in (200, 429)
        assert not _logged_in(response)
    _assert_locked(_post(client, "alice", PASSWORD))


def test_five_failures_lock_the_username_from_that_address_only(client, staff):
    for n in range(4):
        _post(client, "alice", f"guess-{n}", REMOTE_ADDR="203.0.113.1")
    assert _logged_in(_post(client, "alice", PASSWORD, REMOTE_ADDR="203.0.113.1"))
    _post(client, "alice", "guess-4", REMOTE_ADDR="203.0.113.1")
    _assert_locked(_post(client, "alice", PASSWORD, REMOTE_ADDR="203.0.113.1"))
    # Whoever guessed from there cannot lock alice out of her own desk, nor lock out bob.
    assert _logged_in(_post(client, "alice", PASSWORD, REMOTE_ADDR="198.51.100.7"))
    assert _logged_in(_post(client, "bob", PASSWORD, REMOTE_ADDR="203.0.113.1"))


def test_failures_for_one_username_from_many_addresses_never_lock_it_everywhere(client, staff):
    for n in range(30):
        _post(client, "alice", f"guess-{n}", REMOTE_ADDR=f"203.0.113.{n + 1}")
    assert _logged_in(_post(client, "alice", PASSWORD, REMOTE_ADDR="198.51.100.7"))


def test_one_address_guessing_many_usernames_is_locked_out_at_its_own_limit(client, staff, settings):
    assert settings.AXES_ADDRESS_FAILURE_LIMIT == 20
    for n in range(19):
        _post(client, f"nobody-{n}", "guess", REMOTE_ADDR="203.0.113.9")
    assert _logged_in(_post(client, "carol", PASSWORD, REMOTE_ADDR="203.0.113.9"))
    _post(client, "nobody-19", "guess", REMOTE_ADDR="203.0.113.9")
    _assert_locked(_post(client, "carol", PASSWORD, REMOTE_ADDR="203.0.113.9"))
    assert _logged_in(_post(client, "carol", PASSWORD, REMOTE_ADDR="203.0.113.10"))


def test_tries_during_a_lockout_do_not_extend_it(client, staff):
    for n in range(5):
        _post(client, "alice", f"guess-{n}")
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=10))
    for n in range(10):  # ten minutes into the lockout, the guesser keeps trying
        _assert_locked(_post(client, "alice", f"again-{n}"))
    _assert_locked(_post(client, "alice", PASSWORD))
    # Six more minutes: 16 since the failure that locked, 6 since the last knock.
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=6))
    assert _logged_in(_post(client, "alice", PASSWORD))


def test_behind_a_trusted_proxy_the_address_it_appended_counts(client, staff, settings):
    settings.CONSOLE_TRUSTED_PROXY_COUNT = 1
    settings.CONSOLE_TRUSTED_PROXIES = (ipaddress.ip_network("10.0.0.0/8"),)
    proxy = {"REMOTE_ADDR": "10.0.0.2"}
    for n in range(5):
        # The left end is whatever the client sent; the proxy appended the real address last.
        _post(client, "carol", f"guess-{n}", HTTP_X_FORWARDED_FOR=f"192.0.2.{n}, 203.0.113.9", **proxy)
    assert AccessAttempt.objects.filter(ip_address="203.0.113.9").count() == 1
    _assert_locked(_post(client, "carol", PASSWORD, HTTP_X_FORWARDED_FOR="203.0.113.9", **proxy))
    # Other clients behind the same proxy are not locked out with the guesser.
    assert _logged_in(_post(client, "carol", PASSWORD, HTTP_X_FORWARDED_FOR="203.0.113.10", **proxy))


def test_a_client_reaching_the_server_directly_cannot_choose_its_address(client, staff, settings):
    """X-Forwarded-For from a peer that is not a trusted proxy is the client's own writing."""
    settings.CONSOLE_TRUSTED_PROXY_COUNT = 1
    direct = {"REMOTE_ADDR": "198.51.100.66"}
    for n in range(5):
        _post(client, "carol", f"guess-{n}", HTTP_X_FORWARDED_FOR=f"192.0.2.{n}", **direct)
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"198.51.100.66"}
    _assert_locked(_post(client, "carol", PASSWORD, HTTP_X_FORWARDED_FOR="192.0.2.200", **direct))


def test_the_admin_login_is_throttled_too(client, staff):
    for n in range(5):
        _post(client, "alice", f"guess-{n}", path="/admin/login/")
    response = _post(client, "alice", PASSWORD, path="/admin/login/")
    assert response.status_code == 429 and "_auth_user_id" not in response.wsgi_request.session
    _assert_locked(_post(client, "alice", PASSWORD))


def test_the_lock_lifts_after_the_cool_off(client, staff):
    for n in range(5):
        _post(client, "alice", f"guess-{n}")
    _assert_locked(_post(client, "alice", PASSWORD))
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert _logged_in(_post(client, "alice", PASSWORD))


@pytest.mark.parametrize(("command", "argument"),
                         [("axes_reset_username", "alice"), ("axes_reset_ip", "127.0.0.1")])
def test_an_operator_unlocks_with_axes_commands(client, staff, command, argument):
    for n in range(5):
        _post(client, "alice", f"guess-{n}")
    _assert_locked(_post(client, "alice", PASSWORD))
    call_command(command, argument)
    assert not AccessAttempt.objects.exists()
    assert _logged_in(_post(client, "alice", PASSWORD))


def test_a_lockout_does_not_outlive_its_test_1(client, staff):
    for n in range(5):
        _post(client, "alice", f"guess-{n}")
    _assert_locked(_post(client, "alice", PASSWORD))


def test_a_lockout_does_not_outlive_its_test_2(client, staff):
    # Runs after _1 (file order): the test database's rollback took its lockout away, so the
    # browser tests, which log in from 127.0.0.1 as alice-like users, never meet an old one.
    assert not AccessAttempt.objects.exists()
    assert _logged_in(_post(client, "alice", PASSWORD))
