"""Imported at start-up by every Python process that has this directory on PYTHONPATH (the worker
processes of tests/system/test_work_horse_connections.py, and the work-horses they fork): one
line per database connection Django opens, "pid parent-pid rq-job-id", appended to the file
$DB_CONNECTION_LOG. It observes Django's own connection_created signal; it changes nothing."""

import os

if os.environ.get("DB_CONNECTION_LOG"):
    from django.db.backends.signals import connection_created

    def _note(sender, connection, **kwargs):
        line = f"{os.getpid()} {os.getppid()} {os.environ.get('RQ_JOB_ID', '-')}\n"
        with open(os.environ["DB_CONNECTION_LOG"], "a") as log:
            log.write(line)

    connection_created.connect(_note, weak=False)
