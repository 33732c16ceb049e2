"""The commands that keep an index in step with its folders: `forget` and `watch`.

    attnswitch forget PATH [--once] [--db DIR] [--json]
    attnswitch unforget PATH [--db DIR] [--json]
    attnswitch watch FOLDER [--db DIR] [the options of run] [--json]

`forget` removes a file or a folder (every document below it) from the index, with its
chunks and vectors, and records it as forgotten in the rules kept with the index, so that
later runs and `watch` leave it out (`--once`: removed now only, a later run may index it
again); a path with no indexed document is refused with one line naming it. `unforget`
takes a forgotten path back: the next run (or `watch`'s next batch) indexes it again.
`watch` indexes FOLDER (catching up with whatever changed since the last run), then
follows its changes until Ctrl-C or SIGTERM: it prints a start line (folder, index, rules in
effect), one line per batch (files and chunks; each file is searchable as soon as its
document is written, the whole batch when its line prints) with the run's progress display
(and its ETA) on stderr for a batch that takes long, and, between batches, how the full pass
goes ("N of M chunks", with an ETA; `cli/watch_output.py`; with --json, one JSON object per
line: `{"status": "watching", ...}`, each batch's run summary, `{"status": "filling",
...}`); `--log FILE` appends the same events to FILE, one `key=value` line each. It watches the folders a run walks (no link
followed). When another run holds the index, or the folder is deleted (or replaced by a
link or a file), it prints one line (with --json, `{"status": "waiting", ...}`) and waits
for the lock, or for a folder there again, then catches up; it never exits for either.
It keeps the model, precision and chunking the index was made with; for a new index, those
of run's defaults and the options given.
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from attnswitch.cli.options import (
    EngineOption,
    ExcludeOption,
    GitignoreOption,
    IncludeOption,
    JsonOption,
    OcrLanguagesOption,
    StoreOption,
    file_rules,
    nonblank_path,
)
from attnswitch.cli.output import jsonable, print_json, rich_console, terminal_text
from attnswitch.cli.watch_output import (
    BatchProgress,
    FillLines,
    batch_line,
    log_to,
    start_line,
)
from attnswitch.documents.rules import describe

log = logging.getLogger(__name__)


def forget_command(
    path: Annotated[
        Path, typer.Argument(help="A file or folder of an indexed folder.", parser=nonblank_path)
    ],
    db: StoreOption = None,
    once: Annotated[
        bool,
        typer.Option(
            "--once",
            help="Remove it now only, without recording it in the rules: a later run or "
            "watch of its folder indexes it again.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Remove a file or a folder from the index, with its chunks and vectors, and keep it
    out: the path is recorded in the rules kept with the index (`status` shows them), so
    later runs and watch leave it out until `attnswitch unforget PATH`. The files
    themselves are left alone."""
    from attnswitch.cli.opening import _fail, _open_store, _store_errors, store_location
    from attnswitch.indexing.forget import NotIndexedError, forget

    location = store_location(db)
    with (
        _store_errors("forget", location, as_json),
        _open_store(location, "forget", as_json, existing=True) as store,
    ):
        try:
            done = forget(path, store, once=once)
        except NotIndexedError as exc:
            raise _fail("forget", str(exc), as_json) from None
    report = {
        "path": done.path,
        "documents": done.documents,
        "removed": [{"root": r, "documents": n} for r, n in done.removed.items()],
        "recorded": list(done.recorded),
    }
    if as_json:
        print_json(report)
        return
    typer.echo(f"forgot {done.documents:,} document(s) at {done.path}")
    if done.recorded:
        typer.echo(
            "kept out of later runs and watch of "
            + ", ".join(done.recorded)
            + f" (recorded in the rules; `attnswitch unforget {done.path}` takes it back)"
        )
    else:
        typer.echo("not recorded in the rules: a later run of its folder indexes it again")


