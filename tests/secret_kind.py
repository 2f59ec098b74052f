"""A report kind with a sensitive param, installed for the tests of who sees params
(reports/kinds/masking.py), and a dead letter of it whose traceback quotes its visible param."""

import pytest

from reports.errors import PermanentError
from reports.kinds import KINDS
from reports.kinds.base import Param, ReportKind
from reports.models import TaskStatus
from tests.factories import make_dead_letter, make_task

CUSTOMER = "ACME-CUSTOMER-4711"  # a plain param: shown only with the permission
API_KEY = "sk-LIVE-93f0a1b2c3"  # a sensitive param: shown to nobody
PARAMS = {"customer": CUSTOMER, "api_key": API_KEY, "rows": 25, "draft": True}


class SecretKind(ReportKind):
    name = "secret_test"
    title = "Secret test"
    params = (
        Param("customer", "string", max_length=100),
        Param("api_key", "string", max_length=100, sensitive=True),
        Param("rows", "integer", default=10, minimum=1, maximum=1000),
        Param("draft", "boolean", default=False),
    )
    received: list[dict] = []

    def generate(self, params, ctx):
        SecretKind.received.append(dict(params))
        raise PermanentError(f"upstream refused key {params['api_key']} for {params['customer']}")


@pytest.fixture
def secret_kind(monkeypatch):
    kind = SecretKind()
    monkeypatch.setitem(KINDS, kind.name, kind)
    SecretKind.received = []
    return kind


def make_secret_letter(**fields):
    """A dead letter as the worker leaves it: the traceback quotes the customer, never the key."""
    task = make_task(kind=SecretKind.name, params=dict(PARAMS), status=TaskStatus.DEAD, attempt=1,
                     max_attempts=1, last_error="reports.errors.PermanentError: upstream refused")
    traceback = f"Traceback (most recent call last):\n  File \"x.py\", line 1\n    fetch({CUSTOMER!r})\n"
    letter = make_dead_letter(task=task, error_message="upstream refused", traceback=traceback, **fields)
    task.attempts.update(traceback=traceback)
    return letter
