"""What the pipeline announces to the layers above it, which it never imports.

Every signal is sent with `send()`, so a receiver's exception propagates: a receiver that
writes in the sender's transaction (the dead letter, an alert outbox row) commits or rolls
back with it.
"""

from django.dispatch import Signal

# A task moved to dead. Sent inside the transaction that made it so, after the task row
# and its last attempt were written. kwargs: task (ReportTask, as committed), failure (FailureInfo).
task_died = Signal()

# A kind's circuit breaker changed (reports/services/breakers.py), inside the transaction of the
# change. kwargs: breaker (KindBreaker, as committed), change ("opened", "reopened", "held" or
# "closed"), actor (the operator; "" for the breaker itself), waiting (the kind's waiting tasks).
breaker_changed = Signal()
