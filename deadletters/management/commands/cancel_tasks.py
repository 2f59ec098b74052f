import uuid

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from deadletters.services.task_controls import task_cancel
from reports.models import ReportTask
from reports.services.controls import TaskNotControllable


class Command(BaseCommand):
    help = (
        "Cancel pending or retrying report tasks by id: they never run and are not dead letters. A task "
        "that already ran or is running is left as it is and named. Exits 1 when one was not cancelled."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "task_ids", nargs="+", metavar="TASK_ID", help="a task id (the UUID the API returned)"
        )
        parser.add_argument("--reason", default="", help="why (kept in the audit log)")
        parser.add_argument("--actor", default="manage.py", help="who cancels (default %(default)s)")

    def handle(self, *args, task_ids, reason, actor, **options):
        refused = 0
        for raw in task_ids:
            try:
                task = ReportTask.objects.filter(public_id=uuid.UUID(raw)).only("pk").first()
            except ValueError:
                task = None
            if task is None:
                refused += 1
                self.stderr.write(_("%(id)s: no such task") % {"id": raw})
                continue
            try:
                task_cancel(task_id=task.pk, actor=actor, source="cli", reason=reason)
            except TaskNotControllable as exc:
                refused += 1
                self.stderr.write(_("%(id)s: %(why)s") % {"id": raw, "why": exc})
                continue
            self.stdout.write(_("%(id)s: cancelled") % {"id": raw})
        if refused:
            raise CommandError(_("%(refused)d of %(n)d tasks not cancelled")
                               % {"refused": refused, "n": len(task_ids)})
