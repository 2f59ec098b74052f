"""console.traceback: a traceback read exception first, project frames apart from library ones."""

from console.traceback import parse_traceback

CHAINED = """Traceback (most recent call last):
  File "/srv/app/.venv/lib/python3.11/site-packages/urllib3/connection.py", line 198, in _new_conn
    sock = connection.create_connection(
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/lib/python3.11/socket.py", line 851, in create_connection
    raise exceptions[0]
ConnectionRefusedError: [Errno 111] Connection refused

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/srv/app/reports/jobs.py", line 58, in run_report_task
    relative = kind.generate(task, output_dir)
  File "/srv/app/reports/kinds/http_export.py", line 41, in generate
    response = requests.get(url, timeout=10)
  File "/srv/app/.venv/lib/python3.11/site-packages/requests/api.py", line 73, in get
    return request("get", url, params=params, **kwargs)
  File "/srv/app/.venv/lib/python3.11/site-packages/requests/adapters.py", line 519, in send
    raise ConnectionError(e, request=request)
requests.exceptions.ConnectionError: HTTPConnectionPool(host='orders.internal', port=8080): Max retries
exceeded with url: /export
"""


def test_the_final_exception_comes_first_with_its_whole_message():
    parsed = parse_traceback(CHAINED)
    assert parsed.final.exception_text == (
        "requests.exceptions.ConnectionError: HTTPConnectionPool(host='orders.internal', port=8080): "
        "Max retries\nexceeded with url: /export"
    )
    assert [s.exception_text for s in parsed.earlier] == [
        "ConnectionRefusedError: [Errno 111] Connection refused"]
    assert parsed.final.note == "The above exception was the direct cause of the following exception:"


def test_frames_run_most_recent_first_with_library_runs_apart():
    runs = parse_traceback(CHAINED).final.runs
    assert [(run.library, [f.short_path for f in run.frames]) for run in runs] == [
        (True, ["requests/adapters.py", "requests/api.py"]),
        (False, ["reports/kinds/http_export.py", "reports/jobs.py"]),
    ]
    project = runs[1].frames[0]
    assert (project.line, project.function, project.code) == (
        41,
        "generate",
        ["response = requests.get(url, timeout=10)"],
    )


def test_standard_library_and_caret_lines_are_understood():
    earlier = parse_traceback(CHAINED).earlier[0]
    assert [f.is_library for f in earlier.frames] == [True, True]
    assert earlier.frames[0].code == [
        "sock = connection.create_connection(",
        "       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    ]


def test_text_that_is_not_a_traceback_is_left_for_the_raw_view():
    assert parse_traceback("") is None
    assert parse_traceback("worker killed by SIGKILL") is None
    assert parse_traceback("Traceback (most recent call last):\n") is None


def test_a_traceback_cut_short_still_shows_what_it_has():
    cut = CHAINED[: CHAINED.index("  File \"/srv/app/.venv/lib/python3.11/site-packages/requests/api.py\"")]
    parsed = parse_traceback(cut)
    assert [f.short_path for f in parsed.final.frames] == ["reports/jobs.py", "reports/kinds/http_export.py"]
    assert parsed.final.exception_text == ""


def test_a_runaway_stack_shows_its_most_recent_frames_only():
    frame = '  File "/srv/app/reports/x.py", line 1, in f\n    f()\n'
    text = "Traceback (most recent call last):\n" + frame * 5000
    parsed = parse_traceback(text + "RecursionError: maximum recursion depth exceeded\n")
    assert sum(len(run.frames) for run in parsed.final.runs) == 60
    assert parsed.final.hidden_frame_count == 4940
