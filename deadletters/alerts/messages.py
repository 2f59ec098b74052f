"""What the operator reads on DingTalk: actionCards (markdown) in one language, ALERT_LANGUAGE.

Links are absolute, built by deadletters.links from CONSOLE_BASE_URL. Buttons open pages; the replay button opens the replay
*confirmation* page, and replaying needs a POST from there: a click never replays by itself.
"""

import re
import unicodedata
from datetime import datetime
from urllib.parse import quote

from django.conf import settings
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, pgettext

from deadletters.alerts.client import RobotConfig
from deadletters.links import (
    batch_url,
    dead_letter_list_url,
    dead_letter_url,
    fingerprint_url,
    replay_confirm_url,
)

MESSAGE_LINE_MAX = 160
TITLE_MAX = 120
# DingTalk's documentation found gives no figure for a markdown/actionCard text; 4,000 characters
# stays well inside what robots are seen to accept.
TEXT_MAX = 4000


# --- links ----------------------------------------------------------------------


def link(url: str, robot: RobotConfig) -> str:
    """Optionally wrap for DingTalk's desktop client so it opens the system browser."""
    if not robot.wrap_links:
        return url
    return f"dingtalk://dingtalkclient/page/link?url={quote(url, safe='')}&pc_slide=false"


# --- text helpers ---------------------------------------------------------------


def one_line(text: str, limit: int = MESSAGE_LINE_MAX) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


# Characters that make markdown structure (links, images, headings, code, emphasis, quotes, HTML)
# swapped for look-alikes that render as themselves.
_MARKDOWN_NEUTRAL = str.maketrans({"`": "'", "[": "(", "]": ")", "#": "＃", "*": "＊", "<": "＜", ">": "＞"})
# What a chat client turns into a link by itself: anything with a scheme, and www. names.
_BARE_URL = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*)://([^\s/?#]*)|\b(www\.[^\s/?#]+)")
# Control characters, and format characters: bidi overrides and isolates, zero-width ones.
_INVISIBLE = {"Cc", "Cf", "Cs", "Co"}


def _defang(match: re.Match) -> str:
    """hxxps://evil(.)example: shown to the operator, linked by nothing."""
    if match.group(3):
        return match.group(3).replace(".", "(.)")
    scheme, host = match.group(1), match.group(2).replace(".", "(.)")
    if scheme.lower() in ("http", "https"):
        return f"{scheme[0]}xx{scheme[3:]}://{host}"
    return f"{scheme}(:)//{host}"


def neutral(text, limit: int = MESSAGE_LINE_MAX) -> str:
    """Any user-supplied value (kind, error, message, batch name...) as it may appear in an alert:
    one line, cut to `limit`, unable to open a new paragraph, quote, heading, link or tag, with no
    link a chat client would make of a bare URL, and nothing invisible that reorders or hides text."""
    text = "".join(
        c for c in str(text if text is not None else "") if c.isspace() or unicodedata.category(c) not in _INVISIBLE
    )
    return one_line(_BARE_URL.sub(_defang, one_line(text, limit * 2)), limit).translate(_MARKDOWN_NEUTRAL)


