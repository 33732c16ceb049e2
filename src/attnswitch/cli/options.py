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


DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        help="Data folder of the index (default ./.attnswitch/), or the index file "
        "itself (an existing file, or a new path with a suffix such as x.db).",
        show_default=False,
        parser=nonblank_path,
    ),
]
StoreOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Data folder of the index (default ./.attnswitch/), or a PostgreSQL "
        "server with pgvector: postgresql://USER@HOST/DB.",
        metavar="DIR|URL",
        show_default=False,
        parser=nonblank_location,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]


ENGINE_HELP = (
    "auto: the fastest engine measured on this machine whose vectors match torch "
    "float32 (measured on first use, remembered; `attnswitch doctor` shows it); or "
    "one by name: torch, jax, openvino, onnxruntime, or a plug-in's. "
    "$ATTNSWITCH_ENGINE names one for auto."
)
EngineOption = Annotated[str, typer.Option(help=ENGINE_HELP)]


class Precision(str, enum.Enum):
    auto = "auto"
    fp32 = "fp32"
    bf16 = "bf16"
    int8 = "int8"


OcrLanguagesOption = Annotated[
    str | None,
    typer.Option(
        "--ocr-languages",
        metavar="LANGS",
        help="Tesseract language packs OCR reads with: eng+deu, or eng,deu. Default: the system "
        "locale's language and English, those installed. A page in a script none of them reads "
        "(found by Tesseract's OSD, the osd pack) is read with its script's installed packs, or "
        "listed with the Debian package to install (tesseract-ocr-kor, ...).",
        show_default=False,
    ),
]


def ocr_languages_error(value: str) -> str | None:
    """Why OCR cannot read with `--ocr-languages VALUE` on this machine, in one line
    naming the flag and listing the installed packs: not packs joined by '+' or ',', or a
    pack not installed (with the Debian package of each missing one), or Tesseract does
    not run; None when it can."""
    from attnswitch.documents.readers.ocr_languages import check_installed, parse_languages
    from attnswitch.documents.readers.tesseract import installed_packs

    try:
        installed = installed_packs()
    except RuntimeError as exc:  # no tesseract program, or it does not run
        try:
            parse_languages(value, "--ocr-languages")
        except ValueError as bad:
            return str(bad)
        return (
            f"--ocr-languages: expected language packs of Tesseract, got {value!r}, and "
            f"{exc} (Debian: tesseract-ocr)"
        )
    try:
        check_installed(value, installed, "--ocr-languages")
    except ValueError as exc:
        return str(exc)
    return None


IncludeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--include",
        help="Index only the files this glob matches (gitignore syntax, below the "
        "folder: '*.pdf', 'docs/**'); repeatable. Kept with the index: later runs and watch "
        "apply the same rules until new ones are given.",
        show_default=False,
    ),
]
ExcludeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude",
        help="Leave out the files and folders this glob matches (gitignore "
        "syntax); repeatable; kept with the index.",
        show_default=False,
    ),
]
GitignoreOption = Annotated[
    bool | None,
    typer.Option(
        "--gitignore/--no-gitignore",
        help="Honour the .gitignore and .ignore files found in the "
        "folder; kept with the index. System folders (recycle bins, lost+found, node_modules, "
        "__pycache__, ...) are never walked; hidden ones only with hidden files.",
        show_default=False,
    ),
]


def file_rules(
    include: list[str] | None, exclude: list[str] | None, gitignore: bool | None
) -> tuple[tuple[str, ...], tuple[str, ...], bool] | None:
    """The file rules the options give, as (include, exclude, gitignore), or None when none
    was given (the rules stored with the index apply)."""
    if not include and not exclude and gitignore is None:
        return None
    return tuple(include or ()), tuple(exclude or ()), bool(gitignore)
