"""Watch: keep an index current with a folder as its files are added, changed, moved and
deleted.

`watch(root, store, options)` watches the folders a run of `root` walks
(`walked.walked_folders`: the walk of `scan` itself, so no link is followed, no pseudo
filesystem, system, hidden, excluded or ignored folder is entered, and none past the depth
limit), each one alone, not recursively (watchfiles: the operating system's file events,
inotify on Linux, FSEvents on macOS, ReadDirectoryChangesW on Windows, or polling where
there are none; its recursive mode would follow links to folders). Once the watcher is set
up it catches up with one run (`run.drive`: whatever changed while nothing watched, a
restart included, is found by that one scan), then runs again after each debounced batch
of changes that matter. Each run is the ordinary full run of the root: it applies the same
rules, and its plan reads no unchanged file (same size, mtime and config), so a batch
costs one listing of the root plus the files that changed. A file moved or renamed inside
the root keeps its chunks and vectors under its new path (the run's content dedup: same
hash, nothing extracted or encoded).

Rescanning the whole root per batch, rather than passing the changed paths to the run, is
deliberate: a listing is cheap next to reading, the run's freshness rule already skips
every unchanged file, and a batch that loses an event (an overflowed inotify queue, a
folder renamed with thousands of files) is still caught up exactly.

What a batch does (`ChangeFilter`): a change to a file the walk would list (in a watched
folder, not hidden unless `include_hidden`, kept by the stored rules), or to an ignore
file when the rules honour them, starts a run; a change to the store's own files, to a
hidden name or to a file the rules leave out starts none. A change to a folder (added,
removed, renamed) lists the folders again: when they differ, the watcher is set up again
over the new list and a run catches up; when they do not, no run, unless a watched folder
itself was modified (a chmod, chown or setfacl: inotify's attribute event, as a file's
is): who may read the files below it changed, and the run records it without reading
them (`IndexWriter.refresh_access`, counted as `permissions_changed`).

Waits, each announced once by `on_wait(reason, line)` and never an exit:

- another process holds the store's run lock (`StoreBusyError`: another writer,
  `indexing/writer.py`, such as `attnswitch run` of another folder into the same store):
  the run is tried again once the lock is free, or until `stop_event` is set;
- the root is gone (deleted, or its path replaced by a link or a file): the path is looked
  at every `ROOT_POLL_S` until it is a real folder again (opened without following any
  link), whose folders are then watched and caught up with one run (its plan removes the
  files deleted meanwhile). A root replaced by another folder is the same: watched anew.

Each run is the quick pass alone (`jobs/passes.py`): a change is searchable as soon as its
own document is written, by its words and its quick vectors, and no batch waits on the
transformer. The full pass is done between batches, in slices (`_Watch.fill`): whenever the
watcher has no change to hand over, the chunks without a full vector (this watch's, or
those an earlier `run --quick` or a killed run left) are encoded, the most recently
modified documents first, for at most `FILL_SLICE_S` seconds under the run lock; then the
watcher is asked again, so a change waits at most one slice, and the fill goes on after
its batch. `on_fill(counts, left)` tells each slice.

The model is loaded once, on first need, and kept across runs. The loop ends when
`stop_event` is set (the CLI sets it on SIGTERM) or on Ctrl-C; a run in progress then
finishes first, or is recorded "interrupted" by Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from attnswitch.documents.ingest import folder_id
from attnswitch.documents.rules import IGNORE_FILES, FileRules, rules_for
from attnswitch.documents.walked import WalkedFolder, walked_folders
from attnswitch.indexing.records import root_key
from attnswitch.indexing.store import Store, StoreBusyError, is_own
from attnswitch.indexing.writer import IndexWriter
from attnswitch.jobs.options import RunOptions
from attnswitch.jobs.passes import FullPassCounts, full_pass
from attnswitch.jobs.run import check_root, drive, local_job
from attnswitch.jobs.summary import RunSummary

if TYPE_CHECKING:
    from watchfiles import Change

    from attnswitch.engines.base import Encoder
    from attnswitch.jobs.encode import ChunkEncoder
    from attnswitch.jobs.run_state import RunProgress

    # A batch of changes: (what changed, the path).
    Changes = set[tuple[Change, str]]

# Milliseconds a batch of changes is gathered for after its first event (watchfiles'
# debounce), and between checks of the stop event.
DEFAULT_DEBOUNCE_MS = 1600
STEP_MS = 50
# Milliseconds the watcher waits for an event before it yields an empty batch: the first
# one, once the watcher is set up, starts the catch-up run; each one checks that the root
# is still the folder watched.
IDLE_YIELD_MS = 200
# Seconds between looks for a root that is gone, and the longest one wait for another
# run's lock lasts before the stop event is looked at.
ROOT_POLL_S = 0.5
LOCK_POLL_S = 1.0
# Seconds a slice of the full pass encodes for between two looks at the watcher: the
# longest a change waits for the fill.
FILL_SLICE_S = 5.0
# `on_wait` reasons.
WAIT_LOCK = "lock"
WAIT_ROOT = "root"
LOCK_LINE = "waiting for another run of this index to finish ..."


class ChangeFilter:
    """The changes that may matter to the index of a root whose walk enters `folders`
    (real path -> `WalkedFolder`, replaced when listed again): a change to one of those
    folders, to a folder in one of them, to a file there the walk would list, or to an
    ignore file when `gitignore`; none to the store's own files (`Store.own_files`), nor,
    unless `include_hidden`, to a hidden name."""

    def __init__(
        self,
        own: set[Path],
        include_hidden: bool,
        folders: dict[Path, WalkedFolder],
        gitignore: bool,
    ):
        self.own, self.include_hidden = own, include_hidden
        self.folders, self.gitignore = folders, gitignore

    def __call__(self, change: Change, path: str) -> bool:
        p = Path(path)
        if is_own(p, self.own):
            return False
        if p in self.folders:
            return True
        parent = self.folders.get(p.parent)
        if parent is None:  # outside the folders watched (a folder just left behind)
            return False
        if self.gitignore and p.name in IGNORE_FILES:
            return True
        if not self.include_hidden and p.name.startswith("."):
            return False
        return _is_folder(p) or parent.lists(p.name)

    def touches_folders(self, changes: Changes) -> bool:
        """Whether `changes` may change which folders the walk enters: a watched folder
        changed, a folder appeared, or an ignore file changed."""
        return any(
            Path(p) in self.folders
            or _is_folder(Path(p))
            or (self.gitignore and Path(p).name in IGNORE_FILES)
            for _, p in changes
        )

    def folder_modified(self, changes: Changes) -> bool:
        """Whether `changes` hold a watched folder's own change (a chmod, chown or ACL
        change: inotify's attribute event), which changes who may read every file below
        it: the run that follows records it (`IndexWriter.refresh_access`)."""
        from watchfiles import Change as Changed

        return any(c == Changed.modified and Path(p) in self.folders for c, p in changes)

    def files_in(self, changes: Changes) -> bool:
        """Whether `changes` hold a change to a file (anything but a folder: a removed
        path is judged by the name alone)."""
        return any(Path(p) not in self.folders and not _is_folder(Path(p)) for _, p in changes)


def _is_folder(path: Path) -> bool:
    """Whether `path` is a folder now (a link is not one)."""
    try:
        return path.is_dir() and not path.is_symlink()
    except OSError:
        return False


class _RootGone(Exception):
    """The root is no longer the folder listed: gone, or replaced."""


class _Watch:
    """One `watch` call's state: the root, its store, the folders watched and the runs."""

    def __init__(
        self,
        root: Path,
        store: Store,
        options: RunOptions,
        encoder: Callable[[], Encoder],
        stop: threading.Event,
        on_batch: Callable[[RunSummary, Changes], None] | None,
        on_wait: Callable[[str, str], None] | None,
        on_progress: Callable[[RunProgress], None] | None = None,
        on_fill: Callable[[FullPassCounts, int], None] | None = None,
    ):
        self.root, self.store, self.options, self.encoder = root, store, options, encoder
        self.stop, self.on_batch, self.on_wait = stop, on_batch, on_wait
        self.on_progress, self.on_fill = on_progress, on_fill
        self.root_id: tuple[int, int] | None = None  # the root's (device, inode) listed
        self.filter = ChangeFilter(store.own_files(), options.read.include_hidden, {}, False)
        self.rules = FileRules()  # the rules in effect, as listed last
        self.runs = 0
        self.filling = True  # chunks may lack a full vector (looked at by the next slice)
        self.filled = FullPassCounts()  # this watch's full pass so far
        self._encoding: ChunkEncoder | None = None

    def list_folders(self) -> bool:
        """List the folders to watch (into `filter`), waiting while the root is gone;
        False when stopped first."""
        announced = False
        while not self.stop.is_set():
            try:
                self.root_id = folder_id(self.root)
                self._list()
                return True
            except OSError as exc:  # NotADirectoryError included: the root is not a folder
                if not announced:
                    self._wait(
                        WAIT_ROOT,
                        f"{self.root} is no longer a folder (deleted, or "
                        f"replaced by a link or a file: {exc.strerror or exc}); "
                        "waiting for a folder there ...",
                    )
                    announced = True
                self.stop.wait(ROOT_POLL_S)
        return False

    def relisted(self) -> bool:
        """List the folders again (`_RootGone` when the root is not the folder listed);
        True when they are others than those watched."""
        before = set(self.filter.folders)
        try:
            if folder_id(self.root) != self.root_id:
                raise _RootGone
            self._list()
        except OSError:
            raise _RootGone from None
        return set(self.filter.folders) != before

    def _list(self) -> None:
        rules = rules_for(self.store, root_key(self.root), self.options.read.rules)
        folders = walked_folders(
            self.root,
            include_hidden=self.options.read.include_hidden,
            root_id=self.root_id,
            rules=rules,
        )
        self.filter.folders = {f.path: f for f in folders}
        self.filter.gitignore = rules.gitignore
        self.rules = rules

    def intact(self) -> bool:
        """Whether the root's path still leads to the folder listed."""
        try:
            return folder_id(self.root) == self.root_id
        except OSError:
            return False

    def run(self, changes: Changes) -> None:
        """One run of the root, waiting while another process holds the store's run lock
        (none when stopped meanwhile); `_RootGone` when the root is not the folder listed."""
        announced = False
        while not self.stop.is_set():
            if not self.intact():
                raise _RootGone
            # a root swapped during the run is not walked (`root_id`); the quick pass only
            job = local_job(
                self.root,
                self.store,
                self.options.replace(quick=True),
                self.encoder,
                self.on_progress,
                self.root_id,
            )
            try:
                job.target.writer.check_unlocked()
                summary = drive(job, time.perf_counter())
            except StoreBusyError:
                if not announced:
                    self._wait(WAIT_LOCK, LOCK_LINE)
                    announced = True
                self._wait_for_lock()
                continue
            except OSError:  # NotADirectoryError...: the root may have gone during the run
                if self.intact():
                    raise
                raise _RootGone from None
            self.runs += 1
            self.filling = self.filling or summary.chunks_unencoded > 0
            if self.options.read.rules is not None:  # the change is stored: later runs read
                self.options = self.options.replace(rules=None)  # the rules (a `forget` too)
            if self.on_batch is not None:
                self.on_batch(summary, changes)
            return

    def fill(self) -> None:
        """A slice of the full pass (see the module doc): the chunks without a full vector
        encoded for at most `FILL_SLICE_S` seconds, under the run lock (none when another
        process holds it: the next slice tries again). Nothing once none is left, until
        the next run."""
        if not self.filling or self.stop.is_set():
            return
        writer = IndexWriter(self.store, wait_s=0.0)
        try:
            writer.lock()
        except StoreBusyError:
            return
        deadline = time.monotonic() + FILL_SLICE_S
        try:
            if not writer.unencoded_count():
                self.filling = False
                return
            done = full_pass(
                writer,
                self._encoder().encode,
                self.options.encode.chunks_per_call,
                until=lambda: time.monotonic() >= deadline or self.stop.is_set(),
            )
        finally:
            writer.unlock()
        total = self.filled
        total.encoded += done.encoded
        total.tokens += done.tokens
        total.reused += done.reused
        total.refused += done.refused
        total.seconds += done.seconds
        total.left = done.left
        # done, or only refused chunks left: wait for the next run to try them again
        self.filling = done.left > 0 and done.encoded + done.reused > 0
        if self.on_fill is not None:
            self.on_fill(total, done.left)

    def _encoder(self) -> ChunkEncoder:
        """The model's encoder as a run drives it (`encode.ChunkEncoder`), made once."""
        if self._encoding is None:
            from attnswitch.jobs.encode import ChunkEncoder

            self._encoding = ChunkEncoder(
                self.encoder(),
                self.options.encode.chunks_per_call,
                self.options.encode.batch_tokens,
            )
        return self._encoding

    def _wait_for_lock(self) -> None:
        while not self.stop.is_set():
            try:
                IndexWriter(self.store).check_unlocked(LOCK_POLL_S)
                return
            except StoreBusyError:
                continue

    def _wait(self, reason: str, line: str) -> None:
        if self.on_wait is not None:
            self.on_wait(reason, line)


