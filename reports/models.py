import uuid

from django.db import models

from reports.errors import escape_controls


class TaskStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    RETRYING = "retrying"
    DONE = "done"
    DEAD = "dead"
    # An operator (or the owning client) called it off before it ran to an end: it never runs
    # again and it is not a dead letter.
    CANCELLED = "cancelled"


class Priority(models.TextChoices):
    HIGH = "high"
    DEFAULT = "default"
    LOW = "low"


class BatchStatus(models.TextChoices):
    OPEN = "open"
    COMPLETED = "completed"


class ApiScope(models.TextChoices):
    SUBMIT = "submit"
    READ = "read"
    REPLAY = "replay"
    # Widens the others to every client's tasks (and allows operator-only kinds such as the probe).
    OPERATOR = "operator"
    # Reads GET /metrics and nothing else.
    METRICS = "metrics"
    # With operator: other clients' params and tracebacks unmasked (a client always sees its own).
    PARAMS = "params"


def idempotency_constraints(prefix: str) -> list[models.UniqueConstraint]:
    """An idempotency key is unique per owner. NULL never equals NULL in a unique index, so the
    owner-less rows (console, shell) get a partial index of their own: one key, one row there too."""
    return [
        models.UniqueConstraint(
            fields=["owner", "idempotency_key"],
            condition=models.Q(owner__isnull=False),
            name=f"{prefix}_idempotency_per_client",
        ),
        models.UniqueConstraint(
            fields=["idempotency_key"],
            condition=models.Q(owner__isnull=True),
            name=f"{prefix}_idempotency_ownerless",
        ),
    ]


