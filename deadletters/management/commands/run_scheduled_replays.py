from django.core.management.base import BaseCommand
from django.utils.translation import gettext as _

from deadletters.bulk.canary import decide_canaries
from deadletters.bulk.schedule import promote_due_bulk_actions


class Command(BaseCommand):
    help = (
        "One pass, for cron (`manage.py housekeeper` does it every half second): start the scheduled "
        "bulk runs (and scheduled single replays) whose time has come, and give the verdict of canary "
        "replays whose outcome is certain (carry on, or stop as canary_failed). Safe to run on several "
        "machines: each start and each verdict is a conditional update one of them wins."
    )

    def handle(self, *args, verbosity, **options):
        started = promote_due_bulk_actions()
        decided = decide_canaries()
        if verbosity >= 1:
            self.stdout.write(
                _("%(started)d scheduled run(s) started, %(decided)d canary verdict(s) given")
                % {"started": len(started), "decided": len(decided)}
            )
