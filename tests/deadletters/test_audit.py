"""client_ip: the one address the audit log and the login throttle record for a request."""

import ipaddress

import pytest
from django.test import RequestFactory

from deadletters.audit import client_ip

FORWARDED = "198.51.100.66, 203.0.113.9"  # a forged left end, then what the proxy saw


def _ip(remote, forwarded=FORWARDED):
    return client_ip(RequestFactory().get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded))


def test_without_proxies_the_header_is_ignored(settings):
    settings.CONSOLE_TRUSTED_PROXY_COUNT = 0
    assert _ip("127.0.0.1") == "127.0.0.1"


@pytest.mark.parametrize(("remote", "expected"), [("127.0.0.1", "203.0.113.9"), ("::1", "203.0.113.9"),
                                                  ("10.0.0.2", "10.0.0.2"), ("198.51.100.1", "198.51.100.1")])
def test_the_header_counts_only_from_a_trusted_peer(settings, remote, expected):
    """A client that reaches gunicorn itself (bound to 0.0.0.0) writes X-Forwarded-For as it likes."""
    settings.CONSOLE_TRUSTED_PROXY_COUNT = 1
    assert _ip(remote) == expected


def test_trusted_proxies_may_be_networks(settings):
    settings.CONSOLE_TRUSTED_PROXY_COUNT = 2
    settings.CONSOLE_TRUSTED_PROXIES = (ipaddress.ip_network("10.0.0.0/8"),)
    assert _ip("10.9.8.7", "192.0.2.1, 198.51.100.66, 10.0.0.5") == "198.51.100.66"
    assert _ip("10.9.8.7", "not-an-address, 10.0.0.5") is None
    assert _ip("10.9.8.7", "10.0.0.5") == "10.9.8.7"  # fewer hops than proxies: the peer itself
