"""The operators' canary and the benchmarks' workload: fails on demand, so anyone can
drive the whole chain (retry, dead letter, alert, replay) on purpose."""

import time

from reports.errors import PermanentError, TransientError
from reports.kinds.base import ReportKind, RunContext, boolean, number, reject_unknown, write_table


class Probe(ReportKind):
    name = "probe"
    title = "Probe (canary)"

    def validate(self, params):
        reject_unknown(params, {"sleep_seconds", "fail_attempts", "fail_permanently", "write_output"})
        return {
            "sleep_seconds": number(params, "sleep_seconds", 0, minimum=0, maximum=3600),
            "fail_attempts": number(params, "fail_attempts", 0, minimum=0, maximum=1000, integer=True),
            "fail_permanently": boolean(params, "fail_permanently", False),
            "write_output": boolean(params, "write_output", True),
        }

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
