"""params_for_display, the one masking rule every face uses, and the worker: the kind gets the real
values, the error and traceback it leaves are stored with its sensitive values masked."""

import pytest

from deadletters.models import DeadLetter
from reports.kinds import KINDS
from reports.kinds.masking import MASK, params_for_display, unmask_params
from reports.models import TaskAttempt
from reports.worker.report_job import run_report_task
from tests.factories import make_task
from tests.secret_kind import API_KEY, CUSTOMER, PARAMS, SecretKind, secret_kind  # noqa: F401


def test_keys_show_with_values_masked_unless_allowed_and_sensitive_keys_always(secret_kind):  # noqa: F811
    assert params_for_display(PARAMS, "secret_test", can_see=False) == {key: MASK for key in PARAMS}
    assert params_for_display(PARAMS, "secret_test", can_see=True) == {**PARAMS, "api_key": MASK}
    assert params_for_display(PARAMS, "uninstalled", can_see=True) == PARAMS
    assert params_for_display(None, "secret_test", can_see=True) == {}


def test_a_value_left_masked_keeps_the_stored_one():
    stored = {"a": "secret", "b": 1}
    assert unmask_params({"a": MASK, "b": 2, "c": MASK}, stored) == {"a": "secret", "b": 2, "c": MASK}


def test_the_openapi_schema_marks_a_sensitive_param_write_only(secret_kind):  # noqa: F811
    properties = KINDS["secret_test"].params_schema()["properties"]
    assert properties["api_key"]["writeOnly"] is True and "writeOnly" not in properties["customer"]


@pytest.mark.django_db
def test_the_worker_runs_with_the_real_value_and_stores_the_failure_masked(secret_kind):  # noqa: F811
    task = make_task(kind="secret_test", params=dict(PARAMS), max_attempts=1)
    assert run_report_task(task.pk, 1) == "failed"
    assert SecretKind.received == [PARAMS]  # the kind had the key itself
    letter = DeadLetter.objects.get(task=task)
    attempt = TaskAttempt.objects.get(task=task)
    task.refresh_from_db()
    for text in (letter.error_message, letter.traceback, attempt.error_message, attempt.traceback,
                 task.last_error):
        assert API_KEY not in text and f"key {MASK} for {CUSTOMER}" in text
