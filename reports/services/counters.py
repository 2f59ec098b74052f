"""Monotonic event counts per kind (reports.models.TaskCounter), bumped inside the transaction of
the event they count: a death counts exactly when the task's move to dead commits."""

from django.db import connection

from reports.models import TaskCounter

DEATHS = "deaths"
CANCELLATIONS = "cancellations"
STOPS = "stops"

_TABLE = TaskCounter._meta.db_table
# One statement on PostgreSQL and SQLite (3.24+) alike; concurrent bumps of one row queue on its lock.
_BUMP = (
    f"INSERT INTO {_TABLE} (kind, event, count) VALUES (%s, %s, %s) "
    "ON CONFLICT (kind, event) DO UPDATE SET count = " + _TABLE + ".count + excluded.count"
)


def bump_counter(*, kind: str, event: str, by: int = 1) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_BUMP, [kind, event, by])
