"""Run: bring a store up to date with a folder (ingest -> chunk -> encode -> store).

`run(root, store, options)` does the whole job and returns a `RunSummary`:

1. scan `root`; every stored document of `root` absent from the listing is deleted;
2. a file whose size, mtime and config match its stored row is unchanged without being read
   (as make and rsync judge: a file rewritten with the same size and mtime is not seen);
   every other file is read and hashed (`ingest.load`, a few files ahead of the encoder:
   in `read_workers` processes, taken as they finish, `read_pool.read_in_pool`; or, with
   `read_workers=0`, on one background thread in order, `read_ahead`): same hash and
   config -> unchanged,
   a skip (with its reason) -> recorded, else new or changed;
3. new and changed documents are chunked (`chunk.chunk_document`: from their blocks, or
   fixed windows, by the config's `chunking`, with the model's tokenizer); a chunk whose
   vector the store already holds for this document (same text for the encoder, same
   vector fingerprint: `IndexWriter.vectors_by_key`) keeps it, and the other chunks are
   gathered, several documents at a time, until
   `chunks_per_call` chunks are pending; they are embedded by `Encoder.encode` calls of
   that many chunks (the engine sorts each call's chunks by length and cuts token-budget
   batches), and then each document is written in its own transaction
   (`IndexWriter.write_document`: the run's writer holds the store's run lock from
   `begin_run` to `finish_run`, `indexing/writer.py`).

So a run killed at any moment, `kill -9` included, loses only the pending documents (about
`chunks_per_call` chunks, or one large document), and the next run redoes exactly those
(their stored rows still have the old hash). A re-run on unchanged files reads no file,
loads no model and encodes nothing.

The model is loaded on first need (`get_encoder`). When an encode call fails, its documents
are encoded one at a time; a document that fails on its own is recorded as skipped ("encode
failed") and retried by the next run. `MAX_FAILURES_IN_ROW` documents failing one after
another are not the documents' fault: the run stops ("failed"), keeping what it committed.

During the run a `MemoryWatchdog` samples memory after each encode call and judges once
`WATCH_WARMUP_CALLS + WATCH_MIN_CALLS` calls are done; its verdict, the attention backends
that served (from `observe.metrics.stats()`), peak memory and the cost per million tokens
(`observe.cost`) are in the summary.

The parts: `RunJob` owns the run's state (`run_state`: its resolution, progress, counts,
target and encode queue; `phases.Phases`: where the time went) and drives its two phases,
the read phase (`read_phase`: steps 1-3 up to the queue) and the encode phase
(`encode_phase`: the queue encoded and written). What differs with where the work runs is
given to it: the `read_phase.DocumentSource` (here `LocalSource`) and the
`encode_phase.Encoding` (here `encode_phase.LocalEncoding`). `ray_run.run_on_ray` gives it
Ray's (`drive` is their shared frame); this module never imports Ray.

The options are `options.RunOptions` (imported from here too): the stages read their part,
`options.read`, `options.chunk` (through the index's config) and `options.encode`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

from attnswitch.documents.ingest import Document, SourceFile, load, scan
from attnswitch.indexing.config import (
    IndexConfig,
    check_same_model,
    chunk_tokenizer,
    stored_config,
)
from attnswitch.indexing.store import Store
from attnswitch.indexing.writer import IndexWriter
from attnswitch.jobs.choose import choose
from attnswitch.jobs.encode_phase import EncodeStart, Encoding, LocalEncoding, flush
from attnswitch.jobs.heap import trim_heap
from attnswitch.jobs.options import ReadOptions, RunOptions  # RunOptions: also imported from here
from attnswitch.jobs.passes import FullPassCounts, QuickPass, full_pass
from attnswitch.jobs.phases import Phases
from attnswitch.jobs.read_phase import (
    DocumentSource,
    Read,
    ReadPhase,
    ReadRequest,
    job_bytes,
    list_root,
)
from attnswitch.jobs.read_pool import default_read_workers, queue_of, read_in_pool
from attnswitch.jobs.record import MAX_FAILURES_IN_ROW, RunRecord
from attnswitch.jobs.run_state import (
    MEASURING,
    EncodeQueue,
    Resolution,
    RunCounts,
    RunProgress,
    RunTarget,
)
from attnswitch.jobs.summary import RunSummary, summarise
from attnswitch.observe.metrics import stats

if TYPE_CHECKING:
    from attnswitch.engines.base import Encoder
    from attnswitch.jobs.run_state import Vectors

# Files read and extracted ahead of the encoder (`read_ahead`; at least this many in
# `read_in_pool`).
READ_AHEAD = 8


def read_ahead(
    entries: Iterable[SourceFile], read: ReadOptions = ReadOptions(), depth: int = READ_AHEAD
) -> Generator[Document, None, None]:
    """`load` each entry (with `read.load_kwargs()`), in order, on a background thread at
    most `depth` files ahead of the consumer: reading and extracting the next files overlaps
    with encoding (the engines release the GIL while they compute). Files not yet taken
    when the consumer stops are not read. A deque of entries is drained as they are sent
    to be read (`read_pool.queue_of`)."""
    reading = read.load_kwargs()
    todo = queue_of(entries)
    with ThreadPoolExecutor(1, thread_name_prefix="attnswitch-read") as pool:
        ahead: deque[Future[Document]] = deque(
            pool.submit(load, todo.popleft(), **reading) for _ in range(min(depth, len(todo)))
        )
        try:
            while ahead:
                doc = ahead.popleft().result()
                if todo:
                    ahead.append(pool.submit(load, todo.popleft(), **reading))
                yield doc
        finally:
            for future in ahead:
                future.cancel()


class LocalSource:
    """The `read_phase.DocumentSource` of a run in this process: the root listed by
    `ingest.scan`, the files read in `read_workers` worker processes as they finish, or in
    order on a thread when `read_workers` is 0; the run waits for each, timed as its "read"
    part. The documents come unchunked (the read phase chunks them)."""

    @property
    def files_at_hand(self) -> bool:
        return True

    def listing(self, target: RunTarget, read: ReadOptions) -> list[SourceFile]:
        return scan(
            target.root,
            include_hidden=read.include_hidden,
            root_id=target.root_id,
            rules=target.rules,
        )

    def documents(self, request: ReadRequest) -> Generator[Read, None, None]:
        with closing(self._read(request.entries, request.read)) as docs:  # stops the readers
            while True:
                with request.phases.part("read"):
                    doc = next(docs, None)
                if doc is None:
                    return
                request.on_read(doc)
                yield doc, None

    @staticmethod
    def _read(entries: deque[SourceFile], read: ReadOptions) -> Generator[Document, None, None]:
        workers = default_read_workers() if read.read_workers is None else read.read_workers
        if workers == 0:
            return read_ahead(entries, read)
        return read_in_pool(entries, read, workers=workers, depth=max(READ_AHEAD, 2 * workers))


class RunJob:
    """One run of `target`'s root into its store with `options`: the state it owns
    (`progress`, `counts`, `phases`, `queue`, and `resolution` once `resolve` ran; see
    `run_state`) and the two parts given to it, `source` (where files are listed and read)
    and `encoding` (how queued chunks are encoded). `drive` runs it."""

    def __init__(
        self,
        target: RunTarget,
        options: RunOptions,
        source: DocumentSource,
        encoding: Encoding,
        on_progress: Callable[[RunProgress], None] | None = None,
    ):
        from attnswitch.engines import ModelSpec

        self.target, self.options = target, options
        self.source, self.encoding = source, encoding
        self.on_progress: Callable[[RunProgress], None] = on_progress or (lambda p: None)
        self.progress = RunProgress()
        self.counts = RunCounts()
        self.phases = Phases()
        self.queue = EncodeQueue(options.encode.chunks_per_call)
        self.spec = ModelSpec.load(options.encode.model)
        self.tokenizer = chunk_tokenizer(self.spec)
        self.resolution: Resolution | None = None  # set by `resolve`, which `drive` calls first
        self.listed: list[SourceFile] | None = None  # the root's listing, once made

    def resolve(self) -> None:
        """Choose the engine and precision (`choose.choose`: measured or checked first when
        that is due and the job repays it), then the index config (`resolution`); the
        options' encode part becomes the concrete choice. Its seconds are the run's
        `measure` part."""
        start = time.perf_counter()
        choice = choose(self.options.encode, self._job_bytes, self._measuring, self._say)
        self.options = dataclasses.replace(self.options, encode=choice.options(self.options.encode))
        e, c = self.options.encode, self.options.chunk
        config = IndexConfig.build(
            self.spec,
            e.model,
            choice.engine,
            e.precision,
            c.max_tokens,
            c.overlap,
            self.tokenizer,
            chunking=c.chunking,
            embed_headings=c.embed_headings,
        )
        self.resolution = Resolution(
            choice.engine, choice.engine_reason, choice.precision_reason, config
        )
        self.progress.measure_s = time.perf_counter() - start
        if choice.measured:
            self.progress.stage = "scanning"
            self.on_progress(self.progress)

    @property
    def resolved(self) -> Resolution:
        """What `resolve` chose (`run: expected ...` before it ran)."""
        if self.resolution is None:
            raise RuntimeError("run: expected the engine and config resolved first, got none")
        return self.resolution

    @property
    def config(self) -> IndexConfig:
        return self.resolved.config

    def _say(self, line: str) -> None:
        self.progress.measure_note = line
        self.on_progress(self.progress)

    def _measuring(self, done: float, total: float, what: str) -> None:
        """Progress of a measurement or an engine's check, as a run stage."""
        p = self.progress
        p.stage = MEASURING if done < total else "scanning"
        p.measure_done, p.measure_total, p.measure_step = done, total, what
        self.on_progress(p)

    def _job_bytes(self) -> int:
        """The bytes of the files this run has to read (`read_phase.job_bytes`), the root
        listed once for the run."""
        self.listed = list_root(self.source, self.target, self.options.read)
        return job_bytes(self.target, self.listed)

    def execute(self) -> None:
        """The read phase, sending the queue to the encoding whenever it is full and at
        the end of each round of reading; then, where the chunks are encoded here and
        the run is not the quick pass, the full pass."""
        resolution, encoding, queue = self.resolved, self.encoding, self.queue
        record = RunRecord(
            self.target,
            resolution,
            self.counts,
            self.progress,
            self.phases,
            queue,
            self.on_progress,
        )
        encoding.begin(
            EncodeStart(
                self.spec,
                self.options.encode,
                resolution.config,
                self.target.run_id,
                self.progress,
                self.on_progress,
            )
        )
        here = encoding.encode_here
        two_passes = self.options.encode.quick or here is not None
        read = self.options.read
        if two_passes and read.read_workers is None:  # no encoder beside the readers
            read = dataclasses.replace(
                read, read_workers=default_read_workers(beside_encoder=False)
            )
        reading = ReadPhase(
            record,
            queue,
            self.source,
            read,
            self.tokenizer,
            None,
        )
        listed, self.listed = self.listed, None  # the plan holds what it needs of it
        with self.phases.part("scan"):
            to_read = reading.prepare(listed)
        del listed
        if two_passes:
            started = time.perf_counter()  # the static model: made once per model, then loaded
            reading.quick = QuickPass(self.target.writer, self.spec)
            self.progress.load_s += time.perf_counter() - started
        try:
            while to_read:
                with closing(self.source.documents(reading.request(to_read))) as docs:
                    for doc, chunks in docs:
                        reading.admit(doc, chunks)
                        trim_heap()  # what the documents before it took
                        if queue.full:
                            flush(queue, encoding, record)
                flush(queue, encoding, record)
                encoding.finish(record)
                to_read = deque(reading.copy_deferred())
        finally:
            encoding.close()
        if two_passes:
            self.progress.searchable_s = time.perf_counter() - self.progress.started
        if not self.options.encode.quick and here is not None:
            if two_passes and self.target.writer.unencoded_count():
                with self.phases.part("store"):  # the graphs searches use meanwhile
                    self.target.writer.sync()
            self._full_pass(here)
        self.progress.stage = "done"
        self.on_progress(self.progress)

    def _full_pass(self, encode: Callable[[list[str]], Vectors]) -> None:
        """Encode the chunks stored without a full vector (`passes.full_pass`)."""
        counts, progress = self.counts, self.progress

        def called(done: FullPassCounts) -> None:
            counts.filled = progress.fill_done = done.encoded + done.reused
            progress.tokens = done.tokens  # over the encoder's seconds: tokens_per_s
            progress.fill_s = time.perf_counter() - started
            self.on_progress(progress)

        writer = self.target.writer
        progress.fill_total = writer.unencoded_count()
        if progress.fill_total:
            started = time.perf_counter()
            progress.stage, progress.tokens = "encoding", 0
            self.on_progress(progress)
            done = full_pass(writer, encode, self.options.encode.chunks_per_call, called)
            progress.fill_s = time.perf_counter() - started
            counts.filled = progress.fill_done = done.encoded + done.reused
            counts.filled_encoded = done.encoded
            counts.tokens += done.tokens

    def time_parts(self, wall: float) -> dict[str, float]:
        """Where the wall time went (`Encoding.time_parts`): seconds per part and the
        rest, `other`."""
        return self.encoding.time_parts(self.phases, self.progress, wall)


