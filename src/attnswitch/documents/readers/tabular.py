"""Tables as blocks: CSV and TSV files (stdlib `csv`, its `Sniffer` choosing the dialect),
and the shared cut of any sheet's rows (spreadsheets, CSV) into table blocks.

A sheet's first non-empty row is its header (as spreadsheets and pandas take it); the
data rows below it are cut into table blocks of at most `ROWS_PER_BLOCK` rows, each
block holding the header row first (`Block.header`), so every block reads on its own;
`Location.rows` is the first and last data row of the block, numbered as the file
numbers them (row 1 is the header of a CSV file). Empty rows are left out and trailing
empty cells are dropped.
"""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Iterable
from pathlib import PurePath

from attnswitch.documents.readers.blocks import Block, Extracted, Location, ReadOptions, table_block
from attnswitch.documents.readers.skip import Skip, Skipped
from attnswitch.documents.readers.text import check_controls, decode

ROWS_PER_BLOCK = 50
_SNIFF_CHARS = 64 * 1024
_DELIMITERS = ",;\t|"


def cell_text(value: object) -> str:
    """A cell's value as a person reads it: whole floats without ".0", dates in ISO form,
    None as ""."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    return " ".join(str(value).split())


def sheet_blocks(
    rows: Iterable[tuple[int, list[str]]], *, sheet: str | None = None, extra: Location = Location()
) -> list[Block]:
    """Table blocks of one sheet given as (row number, cell texts) in order; the first
    non-empty row is the header. `extra`'s fields (a slide, a mail part) are kept in each
    block's location."""
    header: tuple[str, ...] | None = None
    out: list[Block] = []
    group: list[tuple[int, tuple[str, ...]]] = []

    def flush() -> None:
        if not group:
            return
        assert header is not None
        table = (header,) + tuple(cells for _, cells in group)
        where = Location(
            page=extra.page,
            slide=extra.slide,
            sheet=sheet,
            rows=(group[0][0], group[-1][0]),
            part=extra.part,
            cell=extra.cell,
        )
        out.append(table_block(table, where, header=True))
        group.clear()

    for number, cells in rows:
        while cells and not cells[-1]:
            cells = cells[:-1]
        if not cells:
            continue
        if header is None:
            header = tuple(cells)
            continue
        group.append((number, tuple(cells)))
        if len(group) == ROWS_PER_BLOCK:
            flush()
    flush()
    if header is not None and not out:  # a sheet of one row: the row alone
        out.append(
            table_block(
                (header,),
                Location(
                    page=extra.page,
                    slide=extra.slide,
                    sheet=sheet,
                    part=extra.part,
                    cell=extra.cell,
                ),
            )
        )
    return out


def read_csv(data: bytes, options: ReadOptions) -> Extracted:
    """A CSV or TSV file as table blocks (see the module). `.tsv` and `.tab` files are
    tab-separated; other files' delimiter and quoting are sniffed from their start."""
    text, encoding, detected = decode(data)
    check_controls(text)
    suffix = PurePath(options.name).suffix.lower()
    if suffix in (".tsv", ".tab"):
        dialect: type[csv.Dialect] | csv.Dialect = csv.excel_tab
    else:
        try:
            dialect = csv.Sniffer().sniff(text[:_SNIFF_CHARS], delimiters=_DELIMITERS)
        except csv.Error:  # one column, or no consistent delimiter
            dialect = csv.excel
    lines = text.splitlines(keepends=True)
    reader = csv.reader(lines, dialect)
    try:
        rows = [(reader.line_num, [cell_text(c) for c in row]) for row in reader]
    except csv.Error as exc:
        raise Skipped(Skip.CORRUPT, f"csv: line {reader.line_num}: {exc}") from None
    blocks = sheet_blocks(rows)
    if not blocks:
        raise Skipped(Skip.EMPTY, "csv: no rows")
    return Extracted(tuple(blocks), encoding, detected)
