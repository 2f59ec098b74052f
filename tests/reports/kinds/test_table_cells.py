"""Report files never carry a formula a client or a remote source slipped into a cell, and read
back in a spreadsheet as what they hold: text as text, money as money."""

import codecs
import csv
import zipfile
from decimal import Decimal

import pytest
from django.core.management import call_command
from openpyxl import load_workbook

from reports.kinds.base import RunContext, neutralise_cell, write_table
from reports.kinds.sales_summary import SalesSummary

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
    with path.open(newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["'=name", "n"]
    assert rows[1:] == [["'" + text, "-5"] for text in HOSTILE]


def test_a_csv_file_starts_with_a_byte_order_mark_so_spreadsheets_read_chinese_text(tmp_path):
    path = write_table(tmp_path / "t", "csv", ["地区", "revenue"], [["华东", Decimal("4333787.30")]])
    raw = path.read_bytes()
    assert raw.startswith(codecs.BOM_UTF8)
    assert raw[len(codecs.BOM_UTF8) :].decode("utf-8") == "地区,revenue\r\n华东,4333787.30\r\n"
    with path.open(newline="", encoding="utf-8-sig") as handle:
        assert list(csv.reader(handle)) == [["地区", "revenue"], ["华东", "4333787.30"]]


def test_an_xlsx_file_holds_hostile_text_as_string_cells_without_an_apostrophe(tmp_path):
    texts = [*HOSTILE, "#N/A", "地区"]
    path = write_table(tmp_path / "t", "xlsx", ["@name", "n"], [[text, -2.5] for text in texts])
    sheet = load_workbook(path).active
    cells = [cell for row in sheet.iter_rows() for cell in row]
    assert not [cell.coordinate for cell in cells if cell.data_type == "f"]
    # XML reads a stored carriage return back as a line feed.
    column = [(cell.value.replace("\n", "\r"), cell.data_type) for cell in sheet["A"]]
    assert column == [("@name", "s"), *((text, "s") for text in texts)]
    assert [(cell.value, cell.data_type) for cell in sheet["B"][1:]] == [(-2.5, "n")] * len(texts)
    with zipfile.ZipFile(path) as archive:
        assert "<f>" not in archive.read("xl/worksheets/sheet1.xml").decode()


def test_xlsx_money_is_a_number_with_two_decimals_and_huge_integers_are_text(tmp_path):
    huge = 2**53 + 1
    rows = [["east", 3, Decimal("4333787.30"), huge, 2**53], ["west", 1, Decimal("0.10"), -huge, 7]]
    path = write_table(tmp_path / "t", "xlsx", ["region", "orders", "revenue", "id", "n"], rows,
                       money_columns=["revenue"])
    sheet = load_workbook(path).active
    revenue = sheet["C"][1:]
    assert [(cell.value, cell.data_type, cell.number_format) for cell in revenue] == [
        (4333787.3, "n", "#,##0.00"),
        (0.1, "n", "#,##0.00"),
    ]
    assert [(cell.value, cell.data_type) for cell in sheet["D"][1:]] == [(str(huge), "s"), (str(-huge), "s")]
    assert [(cell.value, cell.data_type) for cell in sheet["E"][1:]] == [(2**53, "n"), (7, "n")]
    assert sheet["B2"].number_format == "General"


def test_the_sales_summary_xlsx_shows_revenue_with_two_decimals(tmp_path, db):
    call_command("seed_demo_data", rows=200, verbosity=0)
    params = SalesSummary().validate({"format": "xlsx"})
    path = SalesSummary().generate(params,
                                   RunContext(task_id=1, public_id="t", attempt=1, output_dir=tmp_path))
    sheet = load_workbook(path).active
    assert [cell.value for cell in sheet[1]] == ["region", "orders", "units", "revenue"]
    revenue = [cell for cell in sheet["D"][1:]]
    assert revenue and all(cell.data_type == "n" and cell.number_format == "#,##0.00" for cell in revenue)
    assert all(sheet.cell(row=cell.row, column=2).number_format == "General" for cell in revenue)
