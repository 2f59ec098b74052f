"""What the operator reads on DingTalk: actionCards (markdown) in Chinese first, with English lines.

Links are absolute, built by deadletters.links from CONSOLE_BASE_URL. Buttons open pages; the replay button opens the replay
*confirmation* page, and replaying needs a POST from there: a click never replays by itself.
"""

from datetime import datetime
from urllib.parse import quote

from django.conf import settings
from django.utils import timezone

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


def neutral(text, limit: int = MESSAGE_LINE_MAX) -> str:
    """Any user-supplied value (kind, error, message, batch name...) as it may appear in an alert:
    one line, cut to `limit`, unable to open a new paragraph, quote, heading, link or tag."""
    return one_line(str(text if text is not None else ""), limit).translate(_MARKDOWN_NEUTRAL)


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


def render_dead_letter(payload: dict, robot: RobotConfig) -> tuple[str, dict]:
    dl_id = payload["dead_letter_id"]
    kind = neutral(payload.get("kind", ""), TITLE_MAX)
    title = f"报表死信告警 Dead letter: {kind}"
    text = "\n".join(
        [
            "### 报表死信告警",
            "Report task dead letter",
            "",
            f"- **任务 Task:** {neutral(payload.get('task_id', ''))}",
            f"- **报表类型 Kind:** {kind}",
            f"- **错误类型 Error:** {neutral(payload.get('error_type', ''))}",
            f"- **错误信息 Message:** {neutral(payload.get('message', ''))}",
            f"- **尝试次数 Attempts:** {neutral(payload.get('attempts', ''))}",
            f"- **时间 Time:** {format_time(payload.get('created_at'))}",
            f"- **死信编号 Dead letter:** #{dl_id}",
        ]
    )
    buttons = [
        ("查看死信 Open dead letter", link(dead_letter_url(dl_id), robot)),
        ("重放确认 Replay (confirm)", link(replay_confirm_url(dl_id), robot)),
    ]
    return title, _envelope(title, text, buttons, robot)


def render_batch_summary(payload: dict, robot: RobotConfig) -> tuple[str, dict]:
    name = neutral(payload.get("name") or payload.get("batch_id", ""), TITLE_MAX)
    dead = int(payload.get("dead", 0))
    title = f"报表批次完成 Batch finished: {name}" + (f" ({dead} 死信 dead)" if dead else "")
    text = "\n".join(
        [
            "### 报表批次完成",
            "Report batch finished",
            "",
            f"- **批次 Batch:** {name}",
            f"- **任务总数 Tasks:** {neutral(payload.get('total', '-'))}",
            f"- **成功 Done:** {neutral(payload.get('done', '-'))}",
            f"- **死信 Dead:** {dead}",
            f"- **完成时间 Finished:** {format_time(payload.get('finished_at'))}",
        ]
    )
    buttons = [("查看该批次死信 Open the batch's dead letters", link(batch_url(payload["batch_id"]), robot))]
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
    title = f"报表死信告警汇总 Dead-letter digest: {letters}" + (f" + {batches} 批次 batch" if batches else "")
    lines = [
        f"### 报表死信告警汇总：共 {letters} 条，{causes} 类" + (f"；{batches} 个批次汇总" if batches else ""),
        f"Dead-letter digest: {_count(letters, 'dead letter')} in {_count(causes, 'group')}"
        + (f", {_count(batches, 'batch summary', 'batch summaries')}" if batches else ""),
        f"{format_time(first)} → {format_time(last)}",
        "",
    ]
    for group in shown:
        if group.get("batch_id"):
            target = link(batch_url(group["batch_id"]), robot)
            label = f"批次汇总 batch summary {neutral(group.get('name') or group['batch_id'])}"
            group = {**group, "message": _batch_counts(group)}
        else:
            target = link(fingerprint_url(group["fingerprint"]), robot)
            label = f"{neutral(', '.join(map(str, group['kinds'])))} · {neutral(group.get('error_type', ''))}"
        lines.append(
            f"- **{group['count']} ×** {label}: {neutral(group.get('message', ''), 100)}  \n"
            f"  首次 first {format_time(group['first'])}, 最近 last {format_time(group['last'])} "
            f"[查看 View]({target})"
        )
    if hidden:
        lines.append(
            f"- ……及其他 {len(hidden)} 类，共 {sum(g['count'] for g in hidden)} 条 "
            f"(and {_count(len(hidden), 'more group')}, {_count(sum(g['count'] for g in hidden), 'alert')})"
        )
    buttons = [("打开死信控制台 Open the dead-letter console", link(dead_letter_list_url(), robot))]
    return title, _envelope(title, "\n".join(lines), buttons, robot)


def _count(n: int, singular: str, plural: str = "") -> str:
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def _batch_counts(group: dict) -> str:
    """A batch summary's line in a digest: its counts, where a dead letter's line has its error."""
    if "total" not in group:
        return "-"
    return (
        f"任务 {group['total']}，成功 {group['done']}，死信 {group['dead']} "
        f"({group['total']} tasks, {group['done']} done, {group['dead']} dead)"
    )


def render_test(robot: RobotConfig, *, now: datetime | None = None) -> tuple[str, dict]:
    title = "报表告警测试 DingTalk test message"
    text = "\n".join(
        [
            "### 报表告警测试",
            "Test message from the report console: this robot is set up correctly.",
            "",
            f"- **时间 Time:** {format_time(now or timezone.now())}",
        ]
    )
    return title, _envelope(
        title, text, [("打开控制台 Open the console", link(dead_letter_list_url(), robot))], robot
    )
