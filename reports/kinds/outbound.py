"""Outbound HTTP on a client's behalf (http_export): the SSRF policy, in one place.

Workers sit inside the network, so a URL a client names is a request the client makes from
there. The policy (README, "Outbound requests"):

- The URL may hold nothing two parsers could read differently (no backslash, whitespace,
  control or non-ASCII character, no user name or password); urllib3's parser must read it as
  ours does, and it is rebuilt from the checked parts.
- Its `host:port` must be in HTTP_EXPORT_ALLOWED_HOSTS (an entry `host` is the scheme's default
  port only).
- The name is resolved once; every address must be public, or be itself named in the
  allowlist (`127.0.0.1:8000`): a DNS answer cannot turn an allowed name into a way inside. The
  connection goes to an address that was checked, never through a second lookup.
- No redirects; the answer is read up to HTTP_EXPORT_MAX_BYTES and within HTTP_EXPORT_DEADLINE
  for the whole fetch (a watchdog closes the socket, so a source dribbling bytes cannot stretch it).
- Whatever keeps an HTTP answer from coming once a connection is tried (refused, reset, silent,
  TLS, not HTTP) reads the same in last_error; the worker log has the details. Only a name that
  does not resolve says so: no connection was tried, so it tells nothing about any port.
"""

import http.client
import ipaddress
import logging
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext as _
from urllib3.util import parse_url

from reports.errors import PermanentError, UpstreamError, escape_controls

logger = logging.getLogger(__name__)

DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")
# IPv6 ranges whose last 32 bits are an IPv4 address: IPv4-compatible (deprecated), SIIT-translated,
# and the well-known NAT64 prefix.
_LOW_32_BITS = tuple(ipaddress.ip_network(n) for n in ("::/96", "::ffff:0:0:0/96", "64:ff9b::/96"))
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")
# is_global calls these public: deprecated site-local (RFC 3879) and SRv6 segment ids (RFC 9602).
_NOT_PUBLIC_V6 = tuple(ipaddress.ip_network(n) for n in ("fec0::/10", "5f00::/8"))
READ_CHUNK = 64 * 1024

Resolver = Callable[[str, int], list[str]]


class UrlRefused(ValueError):
    """The URL breaks the policy. The message is meant for the client that named the URL."""


