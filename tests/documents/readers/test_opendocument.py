"""OpenDocument text, presentation and spreadsheet files written by pandoc and LibreOffice
(fixtures/), read back and checked against their sources."""

from __future__ import annotations

import io

from reader_sources import anyhow_headings, anyhow_words, headings, json_types_rows, read, recall

from attnswitch.documents.readers.blocks import BlockKind, Location, ReadOptions
from attnswitch.documents.readers.opendocument import read_ods
from attnswitch.documents.readers.skip import Skip, Skipped


def test_odt_keeps_the_heading_structure_and_every_word() -> None:
    got = read("anyhow.odt")
    assert headings(got.blocks) == [(1, "anyhow")] + anyhow_headings()
    assert recall(anyhow_words(), got.text) == 1.0
    code = [b.text for b in got.blocks if b.kind is BlockKind.CODE]
    assert '[dependencies]\nanyhow = "1.0"' in code  # code lines joined into one block
    assert sum(b.kind is BlockKind.LIST_ITEM for b in got.blocks) >= 4


def test_odp_gives_each_page_its_slide_and_titles_as_headings() -> None:
    got = read("anyhow.odp")
    expected = [(1, "anyhow")] + [(1, text) for level, text in anyhow_headings() if level <= 2]
    assert headings(got.blocks) == expected
    assert all(b.location.slide is not None for b in got.blocks)
    assert recall(anyhow_words(), got.text) == 1.0


def test_ods_gives_the_sheet_rows_with_the_header_row() -> None:
    [table] = read("json-types.ods").blocks
    rows = json_types_rows()
    assert [list(r) for r in table.rows] == rows and table.header
    assert table.location == Location(sheet="json-types", rows=(2, len(rows)))


def test_a_sheet_of_repeated_rows_past_the_limit_is_not_expanded() -> None:
    from odfdo import Document, Row, Table

    document = Document("spreadsheet")
    table = Table("big")
    row = Row(repeated=5_000_000)  # 8 KB on disk
    row.set_value(0, "x")
    table.append(row)
    document.body.append(table)
    buffer = io.BytesIO()
    document.save(buffer)
    try:
        read_ods(buffer.getvalue(), ReadOptions())
    except Skipped as skip:
        assert skip.skip is Skip.TOO_LARGE and "5000000 cells" in skip.detail
    else:
        raise AssertionError("expected the sheet to be refused")
