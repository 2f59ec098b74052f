import uuid
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from reports.models import ReportTask, TaskStatus


class DeadLetterStatus(models.TextChoices):
    OPEN = "open"
    REPLAYED = "replayed"
    ARCHIVED = "archived"
    DISCARDED = "discarded"
    SUPERSEDED = "superseded"  # a later task of the same kind, params and client ended done


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
    # The bulk action that replayed this letter, so the bulk can watch what its replays led to.
    replayed_in = models.ForeignKey(
        "BulkAction", null=True, blank=True, on_delete=models.SET_NULL, related_name="replayed_letters"
    )
    # The done task that made this letter moot (deadletters/services/supersession.py). No database
    # constraint: retention may delete that task later, and the link then shows as gone.
    superseded_by = models.ForeignKey(ReportTask, null=True, blank=True, on_delete=models.DO_NOTHING,
                                      db_constraint=False, db_index=False, related_name="+")

    class Meta:
        indexes = [
            models.Index(fields=["status", "-created_at", "-id"], name="dl_status_created"),
            models.Index(fields=["fingerprint", "-created_at"], name="dl_fingerprint_created"),
            # The archiver's and the purge's keyset walks (deadletters/migrations/0005_walk_indexes.py),
            # partial so that a letter changing state leaves them (no insert) unless it enters one;
            # a trigram index on UPPER(error_message) of open letters serves search on PostgreSQL (0003).
            models.Index(
                fields=["expire_at", "id"], name="dl_open_expire_id", condition=models.Q(status="open")
            ),
            models.Index(
                fields=["archived_at", "id"], name="dl_archived_at_id", condition=models.Q(status="archived")
            ),
            models.Index(fields=["kind", "status", "-created_at"], name="dl_kind_status_created"),
        ]
        permissions = [
            ("replay_deadletter", "Can replay dead letters"),
            ("archive_deadletter", "Can archive, discard and restore dead letters"),
            # Changing what a task does is more than running it again (Oban Web splits them too).
            ("replay_edited_deadletter", "Can replay dead letters with edited params"),
            # Params can name customers and amounts; tracebacks quote them (docs/console.md).
            ("view_params", "Can see task params and tracebacks"),
        ]

    def __str__(self) -> str:
        return f"dead letter {self.pk} of task {self.task_id} ({self.status})"

    @property
    def died_without_retry(self) -> bool:
        """This death ended its run with attempts to spare: the error was permanent (or the task
        was reaped too often), so running the same params again is expected to fail alike."""
        task = self.task
        return (task.status == TaskStatus.DEAD and self.attempts == task.attempt
                and task.attempt < task.max_attempts)


class OpenLetterCount(models.Model):
    """Open dead letters per (kind, fingerprint), kept by database triggers on the dead-letter table
    (deadletters/migrations/0007_open_letter_counts.py) in the transaction of each change, so
    /metrics reads a few rows instead of counting a million. Rows may hold 0."""

    kind = models.CharField(max_length=64)
    fingerprint = models.CharField(max_length=40)
    error_type = models.CharField(max_length=200, blank=True)
    count = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "fingerprint"], name="open_letter_count_kind_fingerprint")
        ]

    def __str__(self) -> str:
        return f"{self.count} open {self.kind} letters of {self.fingerprint[:12]}"


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


class AlertStatus(models.TextChoices):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"
    SKIPPED = "skipped"  # no robot configured: recorded, visible, nothing sent
    MUTED = "muted"  # its cause or kind was snoozed (or the kind paused): counted, not sent


class AlertCategory(models.TextChoices):
    DEAD_LETTER = "dead_letter"
    BATCH_SUMMARY = "batch_summary"
    TEST = "test"
    RESOLVED = "resolved"
    DAILY_DIGEST = "daily_digest"  # a channel's "all quiet" digest of the last 24 hours


class AlertMessage(models.Model):
    """One request to one channel (the DingTalk robot, a Feishu bot, a mail...): a single alert, a
    follow-up of one cause or a digest of many. Every resend reuses msg_uuid, which goes out as
    DingTalk's msgUuid and the webhook's Idempotency-Key. The body holds no URL or secret."""

    channel = models.CharField(max_length=40, default="")
    msg_uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    is_digest = models.BooleanField(default=False)
    title = models.CharField(max_length=200)
    body = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=AlertStatus.choices, default=AlertStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    last_errcode = models.IntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["channel", "status", "next_attempt_at"],
                                name="alertmsg_channel_next")]

    def __str__(self) -> str:
        return f"{self.channel} message {self.msg_uuid} ({self.status})"


