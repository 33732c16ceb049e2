"""Word, PowerPoint and Excel files written by pandoc and LibreOffice (fixtures/, see
scripts/make_reader_fixtures.py), read back and checked against their sources: the
headings of the Markdown source, its every word, and the cells of the table."""

from __future__ import annotations

import io

import pytest
from reader_sources import anyhow_headings, anyhow_words, headings, json_types_rows, read, recall

from attnswitch.documents.readers.blocks import BlockKind, Location, ReadOptions
from attnswitch.documents.readers.office import read_xlsx
from attnswitch.documents.readers.tabular import ROWS_PER_BLOCK


def test_docx_keeps_the_heading_structure_and_every_word() -> None:
    got = read("anyhow.docx")
    assert headings(got.blocks) == [(1, "anyhow")] + anyhow_headings()
    assert recall(anyhow_words(), got.text) == 1.0
    kinds = {b.kind for b in got.blocks}
    assert {BlockKind.LIST_ITEM, BlockKind.CODE, BlockKind.PARAGRAPH} <= kinds
    code = [b.text for b in got.blocks if b.kind is BlockKind.CODE]
    # A fenced block of the source, line breaks kept, as one code block.
    assert any(
        t.startswith("use anyhow::Result;\n\nfn get_cluster_info() -> Result<ClusterMap> {\n")
        for t in code
    ), code


def test_a_word_table_gives_its_rows_with_the_header() -> None:
    got = read("json-types.docx")
    [table] = [b for b in got.blocks if b.kind is BlockKind.TABLE]
    assert [list(r) for r in table.rows] == json_types_rows()
    assert table.header and table.text.splitlines()[0] == "\t".join(json_types_rows()[0])


def test_pptx_gives_each_slide_its_location_and_titles_as_headings() -> None:
    got = read("anyhow.pptx")
    expected = [(1, "anyhow")] + [(1, text) for level, text in anyhow_headings() if level <= 2]
    assert headings(got.blocks) == expected
    assert all(b.location.slide is not None for b in got.blocks)
    slides = [b.location.slide for b in got.blocks]
    assert slides == sorted(slides) and slides[0] == 1 and slides[-1] == 7
    assert recall(anyhow_words(), got.text) == 1.0


def test_xlsx_gives_the_sheet_rows_with_the_header_row() -> None:
    got = read("json-types.xlsx")
    [table] = got.blocks
    rows = json_types_rows()
    assert [list(r) for r in table.rows] == rows and table.header
    assert table.location == Location(sheet="json-types", rows=(2, len(rows)))


def test_a_long_sheet_is_cut_into_blocks_each_with_the_header() -> None:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "Q3 sales"
    sheet.append(["region", "units", "day"])
    sheet.append([])  # an empty row is left out, and the numbering keeps its place
    total = 2 * ROWS_PER_BLOCK + 7
    for i in range(total):
        sheet.append([f"region {i}", i * 1.0, None])
    second = book.create_sheet("notes")
    second.append(["only a header"])
    buffer = io.BytesIO()
    book.save(buffer)
    got = read_xlsx(buffer.getvalue(), ReadOptions())
    tables = [b for b in got.blocks if b.location.sheet == "Q3 sales"]
    assert [b.location.rows for b in tables] == [
        (3, 2 + ROWS_PER_BLOCK),
        (3 + ROWS_PER_BLOCK, 2 + 2 * ROWS_PER_BLOCK),
        (3 + 2 * ROWS_PER_BLOCK, 2 + total),
    ]
    assert all(b.rows[0] == ("region", "units", "day") and b.header for b in tables)
    assert tables[0].rows[1] == ("region 0", "0")  # a whole float without ".0"; no empty tail
    assert sum(len(b.rows) - 1 for b in tables) == total
    [note] = [b for b in got.blocks if b.location.sheet == "notes"]
    assert note.rows == (("only a header",),) and not note.header


@pytest.mark.parametrize("name", ["anyhow.docx", "anyhow.pptx", "json-types.xlsx"])
def test_a_file_under_another_name_is_known_by_its_members(name: str) -> None:
    from reader_sources import FIXTURES

    from attnswitch.documents.readers.dispatch import read_named

    data = (FIXTURES / name).read_bytes()
    assert read_named("download", data, ReadOptions()).blocks == read(name).blocks
