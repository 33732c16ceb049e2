"""CSV and TSV files as table blocks: the fixtures (the corpus' JSON types table) and
awkward hand-made files (dialects, quoting, BOMs, one column, no rows)."""

from __future__ import annotations

import pytest
from reader_sources import json_types_rows, read

from attnswitch.documents.readers.blocks import Location, ReadOptions
from attnswitch.documents.readers.skip import Skip, Skipped
from attnswitch.documents.readers.tabular import ROWS_PER_BLOCK, read_csv


@pytest.mark.parametrize("name", ["json-types.csv", "json-types.tsv"])
def test_rows_with_the_header(name: str) -> None:
    [table] = read(name).blocks
    rows = json_types_rows()
    assert [list(r) for r in table.rows] == rows and table.header
    assert table.location == Location(rows=(2, len(rows)))


@pytest.mark.parametrize(
    ("name", "data", "rows"),
    [
        ("semi.csv", b"a;b\n1;2\n3;4\n", [["a", "b"], ["1", "2"], ["3", "4"]]),
        ("pipes.csv", b"a|b\n1|2\n", [["a", "b"], ["1", "2"]]),
        (
            "quoted.csv",
            b'name,note\nx,"two\nlines, and a comma"\n',
            [["name", "note"], ["x", "two lines, and a comma"]],
        ),
        ("bom.csv", "\ufeffname,city\nZoë,Köln\n".encode(), [["name", "city"], ["Zoë", "Köln"]]),
        (
            "latin1.csv",
            "name,city\nZoë,Köln\n".encode("latin-1"),
            [["name", "city"], ["Zoë", "Köln"]],
        ),
        ("one.csv", b"word\nalpha\nbeta\n", [["word"], ["alpha"], ["beta"]]),
        ("blank-lines.tsv", b"a\tb\n\n1\t2\n\t\n", [["a", "b"], ["1", "2"]]),
    ],
)
def test_awkward_files(name: str, data: bytes, rows: list[list[str]]) -> None:
    blocks = read_csv(data, ReadOptions(name=name)).blocks
    assert [list(r) for b in blocks for r in b.rows[1:]] == rows[1:]
    assert all(list(b.rows[0]) == rows[0] for b in blocks)


def test_long_files_are_cut_with_the_header_repeated() -> None:
    data = "id,value\n" + "".join(f"{i},v{i}\n" for i in range(ROWS_PER_BLOCK + 3))
    blocks = read_csv(data.encode(), ReadOptions(name="long.csv")).blocks
    assert [b.location.rows for b in blocks] == [
        (2, ROWS_PER_BLOCK + 1),
        (ROWS_PER_BLOCK + 2, ROWS_PER_BLOCK + 4),
    ]
    assert blocks[1].rows[0] == ("id", "value") and blocks[1].rows[1] == (
        str(ROWS_PER_BLOCK),
        f"v{ROWS_PER_BLOCK}",
    )


@pytest.mark.parametrize(("data", "skip"), [(b"\n\n", Skip.EMPTY), (b"a,b\x00\x00", Skip.BINARY)])
def test_no_rows_or_not_text(data: bytes, skip: Skip) -> None:
    with pytest.raises(Skipped) as caught:
        read_csv(data, ReadOptions(name="x.csv"))
    assert caught.value.skip is skip
