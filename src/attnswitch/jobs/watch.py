"""Watch: keep an index current with a folder as its files are added, changed, moved and
deleted.

`watch(root, store, options)` starts watching `root` (watchfiles: the operating system's
file events, inotify on Linux, FSEvents on macOS, ReadDirectoryChangesW on Windows, or
polling where there are none), catches up with one run (`run.run`: whatever changed while
nothing watched, a restart included, is found by that one scan), then runs again after
each debounced batch of changes. Each run is the ordinary full run of the root: it applies
the same rules, and its plan reads no unchanged file (same size, mtime and config), so a
batch costs one listing of the root plus the files that changed. A file moved or renamed
inside the root keeps its chunks and vectors under its new path (the run's content dedup:
same hash, nothing extracted or encoded).

Rescanning the whole root per batch, rather than passing the changed paths to the run, is
deliberate: a listing is cheap next to reading, the run's freshness rule already skips
every unchanged file, and a batch that loses an event (an overflowed inotify queue, a
folder renamed with thousands of files) is still caught up exactly.

Changes to the store's own files and, unless `include_hidden`, to hidden paths (where a
data folder such as `.attnswitch/` lives) start no run, so the index's writes never wake
the watcher. The model is loaded once, on first need, and kept across runs.

The loop ends when `stop_event` is set (the CLI sets it on SIGTERM) or on Ctrl-C; a run in
progress then finishes first, or is recorded "interrupted" by Ctrl-C.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnswitch.jobs.run import RunJob, RunOptions, RunSummary, check_root, drive
from attnswitch.index.store import Store

# Milliseconds a batch of changes is gathered for after its first event (watchfiles'
# debounce), and between checks of the stop event.
DEFAULT_DEBOUNCE_MS = 1600
STEP_MS = 50
# Milliseconds the watcher waits for an event before it yields an empty batch: the first
# one, once the watcher is set up, starts the catch-up run (later ones are passed over).
IDLE_YIELD_MS = 200


class ChangeFilter:
    """The changes that may matter to the index of `root`: none of the store's own files
    (`Store.own_files`) and, unless `include_hidden`, no path with a hidden part below the
    root."""

    def __init__(self, root: Path, own: set[Path], include_hidden: bool):
        self.root, self.own, self.include_hidden = root, own, include_hidden

    def __call__(self, change: Any, path: str) -> bool:
        p = Path(path)
        if p in self.own:
            return False
        try:
            parts = p.relative_to(self.root).parts
        except ValueError:
            return False
        return self.include_hidden or not any(part.startswith(".") for part in parts)


def watch(root: str | os.PathLike, store: Store, options: RunOptions = RunOptions(), *,
          get_encoder: Callable[[], Any] | None = None,
          stop_event: threading.Event | None = None,
          on_batch: Callable[[RunSummary, set[tuple[Any, str]]], None] | None = None,
          debounce_ms: int = DEFAULT_DEBOUNCE_MS, force_polling: bool | None = None) -> int:
    """Keep `store` current with `root` until `stop_event` is set (see the module doc).
    `on_batch(summary, changes)` is called after each run, the catch-up run's changes
    being an empty set; `get_encoder` as for `run.run`, called once. Returns how many
    runs were made."""
    import watchfiles

    root = check_root(root)
    resolved = root.resolve()
    keep = ChangeFilter(resolved, store.own_files(), options.include_hidden)
    loaded: list[Any] = []  # the encoder, once a run has loaded it

    def encoder() -> Any:
        if not loaded:
            loaded.append(get_encoder() if get_encoder else _default_encoder(options))
        return loaded[0]

    runs = 0
    for changes in watchfiles.watch(resolved, watch_filter=keep, debounce=debounce_ms,
                                    step=STEP_MS, stop_event=stop_event,
                                    rust_timeout=IDLE_YIELD_MS,
                                    yield_on_timeout=True, raise_interrupt=True,
                                    force_polling=force_polling):
        if runs and not changes:
            continue
        summary = drive(RunJob(root, store, options, encoder, None), time.perf_counter())
        runs += 1
        if on_batch is not None:
            on_batch(summary, changes)
    return runs


def options_of_index(store: Store, options: RunOptions) -> RunOptions:
    """`options` with the model, precision and chunking of the index `store` holds
    (`config.stored_config`), so that watching an index made by `run` with other options
    neither re-chunks nor re-encodes it; `options` as given for a new index."""
    import dataclasses

    from attnswitch.index.config import stored_config

    config = stored_config(store)
    if config is None:
        return options
    return dataclasses.replace(options, model=config.model, precision=config.precision,
                               max_tokens=config.max_tokens, overlap=config.overlap,
                               chunking=config.chunking, embed_headings=config.embed_headings)


def _default_encoder(options: RunOptions) -> Any:
    """The encoder `run.run` would load for `options`."""
    from attnswitch.engines import ModelSpec
    from attnswitch.jobs.encode import load_encoder, resolve_precision

    resolved, _ = resolve_precision(options)
    return load_encoder(resolved, ModelSpec.load(options.model))
