"""DingTalk custom-robot client: signing, one POST with a timeout, a classified answer.

The webhook URL holds the robot's access_token and the secret signs every request; neither may
reach a log line, a page or a stored error. Everything that leaves this module as text goes
through `redact()`, and urllib3's debug log (which prints request URLs) is filtered too.
"""

import base64
import hashlib
import hmac
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, quote, quote_plus, urlsplit

import requests
from django.conf import settings

logger = logging.getLogger(__name__)

THROTTLED_ERRCODE = 130101  # "send too fast": DingTalk mutes the robot for 10 minutes
SECURITY_ERRCODE = 310000  # bad signature, stale timestamp, missing keyword, IP not allowed
CONFIG_ERRCODES = frozenset({SECURITY_ERRCODE})

_SENSITIVE_PARAMS = re.compile(r"\b(access_token|sign|timestamp)=[^&\s'\"<>)]+", re.IGNORECASE)
REDACTED = "<redacted>"


@dataclass(frozen=True)
class RobotConfig:
    webhook: str = ""
    secret: str = ""
    keyword: str = ""
    at_mobiles: tuple[str, ...] = ()
    timeout: float = 5.0
    rate_per_minute: int = 20
    wrap_links: bool = False

    @classmethod
    def from_settings(cls) -> "RobotConfig":
        return cls(
            webhook=settings.DINGTALK_WEBHOOK,
            secret=settings.DINGTALK_SECRET,
            keyword=settings.DINGTALK_KEYWORD,
            at_mobiles=tuple(settings.DINGTALK_AT_MOBILES),
            timeout=settings.DINGTALK_TIMEOUT,
            rate_per_minute=settings.DINGTALK_RATE_PER_MINUTE,
            wrap_links=settings.DINGTALK_WRAP_LINKS,
        )

    @property
    def configured(self) -> bool:
        return bool(self.webhook)

    @property
    def access_token(self) -> str:
        values = parse_qs(urlsplit(self.webhook).query).get("access_token") or [""]
        return values[0]

    @property
    def robot_key(self) -> str:
        """Names this robot in Redis keys and logs: a hash, never the token."""
        return hashlib.sha256(self.webhook.encode()).hexdigest()[:16]

    @property
    def config_key(self) -> str:
        """Changes when the operator fixes the webhook, secret or keyword (ends a config-error pause)."""
        raw = f"{self.webhook}\n{self.secret}\n{self.keyword}"
        return hashlib.sha256(raw.encode()).hexdigest()[:16]

    def __repr__(self) -> str:  # dataclass repr would print the webhook and the secret
        return (
            f"RobotConfig(robot={self.robot_key}, signed={bool(self.secret)}, keyword={bool(self.keyword)})"
        )


def redact(text: str, robot: RobotConfig | None = None) -> str:
    """Remove the webhook, access token, secret and signature from any text."""
    if not text:
        return ""
    text = str(text)
    if robot is not None:
        for value in (robot.webhook, robot.secret, robot.access_token):
            if value and len(value) >= 4:
                text = text.replace(value, REDACTED)
                text = text.replace(quote(value, safe=""), REDACTED)
    return _SENSITIVE_PARAMS.sub(lambda m: f"{m.group(1)}={REDACTED}", text)


class _RedactingFilter(logging.Filter):
    """urllib3 logs 'POST /robot/send?access_token=...' at DEBUG; scrub it before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is not ours to fix
            return True
        cleaned = redact(message, RobotConfig.from_settings() if settings.configured else None)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


def _install_log_filter() -> None:
    for name in ("urllib3.connectionpool", "urllib3.util.retry", "requests"):
        target = logging.getLogger(name)
        if not any(isinstance(f, _RedactingFilter) for f in target.filters):
            target.addFilter(_RedactingFilter())


_install_log_filter()


def sign(secret: str, timestamp_ms: int) -> str:
    """DingTalk's 加签: base64(HMAC-SHA256(secret, f"{timestamp}\\n{secret}")), URL-encoded."""
    string_to_sign = f"{timestamp_ms}\n{secret}".encode()
    digest = hmac.new(secret.encode(), string_to_sign, hashlib.sha256).digest()
    return quote_plus(base64.b64encode(digest))


def signed_url(robot: RobotConfig, *, now: float) -> str:
    if not robot.secret:
        return robot.webhook
    timestamp_ms = int(now * 1000)
    separator = "&" if "?" in robot.webhook else "?"
    return f"{robot.webhook}{separator}timestamp={timestamp_ms}&sign={sign(robot.secret, timestamp_ms)}"


@dataclass(frozen=True)
class SendResult:
    ok: bool
    errcode: int | None = None  # DingTalk's errcode; None when there was no JSON answer
    error: str = ""  # redacted, one line, safe to store and show
    http_status: int | None = None
    answer: dict = field(default_factory=dict)

    @property
    def throttled(self) -> bool:
        return self.errcode == THROTTLED_ERRCODE

    @property
    def config_error(self) -> bool:
        return self.errcode in CONFIG_ERRCODES

    @property
    def transport_error(self) -> bool:
        """No DingTalk answer at all (timeout, refused, HTTP 5xx): the robot is unreachable."""
        return not self.ok and self.errcode is None


_session: requests.Session | None = None


def _default_session() -> requests.Session:
    global _session
    if _session is None:
        _session = requests.Session()
    return _session


def send(
    robot: RobotConfig,
    payload: dict,
    *,
    msg_uuid: uuid.UUID | str | None = None,
    clock: Callable[[], float] = time.time,
    session: requests.Session | None = None,
) -> SendResult:
    """POST one message. Never raises for network or DingTalk errors; the result says what happened."""
    if not robot.configured:
        return SendResult(ok=False, error="no DingTalk webhook configured (DINGTALK_WEBHOOK)")
    body = dict(payload)
    if msg_uuid is not None:
        body["msgUuid"] = str(msg_uuid)
    url = signed_url(robot, now=clock())
    try:
        response = (session or _default_session()).post(url, json=body, timeout=robot.timeout)
    except requests.Timeout:
        return SendResult(ok=False, error=f"timeout: no answer from DingTalk within {robot.timeout:g}s")
    except requests.RequestException as exc:
        return SendResult(ok=False, error=redact(f"{type(exc).__name__}: {exc}", robot)[:500])
    status = response.status_code
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or "errcode" not in answer:
        text = redact(" ".join(response.text.split())[:200], robot)
        return SendResult(ok=False, error=f"HTTP {status}: {text or 'no JSON answer'}", http_status=status)
    try:
        errcode = int(answer.get("errcode"))
    except (TypeError, ValueError):
        errcode = -1
    errmsg = redact(str(answer.get("errmsg", "")), robot)[:300]
    safe_answer = {"errcode": errcode, "errmsg": errmsg}
    if errcode == 0 and status < 400:
        return SendResult(ok=True, errcode=0, http_status=status, answer=safe_answer)
    return SendResult(
        ok=False,
        errcode=errcode,
        error=f"errcode {errcode}: {errmsg}",
        http_status=status,
        answer=safe_answer,
    )