def watch(
    root: str | os.PathLike[str],
    store: Store,
    options: RunOptions = RunOptions(),
    *,
    get_encoder: Callable[[], Encoder] | None = None,
    stop_event: threading.Event | None = None,
    on_batch: Callable[[RunSummary, Changes], None] | None = None,
    on_wait: Callable[[str, str], None] | None = None,
    on_start: Callable[[FileRules, int], None] | None = None,
    on_progress: Callable[[RunProgress], None] | None = None,
    on_fill: Callable[[FullPassCounts, int], None] | None = None,
    debounce_ms: int = DEFAULT_DEBOUNCE_MS,
    force_polling: bool | None = None,
) -> int:
    """Keep `store` current with `root` until `stop_event` is set (see the module doc).
    `on_start(rules, folders)` is called once the folders to watch are first listed, with
    the file rules in effect and how many folders are watched; `on_batch(summary,
    changes)` after each run with the changes it follows (an empty set for the catch-up
    run at the start); `on_progress(progress)` as each run goes (`run.run`'s);
    `on_fill(counts, left)` after each slice of the full pass (this watch's counts so far,
    and the chunks still without a full vector); `on_wait(reason, line)` when a wait
    begins (`WAIT_LOCK` or `WAIT_ROOT`, and one line saying what is waited for);
    `get_encoder` as for `run.run`, called once. Returns how many runs were made."""
    import watchfiles

    resolved = check_root(root).resolve()
    stop = stop_event or threading.Event()
    loaded: list[Encoder] = []  # the encoder, once a run has loaded it

    def encoder() -> Encoder:
        if not loaded:
            loaded.append(get_encoder() if get_encoder else _default_encoder(options))
        return loaded[0]

    state = _Watch(resolved, store, options, encoder, stop, on_batch, on_wait, on_progress, on_fill)
    due: Changes | None = set()  # the changes a run is owed for (None: none)
    started_once = False
    while state.list_folders():
        if not started_once and on_start is not None:
            on_start(state.rules, len(state.filter.folders))
        started_once = True
        batches = watchfiles.watch(
            *state.filter.folders,
            watch_filter=state.filter,
            debounce=debounce_ms,
            step=STEP_MS,
            stop_event=stop,
            rust_timeout=IDLE_YIELD_MS,
            yield_on_timeout=True,
            raise_interrupt=True,
            force_polling=force_polling,
            recursive=False,
        )
        started = False  # the watcher is set up
        try:
            with contextlib.closing(batches):
                for changes in batches:
                    started = True
                    if changes:
                        owed = due
                        due = (due or set()) | changes
                        if state.filter.touches_folders(changes) and state.relisted():
                            break  # watch the folders listed now; the first yield runs
                        if (
                            owed is None
                            and not state.filter.files_in(changes)
                            and not state.filter.folder_modified(changes)
                        ):
                            due = None  # folders changed, not which ones are walked
                            continue
                    elif due is None:
                        if state.intact():
                            state.fill()  # no change to hand over: a slice of the full pass
                            continue
                        due = set()
                        break  # the root was replaced and no event told
                    state.run(due)
                    due = None
                else:
                    return state.runs  # stopped
        except _RootGone:
            due = due or set()
        except FileNotFoundError:
            if started:
                raise
            due = due or set()  # a folder went before the watcher was set up on it
    return state.runs


def options_of_index(store: Store, options: RunOptions) -> RunOptions:
    """`options` with the model, precision and chunking of the index `store` holds
    (`config.stored_config`), so that watching an index made by `run` with other options
    neither re-chunks nor re-encodes it; `options` as given for a new index."""
    from attnswitch.indexing.config import stored_config

    config = stored_config(store)
    if config is None:
        return options
    return options.replace(
        model=config.model,
        precision=config.precision,
        max_tokens=config.max_tokens,
        overlap=config.overlap,
        chunking=config.chunking,
        embed_headings=config.embed_headings,
    )


def _default_encoder(options: RunOptions) -> Encoder:
    """The encoder `run.run` would load for `options`."""
    from attnswitch.engines import ModelSpec
    from attnswitch.jobs.encode import load_encoder, resolve_precision

    resolved, _ = resolve_precision(options.encode)
    return load_encoder(resolved, ModelSpec.load(options.encode.model))
