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

`ray_run.run_on_ray` runs the same job on a Ray cluster through a subclass of `RunJob`
(`drive` is their shared frame); this module never imports Ray.

The options are `options.RunOptions` (imported from here too): the stages read their part,
`options.read`, `options.chunk` (through the index's config) and `options.encode`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import Counter, deque
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np

from attnswitch.documents.chunk import Chunk, chunk_document
from attnswitch.documents.ingest import (
    Document,
    SourceFile,
    digest,
    load,
    scan,
)
from attnswitch.documents.readers.skip import Skip
from attnswitch.documents.rules import FileRules, rules_for
from attnswitch.documents.rules import meta_key as rules_meta_key
from attnswitch.indexing.config import (
    META_KEY,
    IndexConfig,
    check_same_model,
    chunk_tokenizer,
    stored_config,
)
from attnswitch.indexing.store import (
    Store,
    StoredDocument,
    SyncPlan,
    indexed_sha,
    root_key,
    vector_key,
)
from attnswitch.indexing.writer import IndexWriter
from attnswitch.jobs.choose import choose
from attnswitch.jobs.encode import (
    ChunkEncoder,
    count_diff,
    device_name,
    load_encoder,
    memory_report,
    peak_device_mb,
    settle,
)
from attnswitch.jobs.options import ReadOptions, RunOptions  # RunOptions: also imported from here
from attnswitch.jobs.passes import FullPassCounts, QuickPass, full_pass
from attnswitch.jobs.phases import Phases
from attnswitch.jobs.read_pool import default_read_workers, read_in_pool
from attnswitch.jobs.run_state import MEASURING, Resolution, RunProgress
from attnswitch.jobs.summary import RunSummary, summarise
from attnswitch.observe.metrics import stats

# Documents failing to encode one after another point at the engine or device, not at them.
MAX_FAILURES_IN_ROW = 3
# Files read and extracted ahead of the encoder (`read_ahead`; at least this many in
# `read_in_pool`).
READ_AHEAD = 8


def read_ahead(
    entries: list[SourceFile], read: ReadOptions = ReadOptions(), depth: int = READ_AHEAD
) -> Generator[Document, None, None]:
    """`load` each entry (with `read.load_kwargs()`), in order, on a background thread at
    most `depth` files ahead of the consumer: reading and extracting the next files overlaps
    with encoding (the engines release the GIL while they compute). Files not yet taken
    when the consumer stops are not read."""
    reading = read.load_kwargs()
    with ThreadPoolExecutor(1, thread_name_prefix="attnswitch-read") as pool:
        ahead: deque[Future[Document]] = deque(
            pool.submit(load, e, **reading) for e in entries[:depth]
        )
        rest = iter(entries[depth:])
        try:
            while ahead:
                doc = ahead.popleft().result()
                following = next(rest, None)
                if following is not None:
                    ahead.append(pool.submit(load, following, **reading))
                yield doc
        finally:
            for future in ahead:
                future.cancel()


class RunJob:
    """The state of one run: `run()` below drives it, and `ray_run.RayRunJob` subclasses it
    to put its stages on Ray (`drive` is their shared frame)."""

    def __init__(
        self,
        root: Path,
        store: Store,
        options: RunOptions,
        get_encoder: Callable[[], Any] | None,
        on_progress: Callable[[RunProgress], None] | None,
    ):
        from attnswitch.engines import ModelSpec

        self.root, self.store, self.options = root, store, options
        self.writer = IndexWriter(store)  # the run's writes and its run lock
        self.on_progress = on_progress or (lambda p: None)
        self.progress = RunProgress()
        self.phases = Phases()
        self.spec = ModelSpec.load(options.encode.model)
        self.tokenizer = chunk_tokenizer(self.spec)
        # set by `resolve` (which `drive` calls first): the engine, precision and config
        self.resolution: Resolution | None = None
        self._listed: list[SourceFile] | None = None  # the listing, once made
        # document source -> (all its chunks, index -> stored vector it keeps)
        self.kept: dict[str, tuple[list[Chunk], dict[int, np.ndarray]]] = {}
        self._get_encoder = get_encoder or (lambda: load_encoder(self.options.encode, self.spec))
        self.encoding: ChunkEncoder | None = None
        self.counts: Counter[str] = Counter()
        self.skips: list[Document] = []
        self.notes: list[dict[str, str]] = []
        self.pending: list[tuple[Document, list[Chunk], str]] = []
        self.stored: dict[str, StoredDocument | None] = {}  # the store rows of the files to read
        # files whose content another file of this run has: (entry, its hashed document,
        # new?), copied once that one is written (`_copy_deferred`)
        self.deferred: list[tuple[SourceFile, Document, bool]] = []
        self.encode_s = 0.0  # seconds spent encoding
        self.failures_in_row = 0
        self.run_id = 0
        self.root_id: tuple[int, int] | None = None  # the root's (device, inode), if pinned
        self.rules = FileRules()  # the rules of this root, once `_prepare` has read them
        self.quick: QuickPass | None = None  # the quick pass's writer (`--quick`)

    def resolve(self) -> None:
        """Choose the engine and precision (`choose.choose`: measured or checked first when
        that is due and the job repays it), then the index config (`resolution`). Its
        seconds are the run's `measure` part."""
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

    @property
    def fp(self) -> str:
        return self.resolved.config.fingerprint

    @property
    def vector_fp(self) -> str:
        return self.resolved.config.vector_fingerprint

    @property
    def engine_name(self) -> str:
        return self.resolved.engine

    @property
    def engine_reason(self) -> str:
        return self.resolved.engine_reason

    @property
    def precision_reason(self) -> str:
        return self.resolved.precision_reason

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
        """The bytes of the files this run has to read: the listing less the files stored
        at their size and mtime under the index's own config (all of them in a new index)."""
        key = root_key(self.root)
        self.rules = rules_for(self.store, key, self.options.read.rules)
        self._listed = self._listing()
        stored = stored_config(self.store)
        entries = (
            self._listed
            if stored is None
            else self.writer.plan(self.root, self._listed, stored.fingerprint).to_read
        )
        return sum(max(e.size, 0) for e in entries)

    # -- stages -------------------------------------------------------------------------

    def execute(self) -> None:
        with self.phases.part("scan"):
            to_read = self._prepare()
        if self.options.encode.quick:
            started = time.perf_counter()  # the static model: made once per model, then loaded
            self.quick = QuickPass(self.writer, self.spec)
            self.progress.load_s += time.perf_counter() - started
        while to_read:
            with closing(self._read(to_read)) as docs:  # stops the readers on any exit
                for doc in self._waited(docs):
                    self._admit(doc)
            self._flush()
            to_read = self._copy_deferred()
        if not self.options.encode.quick and self.reuses_vectors:
            self._full_pass()
        self._done()

    def _full_pass(self) -> None:
        """Encode the chunks stored without a full vector (`passes.full_pass`)."""

        def called(counts: FullPassCounts) -> None:
            self.counts["filled"] = counts.encoded + counts.reused
            self.on_progress(self.progress)

        if self.writer.unencoded_count():
            done = full_pass(self.writer, self._encode, self.options.encode.chunks_per_call, called)
            self.counts["filled"] = done.encoded + done.reused
            self.counts["filled_encoded"] = done.encoded
            self.counts["tokens"] += done.tokens

    def _waited(self, docs: Iterator[Document]) -> Iterator[Document]:
        """`docs`, the wait for each timed as the run's `read` part and counted as read."""
        p = self.progress
        while True:
            with self.phases.part("read"):
                doc = next(docs, None)
            if doc is None:
                return
            p.files_read += 1
            p.bytes_read += max(doc.size, 0)
            self.on_progress(p)
            yield doc

    def _read(self, entries: list[SourceFile]) -> Generator[Document, None, None]:
        """The documents of `entries`: read in worker processes as they finish, or in
        order on a thread when `read_workers` is 0."""
        read = self.options.read
        workers = default_read_workers() if read.read_workers is None else read.read_workers
        if workers == 0:
            return read_ahead(entries, read)
        return read_in_pool(entries, read, workers=workers, depth=max(READ_AHEAD, 2 * workers))

    def _prepare(self) -> list[SourceFile]:
        """List the root, delete what left it, and return the files to read: those the
        writer's plan finds not fresh (`IndexWriter.plan`)."""
        store = self.store
        key = root_key(self.root)
        if self._listed is None:
            self.rules = rules_for(store, key, self.options.read.rules)
        entries = self._listed if self._listed is not None else self._listing()
        store.set_meta(META_KEY, self.config.to_json())
        store.set_meta(rules_meta_key(key), self.rules.to_json())
        plan = self.writer.plan(self.root, entries, self.fp)
        self.stored = plan.stored
        to_read, deleted = (
            self._reuse_identical(plan) if self.reuses_files else (list(plan.to_read), plan.deleted)
        )
        if deleted:
            self.counts["deleted"] = self.writer.remove(plan.root, deleted)
        self.counts["unchanged"] += len(plan.fresh)
        p = self.progress
        p.files_total = len(entries)
        p.files_done = p.files_read = len(entries) - len(to_read) - len(self.deferred)
        p.bytes_total = sum(max(e.size, 0) for e in to_read)
        p.stage = "reading"
        self.on_progress(p)
        return to_read

    reuses_files = True  # a job whose files are read elsewhere (Ray) hashes none here

    def _reuse_identical(self, plan: SyncPlan) -> tuple[list[SourceFile], tuple[str, ...]]:
        """Hash the files to read that may be copies (of the same size as an indexed
        document, or as another file to read) and give up reading those whose content the
        store holds already: a file with its own stored hash is unchanged (touched), one
        with the hash of a document that left the root was moved (`IndexWriter.move_document`),
        one with the hash of another indexed document is a copy (`IndexWriter.copy_document`);
        a second file with the hash of one still to read waits in `deferred` until that
        one is written. Returns the files still to read and the sources deleted."""
        writer, fp = self.writer, self.fp
        sizes = writer.indexed_sizes(fp)
        same_size = Counter(e.size for e in plan.to_read if e.error is None)
        maybe = [
            e
            for e in plan.to_read
            if e.error is None and e.size > 0 and (e.size in sizes or same_size[e.size] > 1)
        ]
        with ThreadPoolExecutor(
            min(4, len(maybe) or 1), thread_name_prefix="attnswitch-hash"
        ) as pool:
            hashed = dict(
                zip(
                    (e.source for e in maybe),
                    pool.map(lambda e: digest(e, max_bytes=self.options.read.max_bytes), maybe),
                )
            )
        gone = dict.fromkeys(plan.deleted)
        first: set[str] = set()
        to_read: list[SourceFile] = []
        for entry in plan.to_read:
            found = hashed.get(entry.source)
            if found is None:
                to_read.append(entry)
                continue
            sha, size, mtime_ns = found
            doc = Document(
                entry.root, entry.source, entry.path, size, mtime_ns, sha, kind=None, text=None
            )
            row = plan.stored.get(entry.source)
            if indexed_sha(row, fp) == sha:
                writer.touch(doc)
                self.counts["unchanged"] += 1
                continue
            copies = writer.copies_of(sha, fp)
            moved = next((c for c in copies if c.root == plan.root and c.source in gone), None)
            if row is None and moved is not None:
                writer.move_document(plan.root, moved.source, doc)
                del gone[moved.source]
                self.counts["moved"] += 1
            elif copies:
                writer.copy_document(copies[0], doc, run_id=self.run_id)
                self.counts["new" if row is None else "changed"] += 1
                self.counts["copied"] += 1
            elif sha in first:
                self.deferred.append((entry, doc, row is None))
            else:
                first.add(sha)
                to_read.append(entry)
        return to_read, tuple(gone)

    def _copy_deferred(self) -> list[SourceFile]:
        """Copy each deferred file (`_reuse_identical`) from the document with its content
        indexed since; those whose original was not indexed (skipped, failed) are returned,
        to be read."""
        deferred, self.deferred = self.deferred, []
        left = []
        for entry, doc, new in deferred:
            with self.phases.part("store"):
                copies = [] if doc.sha256 is None else self.writer.copies_of(doc.sha256, self.fp)
                if copies:
                    self.writer.copy_document(copies[0], doc, run_id=self.run_id)
            if not copies:
                left.append(entry)
                continue
            self.counts["new" if new else "changed"] += 1
            self.counts["copied"] += 1
            self.progress.files_read += 1
            self.progress.bytes_read += max(doc.size, 0)
            self._advance(doc)
        return left

    def _done(self) -> None:
        self.progress.stage = "done"
        self.on_progress(self.progress)

    def _listing(self) -> list[SourceFile]:
        """The files of the root, less the store's own files when they lie inside."""
        return self._not_own(
            scan(
                self.root,
                include_hidden=self.options.read.include_hidden,
                root_id=self.root_id,
                rules=self.rules,
            )
        )

    def _not_own(self, entries: list[SourceFile]) -> list[SourceFile]:
        """`entries` less the store's own files and the folders that hold them (a store
        inside the root is not the user's: not indexed, not listed as skipped)."""
        own = self.store.own_files()
        holders = {parent for path in own for parent in path.parents}
        return [e for e in entries if e.path not in own and e.path not in holders]

    def _admit(self, doc: Document, chunks: list[Chunk] | None = None) -> None:
        """Classify a loaded document against the store: record a skip, touch an unchanged
        one, or queue its chunks for encoding (`chunks`: already cut elsewhere, None: cut
        here)."""
        with self.phases.part("store"):
            kind = self.writer.classify(doc, self.fp)
        if kind == "skipped":
            self._skip(doc)
        elif kind == "unchanged":
            with self.phases.part("store"):
                self.writer.touch(doc)
            self.counts["unchanged"] += 1
            self._advance(doc)
        else:
            if chunks is None:
                with self.phases.part("chunk"):
                    chunks = chunk_document(
                        doc.text or "",
                        doc.blocks,
                        self.tokenizer,
                        chunking=self.config.chunking,
                        max_tokens=self.config.max_tokens,
                        overlap=self.config.overlap,
                        embed_headings=self.config.embed_headings,
                    )
            if not chunks:
                self._skip(
                    dataclasses.replace(
                        doc, text=None, skip=Skip.EMPTY, detail="no model tokens in the text"
                    )
                )
                return
            self.counts[kind] += 1
            if self.quick is not None:
                with self.phases.part("store"):
                    self.quick.write(
                        doc,
                        chunks,
                        config=self.fp,
                        run_id=self.run_id,
                        vector_fingerprint=self.vector_fp,
                    )
                self.counts["quick"] += len(chunks)
                self.failures_in_row = 0
                self._advance(doc, chunks)
                return
            if self.reuses_vectors:
                with self.phases.part("store"):
                    chunks = self._keep_stored(doc, chunks)
                if not chunks:  # every vector kept: nothing to encode
                    self._write(doc, [], np.zeros((0, 1), np.float32))
                    return
            self._queue(doc, chunks, kind)

    reuses_vectors = True  # a job whose encoders write their own documents does not

    def _keep_stored(self, doc: Document, chunks: list[Chunk]) -> list[Chunk]:
        """The chunks of a new or changed document that still need encoding: those whose
        vector the store holds, for any document (`IndexWriter.vectors_by_key`: same encoder
        text and vector fingerprint; quoted mail, boilerplate, an edited copy), keep it,
        remembered in `kept` until the document is written."""
        keys = [vector_key(self.vector_fp, c.encoder_text) for c in chunks]
        stored = self.writer.vectors_by_key(keys)
        if not stored:
            return chunks
        kept = {i: stored[k] for i, k in enumerate(keys) if k in stored}
        self.kept[doc.source] = (chunks, kept)
        self.counts["reused"] += len(kept)
        return [c for i, c in enumerate(chunks) if i not in kept]

    def _queue(self, doc: Document, chunks: list[Chunk], kind: str) -> None:
        self.pending.append((doc, chunks, kind))
        if sum(len(c) for _, c, _ in self.pending) >= self.options.encode.chunks_per_call:
            self._flush()

    def _skip(self, doc: Document) -> None:
        with self.phases.part("store"):
            self.writer.record_skip(doc, config=self.fp, run_id=self.run_id)
        self.counts["skipped"] += 1
        self.skips.append(doc)
        self._advance(doc)

    def _advance(self, doc: Document, chunks: Sequence[Chunk] = ()) -> None:
        p = self.progress
        p.files_done += 1
        p.bytes_done += max(doc.size, 0)
        p.chunks += len(chunks)
        p.tokens += sum(c.n_tokens for c in chunks)
        self.on_progress(p)

    def _flush(self) -> None:
        """Encode every pending chunk in one call, then write each document on its own
        (`encode.settle`: a failed call is retried one document at a time)."""
        todo, self.pending = deque([self.pending]), []
        while todo:
            group = todo.popleft()
            if not group:
                continue
            try:
                outcome: Any = self._encode_once([c for _, chunks, _ in group for c in chunks])
            except Exception as exc:
                outcome = exc
            settle(
                group,
                outcome,
                write=self._write,
                fail=self._failed,
                retry=lambda singles: todo.extendleft(reversed(singles)),
            )

    def _encode_once(self, chunks: list[Chunk]) -> np.ndarray:
        """Vectors of `chunks`, each distinct encoder text encoded once: the chunks that
        repeat one are counted as reused, not as encoded."""
        texts = [c.encoder_text for c in chunks]
        where: dict[str, int] = {}  # distinct text -> its row in the encoded call
        repeats = []
        for c in chunks:
            if c.encoder_text in where:
                repeats.append(c)
            else:
                where[c.encoder_text] = len(where)
        if not repeats:
            return self._encode(texts)
        vectors = np.asarray(self._encode(list(where)))
        self.counts["reused"] += len(repeats)
        self.counts["chunks"] -= len(repeats)  # `_written` counts every chunk it writes
        self.counts["tokens"] -= sum(c.n_tokens for c in repeats)
        return vectors[[where[t] for t in texts]]

    def _failed(self, doc: Document, kind: str, exc: Exception) -> None:
        """Record a document that failed to encode; stop when failures come in a row."""
        self.failures_in_row += 1
        if self.failures_in_row >= MAX_FAILURES_IN_ROW:
            raise exc
        self.counts[kind] -= 1
        self.counts["failed"] += 1
        self._skip(
            dataclasses.replace(
                doc, text=None, skip=Skip.ENCODE_FAILED, detail=f"{type(exc).__name__}: {exc}"
            )
        )

    def _write(self, doc: Document, chunks: list[Chunk], vectors: Any) -> None:
        """Write a document with its vectors (None: an encoder wrote it already); the
        vectors it keeps from the store (`_keep_stored`) go back in their places."""
        encoded = chunks
        if doc.source in self.kept:
            chunks, kept = self.kept.pop(doc.source)
            fresh = iter(np.asarray(vectors, np.float32))
            vectors = np.stack([kept[i] if i in kept else next(fresh) for i in range(len(chunks))])
        if vectors is not None:
            with self.phases.part("store"):
                self.writer.write_document(
                    doc,
                    chunks,
                    vectors,
                    config=self.fp,
                    run_id=self.run_id,
                    vector_fingerprint=self.vector_fp,
                )
        self._written(doc, encoded)

    def _written(self, doc: Document, chunks: list[Chunk]) -> None:
        """Account for a document whose chunks were committed (here or by a Ray actor)."""
        self.failures_in_row = 0
        self.counts["chunks"] += len(chunks)
        self.counts["tokens"] += sum(c.n_tokens for c in chunks)
        if doc.encoding_detected:
            self.notes.append(
                {"source": doc.source, "note": f"not UTF-8: decoded as {doc.encoding} (detected)"}
            )
        if doc.pages_failed:
            why = f": {'; '.join(doc.failed)}" if doc.failed else ""
            self.notes.append(
                {
                    "source": doc.source,
                    "note": f"text of {doc.pages_failed} page(s) or part(s) not read{why}",
                }
            )
        self._advance(doc, chunks)

    @property
    def encoder(self) -> Any:
        """The `Encoder` of this run (None until the model is loaded)."""
        return None if self.encoding is None else self.encoding.encoder

    def _encode(self, texts: list[str]) -> np.ndarray:
        """Vectors of `texts` (`encode.ChunkEncoder`), the model loaded on first need."""
        encoding = self.encoding if self.encoding is not None else self._load()
        self.progress.stage = "encoding"
        try:
            vectors: np.ndarray = encoding.encode(texts)
            return vectors
        finally:
            self.encode_s = self.progress.encode_s = encoding.seconds

    def _load(self) -> ChunkEncoder:
        self.progress.stage = "loading model"
        self.on_progress(self.progress)
        start = time.perf_counter()
        encoder = self._get_encoder()
        self.progress.load_s = time.perf_counter() - start
        self.encoding = ChunkEncoder(
            encoder, self.options.encode.chunks_per_call, self.options.encode.batch_tokens
        )
        return self.encoding

    def time_parts(self, wall: float) -> dict[str, float]:
        """Where the wall time went (`phases`): seconds per part and the rest, `other`."""
        return self.phases.breakdown(
            wall, measure=self.progress.measure_s, load=self.progress.load_s, encode=self.encode_s
        )

    def engine_report(self, calls_before: dict[str, Any]) -> dict[str, Any]:
        """What the summary says of the encoding side: device, attention backends and
        fallbacks (since `calls_before`), device memory, the memory watchdog's verdict, and
        `ray` (None here)."""
        calls_after = stats()
        return {
            "device": device_name(self.encoder) if self.encoder is not None else None,
            "backends": count_diff(calls_after["calls"], calls_before["calls"]),
            "fallbacks": count_diff(calls_after["fallbacks"], calls_before["fallbacks"]),
            "peak_device_mb": peak_device_mb(self.encoder),
            "memory": memory_report(None if self.encoding is None else self.encoding.watchdog),
            "ray": None,
        }


def run(
    root: str | os.PathLike[str],
    store: Store,
    options: RunOptions = RunOptions(),
    *,
    get_encoder: Callable[[], Any] | None = None,
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
    root = check_root(root)
    job = RunJob(root, store, options, get_encoder, on_progress)
    job.root_id = root_id
    return drive(job, started)


def check_root(root: str | os.PathLike[str]) -> Path:
    from attnswitch.documents.ingest import check_root_filesystem, check_root_name

    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"root: expected a folder, got {str(root)!r}")
    check_root_name(root.resolve())  # before the store records it
    check_root_filesystem(root)
    return root


def drive(job: RunJob, started: float) -> RunSummary:
    """Run a prepared job (`RunJob` or a subclass) against its store: refuse another model's
    store, record the run in the runs table and summarise it (`started`: a perf_counter
    time, the start of the wall time)."""
    store = job.store
    job.resolve()
    calls_before = stats()  # after the resolution, whose checks make attention calls
    check_same_model(stored_config(store), job.config, store.dim, store.location)
    job.progress.started = started
    job.run_id = job.writer.begin_run(job.root, job.fp)
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
        job.writer.finish_run(
            job.run_id, status, counts=summary.counts(), summary=summary.to_dict()
        )
    return summary
