"""Report files never carry a formula a client or a remote source slipped into a cell."""

import csv
from decimal import Decimal

import pytest
from openpyxl import load_workbook

from reports.kinds.base import neutralise_cell, write_table

HOSTILE = ["=1+1", "+1+2", "-2+3", "@SUM(A1:A9)", "\t=1+1", "\r=1+1", '=HYPERLINK("http://x.invalid","y")']
HARMLESS = ["plain", "a=b", "", "-5", "+1.5", "-.5e3", "3"]


@pytest.mark.parametrize("text", HOSTILE)
def test_text_that_would_start_a_formula_gets_an_apostrophe(text):
    assert neutralise_cell(text) == "'" + text


@pytest.mark.parametrize("value", [*HARMLESS, -5, -2.5, 0, Decimal("-3.10"), None, True])
def test_numbers_and_plain_text_are_left_alone(value):
    assert neutralise_cell(value) == value


def test_a_csv_file_holds_the_hostile_cells_as_text_and_the_numbers_as_numbers(tmp_path):
    path = write_table(tmp_path / "t", "csv", ["=name", "n"], [[text, -5] for text in HOSTILE])
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["'=name", "n"]
    assert rows[1:] == [["'" + text, "-5"] for text in HOSTILE]


def test_an_xlsx_file_has_no_formula_cell_and_keeps_numbers_numeric(tmp_path):
    path = write_table(tmp_path / "t", "xlsx", ["@name", "n"], [[text, -2.5] for text in HOSTILE])
    sheet = load_workbook(path).active
    cells = [cell for row in sheet.iter_rows() for cell in row]
    assert not [cell.coordinate for cell in cells if cell.data_type == "f"]
    # XML reads a stored carriage return back as a line feed.
    texts = [cell.value.replace("\n", "\r") for cell in sheet["A"]]
    assert texts == ["'@name", *("'" + text for text in HOSTILE)]
    assert [(cell.value, cell.data_type) for cell in sheet["B"][1:]] == [(-2.5, "n")] * len(HOSTILE)
