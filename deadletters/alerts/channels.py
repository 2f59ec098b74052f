"""The alert channels: the DingTalk robot (DINGTALK_* settings, channel "dingtalk") and the JSON list
in ALERT_CHANNELS (docs/operators.md), each with its routing rules:
    [{"name": "ops-feishu", "type": "feishu", "url": "…", "secret": "…", "events": ["new_cause"]}]

An event is what a message says: `death` (a dead letter), `new_cause` (the first death of a cause
never seen before), `batch` (a batch finished), `resolved` (a cause went quiet, and the other
notices), `test`. A digest carries deaths, so a channel takes digests when it takes deaths or new
causes. `kinds` limits a channel to some report kinds (empty: all). A death card lists the params'
keys with masked values unless the channel says `"show_params": true` (a kind's sensitive params
stay masked).

The alert path proves itself (deadletters/alerts/heartbeat.py, digest.py): `heartbeat_url` is a
dead-man's switch pinged while the channel delivers (at least every `heartbeat_minutes`), and
`daily_digest_at` ("HH:MM" in TIME_ZONE) sends a daily "all quiet" digest. An entry named
"dingtalk" with only these keys gives them to the robot of the DINGTALK_* settings.
"""

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

EVENTS = frozenset({"death", "new_cause", "batch", "resolved", "test"})
DINGTALK = "dingtalk"

# Per type: the service's documented budget (per minute, per second).
TYPE_DEFAULTS = {
    "dingtalk": {"rate_per_minute": 20, "rate_per_second": 0},
    "feishu": {"rate_per_minute": 100, "rate_per_second": 5},
    "wecom": {"rate_per_minute": 20, "rate_per_second": 0},
    "slack": {"rate_per_minute": 60, "rate_per_second": 1},
    "webhook": {"rate_per_minute": 60, "rate_per_second": 0},
    "email": {"rate_per_minute": 30, "rate_per_second": 0},
}
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")
# Path words of the services' documented hook URLs: not secret, and too common to scrub from text.
_PUBLIC_PARTS = frozenset(
    {"open-apis", "bot", "v2", "hook", "cgi-bin", "webhook", "send", "robot", "services", "api", "v1",
     "heartbeat", "ping"}
)
PATH_KEYS = frozenset({"heartbeat_url", "heartbeat_minutes", "daily_digest_at"})
HEARTBEAT_URL_MAX = 500
HEARTBEAT_MINUTES_MAX = 60
_HH_MM = re.compile(r"([01]\d|2[0-3]):[0-5]\d\Z")


@dataclass(frozen=True)
class Channel:
    name: str
    type: str
    url: str = field(default="", repr=False)
    secret: str = field(default="", repr=False)
    keyword: str = ""
    to: tuple[str, ...] = ()
    at_mobiles: tuple[str, ...] = ()
    wrap_links: bool = False
    events: frozenset = EVENTS
    kinds: frozenset = frozenset()
    show_params: bool = False
    rate_per_minute: int = 20
    rate_per_second: int = 0
    timeout: float = 5.0
    max_attempts: int = 10
    heartbeat_url: str = field(default="", repr=False)
    heartbeat_minutes: int = 5
    daily_digest_at: str = ""  # "HH:MM" in TIME_ZONE, or "" for none

    @property
    def key(self) -> str:
        """Names the channel's Redis state: the name and a hash of where and how it sends (so a
        fixed URL, secret or keyword ends a configuration pause), never the URL itself."""
        raw = f"{self.type}\n{self.url}\n{self.secret}\n{self.keyword}\n{','.join(self.to)}"
        return f"{self.name}:{hashlib.sha256(raw.encode()).hexdigest()[:12]}"

    def secrets(self) -> tuple[str, ...]:
        """Values that must never reach a log line, a page or a stored error: the URL, the secret,
        the URL's path and query, and every part of them that is not a documented public word
        (a Slack path, a Feishu hook id, a WeCom key, an access_token), however short."""
        values = [self.url, self.secret, self.heartbeat_url]
        for url in filter(None, (self.url, self.heartbeat_url)):
            parts = urlsplit(url)
            values += [parts.path, parts.query, f"{parts.path}?{parts.query}"]
            values += [p for p in parts.path.split("/") if p.lower() not in _PUBLIC_PARTS]
            values += [v for _, v in parse_qsl(parts.query)]
        return tuple(sorted({v for v in values if v and len(v) >= 3}, key=len, reverse=True))

    def takes(self, *, event: str, kind: str = "") -> bool:
        if event not in self.events:
            return False
        return not (self.kinds and kind and kind not in self.kinds)


def dingtalk_channel() -> Channel | None:
    """The robot of the DINGTALK_* settings as a channel, or None when DINGTALK_WEBHOOK is unset."""
    if not settings.DINGTALK_WEBHOOK:
        return None
    return Channel(
        name=DINGTALK,
        type=DINGTALK,
        url=settings.DINGTALK_WEBHOOK,
        secret=settings.DINGTALK_SECRET,
        keyword=settings.DINGTALK_KEYWORD,
        at_mobiles=tuple(settings.DINGTALK_AT_MOBILES),
        wrap_links=settings.DINGTALK_WRAP_LINKS,
        rate_per_minute=settings.DINGTALK_RATE_PER_MINUTE,
        timeout=settings.DINGTALK_TIMEOUT,
        max_attempts=settings.DINGTALK_MAX_SEND_ATTEMPTS,
    )


