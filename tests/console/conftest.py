from tests.planner import start_planner  # noqa: F401 (a fixture: the replay planner as a process)
