"""Option types shared by the `attnswitch` commands: one definition of each (`--db`,
`--json`, `--engine`, `--precision`, a search's `--mode` and filters) and the checks of
their values.

A search's options are derived from the one definition of a search (`indexing.requests`:
`Mode`, its help; `indexing.filters`: `FIELDS`, `FIELD_HELP`, `FIELD_VALUES`): `ModeOption`
is `--mode`, and `with_filter_options` gives a command one option per filter field
(`--path`, `--type`, `--modified-after`, `--modified-before`, in the Filters panel of its
help), collected into its `filters` parameter, a mapping of field to value ready for
`SearchRequest.of(query, k, mode, **filters)`.
"""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, TypeVar

import typer

from attnswitch.indexing.filters import FIELD_HELP, FIELD_VALUES, FIELDS
from attnswitch.indexing.requests import MODES_HELP, Mode


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


DB_DEFAULT_HELP = (
    "Default: the nearest .attnswitch/ in this folder or above, else $ATTNSWITCH_DB, else db "
    "in ~/.config/attnswitch/config.toml; run and watch use an index found that way only "
    "when it already holds their folder, else ./.attnswitch/."
)
DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        help="Data folder of the index, or the index file itself (an existing file, or a "
        f"new path with a suffix such as x.db). {DB_DEFAULT_HELP}",
        show_default=False,
        parser=nonblank_path,
    ),
]
StoreOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Data folder of the index, or a PostgreSQL server with pgvector: "
        f"postgresql://USER@HOST/DB. {DB_DEFAULT_HELP}",
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
        help="Add a glob of files to index (gitignore syntax, below the folder: '*.pdf', "
        "'docs/**'); repeatable. Once there is one, only the files an include glob matches "
        "are indexed. Added to the rules kept with the index: later runs and watch apply "
        "them until --include-only or --clear-rules replaces them.",
        show_default=False,
    ),
]
ExcludeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude",
        help="Add a glob of files and folders to leave out (gitignore syntax: 'Wiki "
        "export/', '*.tmp'); repeatable. Added to the rules kept with the index (the "
        "others stay); --clear-rules drops them all.",
        show_default=False,
    ),
]
GitignoreOption = Annotated[
    bool | None,
    typer.Option(
        "--gitignore/--no-gitignore",
        help="Honour (or, with --no-gitignore, stop honouring) the .gitignore and .ignore "
        "files found in the folder; kept with the index. Default: as kept. System folders "
        "(recycle bins, lost+found, node_modules, __pycache__, ...) are never walked; hidden "
        "ones only with hidden files.",
        show_default=False,
    ),
]
IncludeOnlyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--include-only",
        help="Replace the include globs kept with the index by these (repeatable); "
        "excludes, ignore files and forgotten paths stay.",
        show_default=False,
    ),
]
ClearRulesOption = Annotated[
    bool,
    typer.Option(
        "--clear-rules",
        help="Drop every rule kept with the index (includes, excludes, ignore files, "
        "paths `forget` recorded) before the rules given here apply.",
    ),
]


def file_rules(
    include: list[str] | None,
    exclude: list[str] | None,
    gitignore: bool | None,
    *,
    include_only: list[str] | None = None,
    clear: bool = False,
) -> dict[str, Any] | None:
    """The change to the stored file rules the options ask for, as the keywords of
    `rules.RulesChange` (made, and its globs checked, by `pipeline._run_options`), or None
    when none was given (the rules stored with the index apply as they are)."""
    if not include and not exclude and gitignore is None and include_only is None and not clear:
        return None
    return {
        "include": tuple(include or ()),
        "exclude": tuple(exclude or ()),
        "gitignore": gitignore,
        "include_only": None if include_only is None else tuple(include_only),
        "clear": clear,
    }


ModeOption = Annotated[
    Mode,
    typer.Option("--mode", metavar="MODE", help=f"How chunks are ranked: {MODES_HELP}."),
]
# What a command decorated by `with_filter_options` receives as `filters`: every field of
# `FIELDS`, each None when its option was not given.
FilterValues = Mapping[str, Any]


def filter_option_name(argument: str) -> str:
    """The option of a filter field, or of the argument a `StoreInputError` of the filter
    names: "path" and "path[2]" are `--path`, "modified_after" `--modified-after`."""
    return "--" + argument.split("[")[0].replace("_", "-")


def _filter_option(name: str) -> Any:
    several = FIELD_VALUES[name] != "time"
    help_line = FIELD_HELP[name][:1].upper() + FIELD_HELP[name][1:]
    return Annotated[
        list[str] | None if several else str | None,
        typer.Option(
            filter_option_name(name),
            help=help_line + ("; repeatable: any." if several else "."),
            show_default=False,
            rich_help_panel="Filters",
        ),
    ]


# The option type of each filter field (`FIELDS`): a repeatable text for a list, one text
# for a time (`FIELD_VALUES`), its help `FIELD_HELP`'s line.
FILTER_OPTIONS = MappingProxyType({name: _filter_option(name) for name in FIELDS})

Command = TypeVar("Command", bound=Callable[..., Any])


def with_filter_options(command: Command) -> Command:
    """`command`, which takes a parameter `filters` (a `FilterValues`), as a typer command
    with one option per filter field in its place (`FILTER_OPTIONS`); the values given
    reach `command` as `filters`, a dict with every field of `FIELDS`.

        @with_filter_options
        def search_command(query: str, ..., filters: FilterValues = MappingProxyType({}), ...):
            request = SearchRequest.of(query, k, mode, **filters)
    """
    signature = inspect.signature(command, eval_str=True)
    if "filters" not in signature.parameters:
        raise TypeError(f"{command.__name__}: expected a parameter `filters`, got none")
    taken = set(FIELDS) & set(signature.parameters)
    if taken:
        raise TypeError(
            f"{command.__name__}: expected no parameter named as a filter field, got "
            f"{', '.join(sorted(taken))}"
        )
    parameters: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        if parameter.name != "filters":
            parameters.append(parameter)
            continue
        parameters += [
            inspect.Parameter(name, parameter.kind, default=None, annotation=FILTER_OPTIONS[name])
            for name in FIELDS
        ]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        filters = {name: kwargs.pop(name, None) for name in FIELDS}
        return command(*args, filters=filters, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
