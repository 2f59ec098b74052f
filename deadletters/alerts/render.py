"""The one renderer: every alert becomes a card (an event, a title, plain lines and links) in
ALERT_LANGUAGE, whoever's request or worker renders it, with times in the team's zone. The
channels' wire formats (deadletters.alerts.wire) lay a card out. Every value a client or an error
supplied goes through text.neutral first, so no channel renders it as markup or a link.

A death card decides: what kind of failure it is and what replaying as is would do, the cause by
its error text, how many open letters share it, and buttons to view, replay this one, and open
the bulk preview of the whole cause (a GET: nothing happens until the operator confirms there)."""

from django.conf import settings
from django.db.models import Sum
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy as pgettext

from deadletters.alerts.channels import channel_named
from deadletters.alerts.digest import daily_card
from deadletters.alerts.text import TITLE_MAX, format_time, neutral
from deadletters.links import (
    batch_url,
    bulk_url,
    cause_replay_preview_url,
    dead_letter_list_url,
    dead_letter_url,
    fingerprint_url,
    kind_url,
    replay_confirm_url,
)
from deadletters.models import AlertCategory, DeadLetter, OpenLetterCount
from deadletters.selectors.cause_notes import cause_note
from reports.kinds.masking import params_for_display


def _card(event: str, title: str, lines: list[str], links: list[tuple], fingerprint: str = "") -> dict:
    """A card; one of a cause (`fingerprint`) opens with its runbook note's first line and adds its
    first link (deadletters.services.cause_notes), in ALERT_LANGUAGE when the note has both."""
    note = cause_note(fingerprint) if fingerprint else None
    if note and note.line:
        lines = [_("Runbook: %(v)s") % {"v": neutral(note.line)}, *lines]
    if note and note.links:
        links = [*links, (_("Runbook"), note.links[0])]
    return {"event": event, "title": title[:TITLE_MAX], "lines": lines, "links": [list(p) for p in links]}


def open_letters(fingerprint: str) -> int:
    """Open dead letters of a cause now (counts kept by triggers, not a count of the letters)."""
    total = OpenLetterCount.objects.filter(fingerprint=fingerprint).aggregate(n=Sum("count"))["n"]
    return int(total or 0)


def cause_text(payload: dict, limit: int = 120) -> str:
    """A cause as an operator recognises it: its error type and message, never its hex id."""
    error = str(payload.get("error_type", "")).rsplit(".", 1)[-1]
    message = payload.get("message", "")
    return neutral(f"{error}: {message}" if message else error, limit)


def _verdict(payload: dict) -> str:
    if payload.get("permanent"):
        return _("Permanent error: replaying as is will fail again; fix the cause or the params first.")
    return _("Transient error, retries used up: replaying as is works once the upstream is back.")


def new_cause_line(payload: dict) -> str:
    if not payload.get("new"):
        return ""
    if payload.get("release"):
        return _("New cause since release %(release)s: first death of this fingerprint") % {
            "release": neutral(payload["release"], 60)
        }
    return _("New cause: first death of this fingerprint")


def lifecycle_line(payload: dict) -> str:
    """What a regression or a crossed threshold says, naming the releases or the threshold."""
    marks = payload.get("lifecycle") or {}
    if marks.get("event") == "regression":
        return _(
            "Regression: marked fixed under release %(fixed_under)s, fixed in %(fixed_in)s, "
            "died again under %(died_under)s."
        ) % {k: neutral(marks.get(k) or "-", 60) for k in ("fixed_under", "fixed_in", "died_under")}
    if marks.get("event") != "threshold":
        return ""
    if marks.get("per_minute") and int(marks.get("last_minute") or 0) > int(marks["per_minute"]):
        said = _("%(n)s deaths in the last minute, more than the %(max)s a minute it was muted until") % {
            "n": marks["last_minute"], "max": marks["per_minute"]}
    else:
        said = _("%(n)s deaths since it was muted, more than the %(max)s in total it was muted until") % {
            "n": marks.get("deaths", 0), "max": marks.get("total", 0)}
    return _("Threshold crossed: %(said)s; its alerts are no longer muted.") % {"said": said}


def _cause_links(fingerprint: str, count: int) -> list[tuple[str, str]]:
    if not fingerprint or count < 1:
        return []
    return [(_("Replay the cause (%(n)s)…") % {"n": count}, cause_replay_preview_url(fingerprint))]


