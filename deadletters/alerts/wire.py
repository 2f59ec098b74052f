"""Each channel type's wire format and its answers, as each service documents them: DingTalk's
custom robot (actionCard, or markdown for @-mentions; 加签 in the query; errcode 130101 too fast,
310000 signature/keyword/IP), Feishu/Lark (signed post; 11232 too fast, 19021/19022/19024/19001
configuration), WeCom (markdown of at most 4096 bytes; 45009, 93000), Slack (HTTP statuses, 429 with
Retry-After), our signed webhook (X-Alert-Signature "v1=" + hex HMAC-SHA256(secret, "timestamp." +
body), Idempotency-Key = the message's uuid) and email (Message-ID from the uuid).

No request follows a redirect: a 3xx is a failed send and a configuration error (a hook that moved
would get our signed body at an address nobody configured). Every text that leaves this module is
scrubbed of the channel's URL, secret and their parts, and urllib3's debug lines are filtered too.
"""

import base64
import hashlib
import hmac
import json
import logging
import re
import smtplib
import time
from dataclasses import dataclass
from urllib.parse import quote, quote_plus

import requests
from django.conf import settings
from django.core.mail import EmailMessage, get_connection

from deadletters.alerts.channels import Channel, configured_channels
from deadletters.alerts.render import card_text
from deadletters.alerts.text import TITLE_MAX, fit_text

OK, RETRY, THROTTLED, CONFIG, REJECTED = "ok", "retry", "throttled", "config", "rejected"
DINGTALK_TEXT_MAX = 4000  # stays well inside what robots are seen to accept
WECOM_MAX_BYTES = 4096
DEFAULT_THROTTLE_SECONDS = 60.0
_SENSITIVE_PARAMS = re.compile(r"\b(access_token|sign|timestamp|key)=[^&\s'\"<>)]+", re.IGNORECASE)


@dataclass(frozen=True)
class Result:
    outcome: str
    code: int | None = None  # the service's error code, or the HTTP status when it has none
    error: str = ""  # scrubbed, one line, safe to store and show
    retry_after: float | None = None
    transport_error: bool = False  # no answer at all (timeout, refused, 5xx): the channel is down
    http_status: int | None = None
    answer: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == OK


def scrub(text, channel: Channel | None = None) -> str:
    text = str(text or "")
    for value in channel.secrets() if channel else ():
        text = text.replace(value, "<redacted>").replace(quote(value, safe=""), "<redacted>")
    return " ".join(_SENSITIVE_PARAMS.sub(lambda m: f"{m.group(1)}=<redacted>", text).split())


class _SecretsFilter(logging.Filter):
    """urllib3 logs 'POST /robot/send?access_token=...' at DEBUG: scrub it before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
            cleaned = scrub(message)
            for channel in configured_channels():
                cleaned = scrub(cleaned, channel)
        except Exception:  # settings not ready, or a malformed list: start-up reports that
            return True
        if cleaned != " ".join(message.split()):
            record.msg, record.args = cleaned, ()
        return True


for _name in ("urllib3.connectionpool", "urllib3.util.retry", "requests"):
    _logger = logging.getLogger(_name)
    if not any(isinstance(f, _SecretsFilter) for f in _logger.filters):
        _logger.addFilter(_SecretsFilter())


# --- request bodies -------------------------------------------------------------------


def _with_keyword(title: str, keyword: str) -> str:
    return f"[{keyword}] {title}"[:TITLE_MAX] if keyword and keyword not in title else title


def dingtalk_sign(secret: str, timestamp_ms: int) -> str:
    """DingTalk's 加签: base64(HMAC-SHA256(secret, f"{timestamp}\\n{secret}")), URL-encoded."""
    digest = hmac.new(secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256).digest()
    return quote_plus(base64.b64encode(digest))


def dingtalk_url(channel: Channel, *, now: float) -> str:
    if not channel.secret:
        return channel.url
    timestamp_ms = int(now * 1000)
    separator = "&" if "?" in channel.url else "?"
    return (
        f"{channel.url}{separator}timestamp={timestamp_ms}&sign={dingtalk_sign(channel.secret, timestamp_ms)}"
    )


def _link(url: str, channel: Channel) -> str:
    """Optionally wrapped for DingTalk's desktop client, so it opens the system browser."""
    if not channel.wrap_links:
        return url
    return f"dingtalk://dingtalkclient/page/link?url={quote(url, safe='')}&pc_slide=false"