class SourceUnreachable(UpstreamError):
    """No HTTP answer came. One message whatever the cause once a connection was tried, so that a
    client cannot map which ports of an allowed host are open; `dns` marks the one cause that maps
    nothing (the allowlisted name did not resolve, so nothing was connected to)."""

    def __init__(self, *, dns: bool = False):
        super().__init__(
            "could not get an HTTP answer from the source"
            + (" (DNS: the name does not resolve)" if dns else "")
        )


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # a lower-case name, or an IP address as ipaddress writes it (IPv6 without brackets)
    port: int
    explicit_port: bool
    path: str  # path and query: the request line's target

    @property
    def netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}" if self.explicit_port else host

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.netloc}{self.path}"

    @property
    def host_port(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def origin(self) -> str:
        """For logs: no path or query, which may carry a source's credentials."""
        return f"{self.scheme}://{self.host_port}"


@dataclass(frozen=True)
class CheckedUrl:
    target: Target
    addresses: tuple[str, ...]  # checked against the policy; empty when the name did not resolve


def _canonical_host(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if not _HOST_NAME.fullmatch(host):
        raise UrlRefused(_("must name a plain host (letters, digits, dots and dashes) or an IP address"))
    try:
        socket.inet_aton(host)
    except OSError:
        return host
    # 2130706433, 0177.0.0.1 and 127.1 are 127.0.0.1 to the resolver: only the usual form counts.
    raise UrlRefused(_("must write an IP address in its usual form"))


def parse_target(url: str) -> Target:
    """The URL as the connection will use it, or UrlRefused. Needs no network."""
    if not isinstance(url, str) or not url:
        raise UrlRefused(_("must be an http(s) URL"))
    if "\\" in url or any(not "!" <= char <= "~" for char in url):
        raise UrlRefused(_("must not contain a backslash, whitespace, control or non-ASCII characters"))
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UrlRefused(_("is not a valid URL")) from None
    if parts.scheme not in DEFAULT_PORTS:
        raise UrlRefused(_("must be an http(s) URL"))
    if "@" in parts.netloc:
        raise UrlRefused(_("must not carry a user name or password"))
    if not parts.hostname:
        raise UrlRefused(_("must name a host"))
    if port == 0:
        raise UrlRefused(_("must not name port 0"))
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    target = Target(
        scheme=parts.scheme,
        host=_canonical_host(parts.hostname),
        port=port or DEFAULT_PORTS[parts.scheme],
        explicit_port=port is not None,
        path=path,
    )
    theirs = parse_url(target.url)
    read_as = (theirs.scheme, (theirs.host or "").strip("[]").lower(),
               theirs.port or DEFAULT_PORTS[target.scheme])
    if read_as != (target.scheme, target.host, target.port):
        raise UrlRefused(_("is read differently by the HTTP client; write it plainly"))
    return target


def allowlist(entries: Iterable[str]) -> frozenset[tuple[str, int | None]]:
    """HTTP_EXPORT_ALLOWED_HOSTS as (host, port) pairs; port None: the scheme's default port."""
    pairs = set()
    for entry in entries:
        try:
            parts = urlsplit(f"//{entry.strip()}")
            port = parts.port
            if not parts.hostname or parts.path or parts.query or "@" in parts.netloc or port == 0:
                raise ValueError
            pairs.add((_canonical_host(parts.hostname), port))
        except ValueError:
            raise ImproperlyConfigured(
                f"HTTP_EXPORT_ALLOWED_HOSTS entries are host or host:port, got {entry!r}"
            ) from None
    return frozenset(pairs)


def _listed(host: str, target: Target, pairs: frozenset[tuple[str, int | None]]) -> bool:
    return (host, target.port) in pairs or (
        target.port == DEFAULT_PORTS[target.scheme] and (host, None) in pairs)


def _address(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(address.split("%", 1)[0])  # a resolver may add an IPv6 zone


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address may stand for: mapped (::ffff:a.b.c.d), translated
    (::ffff:0:a.b.c.d), compatible (::a.b.c.d), 6to4, Teredo, and NAT64 (64:ff9b::/96; in the
    local-use 64:ff9b:1::/48 the gateway's prefix length is unknown, so every RFC 6052 position)."""
    found = [ip.ipv4_mapped, ip.sixtofour, ip.teredo[1] if ip.teredo else None]
    if any(ip in network for network in _LOW_32_BITS):
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip in _LOCAL_NAT64:
        octets = ip.packed
        for taken in (octets[6:8] + octets[9:11], octets[7:8] + octets[9:12], octets[9:13], octets[12:16]):
            found.append(ipaddress.IPv4Address(taken))
    return [address for address in found if address is not None]


def is_public(address: str) -> bool:
    """Reachable on the internet: not loopback, private, link-local (the cloud metadata service
    169.254.169.254), shared, reserved, site-local, SRv6 or multicast, also when an IPv4 address
    is wrapped in an IPv6 one. ipaddress's is_global decides, plus what it lets through."""
    ip = _address(address)
    if ip.version == 6:
        if any(ip in network for network in _NOT_PUBLIC_V6):
            return False
        if any(not is_public(str(embedded)) for embedded in _embedded_ipv4(ip)):
            return False
    return ip.is_global and not ip.is_multicast


def system_resolver(host: str, port: int) -> list[str]:
    return [info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def check_url(
    url: str, *, allowed_hosts: Iterable[str], resolver: Resolver | None = None, must_resolve: bool = True
) -> CheckedUrl:
    """UrlRefused unless the URL, its host:port and every address its host resolves to pass.

    must_resolve=False (at submit, in a web request): a name that does not resolve now is let
    through, and the attempt checks again. True (before a fetch): it is SourceUnreachable."""
    target = parse_target(url)
    pairs = allowlist(allowed_hosts)
    if not _listed(target.host, target, pairs):
        raise UrlRefused(_("%(target)s is not in HTTP_EXPORT_ALLOWED_HOSTS") % {"target": target.host_port})
    try:
        ipaddress.ip_address(target.host)
        addresses = [target.host]
    except ValueError:
        try:
            addresses = list(dict.fromkeys((resolver or system_resolver)(target.host, target.port)))
        except (OSError, UnicodeError) as exc:
            if not must_resolve:
                return CheckedUrl(target, ())
            logger.warning(
                "http_export: %s did not resolve (%s: %s)", target.origin, type(exc).__name__,
                escape_controls(str(exc)),
            )
            raise SourceUnreachable(dns=True) from None
    if not addresses and must_resolve:
        raise SourceUnreachable(dns=True)
    for address in addresses:
        if not is_public(address) and not _listed(str(_address(address)), target, pairs):
            raise UrlRefused(
                _(
                    "%(host)s resolves to an address that is not public; name that address "
                    "in HTTP_EXPORT_ALLOWED_HOSTS to allow it"
                )
                % {"host": target.host}
            )
    return CheckedUrl(target, tuple(addresses))


# --- the fetch ---------------------------------------------------------------------------------


class _Watchdog:
    """Shuts the socket down at the deadline, whatever call is blocked on it."""

    def __init__(self, seconds: float):
        self.fired = threading.Event()
        self.sock: socket.socket | None = None
        self._end = time.monotonic() + seconds
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired.set()
        self._shut()

    def _shut(self) -> None:
        if self.sock is not None:
            try:
                # The plain socket's shutdown, also under TLS: it wakes a blocked read at once.
                socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def watch(self, sock: socket.socket) -> None:
        self.sock = sock
        if self.fired.is_set():
            self._shut()

    def left(self) -> float:
        return max(self._end - time.monotonic(), 0.001)

    def __enter__(self) -> "_Watchdog":
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()


def _connect(checked: CheckedUrl, timeout: float, watchdog: _Watchdog) -> socket.socket:
    target = checked.target
    last: Exception | None = None
    for address in checked.addresses:
        if watchdog.fired.is_set():
            break
        try:
            sock = socket.create_connection((address, target.port), timeout=min(timeout, watchdog.left()))
        except OSError as exc:
            last = exc
            continue
        sock.settimeout(timeout)
        watchdog.watch(sock)
        if target.scheme == "https":
            # The certificate must name the URL's host, though the socket went to a checked address.
            sock = ssl.create_default_context().wrap_socket(
                sock, server_hostname=target.host, do_handshake_on_connect=False
            )
            watchdog.watch(sock)
            sock.do_handshake()
        return sock
    raise last or TimeoutError("deadline passed before a connection")


def fetch(checked: CheckedUrl, *, timeout: float, deadline: float, max_bytes: int) -> bytearray:
    """GET the checked URL from its checked address: the body, or an error the retry policy
    classifies (no answer, 429/5xx, a slow or cut answer: UpstreamError, transient, counted by the
    kind's circuit breaker; a redirect, another 4xx and an over-large answer are permanent)."""
    target = checked.target
    started = time.monotonic()
    with _Watchdog(deadline) as watchdog:
        try:
            try:
                sock = _connect(checked, timeout, watchdog)
                conn = http.client.HTTPConnection(target.host, target.port, timeout=timeout)
                conn.sock = sock
                conn.putrequest("GET", target.path, skip_host=True, skip_accept_encoding=True)
                conn.putheader("Host", target.netloc)
                conn.putheader("Accept", "application/json")
                conn.putheader("Accept-Encoding", "identity")
                conn.putheader("User-Agent", "report-console http_export")
                conn.endheaders()
                response = conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                logger.warning(
                    "http_export: no HTTP answer from %s after %.1fs (%s: %s)",
                    target.origin, time.monotonic() - started, type(exc).__name__, escape_controls(str(exc)),
                )
                raise SourceUnreachable() from None
            _check_status(response.status)
            return _read_body(response, watchdog, deadline=deadline, max_bytes=max_bytes)
        finally:
            if watchdog.sock is not None:
                watchdog.sock.close()


def _check_status(status: int) -> None:
    if 300 <= status < 400:
        raise PermanentError(
            f"the source answered with a redirect (HTTP {status}); redirects are not followed")
    if status == 429 or status >= 500:
        raise UpstreamError(f"the source answered HTTP {status}")
    if status >= 400:
        raise PermanentError(f"the source answered HTTP {status}")


def _read_body(
    response: http.client.HTTPResponse, watchdog: _Watchdog, *, deadline: float, max_bytes: int
) -> bytearray:
    too_large = PermanentError(
        f"the source's answer is larger than HTTP_EXPORT_MAX_BYTES ({max_bytes} bytes)")
    late = UpstreamError(f"the source's answer took longer than HTTP_EXPORT_DEADLINE ({deadline:g} s)")
    declared = response.getheader("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise too_large
    body = bytearray()  # grown in place: no list of chunks joined into a second copy at the end
    try:
        while chunk := response.read1(READ_CHUNK):
            if len(body) + len(chunk) > max_bytes:
                raise too_large
            body += chunk
    except (OSError, http.client.HTTPException) as exc:
        if watchdog.fired.is_set():
            raise late from None
        logger.warning("http_export: the answer was cut off (%s: %s)", type(exc).__name__,
                       escape_controls(str(exc)))
        raise UpstreamError("the source's answer was cut off") from None
    if watchdog.fired.is_set():
        raise late
    return body
