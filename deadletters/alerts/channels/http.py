"""The webhook channels' wire formats and their answers, as each service documents them.

feishu   custom bot: POST JSON {msg_type: post, content}, signed (when the bot has a secret) with
         timestamp (seconds) and sign = base64(HMAC-SHA256(key="timestamp\\nsecret", msg="")) in the
         body; answers {code: 0}; 19021 bad signature or stale timestamp, 19022 IP not allowed,
         19024 keyword missing (configuration), 11232 too frequent (100/min, 5/s), 9499 bad request.
wecom    group robot: POST JSON {msgtype: markdown} to ...?key=; answers {errcode: 0}; 45009 over
         20/min, 93000 invalid webhook key (configuration); markdown content at most 4096 bytes.
slack    incoming webhook: POST JSON {text, blocks}; answers 200 "ok"; 429 with Retry-After (about
         one message a second); 400 invalid_payload; 403/404/410 revoked, missing or archived.
webhook  ours: POST JSON with X-Alert-Timestamp, X-Alert-Signature "v1=" + hex HMAC-SHA256(secret,
         "timestamp." + body) and Idempotency-Key (the message's uuid, the same on every resend).
None of the chat services takes an idempotency key on a custom bot, so for them a crash between
the POST and the mark may duplicate one message; the webhook's receiver can drop the duplicate.
"""

import base64
import hashlib
import hmac
import json
import logging
import time
from dataclasses import dataclass

import requests

from deadletters.alerts.channels.config import Channel, configured_channels
from deadletters.alerts.client import redact

OK, RETRY, THROTTLED, CONFIG, REJECTED = "ok", "retry", "throttled", "config", "rejected"
WECOM_MAX_BYTES = 4096
DEFAULT_THROTTLE_SECONDS = 60.0


@dataclass(frozen=True)
class ChannelResult:
    outcome: str
    code: int | None = None  # the service's error code, or the HTTP status when it has none
    error: str = ""  # redacted, one line, safe to store and show
    retry_after: float | None = None
    transport_error: bool = False

    @property
    def ok(self) -> bool:
        return self.outcome == OK


def scrub(text: str, channel: Channel) -> str:
    text = redact(str(text or ""))
    for value in channel.secrets():
        text = text.replace(value, "<redacted>")
    return " ".join(text.split())


