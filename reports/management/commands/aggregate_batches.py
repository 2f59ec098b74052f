from django.core.management.base import BaseCommand
from django.utils.translation import gettext as _

from reports.services import concurrency
from reports.services.batches import aggregate_batches


class Command(BaseCommand):
    help = (
        "One aggregator pass: mark batches completed when none of their tasks is pending, retrying "
        "or running (one DingTalk summary, through the alert outbox, when a finished batch has dead "
        "letters), and wake tasks waiting for a concurrency slot freed by an expired lease. "
        "`reap_tasks --loop` runs this after every reaper pass; safe to run on several machines."
    )

    def handle(self, *args, verbosity, **options):
        report = aggregate_batches()
        woken = concurrency.wake_all()
        if verbosity >= 1:
            self.stdout.write(
                _(
                    "batches: %(completed)d completed, %(reopened)d reopened, %(alerted)d summary alert(s); "
                    "%(woken)d capped task(s) woken"
                )
                % {"completed": report.completed, "reopened": report.reopened, "alerted": report.alerted, "woken": woken}
            )
