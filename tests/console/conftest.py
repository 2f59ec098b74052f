from tests.housekeeper import start_housekeeper  # noqa: F401 (a fixture: the housekeeper as a process)
