"""`up`'s supervisor: a child's crash loop stops everything, but not the exits of an outage of the
database or Redis (the children are restarted with backoff until they are back)."""

import io
import sys
import threading

from config.supervisor import Child, Supervisor


def failing_child() -> Child:
    return Child("worker1", lambda _start: [sys.executable, "-c", "raise SystemExit(3)"])


def supervise(dependencies_down, *, seconds: float) -> tuple[int, str, Child]:
    child = failing_child()
    err = io.StringIO()
    supervisor = Supervisor([child], {}, restart_limit=2, restart_window=60,
                            dependencies_down=dependencies_down, out=io.StringIO(), err=err)
    timer = threading.Timer(seconds, supervisor.stop.set)
    timer.start()
    try:
        return supervisor.run(), err.getvalue(), child
    finally:
        timer.cancel()


def test_a_child_that_keeps_exiting_is_a_crash_loop_that_stops_everything():
    code, err, child = supervise(list, seconds=60)
    assert code == 1, err
    assert "worker1 exited with 3: 3 exits within 60 s" in err and "a crash loop; stopping everything" in err
    assert "restarting it in 0.5 s" in err and "restarting it in 1 s" in err  # config.backoff's doubling


def test_exits_while_a_dependency_is_down_are_restarted_with_backoff_and_never_stop_up():
    code, err, child = supervise(lambda: ["database"], seconds=5)
    assert code == 0, err  # stopped by the timer (as by Ctrl-C), not by a crash loop
    assert child.starts >= 4, err  # more exits than UP_RESTART_LIMIT allows
    assert "crash loop" not in err
    said = ("worker1 exited with 3 while database did not answer (not counted as a crash); "
            "restarting it in 2 s")
    assert said in err