def fit_text(text: str, limit: int = TEXT_MAX) -> str:
    """The text cut at a line boundary to at most `limit` characters (DingTalk refuses longer)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 2]
    return cut[: cut.rfind("\n") + 1 or len(cut)] + "…"


def format_time(value: datetime | str | None) -> str:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if value is None:
        return "-"
    return timezone.localtime(value).strftime(f"%Y-%m-%d %H:%M:%S {settings.TIME_ZONE}")


def dead_letter_payload(dead_letter) -> dict:
    """The snapshot an alert keeps, so rendering needs no joins and survives later edits."""
    return {
        "dead_letter_id": dead_letter.pk,
        "task_id": str(dead_letter.task.public_id),
        "kind": dead_letter.kind,
        "error_type": dead_letter.error_type,
        "message": one_line(dead_letter.error_message, 300),
        "attempts": dead_letter.attempts,
        "created_at": dead_letter.created_at.isoformat(),
    }


# --- envelopes ------------------------------------------------------------------


def with_keyword(payload: dict, keyword: str) -> dict:
    """The payload with the robot's keyword in its title and text (a keyword-protected robot
    rejects a message without it). Applied again at send time, so a message built before the
    operator set DINGTALK_KEYWORD is accepted on its resend."""
    msgtype = payload.get("msgtype", "")
    content = payload.get(msgtype)
    if not keyword or not isinstance(content, dict):
        return payload
    content = dict(content)
    if "title" in content and keyword not in content["title"]:
        content["title"] = f"[{keyword}] {content['title']}"[:TITLE_MAX]
    for field in ("text", "content"):
        if field in content and keyword not in content[field]:
            content[field] = f"{content[field]}\n\n{keyword}"
    return {**payload, msgtype: content}


def _envelope(title: str, text: str, buttons: list[tuple[str, str]], robot: RobotConfig) -> dict:
    """An actionCard; markdown when @-mentions are configured (DingTalk only @s on text/markdown)."""
    if robot.keyword and robot.keyword not in title:
        title = f"[{robot.keyword}] {title}"
    title = title[:TITLE_MAX]
    room = sum(len(label) + len(url) + 8 for label, url in buttons) + 16 * len(robot.at_mobiles)
    text = fit_text(text, TEXT_MAX - room - len(robot.keyword) - 2)
    if robot.keyword and robot.keyword not in text:
        text = f"{text}\n\n{robot.keyword}"
    if robot.at_mobiles:
        links = "  \n".join(f"[{label}]({url})" for label, url in buttons)
        mentions = " ".join(f"@{mobile}" for mobile in robot.at_mobiles)
        return {
            "msgtype": "markdown",
            "markdown": {"title": title, "text": f"{text}\n\n{links}\n\n{mentions}"},
            "at": {"atMobiles": list(robot.at_mobiles), "isAtAll": False},
        }
    card: dict = {"title": title, "text": text}
    if len(buttons) == 1:
        card.update(singleTitle=buttons[0][0], singleURL=buttons[0][1])
    else:
        card.update(btnOrientation="1", btns=[{"title": label, "actionURL": url} for label, url in buttons])
    return {"msgtype": "actionCard", "actionCard": card}


def _field(label: str, value) -> str:
    return f"- **{label}:** {value}"


def _alert_language():
    """Alerts speak ALERT_LANGUAGE, whoever's request or worker renders them."""
    return translation.override(settings.ALERT_LANGUAGE)


def new_cause_line(payload: dict) -> str:
    """The mark of a cause's first death ("new since release X" when the deployment names one)."""
    if not payload.get("new"):
        return ""
    if payload.get("release"):
        return _("New cause since release %(release)s: first death of this fingerprint") % {
            "release": neutral(payload["release"], 60)
        }
    return _("New cause: first death of this fingerprint")


def render_card(card: dict, robot: RobotConfig) -> tuple[str, dict]:
    """A channel card (deadletters.alerts.channels.render) as a DingTalk message."""
    text = "\n".join([f"### {card['title']}", "", *(f"- {line}" for line in card["lines"])])
    buttons = [(label, link(url, robot)) for label, url in card["links"]]
    return card["title"], _envelope(card["title"], text, buttons, robot)


def render_dead_letter(payload: dict, robot: RobotConfig) -> tuple[str, dict]:
    dl_id = payload["dead_letter_id"]
    kind = neutral(payload.get("kind", ""), TITLE_MAX)
    with _alert_language():
        new = new_cause_line(payload)
        title = _("Report dead letter: %(kind)s") % {"kind": kind}
        text = "\n".join(
            [
                "### " + _("Report dead letter"),
                *([f"**{new}**"] if new else []),
                "",
                _field(pgettext("alert field", "Task"), neutral(payload.get("task_id", ""))),
                _field(pgettext("alert field", "Kind"), kind),
                _field(pgettext("alert field", "Error"), neutral(payload.get("error_type", ""))),
                _field(pgettext("alert field", "Message"), neutral(payload.get("message", ""))),
                _field(pgettext("alert field", "Attempts"), neutral(payload.get("attempts", ""))),
                _field(pgettext("alert field", "Time"), format_time(payload.get("created_at"))),
                _field(pgettext("alert field", "Dead letter"), f"#{dl_id}"),
            ]
        )
        buttons = [
            (_("Open dead letter"), link(dead_letter_url(dl_id), robot)),
            (_("Replay (confirm)"), link(replay_confirm_url(dl_id), robot)),
        ]
    return title, _envelope(title, text, buttons, robot)


def render_batch_summary(payload: dict, robot: RobotConfig) -> tuple[str, dict]:
    name = neutral(payload.get("name") or payload.get("batch_id", ""), TITLE_MAX)
    dead = int(payload.get("dead", 0))
    with _alert_language():
        if dead:
            title = ngettext(
                "Report batch finished: %(name)s (%(dead)d dead letter)",
                "Report batch finished: %(name)s (%(dead)d dead letters)",
                dead,
            ) % {"name": name, "dead": dead}
        else:
            title = _("Report batch finished: %(name)s") % {"name": name}
        text = "\n".join(
            [
                "### " + _("Report batch finished"),
                "",
                _field(pgettext("alert field", "Batch"), name),
                _field(pgettext("alert field", "Tasks"), neutral(payload.get("total", "-"))),
                _field(pgettext("alert field", "Done"), neutral(payload.get("done", "-"))),
                _field(pgettext("alert field", "Dead"), dead),
                _field(pgettext("alert field", "Finished"), format_time(payload.get("finished_at"))),
            ]
        )
        buttons = [(_("Open the batch's dead letters"), link(batch_url(payload["batch_id"]), robot))]
    return title, _envelope(title, text, buttons, robot)


