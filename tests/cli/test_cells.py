"""Tables on an 80-column terminal (cli/cells.py): a path wraps only after a `/` or at a
space, never inside a name, in the search table (`make run`'s last command), the run's
table and the table of files; the search table leaves its per-list scores to `--json` and
its snippet keeps lines of several words."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest
from cli_testing import CORPUS, FAST, invoke

from attnswitch.cli.cells import NARROW, PathCell, break_lines, pieces, source_width
from attnswitch.cli.files_table import render_files

# folders as people name theirs: spaces, long names, deep; and one name too long for a
# search table's column at 80 columns (a table of files keeps it whole)
DEEP = "Reports/2024 Q3/Operations and infrastructure/quarterly-backup-review"
LONG_NAMES = (
    f"{DEEP}/tutorial-update.html",
    "Ops/Runbooks/backup policy (copy)/tutorial-populate.html",
)
LONGEST = "Archive/Private/quarterly-backup-policy-review-final-draft.pdf"
QUERY = "how do I update rows in a table"  # the Makefile's `make run`
SNIPPET_WORDS = 4  # the fewest words on a snippet's line that is not its cell's last


def names(path: str) -> list[str]:
    """The words of `path` that must never be split: its names' space-separated parts."""
    return [w for part in path.split("/") for w in part.split()]


def unsplit(lines: list[str], path: str) -> list[str]:
    """The words of `path` that appear whole on none of `lines` (broken across lines)."""
    return [
        w
        for w in names(path)
        if not any(re.search(rf"(?<![^\s/]){re.escape(w)}(?![^\s/])", x) for x in lines)
    ]


def column(printed: str, index: int) -> list[list[str]]:
    """The cells of column `index` of a rich table with a line between its rows, each
    cell as its lines."""
    cells: list[list[str]] = [[]]
    for line in printed.splitlines():
        if line.startswith("├"):
            cells.append([])
        elif line.startswith("│"):
            cells[-1].append(line.split("│")[1:-1][index].strip())
    return [[x for x in c if x] for c in cells]


def test_pieces_end_after_slashes_and_spaces() -> None:
    assert pieces("a/b c.txt") == ["a/", "b ", "c.txt"]
    assert pieces("drive//Scans/x y/") == ["drive//", "Scans/", "x ", "y/"]
    for text in (DEEP, *LONG_NAMES, LONGEST, "  lead", "", "/abs/path", "p.pdf p. 3 · A › B #2"):
        assert "".join(pieces(text)) == text


@pytest.mark.parametrize("width", [12, 20, 26, 40])
def test_lines_break_only_between_pieces(width: int) -> None:
    for text in (DEEP, *LONG_NAMES, LONGEST):
        lines = break_lines(text, width)
        assert all(len(x) <= width or len(pieces(x)) == 1 for x in lines), lines
        assert "".join(lines).replace(" ", "") == text.replace(" ", "")
        assert not unsplit(lines, text), (width, lines)


def test_a_name_wider_than_its_column_is_folded_not_lost() -> None:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=80, record=True)
    console.print(PathCell("a/" + "x" * 100 + "/b.txt"))
    lines = console.export_text().splitlines()
    assert lines == ["a/", "x" * 80, "x" * 20 + "/", "b.txt"]


def test_the_table_of_files_keeps_names_whole_at_80_columns() -> None:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=80, record=True)
    rows = [
        {"source": path, "reason": "needs OCR: scanned pages; Tesseract reads none of them"}
        for path in (DEEP, *LONG_NAMES, LONGEST)
    ]
    render_files(console, "Skipped files", rows, "reason")
    printed = console.export_text()
    assert all(len(x) <= 80 for x in printed.splitlines())
    files = [x.split("│")[1].strip() for x in printed.splitlines() if x.startswith("│")]
    for row in rows:
        assert not unsplit(files, row["source"]), (row["source"], printed)


def test_the_source_column_leaves_the_snippet_room() -> None:
    assert source_width(80, parts=False) == (0, 26)  # the snippet: 80 - 21 - 26 = 33 cells
    assert source_width(80, False, ["a/twenty-seven-characters.pdf"]) == (27, 27)
    assert source_width(80, False, [LONGEST]) == (29, 29)  # the snippet keeps 30: folded
    assert source_width(NARROW, parts=True) == (0, 30)
    assert source_width(60, parts=False) == (0, 20) and source_width(400, True) == (0, 64)


@pytest.fixture(scope="module")
def deep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of the same page under long, deep names, indexed."""
    base = tmp_path_factory.mktemp("cells")
    for name in LONG_NAMES:
        (base / "docs" / name).parent.mkdir(parents=True)
        shutil.copy2(CORPUS / "postgresql" / Path(name).name, base / "docs" / name)
    result = invoke("run", str(base / "docs"), "--db", str(base / "db"), "--no-progress", *FAST)
    assert result.exit_code == 0, result.output
    return base / "db"


@pytest.mark.parametrize("mode", ["hybrid", "keyword"])
def test_the_search_table_reads_well_at_80_columns(deep: Path, mode: str) -> None:
    result = invoke("search", QUERY, "-k", "4", "--mode", mode, "--db", str(deep), COLUMNS="80")
    assert result.exit_code == 0, result.output
    printed = result.stdout
    assert all(len(x) <= 80 for x in printed.splitlines()), printed
    header = next(x for x in printed.splitlines() if x.startswith("┃"))
    assert [c.strip() for c in header.split("┃")[1:-1]][2:] == ["source", "snippet"]
    sources, snippets = column(printed, 2), column(printed, 3)
    assert len(sources) == len(snippets) == 4, printed
    for cell in sources:
        path = next(p for p in LONG_NAMES if names(p)[0] in cell[0])
        assert not unsplit(cell, path), (cell, printed)
    for cell in snippets:
        assert all(len(x.split()) >= SNIPPET_WORDS for x in cell[:-1]), (cell, printed)
    if mode == "hybrid":
        assert "each part's score and rank: --json" in " ".join(printed.split())


def test_wide_terminals_get_the_per_list_scores(deep: Path) -> None:
    result = invoke("search", QUERY, "-k", "2", "--db", str(deep), COLUMNS=str(NARROW))
    assert result.exit_code == 0, result.output
    header = next(x for x in result.stdout.splitlines() if x.startswith("┃"))
    assert "cosine (rank)" in header and "keyword (rank)" in header
    assert all(len(x) <= NARROW for x in result.stdout.splitlines())