def params_line(alert) -> str:
    """The dead letter's params as the alert's channel may show them: their keys, with values
    masked unless the channel says `show_params` (sensitive ones always masked)."""
    letter = DeadLetter.objects.filter(pk=alert.dead_letter_id).values_list("kind", "params").first()
    if not letter or not letter[1]:
        return ""
    channel = channel_named(alert.channel)
    shown = params_for_display(letter[1], letter[0], can_see=bool(channel and channel.show_params))
    return _("Params: %(v)s") % {"v": neutral(", ".join(f"{k}={v}" for k, v in sorted(shown.items())))}


def death_card(
    payload: dict, fingerprint: str, *, more: int = 0, minutes: int = 0, follow_up: bool = False,
    params: str = "",
) -> dict:
    """One death, with `more` deaths of its cause it carries; a follow-up of an announced cause
    is headed by them: "+N more of <cause> in the last M minutes". `params`: its params_line."""
    kind = neutral(payload.get("kind", ""), 60)
    cause = cause_text(payload)
    count = open_letters(fingerprint) if fingerprint else 0
    new = "" if follow_up else new_cause_line(payload)
    raised = "" if follow_up else lifecycle_line(payload)
    event = (payload.get("lifecycle") or {}).get("event") if raised else ("new_cause" if new else "death")
    if follow_up:
        title = _("+%(n)s more: %(cause)s") % {"n": more, "cause": cause}
    else:
        title = {
            "regression": _("Regression: %(kind)s"), "threshold": _("Threshold crossed: %(kind)s"),
            "new_cause": _("New cause: %(kind)s"),
        }.get(event, _("Dead letter: %(kind)s")) % {"kind": f"{kind} · {cause}"}
    lines = [line for line in (raised, new) if line]
    if more:
        lines.append(
            _("+%(n)s more of %(cause)s in the last %(m)s minutes")
            % {"n": more, "cause": cause, "m": minutes}
        )
    lines += [
        _verdict(payload),
        _("Cause: %(v)s") % {"v": cause},
        _("Open letters of this cause: %(n)s") % {"n": count},
        _("Kind: %(v)s") % {"v": kind},
        _("Attempts: %(v)s") % {"v": neutral(payload.get("attempts", ""))},
        _("Time: %(v)s") % {"v": format_time(payload.get("created_at"))},
        _("Task: %(v)s") % {"v": neutral(payload.get("task_id", ""))},
    ]
    lines += [params] if params else []
    dl_id = payload.get("dead_letter_id")
    if follow_up:
        links = [(_("Open the cause"), fingerprint_url(fingerprint))]
    else:
        links = [
            (_("Open dead letter"), dead_letter_url(dl_id)),
            (_("Replay this one"), replay_confirm_url(dl_id)),
        ]
    links += _cause_links(fingerprint, count)
    return _card(event or "death", title, lines, links, fingerprint)


def batch_card(payload: dict) -> dict:
    name = neutral(payload.get("name") or payload.get("batch_id", ""), TITLE_MAX)
    dead = int(payload.get("dead", 0))
    lines = [
        _("Tasks: %(v)s") % {"v": neutral(payload.get("total", "-"))},
        _("Done: %(v)s") % {"v": neutral(payload.get("done", "-"))},
        _("Dead: %(v)s") % {"v": dead},
        _("Finished: %(v)s") % {"v": format_time(payload.get("finished_at"))},
    ]
    title = _("Batch finished: %(name)s (%(dead)s dead)") % {"name": name, "dead": dead}
    return _card(
        "batch", title, lines, [(_("Open the batch's dead letters"), batch_url(payload["batch_id"]))]
    )


_ACTIONS = {
    "replay": pgettext("alert bulk", "replay"),
    "archive": pgettext("alert bulk", "archive"),
    "discard": pgettext("alert bulk", "discard"),
    "restore": pgettext("alert bulk", "restore"),
}
_STATUSES = {
    "completed": pgettext("alert bulk", "completed"),
    "cancelled": pgettext("alert bulk", "cancelled"),
    "failed": pgettext("alert bulk", "failed"),
    "paused": pgettext("alert bulk", "paused"),
    "canary_failed": pgettext("alert bulk", "stopped by its canary"),
}


