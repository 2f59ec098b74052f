"""What the pipeline announces to the layers above it, which it never imports.

Every signal is sent with `send()`, so a receiver's exception propagates: a receiver that
writes in the sender's transaction (the dead letter, an alert outbox row) commits or rolls
back with it.
"""

from django.dispatch import Signal

# A task moved to dead. Sent inside the transaction that made it so, after the task row
# and its last attempt were written. kwargs: task (ReportTask, as committed), failure (FailureInfo).
task_died = Signal()