def dingtalk_body(channel: Channel, card: dict) -> dict:
    """An actionCard; markdown when @-mentions are configured (DingTalk only @s on markdown)."""
    title = _with_keyword(card["title"], channel.keyword)
    buttons = [(label, _link(url, channel)) for label, url in card["links"]]
    room = sum(len(label) + len(url) + 8 for label, url in buttons) + 16 * len(channel.at_mobiles)
    text = "\n".join([f"### {card['title']}", "", *(f"- {line}" for line in card["lines"])])
    text = fit_text(text, DINGTALK_TEXT_MAX - room - len(channel.keyword) - 2)
    if channel.keyword and channel.keyword not in text:
        text = f"{text}\n\n{channel.keyword}"
    if channel.at_mobiles:
        links = "  \n".join(f"[{label}]({url})" for label, url in buttons)
        mentions = " ".join(f"@{mobile}" for mobile in channel.at_mobiles)
        return {
            "msgtype": "markdown",
            "markdown": {"title": title, "text": f"{text}\n\n{links}\n\n{mentions}"},
            "at": {"atMobiles": list(channel.at_mobiles), "isAtAll": False},
        }
    action: dict = {"title": title, "text": text}
    if len(buttons) == 1:
        action.update(singleTitle=buttons[0][0], singleURL=buttons[0][1])
    else:
        action.update(btnOrientation="1", btns=[{"title": label, "actionURL": url} for label, url in buttons])
    return {"msgtype": "actionCard", "actionCard": action}


def feishu_sign(secret: str, timestamp: int) -> str:
    key = f"{timestamp}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


def feishu_body(channel: Channel, card: dict, *, now: float) -> dict:
    rows = [[{"tag": "text", "text": line}] for line in card["lines"]]
    rows += [[{"tag": "a", "text": label, "href": url}] for label, url in card["links"]]
    post = {"zh_cn": {"title": _with_keyword(card["title"], channel.keyword), "content": rows}}
    body: dict = {"msg_type": "post", "content": {"post": post}}
    if channel.secret:
        body.update(timestamp=str(int(now)), sign=feishu_sign(channel.secret, int(now)))
    return body


def wecom_body(channel: Channel, card: dict) -> dict:
    head = f"### {_with_keyword(card['title'], channel.keyword)}\n"
    links = "".join(f"\n[{label}]({url})" for label, url in card["links"])
    budget = WECOM_MAX_BYTES - len(head.encode()) - len(links.encode()) - 8
    text = ""
    for line in card["lines"]:
        if len((text + line + "\n").encode()) > budget:
            text += "…\n"
            break
        text += line + "\n"
    return {"msgtype": "markdown", "markdown": {"content": head + text + links}}


def slack_body(channel: Channel, card: dict) -> dict:
    title = _with_keyword(card["title"], channel.keyword)
    blocks: list[dict] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
        {"type": "section", "text": {"type": "plain_text", "text": "\n".join(card["lines"])[:2900] or "-"}},
    ]
    if card["links"]:
        buttons = [
            {"type": "button", "text": {"type": "plain_text", "text": label[:75]}, "url": url}
            for label, url in card["links"][:5]
        ]
        blocks.append({"type": "actions", "elements": buttons})
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


def _json(response) -> dict:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _retry_after(response) -> float | None:
    try:
        return max(float(response.headers.get("Retry-After", "")), 1.0)
    except ValueError:
        return None


_CODES = {
    # type: (code field, message field, throttled codes, configuration codes, rejected codes)
    "dingtalk": ("errcode", "errmsg", {130101}, {310000}, set()),
    "feishu": ("code", "msg", {11232}, {19021, 19022, 19024, 19001}, {9499}),
    "wecom": ("errcode", "errmsg", {45009}, {93000, 40001, 40014}, {40008, 40058, 44004, 40035}),
}


