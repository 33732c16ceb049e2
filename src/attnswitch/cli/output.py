"""How the CLI commands print: through a rich console (tables, progress), or as one JSON
object on stdout (`--json`), NaN and infinities as null."""

from __future__ import annotations

import json
import math
import os
import sys
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