def unforget_command(
    path: Annotated[
        Path,
        typer.Argument(help="A path `attnswitch forget` recorded.", parser=nonblank_path),
    ],
    db: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Take back a path `attnswitch forget` recorded (and those below it): the next run or
    watch batch of its folder indexes it again. A path with nothing recorded changes
    nothing; the paths still forgotten are listed."""
    from attnswitch.cli.opening import _open_store, _store_errors, store_location
    from attnswitch.indexing.forget import unforget

    location = store_location(db)
    with (
        _store_errors("unforget", location, as_json),
        _open_store(location, "unforget", as_json, existing=True) as store,
    ):
        done = unforget(path, store)
    if as_json:
        print_json(
            {
                "path": done.path,
                "taken_back": [{"root": r, "paths": list(p)} for r, p in done.taken_back.items()],
                "still_forgotten": list(done.still_forgotten),
            }
        )
        return
    if not done.taken_back:
        typer.echo(
            f"nothing forgotten at {done.path}; forgotten: "
            + (", ".join(done.still_forgotten) or "none")
        )
    for root, paths in done.taken_back.items():
        typer.echo(
            f"took back {', '.join(paths)} in {root}: the next run of it indexes "
            f"{'them' if len(paths) > 1 else 'it'} again"
        )


def watch_command(
    path: Annotated[
        Path,
        typer.Argument(
            help="Folder to index and follow (recursively).",
            show_default=False,
            parser=nonblank_path,
            metavar="FOLDER",
        ),
    ],
    db: StoreOption = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model folder, for a new index (an existing one keeps its own).",
            show_default=False,
        ),
    ] = None,
    engine: EngineOption = "auto",
    max_tokens: Annotated[
        int | None,
        typer.Option(
            help="Text tokens per chunk, for a new index. Default: the model's limit.",
            show_default=False,
        ),
    ] = None,
    overlap: Annotated[
        int,
        typer.Option(help="Tokens shared by neighbouring chunks (windows only), for a new index."),
    ] = 32,
    max_mb: Annotated[float, typer.Option(help="Skip files larger than this (MiB).")] = 20.0,
    include: IncludeOption = None,
    exclude: ExcludeOption = None,
    gitignore: GitignoreOption = None,
    ocr: Annotated[
        bool, typer.Option(help="Recognise scanned PDF pages and images with Tesseract.")
    ] = True,
    ocr_languages: OcrLanguagesOption = None,
    read_workers: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Processes reading files beside the encoder. Default: half the CPUs.",
            show_default=False,
        ),
    ] = None,
    debounce_ms: Annotated[
        int, typer.Option(min=1, help="Milliseconds a batch of changes is gathered for.")
    ] = 1600,
    log_file: Annotated[
        Path | None,
        typer.Option(
            "--log",
            help="Append a line per batch (files, chunks, seconds), the start line and the "
            "full pass's progress to this file.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Index a folder, then keep the index current as its files are added, changed, moved
    and deleted (a move keeps its chunks: nothing is read or encoded again). Ctrl-C or
    SIGTERM ends it; a restart catches up with one scan."""
    import time

    from attnswitch.cli.pipeline import (
        _check_folder,
        _fail,
        _open_store,
        _run_options,
        _store_errors,
        run_store_location,
    )
    from attnswitch.errors import AttnswitchError
    from attnswitch.jobs.watch import options_of_index, watch

    options = _run_options(
        as_json,
        "watch",
        model=model,
        engine=engine,
        max_tokens=max_tokens,
        overlap=overlap,
        max_bytes=max(1, int(max_mb * 2**20)),
        ocr=ocr,
        ocr_languages=ocr_languages,
        read_workers=read_workers,
        rules=file_rules(include, exclude, gitignore),
    )
    _check_folder(path, as_json)

    batch_progress = BatchProgress(as_json)

    def report(summary: Any, changes: set) -> None:
        batch_progress.end()
        log.info(
            "watch batch: changes=%d new=%d changed=%d moved=%d deleted=%d copied=%d "
            "skipped=%d chunks=%d reused=%d documents=%d seconds=%.1f",
            len(changes),
            summary.new,
            summary.changed,
            summary.moved,
            summary.deleted,
            summary.copied,
            summary.skipped,
            summary.chunks_quick + summary.chunks_encoded,
            summary.chunks_reused,
            summary.indexed,
            summary.wall_s,
        )
        if as_json:
            typer.echo(json.dumps(jsonable(summary.to_dict()), default=str))  # a line each
            return
        typer.echo(batch_line(summary))

    def started(rules: Any, folders: int) -> None:
        log.info(
            "watch start: folder=%s index=%s folders=%d rules=%r",
            path,
            location,
            folders,
            describe(rules),
        )
        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "status": "watching",
                        "folder": str(path),
                        "index": str(location),
                        "folders": folders,
                        "rules": {
                            "include": list(rules.include),
                            "exclude": list(rules.exclude),
                            "gitignore": rules.gitignore,
                        },
                    }
                )
            )
            return
        typer.echo(start_line(str(path), str(location), rules, folders))

    fill_lines = FillLines(typer.echo)

    def filled(counts: Any, left: int) -> None:
        log.info(
            "watch fill: encoded=%d reused=%d refused=%d left=%d seconds=%.1f",
            counts.encoded,
            counts.reused,
            counts.refused,
            left,
            counts.seconds,
        )
        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "status": "filling",
                        "encoded": counts.encoded,
                        "reused": counts.reused,
                        "refused": counts.refused,
                        "left": left,
                    }
                )
            )
            return
        fill_lines(counts, left)

    def waiting(reason: str, line: str) -> None:
        if as_json:
            typer.echo(json.dumps({"status": "waiting", "waiting_for": reason, "message": line}))
            return
        rich_console().print(
            f"{time.strftime('%H:%M:%S')} {terminal_text(line)}", soft_wrap=True, highlight=False
        )

    location = run_store_location(path, db)
    stop = threading.Event()
    with (
        _store_errors("watch", location, as_json),
        _open_store(location, "watch", as_json) as store,
        _stopped_by_sigterm(stop),
        log_to(log_file, log),
    ):
        try:
            watch(
                path,
                store,
                options_of_index(store, options),
                stop_event=stop,
                on_batch=report,
                on_wait=waiting,
                on_start=started,
                on_progress=batch_progress,
                on_fill=filled,
                debounce_ms=debounce_ms,
            )
        except KeyboardInterrupt:
            batch_progress.end()
            raise _fail("watch", "interrupted", as_json, 130) from None
        except AttnswitchError as exc:
            raise _fail("watch", str(exc), as_json) from None


@contextlib.contextmanager
def _stopped_by_sigterm(stop: threading.Event) -> Iterator[None]:
    """SIGTERM sets `stop` (the watcher ends after the run in progress) while inside;
    only from the main thread, where Python lets a handler be set."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