def _path_options(name: str, raw: dict) -> dict:
    """heartbeat_url, heartbeat_minutes and daily_digest_at, checked; errors name the channel and
    the key, never the URL."""
    url = str(raw.get("heartbeat_url") or "").strip()
    if url and not (
        url.startswith(("https://", "http://")) and len(url) <= HEARTBEAT_URL_MAX
        and url.isprintable() and " " not in url
    ):
        raise ValueError(f'channel {name}: "heartbeat_url" must be an http(s) URL of at most '
                         f"{HEARTBEAT_URL_MAX} characters")
    minutes = raw.get("heartbeat_minutes", 5)
    if type(minutes) is not int or not 1 <= minutes <= HEARTBEAT_MINUTES_MAX:
        raise ValueError(f'channel {name}: "heartbeat_minutes" must be a whole number from 1 to '
                         f"{HEARTBEAT_MINUTES_MAX}")
    at = raw.get("daily_digest_at") or ""
    if at and not (isinstance(at, str) and _HH_MM.match(at)):
        raise ValueError(f'channel {name}: "daily_digest_at" must be "HH:MM" (00:00 to 23:59, TIME_ZONE)')
    return {"heartbeat_url": url, "heartbeat_minutes": minutes, "daily_digest_at": at}


def _parse_one(raw, seen: set[str]) -> Channel:
    if not isinstance(raw, dict):
        raise ValueError("each channel is a JSON object")
    name = str(raw.get("name", "")).strip().lower()
    kind = str(raw.get("type", "")).strip().lower()
    if not name or not set(name) <= _NAME_CHARS or len(name) > 40:
        raise ValueError(f"channel name {name!r}: 1-40 of a-z, 0-9, - and _")
    if name == DINGTALK and name not in seen and set(raw) <= PATH_KEYS | {"name"}:
        seen.add(name)  # the robot's own options: merged by configured_channels
        return Channel(name=DINGTALK, type=DINGTALK, **_path_options(name, raw))
    if name in seen or name == DINGTALK:
        raise ValueError(f"channel name {name!r} is taken")
    if kind not in TYPE_DEFAULTS or kind == DINGTALK:
        types = ", ".join(sorted(set(TYPE_DEFAULTS) - {DINGTALK}))
        raise ValueError(f"channel {name}: type must be one of {types} (DingTalk: DINGTALK_WEBHOOK)")
    events = frozenset(raw.get("events") or EVENTS)
    if "digest" in events:  # a digest is deaths, coalesced
        events = (events - {"digest"}) | {"death"}
    if not events <= EVENTS:
        raise ValueError(f"channel {name}: unknown events {sorted(events - EVENTS)}")
    defaults = TYPE_DEFAULTS[kind]
    channel = Channel(
        name=name,
        type=kind,
        url=str(raw.get("url", "")).strip(),
        secret=str(raw.get("secret", "")).strip(),
        keyword=str(raw.get("keyword", "")).strip(),
        to=tuple(str(a).strip() for a in raw.get("to") or () if str(a).strip()),
        events=events | {"test"},
        kinds=frozenset(str(k) for k in raw.get("kinds") or ()),
        show_params=raw.get("show_params", False),
        rate_per_minute=int(raw.get("rate_per_minute") or defaults["rate_per_minute"]),
        rate_per_second=int(raw.get("rate_per_second") or defaults["rate_per_second"]),
        timeout=float(raw.get("timeout") or 5.0),
        max_attempts=int(raw.get("max_attempts") or settings.DINGTALK_MAX_SEND_ATTEMPTS),
        **_path_options(name, raw),
    )
    if kind == "email" and not channel.to:
        raise ValueError(f'channel {name}: an email channel needs "to"')
    if kind != "email" and not channel.url.startswith(("https://", "http://")):
        raise ValueError(f'channel {name}: "url" must be an http(s) URL')
    if kind == "webhook" and not channel.secret:
        raise ValueError(f'channel {name}: a webhook channel needs a "secret" to sign with')
    if not isinstance(channel.show_params, bool):
        raise ValueError(f'channel {name}: "show_params" must be true or false')
    if channel.rate_per_minute < 1 or channel.timeout <= 0 or channel.max_attempts < 1:
        raise ValueError(f"channel {name}: rate_per_minute, timeout and max_attempts must be positive")
    seen.add(name)
    return channel


def parse_channels(raw) -> tuple[Channel, ...]:
    """Channels from ALERT_CHANNELS' value (a JSON string or an already parsed list)."""
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
        if data in (None, ""):
            return ()
        if not isinstance(data, list):
            raise ValueError("a JSON list of channels")
        seen: set[str] = set()
        return tuple(_parse_one(item, seen) for item in data)
    except (ValueError, TypeError) as exc:
        # The message names the setting and the problem, never a URL or a secret.
        raise ImproperlyConfigured(f"ALERT_CHANNELS: {exc}") from None


_cache: dict = {}


def configured_channels() -> tuple[Channel, ...]:
    """Every channel that sends: the DingTalk robot first (when set), then ALERT_CHANNELS."""
    raw = settings.ALERT_CHANNELS
    key = json.dumps(raw, sort_keys=True) if not isinstance(raw, str) else raw
    if _cache.get("key") != key:
        _cache.update(key=key, channels=parse_channels(raw))
    robot, channels = dingtalk_channel(), _cache["channels"]
    options = next((c for c in channels if c.name == DINGTALK), None)
    if options is not None:
        channels = tuple(c for c in channels if c is not options)
        robot = robot and dataclasses.replace(robot, **{k: getattr(options, k) for k in PATH_KEYS})
    return ((robot,) if robot else ()) + channels


def channel_named(name: str) -> Channel | None:
    return next((c for c in configured_channels() if c.name == name), None)


def routed_channels(*, event: str, kind: str = "", new: bool = False) -> list[Channel]:
    """The channels that take this event; a new cause's death goes where deaths or new causes go."""
    wanted = {event} | ({"new_cause"} if new else set())
    return [c for c in configured_channels() if any(c.takes(event=e, kind=kind) for e in wanted)]