def classify(response, channel: Channel) -> Result:
    status = response.status_code
    if 300 <= status < 400:
        error = f"HTTP {status}: the channel answered with a redirect, which is not followed; check its URL"
        return Result(CONFIG, status, error, http_status=status)
    if channel.type in _CODES and 200 <= status < 300:
        field, msg_field, throttled, config, rejected = _CODES[channel.type]
        data = _json(response)
        if field == "code" and field not in data:
            field, msg_field = "StatusCode", "StatusMessage"
        if field in data:
            try:
                code = int(data[field])
            except (TypeError, ValueError):
                code = -1
            message = scrub(data.get(msg_field, ""), channel)[:300]
            answer = json.dumps({field: code, msg_field: message}, ensure_ascii=False)
            error = f"{field} {code}: {message}"
            if code == 0:
                return Result(OK, 0, http_status=status, answer=answer)
            if code in throttled:
                wait = settings.DINGTALK_THROTTLE_BACKOFF_SECONDS if channel.type == "dingtalk" else None
                return Result(
                    THROTTLED,
                    code,
                    error,
                    wait or DEFAULT_THROTTLE_SECONDS,
                    http_status=status,
                    answer=answer,
                )
            outcome = CONFIG if code in config else REJECTED if code in rejected else RETRY
            return Result(outcome, code, error, http_status=status, answer=answer)
    text = scrub(response.text[:200], channel)
    error = f"HTTP {status}: {text or '-'}"
    if 200 <= status < 300:
        return (
            Result(OK, 0, http_status=status) if channel.type not in _CODES else Result(RETRY, status, error)
        )
    if status == 429 or (status == 503 and _retry_after(response)):
        return Result(
            THROTTLED, status, error, _retry_after(response) or DEFAULT_THROTTLE_SECONDS, http_status=status
        )
    if status in (401, 403, 404, 410):
        return Result(CONFIG, status, error, http_status=status)
    if 400 <= status < 500 and status != 408:
        return Result(REJECTED, status, error, http_status=status)
    return Result(RETRY, status, error, transport_error=status >= 500, http_status=status)


_session: requests.Session | None = None


def _default_session() -> requests.Session:
    global _session
    if _session is None:
        _session = requests.Session()
    return _session


def send(channel: Channel, card: dict, *, msg_uuid: str, clock=time.time, session=None) -> Result:
    """One request (or mail). Never raises for network or service errors; the result says what
    happened."""
    if channel.type == "email":
        return send_mail(channel, card, msg_uuid=msg_uuid)
    now = clock()
    url, headers = channel.url, {"Content-Type": "application/json; charset=utf-8"}
    if channel.type == "dingtalk":
        body: dict | bytes = {**dingtalk_body(channel, card), "msgUuid": msg_uuid}
        url = dingtalk_url(channel, now=now)
    elif channel.type == "feishu":
        body = feishu_body(channel, card, now=now)
    elif channel.type == "wecom":
        body = wecom_body(channel, card)
    elif channel.type == "slack":
        body = slack_body(channel, card)
    else:
        body = webhook_body(card, msg_uuid=msg_uuid, now=now)
        headers.update(
            {
                "X-Alert-Timestamp": str(int(now)),
                "X-Alert-Signature": webhook_signature(channel.secret, int(now), body),
                "Idempotency-Key": msg_uuid,
            }
        )
    data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    try:
        response = (session or _default_session()).post(
            url, data=data, headers=headers, timeout=channel.timeout, allow_redirects=False
        )
    except requests.Timeout:
        return Result(RETRY, error=f"timeout: no answer within {channel.timeout:g}s", transport_error=True)
    except requests.RequestException as exc:
        return Result(RETRY, error=scrub(f"{type(exc).__name__}: {exc}", channel)[:500], transport_error=True)
    return classify(response, channel)


def message_id(msg_uuid: str) -> str:
    return f"<alert-{msg_uuid}@report-console>"


def send_mail(channel: Channel, card: dict, *, msg_uuid: str) -> Result:
    mail = EmailMessage(
        subject=" ".join(_with_keyword(card["title"], channel.keyword).split()),
        body=card_text(card),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=list(channel.to),
        headers={"Message-ID": message_id(msg_uuid), "X-Alert-Event": card["event"]},
    )
    try:
        mail.connection = get_connection(timeout=channel.timeout)
        mail.send(fail_silently=False)
    except (smtplib.SMTPAuthenticationError, smtplib.SMTPSenderRefused, smtplib.SMTPRecipientsRefused) as exc:
        return Result(
            CONFIG, getattr(exc, "smtp_code", None), scrub(f"{type(exc).__name__}: {exc}", channel)[:500]
        )
    except smtplib.SMTPResponseException as exc:
        outcome = REJECTED if 500 <= exc.smtp_code < 600 else RETRY
        return Result(
            outcome, exc.smtp_code, scrub(f"SMTP {exc.smtp_code}: {exc.smtp_error!r}", channel)[:500]
        )
    except (smtplib.SMTPException, OSError) as exc:
        return Result(RETRY, error=scrub(f"{type(exc).__name__}: {exc}", channel)[:500], transport_error=True)
    return Result(OK, code=0)