class ReportBatch(models.Model):
    """Many tasks submitted together. Progress is counted from its tasks, never stored here."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=200, blank=True)
    # Unique per owner (see Meta.constraints), so one client can neither learn nor squat another's keys.
    # NULL when there is none: NULLs never collide in those unique indexes, "" would.
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    submitted_by = models.CharField(max_length=150, blank=True)
    # The API client that submitted it; None for the console and the shell (operators).
    owner = models.ForeignKey(
        "ApiToken", null=True, blank=True, on_delete=models.PROTECT, related_name="batches"
    )
    total = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=10, choices=BatchStatus.choices, default=BatchStatus.OPEN)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    summary_alerted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "created_at"], name="batch_status_created")]
        constraints = idempotency_constraints("batch")

    def __str__(self) -> str:
        return f"batch {self.public_id} ({self.status})"

    @property
    def label(self) -> str:
        """The batch as the console names it: the client's name with control and bidi characters as
        escapes (a right-to-left override would reorder what an operator reads), else its id."""
        return escape_controls(self.name) if self.name else str(self.public_id)


class PausedKind(models.Model):
    """A report kind whose claims are deferred (not failed, no attempt used) until resumed."""

    kind = models.CharField(max_length=64, unique=True)
    paused_at = models.DateTimeField(auto_now_add=True)
    paused_by = models.CharField(max_length=150, blank=True)
    reason = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"{self.kind} paused"


class BreakerState(models.TextChoices):
    CLOSED = "closed"  # the kind runs; its upstream failures are counted
    OPEN = "open"  # the kind is paused; the housekeeper probes its upstream
    HALF_OPEN = "half_open"  # probes passed: a canary of its tasks runs before the rest
    HELD = "held"  # an operator keeps it open: paused, not probed


class KindBreaker(models.Model):
    """A kind's circuit breaker (reports/services/breakers.py); each change one conditional UPDATE."""

    kind = models.CharField(max_length=64, unique=True)
    state = models.CharField(max_length=10, choices=BreakerState.choices, default=BreakerState.CLOSED)
    # Thresholds: the kind's declaration when the row is born; an operator may change them.
    failures_to_open = models.PositiveIntegerField()
    window_seconds = models.PositiveIntegerField()
    probes_to_close = models.PositiveIntegerField()
    failures = models.PositiveIntegerField(default=0)  # upstream failures in the window so far
    window_started_at = models.DateTimeField(null=True, blank=True)
    passing_probes = models.PositiveIntegerField(default=0)
    probed_at = models.DateTimeField(null=True, blank=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    half_open_at = models.DateTimeField(null=True, blank=True)
    changed_by = models.CharField(max_length=150, blank=True)  # "": the breaker itself
    changed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"breaker of {self.kind}: {self.state}"


class ApiToken(models.Model):
    """A client's bearer token for the JSON API; only its SHA-256 is stored."""

    name = models.CharField(max_length=100, unique=True)
    token_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # ApiScope values; reports/services/tokens.py chooses and checks them.
    scopes = models.JSONField(default=list)

    def __str__(self) -> str:
        return f"API token {self.name} ({self.prefix}...)"

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def is_operator(self) -> bool:
        return ApiScope.OPERATOR in self.scopes


class ReportTask(models.Model):
    """One report a client asked for. The row is the truth; RQ jobs only carry (id, attempt)."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    kind = models.CharField(max_length=64)
    params = models.JSONField(default=dict)
    # Kind, client and params as one hash (submission.params_digest): a later done task with the same
    # one makes this task's dead letters moot. NULL (never equal) for tasks older than the column.
    params_digest = models.CharField(max_length=40, null=True, blank=True)  # noqa: DJ001
    priority = models.CharField(max_length=8, choices=Priority.choices, default=Priority.DEFAULT)
    status = models.CharField(max_length=10, choices=TaskStatus.choices, default=TaskStatus.PENDING)
    # Monotonic across replays: it is the fencing token and part of every RQ job id,
    # so a replayed task never reuses an attempt number (or a job id).
    attempt = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField()
    # The attempt count when the current run began: 0 at submit, `attempt` at each replay. A run's
    # attempts are attempts_before_run+1 .. max_attempts (its backoff ladder and its "k of N").
    attempts_before_run = models.PositiveIntegerField(default=0)
    timeout_seconds = models.PositiveIntegerField()
    # Unique per owner (see Meta.constraints), so one client can neither learn nor squat another's keys.
    # NULL when there is none: NULLs never collide in those unique indexes, "" would.
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    submitted_by = models.CharField(max_length=150, blank=True)
    # The API client that submitted it (a batch's tasks share the batch's); None for the console and
    # the shell. A token without the operator scope sees only its own tasks.
    owner = models.ForeignKey("ApiToken", null=True, blank=True, on_delete=models.PROTECT,
                              related_name="tasks")
    batch = models.ForeignKey(ReportBatch, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="tasks")
    last_error = models.TextField(blank=True)
    output_file = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    next_retry_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Our own outage it waits out, uncharged (reports/services/infra_waits.py): "storage", "database"
    # or "redis", and since when; NULL again after a failure of its own. Read only while it is live.
    # Nullable: a column SQLite adds without rebuilding the table.
    waiting_for = models.CharField(max_length=8, null=True, blank=True)  # noqa: DJ001
    waiting_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["status", "created_at"], name="task_status_created"),
            models.Index(fields=["kind", "status"], name="task_kind_status"),
            # The reaper's two scans: expired leases and overdue pending/retrying tasks.
            models.Index(fields=["status", "lease_expires_at"], name="task_status_lease"),
            models.Index(fields=["status", "next_retry_at"], name="task_status_next_retry"),
            models.Index(fields=["batch", "status"], name="task_batch_status"),
            # Supersession's probe: a done task of this digest after a given one (reports/0007).
            models.Index(fields=["params_digest", "status", "id"], name="task_params_digest"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(attempt__lte=models.F("max_attempts")), name="task_attempt_within_budget"
            ),
            *idempotency_constraints("task"),
        ]
        # What the `operator` scope is to an API token, for a console session submitting through
        # the API: operator-only kinds such as the probe.
        permissions = [("submit_operator_kinds", "Can submit operator-only report kinds (the probe)")]

    def __str__(self) -> str:
        return f"{self.kind} {self.public_id} ({self.status})"

    @property
    def run_attempt(self) -> int:
        """The current attempt counted within this run (1 for the first attempt after a replay)."""
        return max(self.attempt - self.attempts_before_run, 0)

    @property
    def run_budget(self) -> int:
        """How many attempts this run has in all (REPORT_MAX_ATTEMPTS when it began)."""
        return self.max_attempts - self.attempts_before_run

    def job_id(self, attempt: int) -> str:
        return f"report-{self.pk}-{attempt}"


class AttemptOutcome(models.TextChoices):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMEOUT = "timeout"
    ABANDONED = "abandoned"
    # An operator stopped the running attempt (reports/services/controls.py).
    STOPPED = "stopped"
    # Our own infrastructure failed it (reports/errors.py:failure_origin): not charged to the task.
    INFRA = "infra"


class TaskAttempt(models.Model):
    task = models.ForeignKey(ReportTask, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    worker = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=AttemptOutcome.choices, default=AttemptOutcome.RUNNING)
    error_type = models.CharField(max_length=200, blank=True)
    error_message = models.TextField(blank=True)
    traceback = models.TextField(blank=True)
    duration_seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["task_id", "number"]
        indexes = [
            # The metrics' recent window (reports/metrics.py): attempts that finished in the last minutes.
            models.Index(fields=["finished_at"], name="attempt_finished_at"),
            # The console's queue-wait chart (reports/charts.py): first attempts that started in the last day.
            models.Index(fields=["started_at"], name="attempt_first_started", condition=models.Q(number=1)),
        ]
        constraints = [models.UniqueConstraint(fields=["task", "number"], name="attempt_unique_number")]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.task_id}: {self.outcome}"


class TaskCounter(models.Model):
    """Monotonic counts of task events per kind (deaths, cancellations), bumped in the transaction
    of the event itself, for /metrics counters: dead letters are purged and tasks replayed, so no
    row count would only ever grow."""

    kind = models.CharField(max_length=64)
    event = models.CharField(max_length=20)
    count = models.BigIntegerField(default=0)
    # Completions are counted from attempt rows up to a checkpoint (reports/metrics.py): the row of
    # kind "" holds it.
    counted_through = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "event"], name="task_counter_kind_event")]

    def __str__(self) -> str:
        return f"{self.kind} {self.event}: {self.count}"


class Order(models.Model):
    """Demo sales data that the sales_summary report aggregates (`manage.py seed_demo_data`)."""

    ordered_at = models.DateTimeField(db_index=True)
    region = models.CharField(max_length=32)
    product = models.CharField(max_length=64)
    customer = models.CharField(max_length=64)
    quantity = models.PositiveIntegerField()
    unit_price = models.DecimalField(max_digits=10, decimal_places=2)

    def __str__(self) -> str:
        return f"order {self.pk} {self.region} {self.product}"
