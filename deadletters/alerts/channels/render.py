"""One card per channel message, whatever the channel: an event, a title, plain lines and links.
The wire formats (channels.http, channels.email) lay it out; every value a client or an error
supplied goes through messages.neutral first, so no channel renders it as markup or a link."""

from django.utils.translation import gettext as _

from deadletters.alerts.messages import TITLE_MAX, format_time, neutral, new_cause_line
from deadletters.links import (
    batch_url,
    dead_letter_list_url,
    dead_letter_url,
    fingerprint_url,
    replay_confirm_url,
)
from deadletters.models import AlertCategory


def _card(event: str, title: str, lines: list[str], links: list[tuple[str, str]]) -> dict:
    return {
        "event": event,
        "title": title[:TITLE_MAX],
        "lines": lines,
        "links": [list(pair) for pair in links],
    }


def dead_letter_card(payload: dict) -> dict:
    dl_id = payload["dead_letter_id"]
    kind = neutral(payload.get("kind", ""), TITLE_MAX)
    new = new_cause_line(payload)
    title = (_("New cause: %(kind)s") if new else _("Dead letter: %(kind)s")) % {"kind": kind}
    lines = [new] if new else []
    lines += [
        _("Task: %(v)s") % {"v": neutral(payload.get("task_id", ""))},
        _("Kind: %(v)s") % {"v": kind},
        _("Error: %(v)s") % {"v": neutral(payload.get("error_type", ""))},
        _("Message: %(v)s") % {"v": neutral(payload.get("message", ""))},
        _("Attempts: %(v)s") % {"v": neutral(payload.get("attempts", ""))},
        _("Time: %(v)s") % {"v": format_time(payload.get("created_at"))},
        _("Dead letter: #%(v)s") % {"v": dl_id},
    ]
    links = [
        (_("Open dead letter"), dead_letter_url(dl_id)),
        (_("Replay (confirm)"), replay_confirm_url(dl_id)),
    ]
    return _card("new_cause" if new else "death", title, lines, links)


def batch_card(payload: dict) -> dict:
    name = neutral(payload.get("name") or payload.get("batch_id", ""), TITLE_MAX)
    dead = int(payload.get("dead", 0))
    title = _("Batch finished: %(name)s (%(dead)s dead)") % {"name": name, "dead": dead}
    lines = [
        _("Batch: %(v)s") % {"v": name},
        _("Tasks: %(v)s") % {"v": neutral(payload.get("total", "-"))},
        _("Done: %(v)s") % {"v": neutral(payload.get("done", "-"))},
        _("Dead: %(v)s") % {"v": dead},
        _("Finished: %(v)s") % {"v": format_time(payload.get("finished_at"))},
    ]
    return _card(
        "batch", title, lines, [(_("Open the batch's dead letters"), batch_url(payload["batch_id"]))]
    )


def notice_card(payload: dict) -> dict:
    if payload["notice"] == "kind_resumed":
        kind = neutral(payload.get("kind", ""), 60)
        lines = [
            _("Report kind %(kind)s runs again; %(n)s waiting task(s) enqueued.")
            % {"kind": kind, "n": payload.get("waiting", 0)}
        ]
        if payload.get("muted"):
            lines.append(
                _("%(n)s death(s) while it was paused were not alerted one by one.") % {"n": payload["muted"]}
            )
        return _card(
            "resolved",
            _("Resumed: %(kind)s") % {"kind": kind},
            lines,
            [(_("Open the dead-letter console"), dead_letter_list_url())],
        )
    if payload["notice"] == "snooze_ended":
        target = neutral(payload.get("kind") or payload.get("fingerprint", "")[:12], 60)
        lines = [
            _("Alerts of %(target)s are no longer muted.") % {"target": target},
            _("Muted because: %(reason)s") % {"reason": neutral(payload.get("reason", ""))},
            _("Deaths while muted: %(n)s (%(start)s → %(end)s)")
            % {
                "n": payload.get("deaths", 0),
                "start": format_time(payload.get("started_at")),
                "end": format_time(payload.get("until")),
            },
        ]
        url = (
            fingerprint_url(payload["fingerprint"]) if payload.get("fingerprint") else dead_letter_list_url()
        )
        return _card(
            "resolved",
            _("Snooze ended: %(target)s") % {"target": target},
            lines,
            [(_("Open the dead-letter console"), url)],
        )
    return _card(
        "resolved",
        _("Bulk %(action)s %(status)s")
        % {"action": neutral(payload.get("action", "")), "status": neutral(payload.get("status", ""))},
        [
            _("%(succeeded)s of %(total)s done, %(skipped)s skipped.")
            % {
                "succeeded": payload.get("succeeded", 0),
                "total": payload.get("total", 0),
                "skipped": payload.get("skipped", 0),
            }
        ],
        [(_("Open the dead-letter console"), dead_letter_list_url())],
    )