def run(
    root: str | os.PathLike[str],
    store: Store,
    options: RunOptions = RunOptions(),
    *,
    get_encoder: Callable[[], Encoder] | None = None,
    on_progress: Callable[[RunProgress], None] | None = None,
    root_id: tuple[int, int] | None = None,
) -> RunSummary:
    """Index `root` into `store` (see the module doc). `get_encoder` returns the `Encoder`
    to use (default: `engines.get_engine` for the options), called once, on first need.
    `root_id`: the (device, inode) the root must have (`ingest.scan`), for a caller that
    checked the folder before.
    The run is recorded in the store's runs table, "completed", "failed" or "interrupted"
    (Ctrl-C); exceptions propagate after it is recorded."""
    started = time.perf_counter()
    job = local_job(check_root(root), store, options, get_encoder, on_progress, root_id)
    return drive(job, started)


def local_job(
    root: Path,
    store: Store,
    options: RunOptions,
    get_encoder: Callable[[], Encoder] | None = None,
    on_progress: Callable[[RunProgress], None] | None = None,
    root_id: tuple[int, int] | None = None,
) -> RunJob:
    """The `RunJob` of `run`: read and encoded in this process (`root`: checked by
    `check_root`)."""
    target = RunTarget(root, store, IndexWriter(store), root_id)
    return RunJob(target, options, LocalSource(), LocalEncoding(get_encoder), on_progress)


