from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from deadletters.alerts.channels import channel_named
from deadletters.alerts.digest import daily_digest_write
from deadletters.alerts.heartbeat import heartbeats_ping
from deadletters.alerts.sender import retry_failed_alerts, send_due_alerts


class Command(BaseCommand):
    help = (
        "One send pass of the alert outbox, for cron and by hand (`manage.py housekeeper` runs it as a "
        "backstop to the pass kicked on commit): to every channel, the DingTalk robot (DINGTALK_*) and "
        "ALERT_CHANNELS, each on its own budget (DingTalk: DINGTALK_RATE_PER_MINUTE, shared by all "
        "senders through Redis). A cause gets one card, its further deaths one follow-up; a storm is "
        "coalesced into digests, so every death is counted in some sent message. Refused sends are "
        "retried with backoff (DINGTALK_RETRY_BACKOFF) up to DINGTALK_MAX_SEND_ATTEMPTS; a channel that "
        "does not answer is probed until it does, then drained oldest first. Safe to run on several "
        "machines at once."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--retry-failed",
            action="store_true",
            help="first put failed alert messages back to pending (fresh attempts, same msgUuid) "
            "and lift a configuration-error pause, then send",
        )
        parser.add_argument(
            "--digest", metavar="CHANNEL", default="",
            help="first write CHANNEL's daily digest (the last 24 hours) now, then send",
        )
        parser.add_argument(
            "--heartbeat", action="store_true",
            help="after sending, ping every channel's heartbeat_url now (a channel whose sends fail is "
            "not pinged: it says so)",
        )

    def handle(self, *args, retry_failed, digest, heartbeat, verbosity, **options):
        if digest:
            channel = channel_named(digest.strip().lower())
            if channel is None:
                raise CommandError(_("no alert channel named %(name)r") % {"name": digest[:40]})
            daily_digest_write(channel, now=timezone.now())
        if retry_failed:
            count = retry_failed_alerts()
            self.stdout.write(
                ngettext("%(n)d failed alert put back to pending",
                         "%(n)d failed alerts put back to pending", count)
                % {"n": count}
            )
        reports = send_due_alerts()
        if not reports and verbosity >= 1:
            self.stdout.write(_("no alert channel configured: alerts are recorded as skipped"))
        lines = [one.summary() for one in reports] + (heartbeats_ping(force=True) if heartbeat else [])
        for line in lines if verbosity >= 1 else ():
            self.stdout.write(line)
