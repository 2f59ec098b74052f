"""The outbound policy's checks, with name resolution handed in as a plain function."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from reports.kinds import outbound
from reports.kinds.outbound import SourceUnreachable, UrlRefused, check_url, is_public, parse_target

PUBLIC = "93.184.215.14"


def resolving_to(*addresses):
    calls = []

    def resolver(host, port):
        calls.append((host, port))
        return list(addresses)

    resolver.calls = calls
    return resolver


@pytest.mark.parametrize(
    ("url", "rebuilt"),
    [
        ("http://Reports.Example.com/a?b=1#frag", "http://reports.example.com/a?b=1"),
        ("HTTPS://reports.example.com:8443", "https://reports.example.com:8443/"),
        ("http://[::1]:8000/x", "http://[::1]:8000/x"),
        ("http://[0:0:0:0:0:0:0:1]/", "http://[::1]/"),
    ],
)
def test_a_url_is_rebuilt_from_its_checked_parts(url, rebuilt):
    assert parse_target(url).url == rebuilt


@pytest.mark.parametrize(
    "url",
    [
        "http://evil.example\\@reports.example.com/",
        "http://evil.example@reports.example.com/",
        "http://:pw@reports.example.com/",
        "http://reports.example.com\t/",
        "http://reports.example.com/\x7f",
        "http://reports.exämple.com/",
        "http://reports.example.com:0/",
        "http://reports.example.com:65536/",
        "http://reports.example.com:80x/",
        "http:///path",
        "http://under_score.example.com/",
        "http://2130706433/",
        "http://0x7f.1/",
        "http://017700000001/",
        "http://[fe80::1%25eth0]/",
        "file:///etc/passwd",
        "//reports.example.com/",
        "",
    ],
)
def test_urls_two_parsers_could_read_differently_are_refused(url):
    with pytest.raises(UrlRefused):
        parse_target(url)


def test_an_allowlist_entry_is_one_host_and_port():
    allowed = ["reports.example.com", "api.example.com:8443"]
    ok = resolving_to(PUBLIC)
    assert check_url("http://reports.example.com/", allowed_hosts=allowed, resolver=ok)
    assert check_url("https://reports.example.com/", allowed_hosts=allowed, resolver=ok)
    assert check_url("https://api.example.com:8443/", allowed_hosts=allowed, resolver=ok)
    for url in ("http://reports.example.com:6379/", "https://api.example.com/", "http://other.example.com/"):
        with pytest.raises(UrlRefused, match="not in HTTP_EXPORT_ALLOWED_HOSTS"):
            check_url(url, allowed_hosts=allowed, resolver=ok)
    assert ok.calls == [("reports.example.com", 80), ("reports.example.com", 443), ("api.example.com", 8443)]


@pytest.mark.parametrize("entry", ["http://x.example.com", "x.example.com/path", "u@x.example.com",
                                   "x.example.com:0", "x.example.com:http", "[::1", "2130706433"])
def test_a_malformed_allowlist_entry_is_a_configuration_error(entry):
    with pytest.raises(ImproperlyConfigured, match="HTTP_EXPORT_ALLOWED_HOSTS"):
        outbound.allowlist([entry])


@pytest.mark.parametrize(
    "addresses",
    [
        ["127.0.0.1"],
        ["10.1.2.3"],
        ["192.168.0.10"],
        ["169.254.169.254"],
        ["100.100.100.200"],
        ["0.0.0.0"],
        ["::1"],
        ["fd00:ec2::254"],
        ["fe80::1%eth0"],
        ["::ffff:127.0.0.1"],
        ["64:ff9b::a00:1"],
        ["::7f00:2"],
        ["::ffff:0:7f00:2"],
        ["64:ff9b:1::7f00:2"],
        ["fec0::1"],
        ["5f00::1"],
        [PUBLIC, "127.0.0.1"],  # every answer must pass: the client cannot pick which one is used
    ],
)
def test_a_name_resolving_to_a_non_public_address_is_refused(addresses):
    resolver = resolving_to(*addresses)
    with pytest.raises(UrlRefused, match="not public"):
        check_url("http://reports.example.com/", allowed_hosts=["reports.example.com"], resolver=resolver)


def test_a_non_public_address_named_in_the_allowlist_is_allowed():
    resolver = resolving_to("10.1.2.3")
    allowed = ["reports.internal:8080", "10.1.2.3:8080"]
    checked = check_url("http://reports.internal:8080/x", allowed_hosts=allowed, resolver=resolver)
    assert checked.addresses == ("10.1.2.3",)
    with pytest.raises(UrlRefused):  # the address is allowed on its port only
        check_url("http://reports.internal:9090/x", allowed_hosts=["reports.internal:9090", *allowed],
                  resolver=resolver)


def test_a_name_that_does_not_resolve_waits_for_the_attempt():
    def no_such_name(host, port):
        raise OSError("Name or service not known")

    allowed = ["reports.example.com"]
    assert check_url("http://reports.example.com/", allowed_hosts=allowed, resolver=no_such_name,
                     must_resolve=False).addresses == ()
    # At the attempt it is named for what it is: nothing was connected to, so no port is revealed.
    with pytest.raises(SourceUnreachable, match=r"^could not get an HTTP answer from the source "
                                                r"\(DNS: the name does not resolve\)$"):
        check_url("http://reports.example.com/", allowed_hosts=allowed, resolver=no_such_name)
    with pytest.raises(SourceUnreachable, match=r"\(DNS: the name does not resolve\)$"):
        check_url("http://reports.example.com/", allowed_hosts=allowed, resolver=lambda host, port: [])


@pytest.mark.parametrize(
    ("address", "public"),
    [("8.8.8.8", True), ("2606:4700::1111", True), ("127.0.0.2", False), ("172.16.0.1", False),
     ("224.0.0.1", False), ("2002:7f00:1::", False), ("::ffff:8.8.8.8", True),
     # ipaddress's is_global calls all of these public.
     ("::7f00:2", False),  # IPv4-compatible 127.0.0.2
     ("::ffff:0:7f00:2", False),  # SIIT-translated 127.0.0.2
     ("64:ff9b::7f00:1", False), ("64:ff9b::a9fe:a9fe", False), ("64:ff9b::808:808", True),  # NAT64
     ("64:ff9b:1::7f00:2", False), ("64:ff9b:1:7f00:0:100::", False),  # local-use NAT64, /96 and /48
     ("fec0::1", False),  # deprecated site-local
     ("5f00::1", False)],  # SRv6 segment ids
)
def test_is_public(address, public):
    assert is_public(address) is public
