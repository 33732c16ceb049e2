"""JSON output shared by the CLI commands: one object on stdout, NaN and infinities as null."""

from __future__ import annotations

import json
import math
from typing import Any

import typer


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
