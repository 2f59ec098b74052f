from django.core.management.base import BaseCommand

from reports.services.batches import aggregate_batches
from reports.worker import concurrency


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
                f"batches: {report.completed} completed, {report.reopened} reopened, "
                f"{report.alerted} summary alert(s); {woken} capped task(s) woken"
            )