def resolved_card(payload: dict) -> dict:
    if payload.get("notice"):
        return notice_card(payload)
    label = f"{neutral(payload.get('kind', ''), 60)} · {neutral(payload.get('error_type', ''), 80)}"
    title = _("Resolved: %(cause)s") % {"cause": label}
    minutes = max(int(payload.get("duration_seconds", 0)) // 60, 0)
    lines = [
        _("No death of this cause for %(quiet)s minutes.")
        % {"quiet": int(payload.get("quiet_seconds", 0)) // 60},
        _("Cause: %(v)s") % {"v": label},
        _("Message: %(v)s") % {"v": neutral(payload.get("message", ""))},
        _("Died: %(n)s task(s) over %(minutes)s minute(s), %(first)s → %(last)s")
        % {
            "n": payload.get("deaths", 0),
            "minutes": minutes,
            "first": format_time(payload.get("started_at")),
            "last": format_time(payload.get("last_death_at")),
        },
        _("Replayed so far: %(n)s") % {"n": payload.get("replayed", 0)},
    ]
    if payload.get("muted"):
        lines.append(_("Deaths counted while muted: %(n)s") % {"n": payload["muted"]})
    return _card(
        "resolved", title, lines, [(_("Open the cause"), fingerprint_url(payload.get("fingerprint", "")))]
    )


def test_card(now) -> dict:
    return _card(
        "test",
        _("Report console test message"),
        [_("Test message from the report console: this channel is set up correctly."), format_time(now)],
        [(_("Open the console"), dead_letter_list_url())],
    )


def alert_card(alert) -> dict:
    if alert.category == AlertCategory.BATCH_SUMMARY:
        return batch_card(alert.payload)
    if alert.category == AlertCategory.RESOLVED:
        return resolved_card(alert.payload)
    return dead_letter_card(alert.payload)


def digest_card(groups: list[dict], *, total: int, max_groups: int) -> dict:
    """Every alert counted: the largest groups listed, the rest summed in one line."""
    groups = sorted(groups, key=lambda g: (-g["count"], g["first"]))
    shown, hidden = groups[:max_groups], groups[max_groups:]
    title = _("Dead-letter digest: %(total)s") % {"total": total}
    lines = [
        _("%(total)s alerts in %(groups)s groups, %(first)s → %(last)s")
        % {
            "total": total,
            "groups": len(groups),
            "first": format_time(min(g["first"] for g in groups)),
            "last": format_time(max(g["last"] for g in groups)),
        }
    ]
    links = []
    for group in shown:
        prefix = _("NEW") + " " if group.get("new") else ""
        lines.append(f"{group['count']} × {prefix}{group['label']}: {neutral(group.get('message', ''), 100)}")
        if group.get("url") and len(links) < 5:
            links.append((neutral(group["label"], 60), group["url"]))
    if hidden:
        lines.append(
            _("and %(groups)s more groups, %(count)s alerts")
            % {"groups": len(hidden), "count": sum(g["count"] for g in hidden)}
        )
    links.append((_("Open the dead-letter console"), dead_letter_list_url()))
    return _card("digest", title, lines, links)


def group_for(alert, count: int, first, last) -> dict:
    """A digest group's label, message and link from one sample alert of the group."""
    payload = alert.payload
    if alert.category == AlertCategory.BATCH_SUMMARY:
        label = _("batch summary %(name)s") % {
            "name": neutral(payload.get("name") or payload.get("batch_id"))
        }
        url = batch_url(payload.get("batch_id", ""))
    else:
        label = f"{neutral(payload.get('kind', ''), 60)} · {neutral(payload.get('error_type', ''), 80)}"
        if alert.category == AlertCategory.RESOLVED and payload.get("notice"):
            label = resolved_card(payload)["title"]
        elif alert.category == AlertCategory.RESOLVED:
            label = _("resolved: %(cause)s") % {"cause": label}
        url = fingerprint_url(alert.fingerprint) if alert.fingerprint else ""
    return {
        "count": count,
        "first": first,
        "last": last,
        "label": label,
        "message": payload.get("message", ""),
        "new": bool(payload.get("new")),
        "url": url,
    }


def card_text(card: dict, *, with_links: bool = True) -> str:
    """The card as plain text (email, fallbacks)."""
    parts = [card["title"], "", *card["lines"]]
    if with_links and card["links"]:
        parts += ["", *(f"{label}: {url}" for label, url in card["links"])]
    return "\n".join(parts)
