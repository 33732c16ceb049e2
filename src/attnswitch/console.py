"""The rich console every CLI command prints through."""

from __future__ import annotations

import os
import sys
from typing import Any

# Without a terminal (a pipe, a log, a test) rich would fold tables at 80 columns.
PIPE_WIDTH = 160


def rich_console(stderr: bool = False) -> Any:
    """A rich console on stdout (or stderr); when that is not a terminal and `COLUMNS` is
    unset, PIPE_WIDTH wide, so tables and paths are not folded."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    wide = not stream.isatty() and "COLUMNS" not in os.environ
    return Console(file=stream, width=PIPE_WIDTH if wide else None, soft_wrap=False)