class Alert(models.Model):
    """The outbox: one row per event (a death, a batch, a notice) and channel, written in the
    transaction of the event. A row with no channel is an event no channel sends: muted (its cause
    or kind is snoozed or paused) or skipped (no channel configured)."""

    channel = models.CharField(max_length=40, blank=True, default="")
    category = models.CharField(
        max_length=20, choices=AlertCategory.choices, default=AlertCategory.DEAD_LETTER
    )
    dead_letter = models.ForeignKey(
        DeadLetter, null=True, blank=True, on_delete=models.CASCADE, related_name="alerts"
    )
    batch = models.ForeignKey(
        "reports.ReportBatch", null=True, blank=True, on_delete=models.CASCADE, related_name="alerts"
    )
    fingerprint = models.CharField(max_length=40, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=AlertStatus.choices, default=AlertStatus.PENDING)
    message = models.ForeignKey(
        AlertMessage, null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["status", "created_at"], name="alert_status_created"),
            models.Index(fields=["channel", "status", "id"], name="alert_channel_status"),
            models.Index(fields=["fingerprint", "channel"], name="alert_fingerprint_channel"),
        ]

    def __str__(self) -> str:
        return f"alert {self.pk} {self.category} on {self.channel or '-'} ({self.status})"


class AlertPath(models.Model):
    """What the alert path's own duties last did for one channel (deadletters/alerts/heartbeat.py,
    digest.py): when its dead-man's switch was pinged and the day of its last daily digest. Each is
    claimed by a conditional UPDATE, so two housekeepers ping and send once."""

    channel = models.CharField(max_length=40, unique=True)
    pinged_at = models.DateTimeField(null=True, blank=True)
    digest_day = models.DateField(null=True, blank=True)  # in TIME_ZONE

    def __str__(self) -> str:
        return f"alert path of {self.channel}"


class CauseState(models.Model):
    """What alerting knows of one fingerprint: when it first died (and under which release), its
    current episode of deaths, which ends with one resolved notice after a quiet period, and the
    team's runbook note on it."""

    fingerprint = models.CharField(max_length=40, unique=True)
    first_seen_at = models.DateTimeField(default=timezone.now)
    first_release = models.CharField(max_length=100, blank=True)
    episode_started_at = models.DateTimeField(null=True, blank=True)
    episode_deaths = models.PositiveIntegerField(default=0)
    last_death_at = models.DateTimeField(default=timezone.now)
    sample_kind = models.CharField(max_length=64, blank=True)
    sample_error_type = models.CharField(max_length=200, blank=True)
    sample_message = models.CharField(max_length=300, blank=True)
    # The team's runbook note (deadletters.services.cause_notes): text per language, links, who, when.
    note_text = models.JSONField(default=dict, blank=True)
    note_links = models.JSONField(default=list, blank=True)
    note_by = models.CharField(max_length=150, blank=True)
    note_at = models.DateTimeField(null=True, blank=True)
    # "Fixed in the next release" (deadletters/services/cause_lifecycle.py): marked under one release;
    # the first other release to run claims fixed_release_started (set from NULL once) and replays
    # the cause's open letters with a canary; a death under another release after that regresses it.
    fixed_marked_at = models.DateTimeField(null=True, blank=True)
    fixed_marked_by = models.CharField(max_length=150, blank=True)
    fixed_marked_release = models.CharField(max_length=100, blank=True)
    fixed_release = models.CharField(max_length=100, blank=True)
    fixed_release_started = models.DateTimeField(null=True, blank=True)
    regressed_release = models.CharField(max_length=100, blank=True)

    class Meta:
        indexes = [models.Index(fields=["episode_started_at", "last_death_at"], name="cause_episode")]

    def __str__(self) -> str:
        return f"cause {self.fingerprint}"


class CauseRelease(models.Model):
    """How many times a cause died under each RELEASE_NAME, counted in the transaction of each
    death (deadletters.alerts.causes): the groups page and the API list the releases of a cause."""

    fingerprint = models.CharField(max_length=40)
    release = models.CharField(max_length=100)
    deaths = models.PositiveIntegerField(default=0)
    last_death_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["fingerprint", "release"], name="cause_release")]

    def __str__(self) -> str:
        return f"{self.deaths} deaths of {self.fingerprint[:12]} under {self.release}"


