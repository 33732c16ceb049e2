"""The table of files and what befell them (skipped and why, handled with a note) that
`run` and `status` print, the first `SKIPS_SHOWN` of them."""

from __future__ import annotations

from typing import Any

from attnswitch.cli.cells import PathCell, file_width
from attnswitch.cli.output import terminal_text

SKIPS_SHOWN = 20


def render_files(console: Any, title: str, rows: list[dict[str, str]], column: str) -> None:
    """A table of files (`source`, wrapped only after a `/` or at a space: `PathCell`)
    with `column` (a skip's reason, a note, wrapped at spaces), the first `SKIPS_SHOWN`,
    then how many more."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    t.add_column("file", min_width=file_width(console.width, (r["source"] for r in rows)))
    t.add_column(column, overflow="fold")
    for r in rows[:SKIPS_SHOWN]:
        t.add_row(PathCell(r["source"]), terminal_text(r[column]))
    if len(rows) > SKIPS_SHOWN:
        t.add_row(f"... and {len(rows) - SKIPS_SHOWN} more", "(attnswitch status --json)")
    console.print(t)