def check_root(root: str | os.PathLike[str]) -> Path:
    from attnswitch.documents.ingest import check_root_filesystem, check_root_name

    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"root: expected a folder, got {str(root)!r}")
    check_root_name(root.resolve())  # before the store records it
    check_root_filesystem(root)
    return root


def drive(job: RunJob, started: float) -> RunSummary:
    """Run a prepared job against its store: refuse another model's store, record the run
    in the runs table and summarise it (`started`: a perf_counter time, the start of the
    wall time)."""
    target = job.target
    job.resolve()
    calls_before = stats()  # after the resolution, whose checks make attention calls
    check_same_model(
        stored_config(target.store), job.config, target.store.dim, target.store.location
    )
    job.progress.started = started
    target.run_id = target.writer.begin_run(target.root, job.config.fingerprint)
    status = "failed"
    summary: RunSummary | None = None
    try:
        job.execute()
        status = "completed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        summary = summarise(job, status, started, calls_before)
        target.writer.finish_run(
            target.run_id, status, counts=summary.counts(), summary=summary.to_dict()
        )
    return summary


__all__ = [
    "MAX_FAILURES_IN_ROW",
    "MEASURING",
    "READ_AHEAD",
    "LocalSource",
    "RunJob",
    "RunOptions",
    "RunProgress",
    "RunSummary",
    "check_root",
    "drive",
    "local_job",
    "read_ahead",
    "run",
]