def render_digest(groups: list[dict], *, total: int, robot: RobotConfig, max_groups: int) -> tuple[str, dict]:
    """One message for many alerts. Every alert is counted: the top groups are listed, the rest
    summed in an "and K more groups" line. Each group: count, kind(s), error, first/last seen, link."""
    groups = sorted(groups, key=lambda g: (-g["count"], g["first"]))
    shown, hidden = groups[:max_groups], groups[max_groups:]
    first = min(g["first"] for g in groups)
    last = max(g["last"] for g in groups)
    # A batch summary rides in a digest too: it is neither a dead letter nor a cause.
    batches = sum(g["count"] for g in groups if g.get("batch_id"))
    letters, causes = total - batches, sum(1 for g in groups if not g.get("batch_id"))
    with _alert_language():
        if batches:
            title = ngettext(
                "Dead-letter digest: %(total)d + %(batches)d batch",
                "Dead-letter digest: %(total)d + %(batches)d batches",
                batches,
            ) % {"total": letters, "batches": batches}
        else:
            title = _("Dead-letter digest: %(total)d") % {"total": letters}
        header = _("Dead-letter digest: %(letters)s in %(groups)s") % {
            "letters": _letters(letters),
            "groups": _groups(causes),
        }
        if batches:
            header = _with_batches(header, batches)
        lines = [
            "### " + header,
            f"{format_time(first)} → {format_time(last)}",
            "",
        ]
        for group in shown:
            if group.get("batch_id"):
                target = link(batch_url(group["batch_id"]), robot)
                label = _("batch summary %(name)s") % {"name": neutral(group.get("name") or group["batch_id"])}
                group = {**group, "message": _batch_counts(group)}
            else:
                target = link(fingerprint_url(group["fingerprint"]), robot)
                label = f"{neutral(', '.join(map(str, group['kinds'])))} · {neutral(group.get('error_type', ''))}"
                if group.get("new"):
                    label = f"{_('NEW')} {label}"
            view = pgettext("alert field", "View")
            seen = _("first %(first)s, last %(last)s") % {
                "first": format_time(group["first"]),
                "last": format_time(group["last"]),
            }
            lines.append(
                f"- **{group['count']} ×** {label}: {neutral(group.get('message', ''), 100)}  \n"
                f"  {seen} [{view}]({target})"
            )
        if hidden:
            hidden_batches = sum(g["count"] for g in hidden if g.get("batch_id"))
            more = _("and %(groups)s, %(letters)s") % {
                "groups": ngettext("%(n)d more group", "%(n)d more groups", len(hidden)) % {"n": len(hidden)},
                "letters": _letters(sum(g["count"] for g in hidden) - hidden_batches),
            }
            if hidden_batches:
                more = _with_batches(more, hidden_batches)
            lines.append(f"- {more}")
        buttons = [(_("Open the dead-letter console"), link(dead_letter_list_url(), robot))]
    return title, _envelope(title, "\n".join(lines), buttons, robot)


def _letters(n: int) -> str:
    return ngettext("%(n)d dead letter", "%(n)d dead letters", n) % {"n": n}


def _groups(n: int) -> str:
    return ngettext("%(n)d group", "%(n)d groups", n) % {"n": n}


def _with_batches(text: str, batches: int) -> str:
    """A digest line's counts, then its batch summaries ("..., 1 batch summary")."""
    return pgettext("digest counts", "%(counts)s, %(batches)s") % {
        "counts": text,
        "batches": ngettext("%(n)d batch summary", "%(n)d batch summaries", batches) % {"n": batches},
    }


def _batch_counts(group: dict) -> str:
    """A batch summary's line in a digest: its counts, where a dead letter's line has its error."""
    if "total" not in group:
        return "-"
    return _("%(total)s tasks, %(done)s done, %(dead)s dead") % {
        "total": group["total"],
        "done": group["done"],
        "dead": group["dead"],
    }


def render_test(robot: RobotConfig, *, now: datetime | None = None) -> tuple[str, dict]:
    with _alert_language():
        title = _("DingTalk test message")
        text = "\n".join(
            [
                "### " + _("DingTalk test message"),
                _("Test message from the report console: this robot is set up correctly."),
                "",
                _field(pgettext("alert field", "Time"), format_time(now or timezone.now())),
            ]
        )
        buttons = [(_("Open the console"), link(dead_letter_list_url(), robot))]
    return title, _envelope(title, text, buttons, robot)