class _ChannelSecretsFilter(logging.Filter):
    """urllib3 logs request paths at DEBUG: a Slack hook's path or a WeCom key is the credential."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
            channels = configured_channels()
        except Exception:  # settings not ready, or a malformed list: start-up reports that
            return True
        cleaned = message
        for channel in channels:
            cleaned = scrub(cleaned, channel) if any(v in cleaned for v in channel.secrets()) else cleaned
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


for _name in ("urllib3.connectionpool", "requests"):
    _logger = logging.getLogger(_name)
    if not any(isinstance(f, _ChannelSecretsFilter) for f in _logger.filters):
        _logger.addFilter(_ChannelSecretsFilter())


# --- request bodies -------------------------------------------------------------------


def feishu_sign(secret: str, timestamp: int) -> str:
    key = f"{timestamp}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


def _with_keyword(title: str, keyword: str) -> str:
    return f"[{keyword}] {title}" if keyword and keyword not in title else title


def feishu_body(channel: Channel, card: dict, *, now: float) -> dict:
    rows = [[{"tag": "text", "text": line}] for line in card["lines"]]
    rows += [[{"tag": "a", "text": label, "href": url}] for label, url in card["links"]]
    body: dict = {
        "msg_type": "post",
        "content": {
            "post": {"zh_cn": {"title": _with_keyword(card["title"], channel.keyword), "content": rows}}
        },
    }
    if channel.secret:
        timestamp = int(now)
        body.update(timestamp=str(timestamp), sign=feishu_sign(channel.secret, timestamp))
    return body


def wecom_body(channel: Channel, card: dict) -> dict:
    head = f"### {_with_keyword(card['title'], channel.keyword)}\n"
    links = "".join(f"\n[{label}]({url})" for label, url in card["links"])
    budget = WECOM_MAX_BYTES - len(head.encode()) - len(links.encode()) - 8
    text = ""
    for line in card["lines"]:
        piece = f"{line}\n"
        if len((text + piece).encode()) > budget:
            text += "…\n"
            break
        text += piece
    return {"msgtype": "markdown", "markdown": {"content": head + text + links}}


def slack_body(channel: Channel, card: dict) -> dict:
    title = _with_keyword(card["title"], channel.keyword)
    blocks: list[dict] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
        {"type": "section", "text": {"type": "plain_text", "text": "\n".join(card["lines"])[:2900] or "-"}},
    ]
    if card["links"]:
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {"type": "button", "text": {"type": "plain_text", "text": label[:75]}, "url": url}
                    for label, url in card["links"][:5]
                ],
            }
        )
    return {"text": title, "blocks": blocks}


def webhook_body(card: dict, *, msg_uuid: str, now: float) -> bytes:
    data = {
        "id": msg_uuid,
        "event": card["event"],
        "title": card["title"],
        "lines": card["lines"],
        "links": [{"label": label, "url": url} for label, url in card["links"]],
        "sent_at": int(now),
    }
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def webhook_signature(secret: str, timestamp: int, body: bytes) -> str:
    return "v1=" + hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


# --- answers --------------------------------------------------------------------------


def _retry_after(response) -> float | None:
    try:
        return max(float(response.headers.get("Retry-After", "")), 1.0)
    except ValueError:
        return None


def _json(response) -> dict:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def classify_feishu(response, channel: Channel) -> ChannelResult:
    data = _json(response)
    code = data.get("code", data.get("StatusCode"))
    if code is None:
        return _by_status(response, channel)
    code = int(code)
    msg = scrub(data.get("msg", data.get("StatusMessage", "")), channel)[:300]
    if code == 0:
        return ChannelResult(OK, code=0)
    error = f"code {code}: {msg}"
    if code == 11232:
        return ChannelResult(THROTTLED, code, error, retry_after=DEFAULT_THROTTLE_SECONDS)
    if code in (19021, 19022, 19024, 19001):
        return ChannelResult(CONFIG, code, error)
    if code == 9499:
        return ChannelResult(REJECTED, code, error)
    return ChannelResult(RETRY, code, error)


def classify_wecom(response, channel: Channel) -> ChannelResult:
    data = _json(response)
    if "errcode" not in data:
        return _by_status(response, channel)
    code = int(data["errcode"])
    error = f"errcode {code}: {scrub(data.get('errmsg', ''), channel)[:300]}"
    if code == 0:
        return ChannelResult(OK, code=0)
    if code == 45009:
        return ChannelResult(THROTTLED, code, error, retry_after=DEFAULT_THROTTLE_SECONDS)
    if code in (93000, 40001, 40014):
        return ChannelResult(CONFIG, code, error)
    if code in (40008, 40058, 44004, 40035):
        return ChannelResult(REJECTED, code, error)
    return ChannelResult(RETRY, code, error)


def _by_status(response, channel: Channel) -> ChannelResult:
    """Slack and our webhook speak HTTP: 2xx ok, 429 wait, 401/403/404/410 configuration, other
    4xx this message, 408 and 5xx retry."""
    status = response.status_code
    text = scrub(response.text[:200], channel)
    error = f"HTTP {status}: {text or '-'}"
    if 200 <= status < 300:
        return ChannelResult(OK, code=0)
    if status == 429 or (status == 503 and _retry_after(response)):
        return ChannelResult(
            THROTTLED, status, error, retry_after=_retry_after(response) or DEFAULT_THROTTLE_SECONDS
        )
    if status in (401, 403, 404, 410):
        return ChannelResult(CONFIG, status, error)
    if 400 <= status < 500 and status != 408:
        return ChannelResult(REJECTED, status, error)
    return ChannelResult(RETRY, status, error, transport_error=status >= 500)


_session: requests.Session | None = None


def _default_session() -> requests.Session:
    global _session
    if _session is None:
        _session = requests.Session()
    return _session


def post(channel: Channel, card: dict, *, msg_uuid: str, clock=time.time, session=None) -> ChannelResult:
    """One POST. Never raises for network or service errors; the result says what happened."""
    now = clock()
    headers = {"Content-Type": "application/json; charset=utf-8"}
    if channel.type == "feishu":
        data = json.dumps(feishu_body(channel, card, now=now), ensure_ascii=False).encode()
    elif channel.type == "wecom":
        data = json.dumps(wecom_body(channel, card), ensure_ascii=False).encode()
    elif channel.type == "slack":
        data = json.dumps(slack_body(channel, card), ensure_ascii=False).encode()
    else:
        data = webhook_body(card, msg_uuid=msg_uuid, now=now)
        headers.update(
            {
                "X-Alert-Timestamp": str(int(now)),
                "X-Alert-Signature": webhook_signature(channel.secret, int(now), data),
                "Idempotency-Key": msg_uuid,
            }
        )
    try:
        response = (session or _default_session()).post(
            channel.url, data=data, headers=headers, timeout=channel.timeout
        )
    except requests.Timeout:
        return ChannelResult(
            RETRY, error=f"timeout: no answer within {channel.timeout:g}s", transport_error=True
        )
    except requests.RequestException as exc:
        return ChannelResult(
            RETRY, error=scrub(f"{type(exc).__name__}: {exc}", channel)[:500], transport_error=True
        )
    if channel.type == "feishu":
        return classify_feishu(response, channel)
    if channel.type == "wecom":
        return classify_wecom(response, channel)
    return _by_status(response, channel)
