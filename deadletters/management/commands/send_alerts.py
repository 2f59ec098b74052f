from django.core.management.base import BaseCommand
from django.utils.translation import ngettext

from deadletters.alerts.channels.sender import retry_failed_channel_messages
from deadletters.alerts.sender import retry_failed_alerts
from deadletters.housekeeping import announce_quiet_causes, send_due_alerts


class Command(BaseCommand):
    help = (
        "One send pass of the alert outbox, for cron and by hand (`manage.py housekeeper` runs it as a "
        "backstop to the pass kicked on commit): to the DingTalk robot and to every channel of "
        "ALERT_CHANNELS, each on its own budget. Each dead letter gets a signed actionCard while the "
        "robot's budget (DINGTALK_RATE_PER_MINUTE, shared by all senders through Redis) allows; a storm "
        "is coalesced into digests grouped by error fingerprint, so every dead letter is counted in some "
        "sent message. Failed sends are retried with backoff (DINGTALK_RETRY_BACKOFF) up to "
        "DINGTALK_MAX_SEND_ATTEMPTS, then marked failed; DingTalk's 130101 (too fast) pauses the robot "
        "for DINGTALK_THROTTLE_BACKOFF_SECONDS; 310000 (signature/keyword/timestamp) is a configuration "
        "error that pauses sending. Safe to run on several machines at once."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--retry-failed",
            action="store_true",
            help="first put failed alert messages back to pending (fresh attempts, same msgUuid) "
            "and lift a configuration-error pause, then send",
        )

    def handle(self, *args, retry_failed, verbosity, **options):
        if retry_failed:
            count = retry_failed_alerts() + retry_failed_channel_messages()
            self.stdout.write(
                ngettext("%(n)d failed alert put back to pending", "%(n)d failed alerts put back to pending", count)
                % {"n": count}
            )
        announce_quiet_causes()
        sent = send_due_alerts()
        if verbosity >= 1:
            self.stdout.write(sent)
