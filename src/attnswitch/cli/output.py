"""How the CLI commands print: through a rich console (tables, progress), or as one JSON
object on stdout (`--json`), NaN and infinities as null."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from types import MappingProxyType
from typing import Any

import typer

# Without a terminal (a pipe, a log, a test) rich would fold tables at 80 columns.
PIPE_WIDTH = 160


def rich_console(stderr: bool = False) -> Any:
    """A rich console on stdout (or stderr); when that is not a terminal and `COLUMNS` is
    unset, PIPE_WIDTH wide, so tables and paths are not folded."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    wide = not stream.isatty() and "COLUMNS" not in os.environ
    return Console(file=stream, width=PIPE_WIDTH if wide else None, soft_wrap=False)


def jsonable(x: Any) -> Any:
    """NaN and infinities as None (JSON has neither); containers recursively."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    return x


def print_json(data: Any) -> None:
    typer.echo(json.dumps(jsonable(data), indent=1, default=str))


# C0 and C1 controls, DEL, and the bidirectional overrides that reorder what a line shows.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = MappingProxyType({"\n": "\\n", "\r": "\\r", "\t": "\\t"})


def terminal_text(text: object) -> str:
    """`text` safe to print to a terminal through rich: every control character (ESC,
    newline, C1, bidi overrides) shown escaped (`\\x1b`, `\\n`, `\\u202e`), so that a file
    name or a document's text can neither drive the terminal nor fake a row, and rich's
    markup escaped. Everything printed from names, headings, snippets or reasons goes
    through it (or through `highlighted`, for a rich `Text`)."""
    from rich.markup import escape

    return escape(_controls_shown(str(text)))


def _controls_shown(text: str) -> str:
    def shown(m: re.Match) -> str:
        c = m.group()
        return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")

    return _UNSAFE.sub(shown, text)


def highlighted(text: str, spans: list[list[int]], style: str = "bold") -> Any:
    """A rich `Text` (never parsed as markup) of `text` with each [start, end] of `spans`
    in `style`, its control characters shown escaped as `terminal_text` shows them."""
    from rich.text import Text

    out, at = Text(), 0
    for start, end in sorted(spans):
        if start < at or end > len(text):
            continue
        out.append(_controls_shown(text[at:start]))
        out.append(_controls_shown(text[start:end]), style=style)
        at = end
    out.append(_controls_shown(text[at:]))
    return out
