"""Option types shared by the `attnswitch` commands: one definition of each (`--db`,
`--json`, `--engine`, `--precision`) and the checks of their values."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer


def nonblank_location(value: str) -> str:
    """A `--db` value (a folder, a file or a PostgreSQL URL), refusing an empty or blank one."""
    return value if "://" in value else str(nonblank_path(value))


def nonblank_path(value: str | Path) -> Path:
    """A command-line path, refusing an empty or blank one (an unset shell variable would
    otherwise mean the working directory)."""
    if isinstance(value, Path):
        return value
    if not value.strip():
        got = "an empty string" if not value else "only whitespace"
        raise typer.BadParameter(f"expected a path, got {got}")
    return Path(value)


DbOption = Annotated[Path | None, typer.Option(
    "--db", help="Data folder of the index (default ./.attnswitch/), or the index file "
    "itself (an existing file, or a new path with a suffix such as x.db).", show_default=False,
    parser=nonblank_path)]
StoreOption = Annotated[str | None, typer.Option(
    "--db", help="Data folder of the index (default ./.attnswitch/), or a PostgreSQL "
    "server with pgvector: postgresql://USER[:PASSWORD]@HOST:PORT/DBNAME.",
    show_default=False, parser=nonblank_location)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]


ENGINE_HELP = ("auto: the fastest engine measured on this machine whose vectors match torch "
               "float32 (measured on first use, remembered; `attnswitch doctor` shows it); or "
               "one by name: torch, jax, openvino, onnxruntime, or a plug-in's. "
               "$ATTNSWITCH_ENGINE names one for auto.")
EngineOption = Annotated[str, typer.Option(help=ENGINE_HELP)]


class Precision(str, enum.Enum):
    auto = "auto"
    fp32 = "fp32"
    bf16 = "bf16"
    int8 = "int8"
