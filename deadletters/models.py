from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from reports.models import ReportTask


class DeadLetterStatus(models.TextChoices):
    OPEN = "open"
    REPLAYED = "replayed"
    ARCHIVED = "archived"
    DISCARDED = "discarded"


def default_expire_at():
    return timezone.now() + timedelta(days=settings.DEADLETTER_RETENTION_DAYS)


class DeadLetter(models.Model):
    """A task's death, kept as it was: replaying the task later does not rewrite this row."""

    task = models.ForeignKey(ReportTask, on_delete=models.PROTECT, related_name="dead_letters")
    kind = models.CharField(max_length=64)
    params = models.JSONField(default=dict)
    error_type = models.CharField(max_length=200)
    error_message = models.TextField(blank=True)
    traceback = models.TextField(blank=True)
    attempts = models.PositiveIntegerField()
    fingerprint = models.CharField(max_length=40)
    status = models.CharField(max_length=10, choices=DeadLetterStatus.choices, default=DeadLetterStatus.OPEN)
    created_at = models.DateTimeField(default=timezone.now)
    expire_at = models.DateTimeField(default=default_expire_at)
    replayed_at = models.DateTimeField(null=True, blank=True)
    replayed_by = models.CharField(max_length=150, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    discarded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["status", "-created_at", "-id"], name="dl_status_created"),
            models.Index(fields=["fingerprint", "-created_at"], name="dl_fingerprint_created"),
            models.Index(fields=["status", "expire_at"], name="dl_status_expire"),
            models.Index(fields=["kind", "status", "-created_at"], name="dl_kind_status_created"),
        ]
        permissions = [
            ("replay_deadletter", "Can replay dead letters"),
            ("archive_deadletter", "Can archive, discard and restore dead letters"),
        ]

    def __str__(self) -> str:
        return f"dead letter {self.pk} of task {self.task_id} ({self.status})"


class AuditEntry(models.Model):
    """Who did what to which dead letter or task. Written by services only, never edited."""

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=40)
    source = models.CharField(max_length=20, default="console")
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    task = models.ForeignKey(ReportTask, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    dead_letter = models.ForeignKey(
        DeadLetter, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_entries"
    )
    item_count = models.PositiveIntegerField(default=1)
    reason = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor or 'system'} {self.action}"
