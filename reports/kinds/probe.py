"""The operators' canary and the benchmarks' workload: fails on demand, so anyone can
drive the whole chain (retry, dead letter, alert, replay) on purpose."""

import time

from django.utils.translation import gettext_noop

from reports.errors import PermanentError, TransientError
from reports.kinds.base import Param, ReportKind, RunContext, write_table


class Probe(ReportKind):
    name = "probe"
    title = gettext_noop("Probe (canary)")
    # It sleeps and fails on request: an API client must not be able to burn the workers with it.
    operator_only = True

    params = (
        Param("sleep_seconds", "number", default=0, minimum=0, maximum=600,
              description=gettext_noop("seconds to sleep first")),
        Param(
            "fail_attempts",
            "integer",
            default=0,
            minimum=0,
            maximum=1000,
            description=gettext_noop("fail (transiently) while the attempt number is at most this"),
        ),
        Param("fail_permanently", "boolean", default=False,
              description=gettext_noop("die at once, no retry")),
        Param("write_output", "boolean", default=True,
              description=gettext_noop("write a one-line CSV when it succeeds")),
    )

    def writes_file(self, params):
        return params.get("write_output", True)

    def generate(self, params, ctx: RunContext):
        if params.get("sleep_seconds"):
            time.sleep(params["sleep_seconds"])
        if params.get("fail_permanently"):
            raise PermanentError("probe asked to fail permanently")
        # Attempt numbers keep growing across replays, so a replayed probe succeeds
        # once its attempt number passes fail_attempts, as a fixed cause would.
        if ctx.attempt <= params.get("fail_attempts", 0):
            raise TransientError(
                f"probe failing attempt {ctx.attempt} of the first {params['fail_attempts']}"
            )
        if not params.get("write_output", True):
            return None
        return write_table(
            ctx.output_dir / "probe",
            "csv",
            ["task", "attempt"],
            [[ctx.public_id, ctx.attempt]],
        )
