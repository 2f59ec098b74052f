"""A pool worker's jobs that are not report attempts (alert sends, bulk actions, batch fan-outs):
each runs as rq.Worker runs it, in a horse forked for the job, while the worker keeps serving its
pool (results, deaths, leases, heartbeats) between looks at that horse."""

import os
import time

from rq.utils import now as rq_now


class OwnHorseForOtherJobs:
    """Mixed into PoolReportWorker, before ReportWorker: `_service` is the pool's."""

    def monitor_work_horse(self, job, queue):
        if self._running is not None:
            return super().monitor_work_horse(job, queue)
        pid, own_execution = self._horse_pid, self.execution
        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pidfd = None
        job.started_at = rq_now()
        kill_at = time.monotonic() + job.timeout + 60 if job.timeout and job.timeout > 0 else None
        status = rusage = None
        try:
            while True:
                self._service(1.0 if pidfd is not None else 0.05, extra_fds=(pidfd,) if pidfd is not None else ())
                retpid, status, rusage = os.wait4(pid, os.WNOHANG)
                if retpid == pid:
                    break
                if kill_at is not None and time.monotonic() > kill_at:
                    kill_at = None
                    self.kill_horse()
        except ChildProcessError:
            status = -1
        finally:
            if pidfd is not None:
                os.close(pidfd)
            self.execution = own_execution
        self._after_horse_exit(job, queue, status, rusage, reset_working_time=False)
