"""The one keyset cursor: round trips, and refuses what no page ever handed out."""

from datetime import UTC, datetime

import pytest

from config.keyset import MAX_DB_ID, Cursor, InvalidCursor


def test_a_cursor_round_trips_to_the_microsecond():
    cursor = Cursor(datetime(2026, 11, 23, 5, 58, 18, 123456, tzinfo=UTC), 42)

    assert Cursor.decode(cursor.encode()) == cursor


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "garbage!",
        "12-",
        "-1-2",
        "1.5-2",
        f"1-{MAX_DB_ID + 1}",
        "99999999999999999999-1",  # more digits than any microsecond count
        "9999999999999999999-1",  # past year 9999
        "eyJjIjoiMDAwMS0wMS0wMVQwMDowMDowMCsxNDowMCIsImkiOjF9",  # the old API's JSON cursor
        '{"c":"0001-01-01T00:00:00+14:00","i":1}',  # the same, not encoded
        "1-2\n",  # a trailing newline
        "١٢٣-4",  # digits, but not ASCII ones
        "1-٤",
    ],
)
def test_a_cursor_no_page_handed_out_is_refused(raw):
    with pytest.raises(InvalidCursor):
        Cursor.decode(raw)