def _bulk_card(payload: dict) -> dict:
    notice = payload["notice"]
    action = str(_ACTIONS.get(payload.get("action"), neutral(payload.get("action", ""))))
    status = str(_STATUSES.get(payload.get("status"), neutral(payload.get("status", ""))))
    counts = _("%(total)s letters: %(succeeded)s done, %(skipped)s skipped.") % {
        k: payload.get(k, 0) for k in ("total", "succeeded", "skipped")
    }
    if notice == "bulk_paused":
        title = _("Bulk %(action)s paused itself") % {"action": action}
        lines = [
            _("%(died)s of %(finished)s replayed tasks died again (%(ratio)s%%, threshold %(threshold)s%%).")
            % {k: payload.get(k, 0) for k in ("died", "finished", "ratio", "threshold")},
            _("Fix the cause, then resume the run, or cancel it."),
            counts,
        ]
    elif notice == "canary_failed":
        title = _("Canary failed: bulk %(action)s stopped") % {"action": action}
        lines = [
            _("Of %(replayed)s canary replays %(done)s succeeded and %(died)s died again; %(needed)s needed.")
            % {k: payload.get(k, 0) for k in ("replayed", "done", "died", "needed")},
            _("The rest was not replayed. Fix the cause, then start the run again."),
        ]
    elif notice == "not_started":
        title = _("Scheduled bulk %(action)s could not start") % {"action": action}
        lines = [
            _("It was due at %(time)s.") % {"time": format_time(payload.get("start_at"))},
            _("Error: %(v)s") % {"v": neutral(payload.get("error", ""))},
        ]
    else:
        title = _("Bulk %(action)s: %(status)s") % {"action": action, "status": status}
        lines = [counts]
    return _card("resolved", title, lines, [(_("Open the run"), bulk_url(payload.get("bulk_id", "")))])


def _breaker_card(payload: dict) -> dict:
    kind = neutral(payload.get("kind", ""), 60)
    named = ("failures", "window_seconds", "probes", "waiting", "actor")
    values = {"kind": kind, **{name: neutral(payload.get(name, "")) for name in named}}
    if payload["notice"] == "breaker_opened":
        title = _("Circuit breaker opened: %(kind)s") % values
        lines = [
            _("Its upstream failed %(failures)s times within %(window_seconds)s s: %(kind)s is paused, and "
              "its %(waiting)s waiting task(s) use no attempts meanwhile.") % values,
            _("The housekeeper probes the upstream; after %(probes)s passing probes a canary of its tasks "
              "runs, then the rest. One more card says when it closes.") % values,
        ]
    else:
        title = _("Circuit breaker closed: %(kind)s") % values
        lines = [
            (_("Closed by %(actor)s.") % values) if payload.get("actor")
            else _("Its upstream passed its probes and its canary succeeded."),
            _("%(kind)s runs again; %(waiting)s task(s) waiting.") % values,
            _("Open from %(start)s to %(end)s.") % {"start": format_time(payload.get("opened_at")),
                                                     "end": format_time(payload.get("changed_at"))},
        ]
    return _card("resolved", title, lines, [(_("Open the kind"), kind_url(payload.get("kind", "")))])


def notice_card(payload: dict) -> dict:
    notice = payload["notice"]
    if notice.startswith("bulk") or notice in ("canary_failed", "not_started"):
        return _bulk_card(payload)
    if notice.startswith("breaker"):
        return _breaker_card(payload)
    if notice == "kind_resumed":
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
    target = neutral(payload.get("kind"), 60) if payload.get("kind") else cause_text(payload, 60)
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
    url = fingerprint_url(payload["fingerprint"]) if payload.get("fingerprint") else dead_letter_list_url()
    return _card(
        "resolved",
        _("Snooze ended: %(target)s") % {"target": target},
        lines,
        [(_("Open the dead-letter console"), url)],
        payload.get("fingerprint", ""),
    )