class AlertSnooze(models.Model):
    """An operator's mute of one cause (fingerprint) or one report kind until a time, with a
    reason. Deaths it covers are counted, not sent; one summary goes out when it ends. A cause's
    mute may instead last until it crosses a threshold (per_minute or total deaths, the latter
    counted in `deaths`): the death that crosses it ends it and is sent, saying so."""

    fingerprint = models.CharField(max_length=40, blank=True)
    kind = models.CharField(max_length=64, blank=True)
    until = models.DateTimeField()
    reason = models.TextField()
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)  # set when it ends (time up or lifted)
    ended_by = models.CharField(max_length=150, blank=True)
    per_minute = models.PositiveIntegerField(null=True, blank=True)
    total = models.PositiveIntegerField(null=True, blank=True)
    deaths = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["ended_at", "until"], name="snooze_open_until")]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(fingerprint="") & ~models.Q(kind=""))
                | (~models.Q(fingerprint="") & models.Q(kind="")),
                name="snooze_cause_or_kind",
            )
        ]

    def __str__(self) -> str:
        return f"snooze of {self.fingerprint or self.kind} until {self.until:%Y-%m-%d %H:%M}"


class BulkActionKind(models.TextChoices):
    REPLAY = "replay"
    ARCHIVE = "archive"
    DISCARD = "discard"
    RESTORE = "restore"


def permission_for(action: str) -> str:
    """The permission a dead-letter action needs wherever it is named (console or API, one letter
    or a bulk run): replay, or archive (archive, discard and restore)."""
    return ("deadletters.replay_deadletter" if action == BulkActionKind.REPLAY
            else "deadletters.archive_deadletter")


class BulkActionStatus(models.TextChoices):
    SCHEDULED = "scheduled"  # waits for start_at (deadletters.bulk.schedule)
    PENDING = "pending"
    RUNNING = "running"
    CANARY = "canary"  # its first replays made, waiting for their outcome (deadletters.bulk.canary)
    PAUSED = "paused"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"
    CANARY_FAILED = "canary_failed"


class CanaryPhase(models.TextChoices):
    NONE = ""
    PENDING = "pending"  # the run has not started yet
    RUNNING = "running"  # its replays are being made, then awaited
    PASSED = "passed"
    FAILED = "failed"


class BulkAction(models.Model):
    """A background action over many dead letters: a selection (ids) or a saved filter."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    action = models.CharField(max_length=10, choices=BulkActionKind.choices)
    status = models.CharField(
        max_length=16, choices=BulkActionStatus.choices, default=BulkActionStatus.PENDING
    )
    filters = models.JSONField(default=dict, blank=True)
    selected_ids = models.JSONField(null=True, blank=True)
    actor = models.CharField(max_length=150, blank=True)
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    source = models.CharField(max_length=20, default="console")  # where it started (its letters' audit)
    reason = models.TextField(blank=True)
    total = models.PositiveIntegerField(default=0)
    processed = models.PositiveIntegerField(default=0)
    succeeded = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)
    # Keyset cursor: a resumed or restarted run carries on after the last id it handled.
    last_processed_id = models.BigIntegerField(default=0)
    rate_per_second = models.FloatField(default=0)
    pause_threshold = models.FloatField(default=0)
    paused_reason = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    # A scheduled run: the due time is here, not in any process, so every process can restart.
    start_at = models.DateTimeField(null=True, blank=True)
    # A scheduled replay that starts once this kind's circuit breaker is closed (instead of start_at).
    after_breaker_of = models.CharField(max_length=64, blank=True, default="")
    # A canary replay: the first canary_size replays, then their outcome decides (canary_result).
    canary_size = models.PositiveIntegerField(default=0)
    canary_success = models.FloatField(default=0)
    canary_phase = models.CharField(max_length=8, choices=CanaryPhase.choices, blank=True, default="")
    canary_deadline = models.DateTimeField(null=True, blank=True)
    canary_result = models.JSONField(null=True, blank=True)
    # A replay with a params patch (deadletters.bulk.patch); the letters whose patched params their
    # kind refused are not replayed: counted in `refused` (not in skipped), the first kept with their reasons.
    params_patch = models.JSONField(null=True, blank=True)
    refused = models.PositiveIntegerField(default=0)
    refusals = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        # The planner's poll (scheduled runs that are due, canaries awaiting a verdict).
        indexes = [models.Index(fields=["status", "start_at"], name="bulk_status_start_at")]

    def __str__(self) -> str:
        return f"bulk {self.action} {self.public_id} ({self.status})"

    @property
    def percent(self) -> int:
        return 100 if not self.total else min(100, int(self.processed * 100 / self.total))
