"""Read files in a pool of worker processes, as fast as the encoder takes them.

`read_in_pool(entries, read, ...)` yields one `Document` per entry (`ingest.load` with the
run's `options.ReadOptions`, `read.load_kwargs()`: read, hash,
extract, OCR), each read in one of `workers` processes, in the order they finish: a slow
file (a long scanned PDF under OCR) holds up only itself. Entries given as a deque are
taken off it as they are sent to a worker (`queue_of`): the caller holds no entry of a
file once it is read. Extraction in a process of its
own runs beside the encoder, where a thread would hold the GIL through the pure-Python
readers (python-docx, pypdf, trafilatura, openpyxl).

Bounds: at most `depth` files are in flight (submitted and not yet taken by the consumer),
and their sizes on disk add up to at most `bytes_in_flight` (one file is always admitted;
`max_bytes` bounds each file, as in `ingest.load`). Files not yet submitted when the
consumer stops are never read. A file read and not yet taken is held in the consumer's
process, extracted: a compressed file (gzip, the office formats' zip) holds several times
its size on disk, which the bytes bound does not see.

The pool starts on the first file (none for an empty list: a re-run over unchanged files
starts no process). Workers are started by the "spawn" method, a fresh interpreter each:
never forked from this process, whose engine threads (JAX, torch, OpenVINO) would not
survive a fork ("forkserver" would do, but its server keeps workers alive after a
`kill -9` of the run). As with any spawned process, a script that reads through the pool
must guard its entry point (`if __name__ == "__main__":`). A worker ignores Ctrl-C (the
consumer's process stops it) and dies with its parent (Linux `PR_SET_PDEATHSIG`, set
for the thread that submits the files: the consumer's, which closes the pool before it
ends), so a killed run leaves no reader behind; the programs a reader starts (antiword,
Tesseract...) die with their worker in turn (`readers.helper_process`), whether the run
is killed or the worker ends at its deadline.

Failures never stop the stream:

- a worker that dies while reading (a crash in a C library, an out-of-memory kill) breaks
  the pool, failing every file in flight; the pool is replaced and, when more than one file
  was in flight, each is read again alone, so the file that kills its worker alone is the
  one skipped ("extraction crashed: the worker died of SIGSEGV"); the others are read.
  A death the executor learns of before the next submit makes that submit refuse: the
  file goes back to wait, and the files in flight fail as above (when none was, an idle
  worker died: the pool is replaced and nothing is lost);
- a file whose extraction takes more than `read.read_timeout_s` is stopped there: the worker's
  `SIGALRM` (default action, so it fires even while a C library holds the GIL) ends it,
  and the file is skipped ("extraction timed out: more than 600 s"). Each worker tells
  the pool which file it starts, so the file whose deadline ended its worker is known
  and never read a second time; the other files in flight, failed by the break, are
  read again as before (not alone: they did nothing);
- any other error coming back from a worker (a result that cannot be sent back) is a skip
  with the error's one line.

What a library logs (WARNING and above) or warns in a worker comes back with the file's
document and is logged again here, in the consumer's process, in order: a command's
library log (`observe.liblog`) gets it as it would from a reader in its own process.

A worker is replaced by a fresh one after `FILES_PER_WORKER` files, so what the readers'
libraries cache and what their allocations leave behind cannot grow with the number of
files (the drive's 1 GB against its 50 MB: docs/results/drive.md, "1 GB with the listing
let go and fresh reading workers"); a fresh worker costs about a second of CPU (its
imports).

On exit (the consumer done, an exception, Ctrl-C) the workers still busy are killed, so
stopping a run never waits for an OCR to finish.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import multiprocessing.queues
import os
import pickle
import queue
import signal
import warnings
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from logging.handlers import QueueHandler
from multiprocessing.process import BaseProcess
from typing import Any

from attnswitch.documents.ingest import Document, SourceFile, load
from attnswitch.documents.readers.parent_death import die_with_parent
from attnswitch.documents.readers.skip import Skip
from attnswitch.jobs.heap import limit_arenas, trim_heap
from attnswitch.jobs.options import ReadOptions

# The sizes on disk of the files in flight add up to at most this (one file always goes).
DEFAULT_BYTES_IN_FLIGHT = 64 * 2**20
# Files a worker reads before a fresh one replaces it (see the module): about what a worker
# reads over a 50 MB drive, for about 1% more CPU than workers that live all the run.
FILES_PER_WORKER = 500
_POLL_S = 0.25

Loader = Callable[..., Document]


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def default_read_workers(cpus: int | None = None, *, beside_encoder: bool = True) -> int:
    """Worker processes for `cpus` usable CPUs (default: this process's): half of them,
    at least 1 and at most 8 -- the encoder uses the other half (measured:
    docs/results/read_workers.md); with no encoder beside them (the quick pass,
    `jobs/passes.py`: the run's own process only chunks, encodes with the static model and
    stores), all of them, at most 8."""
    cpus = usable_cpus() if cpus is None else cpus
    return max(1, min(8, cpus // 2 if beside_encoder else cpus))


def ocr_pages_per_worker(workers: int, cpus: int | None = None) -> int:
    """Scanned pages one of `workers` workers recognises at once (`ocr_workers`): the
    `cpus` (default: this process's) shared among them, at least 1. Each page is a
    Tesseract process of about 60 MB with its rendered image: one per CPU per worker
    would run `workers` times as many as there are CPUs, for no more speed."""
    cpus = usable_cpus() if cpus is None else cpus
    return max(1, cpus // max(1, workers))


def queue_of(entries: Iterable[SourceFile]) -> deque[SourceFile]:
    """`entries` as the queue a reader drains: a deque is taken as it is (emptied as its
    files are read), anything else copied into one."""
    return entries if isinstance(entries, deque) else deque(entries)


def read_in_pool(
    entries: Iterable[SourceFile],
    read: ReadOptions = ReadOptions(),
    *,
    workers: int,
    depth: int | None = None,
    bytes_in_flight: int = DEFAULT_BYTES_IN_FLIGHT,
    load_file: Loader = load,
) -> Generator[Document, None, None]:
    """`load` each entry in `workers` processes, with `read.load_kwargs()`, each within
    `read.read_timeout_s`; yield the documents as they finish (see the module; a deque of
    entries is drained, `queue_of`). depth:
    files in flight (default: twice the workers, at least 8). `load_file`: the function a
    worker calls, `ingest.load` or one with its signature (a module-level function, so it
    pickles by name). `read.read_workers` is the caller's to turn into `workers`; each
    recognises `ocr_pages_per_worker(workers)` scanned pages at once."""
    if workers < 1:
        raise ValueError(f"workers: expected >= 1, got {workers}")
    timeout_s = read.read_timeout_s
    depth = depth or max(8, 2 * workers)
    todo = queue_of(entries)
    suspects: deque[SourceFile] = deque()  # in flight when a worker died: read alone
    in_flight: dict[Future[_Read], SourceFile] = {}
    pool = _Pool(
        min(workers, len(todo)) or 1,
        load_file,
        timeout_s,
        {**read.load_kwargs(), "ocr_workers": ocr_pages_per_worker(workers)},
    )
    try:
        while todo or suspects or in_flight:
            if suspects:
                if not in_flight:
                    pool.put_in_flight(suspects, in_flight)
            else:
                while (
                    todo
                    and len(in_flight) < depth
                    and (
                        not in_flight
                        or _bytes(in_flight.values()) + _size(todo[0]) <= bytes_in_flight
                    )
                ):
                    if not pool.put_in_flight(todo, in_flight):
                        break  # the pool broke: the wait below fails the files in flight
            done: set[Any] = set()
            while not done:  # in short waits: a stop sent to this thread gets in (service jobs)
                done, _ = wait(in_flight, timeout=_POLL_S, return_when=FIRST_COMPLETED)
            if any(isinstance(f.exception(), BrokenProcessPool) for f in done):
                done, _ = wait(in_flight)  # the break fails every file in flight at once
            broken = []
            for future in sorted(done, key=lambda f: in_flight[f].source):
                entry = in_flight.pop(future)
                error = future.exception()
                if isinstance(error, BrokenProcessPool):
                    broken.append(entry)
                elif error is not None:
                    yield _skipped(entry, Skip.CRASHED, _one_line(error))
                else:
                    yield future.result().replay()
            if not broken:
                continue
            death = pool.replace()
            if death.timed_out in broken:  # its own deadline: the file did it, for sure
                yield _died(death.timed_out, death.exitcode, timeout_s)
                todo.extendleft(reversed([e for e in broken if e is not death.timed_out]))
            elif len(broken) == 1:  # alone in its worker: the file did it
                yield _died(broken[0], death.exitcode, timeout_s)
            else:
                suspects.extend(broken)
    finally:
        pool.close()


@dataclass(frozen=True)
class _Death:
    """How a broken pool's worker died: its exit code (negative: the signal; None when
    unknown) and, when its own deadline ended it, the file it was reading."""

    exitcode: int | None = None
    timed_out: SourceFile | None = None


class _Pool:
    """A `ProcessPoolExecutor` started on the first `submit`, replaced when broken. Each
    worker posts (its pid, the file's ticket) on `started` before it reads a file, so a
    worker's death names the file it was reading."""

    def __init__(self, workers: int, load_file: Loader, timeout_s: float, load_kw: dict[str, Any]):
        self.workers, self.load_file = workers, load_file
        self.timeout_s, self.load_kw = timeout_s, load_kw
        self.executor: ProcessPoolExecutor | None = None
        self.started: multiprocessing.queues.SimpleQueue[Any] | None = None
        self.tickets = itertools.count()
        self.waiting: dict[int, SourceFile] = {}  # ticket -> file submitted, not yet started
        self.reading: dict[int, SourceFile] = {}  # pid -> the file it started last

    def submit(self, entry: SourceFile) -> Future[_Read]:
        if self.executor is None:
            self.started = _context().SimpleQueue()
            self.executor = _Executor(
                self.workers,
                mp_context=_context(),
                initializer=_start_worker,
                initargs=(os.getpid(), self.started),
                max_tasks_per_child=FILES_PER_WORKER,
            )
        self._take_started()  # keeps the channel's pipe from filling up
        ticket = next(self.tickets)
        self.waiting[ticket] = entry
        try:
            return self.executor.submit(
                _load_with_deadline, self.load_file, entry, ticket, self.timeout_s, self.load_kw
            )
        except BrokenProcessPool:
            del self.waiting[ticket]
            raise

    def put_in_flight(
        self, waiting: deque[SourceFile], in_flight: dict[Future[_Read], SourceFile]
    ) -> bool:
        """Submit the first of `waiting` and add it to `in_flight`; False, leaving it
        first, when a worker died since the caller last waited (the executor refuses new
        work once it knows): the files in flight fail with the break, and the caller's
        wait handles them. A death with nothing in flight (an idle worker killed from
        outside) lost no file: the executor is replaced and the file submitted."""
        try:
            future = self.submit(waiting[0])
        except BrokenProcessPool:
            if in_flight:
                return False
            self.replace()
            future = self.submit(waiting[0])
        in_flight[future] = waiting.popleft()
        return True

    def replace(self) -> _Death:
        """Drop the broken executor (the next `submit` starts another); how its worker
        died."""
        executor, self.executor = self.executor, None
        if executor is None:
            return _Death()
        processes = _processes(executor)
        executor.shutdown(wait=True, cancel_futures=True)
        self._take_started()
        reading = self.reading
        self._drop_channel()
        codes = [(p.exitcode, p.pid) for p in processes if p.exitcode not in (None, 0)]
        # The executor stops the surviving workers with SIGTERM: the other code is the death.
        code, pid = next(
            (c for c in codes if c[0] != -signal.SIGTERM), codes[0] if codes else (None, None)
        )
        return _Death(
            code, reading.get(pid) if pid is not None and code == -signal.SIGALRM else None
        )

    def close(self) -> None:
        """Stop now: files in flight are dropped, busy workers killed."""
        executor, self.executor = self.executor, None
        if executor is None:
            return
        for process in _processes(executor):
            if process.is_alive():
                process.kill()
        executor.shutdown(wait=True, cancel_futures=True)
        self._drop_channel()

    def _take_started(self) -> None:
        while self.started is not None and not self.started.empty():
            pid, ticket = self.started.get()
            self.reading[pid] = self.waiting.pop(ticket)

    def _drop_channel(self) -> None:
        if self.started is not None:
            self.started.close()
        self.started = None
        self.waiting, self.reading = {}, {}


class _Executor(ProcessPoolExecutor):
    """A `ProcessPoolExecutor` that keeps all its workers. Python's own, before the fix of
    gh-115634 (3.11 to 3.13 have the bug), replaces a worker that reached
    `max_tasks_per_child` only when no token of its idle-worker count is left, and a token
    kept from an earlier task makes it spawn none: once every worker has gone, the
    executor waits forever. Here a missing worker is always spawned, as the fix does. (Its
    hook is private, as `_processes` below is; this module's tests replace workers on
    every Python they run on.)"""

    def _adjust_process_count(self) -> None:
        while len(self._processes) < self._max_workers:  # type: ignore[attr-defined]
            self._spawn_process()  # type: ignore[attr-defined]


def _processes(executor: ProcessPoolExecutor) -> list[BaseProcess]:
    # Before Python 3.14 (`kill_workers`) the executor gives no public handle on its
    # processes; its process table, there since 3.2, is the only way to stop a worker busy
    # on a file or to learn how one died.
    return list((getattr(executor, "_processes", None) or {}).values())


def _context() -> multiprocessing.context.BaseContext:
    """Spawn, never fork (see the module)."""
    return multiprocessing.get_context("spawn")


# In a worker process: where it posts the ticket of each file it starts (`_Pool`); set
# once, by `_start_worker`.
_started: multiprocessing.queues.SimpleQueue[Any] | None = None


def _start_worker(parent: int, started: multiprocessing.queues.SimpleQueue[Any]) -> None:
    """A worker's set-up: Ctrl-C is its parent's to handle; it dies with its parent (the
    process `parent`, which may have died while this one started); it posts the files it
    starts on `started`; its threads share one heap arena (`heap.limit_arenas`)."""
    global _started
    _started = started
    limit_arenas()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)


@dataclass(frozen=True)
class _Read:
    """A worker's answer: the document, and what libraries logged and warned reading it
    (log records made picklable by `QueueHandler.prepare`; warnings as the arguments of
    `warnings.showwarning`)."""

    doc: Document
    records: tuple[logging.LogRecord, ...] = ()
    warned: tuple[tuple[str, type[Warning], str, int], ...] = ()

    def replay(self) -> Document:
        """Log and warn here what the worker logged and warned; the document."""
        for record in self.records:
            logging.getLogger(record.name).handle(record)
        for message, category, filename, lineno in self.warned:
            warnings.showwarning(message, category, filename, lineno)
        return self.doc


def _load_with_deadline(
    load_file: Loader, entry: SourceFile, ticket: int, timeout_s: float, load_kw: dict[str, Any]
) -> _Read:
    """`load_file(entry, **load_kw)` in a worker, what it logs and warns kept, ended by
    SIGALRM's default action (the process dies) after `timeout_s` seconds; `ticket` is
    posted first, to say which file this worker reads. The memory the last file's
    document took is given back first (`heap.trim_heap`)."""
    trim_heap()
    if _started is not None:
        _started.put((os.getpid(), ticket))
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    keep = QueueHandler(records)
    keep.setLevel(logging.WARNING)
    warned: list[tuple[str, type[Warning], str, int]] = []
    root, showwarning = logging.getLogger(), warnings.showwarning
    root.addHandler(keep)
    warnings.showwarning = lambda message, category, filename, lineno, *_: warned.append(
        (str(message), _picklable(category), filename, lineno)
    )
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        doc = load_file(entry, **load_kw)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        warnings.showwarning = showwarning
        root.removeHandler(keep)
    kept = []
    while not records.empty():
        kept.append(records.get())
    return _Read(doc, tuple(kept), tuple(warned))


def _picklable(category: type[Warning]) -> type[Warning]:
    """`category`, or `UserWarning` when it cannot be sent back (a class not importable)."""
    try:
        pickle.dumps(category)
    except Exception:
        return UserWarning
    return category


def _died(entry: SourceFile, exitcode: int | None, timeout_s: float) -> Document:
    """The skip of a file whose worker died reading it alone (`exitcode`: how)."""
    if exitcode == -signal.SIGALRM:
        return _skipped(entry, Skip.TIMED_OUT, f"more than {timeout_s:g} s")
    if exitcode is None:
        how = "the worker process died"
    elif exitcode < 0:
        how = f"the worker died of {signal.Signals(-exitcode).name}"
        if exitcode == -signal.SIGKILL:
            how += " (killed: out of memory?)"
    else:
        how = f"the worker exited with code {exitcode}"
    return _skipped(entry, Skip.CRASHED, how)


def _skipped(entry: SourceFile, skip: Skip, detail: str) -> Document:
    return Document(
        root=entry.root,
        source=entry.source,
        path=entry.path,
        size=entry.size,
        mtime_ns=entry.mtime_ns,
        sha256=None,
        kind=None,
        text=None,
        skip=skip,
        detail=detail,
    )


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else 'no message'}"


def _size(entry: SourceFile) -> int:
    return max(entry.size, 0)


def _bytes(entries: Iterable[SourceFile]) -> int:
    return sum(_size(e) for e in entries)