def resolved_card(payload: dict) -> dict:
    if payload.get("notice"):
        return notice_card(payload)
    label = f"{neutral(payload.get('kind', ''), 60)} · {cause_text(payload, 80)}"
    lines = [
        _("No death of this cause for %(quiet)s minutes.")
        % {"quiet": int(payload.get("quiet_seconds", 0)) // 60},
        _("Cause: %(v)s") % {"v": label},
        _("Died: %(n)s task(s) over %(minutes)s minute(s), %(first)s → %(last)s")
        % {
            "n": payload.get("deaths", 0),
            "minutes": max(int(payload.get("duration_seconds", 0)) // 60, 0),
            "first": format_time(payload.get("started_at")),
            "last": format_time(payload.get("last_death_at")),
        },
        _("Replayed so far: %(n)s") % {"n": payload.get("replayed", 0)},
    ]
    fingerprint = payload.get("fingerprint", "")
    links = [(_("Open the cause"), fingerprint_url(fingerprint))]
    return _card("resolved", _("Resolved: %(cause)s") % {"cause": label}, lines, links, fingerprint)


def test_card(now) -> dict:
    lines = [_("Test message from the report console: this channel is set up correctly."), format_time(now)]
    return _card(
        "test", _("Report console test message"), lines, [(_("Open the console"), dead_letter_list_url())]
    )


def alert_card(alert, **death) -> dict:
    """The card of one outbox row (`death`: more, minutes, follow_up, see death_card)."""
    with translation.override(settings.ALERT_LANGUAGE):
        if alert.category == AlertCategory.BATCH_SUMMARY:
            return batch_card(alert.payload)
        if alert.category == AlertCategory.RESOLVED:
            return resolved_card(alert.payload)
        if alert.category == AlertCategory.TEST:
            return test_card(alert.created_at)
        if alert.category == AlertCategory.DAILY_DIGEST:
            return daily_card(alert.payload)
        params = "" if death.get("follow_up") else params_line(alert)
        return death_card(alert.payload, alert.fingerprint, params=params, **death)


def _group_line(group: dict) -> str:
    sample, count = group["sample"], group["count"]
    payload = sample.payload
    if sample.category == AlertCategory.BATCH_SUMMARY:
        name = neutral(payload.get("name") or payload.get("batch_id"), 60)
        return _("batch %(name)s: %(total)s tasks, %(done)s done, %(dead)s dead") % {
            "name": name,
            **{k: payload.get(k, "-") for k in ("total", "done", "dead")},
        }
    if sample.category != AlertCategory.DEAD_LETTER:
        return alert_card(sample)["title"]
    kinds = neutral(", ".join(group["kinds"]), 60)
    new = _("NEW") + " " if payload.get("new") else ""
    return f"{count} × {new}{kinds} · {cause_text(payload, 100)}"


def digest_card(groups: list[dict], *, max_groups: int) -> dict:
    """Many alerts in one message, every one counted: the largest groups listed, the rest summed.
    A group: {"sample": Alert, "count", "first", "last", "kinds"}; deaths of a batch count too."""
    with translation.override(settings.ALERT_LANGUAGE):
        groups = sorted(groups, key=lambda g: (-g["count"], g["first"]))
        shown, hidden = groups[:max_groups], groups[max_groups:]
        deaths = sum(g["count"] for g in groups if g["sample"].category == AlertCategory.DEAD_LETTER)
        batches = [g for g in groups if g["sample"].category == AlertCategory.BATCH_SUMMARY]
        deaths += sum(int(g["sample"].payload.get("dead", 0) or 0) for g in batches)
        lines = [
            _("%(total)s deaths in %(groups)s groups, %(first)s → %(last)s")
            % {
                "total": deaths,
                "groups": len(groups),
                "first": format_time(min(g["first"] for g in groups)),
                "last": format_time(max(g["last"] for g in groups)),
            }
        ]
        lines += [_group_line(g) for g in shown]
        if hidden:
            lines.append(
                _("and %(groups)s more groups, %(count)s alerts")
                % {"groups": len(hidden), "count": sum(g["count"] for g in hidden)}
            )
        links = [
            (cause_text(g["sample"].payload, 40), fingerprint_url(g["sample"].fingerprint))
            for g in shown[:3]
            if g["sample"].category == AlertCategory.DEAD_LETTER
        ]
        links.append((_("Open the dead-letter console"), dead_letter_list_url()))
        return _card("digest", _("Dead-letter digest: %(total)s") % {"total": deaths}, lines, links)


def card_text(card: dict, *, with_links: bool = True) -> str:
    """The card as plain text (email, fallbacks)."""
    parts = [card["title"], "", *card["lines"]]
    if with_links and card["links"]:
        parts += ["", *(f"{label}: {url}" for label, url in card["links"])]
    return "\n".join(parts)
