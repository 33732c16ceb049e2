"""Table cells that read well on a narrow terminal (80 columns): `PathCell`, a path or a
hit's place that wraps only after a `/` or at a space, never inside a name; `NARROW`, the
width below which the search table drops its less important columns; `source_width` and
`file_width`, what a column of paths may take so that its names stay whole and the other
columns keep room (a name wider than that is folded).

rich wraps a cell at spaces and folds a "word" wider than its column at any character: a
path has no spaces, so `postgresql/tutorial-update.html` came out as `postgresql/tut` /
`orial-update.h` / `tml`. A `PathCell` tells the table the widest piece it cannot break
(a folder with its `/`, a file's name) as its minimum width, and breaks between pieces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from types import MappingProxyType
from typing import Any

# Terminals narrower than this get tables without their least important columns (the
# search table's per-list scores: `--json` has them).
NARROW = 120
# The search table's `source` column: at least this wide, at most `SOURCE_MAX`; its
# snippet, at least `SNIPPET_MIN` (some five words a line) when a name needs the room.
SOURCE_MIN, SOURCE_MAX, SNIPPET_MIN = 20, 64, 30
# The search table's cells besides its source and snippet: the rank (up to 3 digits), the
# score, with `parts` the two per-list scores, and the borders and padding.
_SEARCH_FIXED = MappingProxyType({False: 21, True: 54})
# The least a table of files leaves its second column (a reason, a note).
REASON_MIN = 24


def source_width(width: int, parts: bool, sources: Iterable[str] = ()) -> tuple[int, int]:
    """(least, most) cells of the search table's `source` column on a terminal `width`
    columns wide, beside the per-list scores (`parts`) or not: at most a quarter of the
    width beside them, else a third, within SOURCE_MIN..SOURCE_MAX; at least the widest
    name of `sources` (so that no name is split) where the snippet keeps SNIPPET_MIN."""
    least = max(0, min(widest(sources), width - _SEARCH_FIXED[parts] - SNIPPET_MIN))
    share = max(SOURCE_MIN, min(SOURCE_MAX, width // (4 if parts else 3)))
    return least, max(least, share)


def file_width(width: int, sources: Iterable[str]) -> int:
    """The least cells of a two-column table's column of files (`files_table`): its widest
    name, where the other column keeps REASON_MIN."""
    return max(0, min(widest(sources), width - 7 - REASON_MIN))


def widest(texts: Iterable[str]) -> int:
    """The widest piece (`pieces`, trailing spaces dropped) of `texts`, in cells."""
    from rich.cells import cell_len

    return max((cell_len(p.rstrip()) for t in texts for p in pieces(t)), default=0)


# A path's pieces: a name with the slashes after it and any spaces after them, or spaces.
_PIECES = re.compile(r"[^\s/]*/+\s*|[^\s/]+\s*|\s+")


def pieces(text: str) -> list[str]:
    """`text` cut where a line may break: after each run of `/`, after each run of spaces
    ("a/b c.txt" -> ["a/", "b ", "c.txt"]); joined, they are `text`."""
    return _PIECES.findall(text)


def break_lines(text: str, width: int) -> list[str]:
    """`text` in lines at most `width` cells wide, broken only between `pieces` (trailing
    spaces dropped); a piece wider than `width` stands on a line of its own, to be folded
    by whoever draws it."""
    from rich.cells import cell_len

    lines: list[str] = []
    line = ""
    for piece in pieces(text):
        if line and cell_len((line + piece).rstrip()) > width:
            lines.append(line.rstrip())
            line = piece.lstrip()
        else:
            line += piece
    if line.strip() or not lines:
        lines.append(line.rstrip())
    return lines


class PathCell:
    """A rich renderable: `text` (shown as it is, never parsed as markup; control
    characters shown escaped as `output.terminal_text` does) in `style`, wrapped by
    `break_lines` at the width its column gets. Its minimum width is its widest piece, so
    a table narrows it no further while other columns can give room."""

    def __init__(self, text: str, style: str = "") -> None:
        from attnswitch.cli.output import highlighted

        self.text = highlighted(text, []).plain
        self.style = style

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.cells import cell_len
        from rich.measure import Measurement

        least = max(1, widest([self.text]))
        whole = cell_len(self.text)
        return Measurement(min(least, options.max_width), min(whole, options.max_width))

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        lines = break_lines(self.text, options.max_width)
        yield Text("\n".join(lines), style=self.style, overflow="fold")

    def __str__(self) -> str:
        return self.text
