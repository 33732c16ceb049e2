"""IndexWriter: the one writer of an index at a time, as Lucene's and Tantivy's split an
index into a writer (one at a time: it owns the writes, deletes and commits) and searchers.

    with IndexWriter(store) as writer:          # takes the store's run lock
        plan = writer.plan(root, scan(root), config)
        writer.remove(plan.root, plan.deleted)
        ...
        writer.write_document(doc, chunks, vectors, config=config)

A writer wraps a store (`store.StoreWriting`, its primitives) and owns:

- planning (`plan`, `classify`, `is_fresh`): which files of a listing are new, changed,
  unchanged, skipped or deleted, by `records.is_fresh_row` and `records.indexed_sha`. The
  stored rows are looked up in bulk, one statement per `PLAN_BATCH` listed files plus
  one for the root's stored sources (tests/indexing/test_plan_queries.py counts them).
  Planning only reads: it needs no lock (a run sizes its job before it takes it);
- duplicate detection (`indexed_sizes`, `copies_of`, `copy_document`, `move_document`:
  a file whose bytes are indexed already is copied or moved, not read; `vectors_by_key`:
  a chunk whose encoder text is stored already keeps its vector);
- the run lock: one writer per store at a time, in this process or any other. Entering
  the writer (`with`, `lock`) or beginning a run (`begin_run`) takes it, waiting up to
  `wait_s` for another process's, then `StoreBusyError`; a second writer of the same
  store object is refused at once with `StoreBusyError`. Every write below raises
  `StoreInputError` ("writer: expected a writer holding the run lock ...") without it;
- runs (`begin_run`, `finish_run`: the runs table's row; a completed run brings the
  SQLite store's HNSW graph up to date, `Store.sync_index`, as does the end of a `with`
  block that wrote);
- document writes and deletes (`write_document`, `record_skip`, `touch`, `remove`,
  `forget`), each committed whole in its own transaction by the store; and the access of
  unchanged documents (`refresh_access`: who may read them, read again without reading
  the files).

A Ray run on a server store writes from several processes under one writer: the driver's
holds the lock and its encoder actors write their batches' documents through their own
connections (`jobs/ray_encoders.py`).

Quick and full vectors (docs/architecture.md, "Two passes"): a chunk may hold a quick
vector (the static model's), a full one (the transformer's), or both. The quick pass writes
documents, chunks, terms and quick vectors (`write_document(..., vectors=None,
quick=...)`, after `set_quick_model`, and tells the store the full vectors' dimension
ahead of them: `expect_dim`); the full pass reads the chunks still without a
full vector (`unencoded`, the most recently modified documents first) and fills theirs in
(`fill_vectors`), both under the run lock. The plan stays the same (a document with quick
vectors only is unchanged, not read again). A search may fill the vectors of its best
candidates meanwhile without the lock (`Searcher`; `Store.fill_vectors` writes only
where a chunk has none and still has the same text).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Self

import numpy as np

from attnswitch.documents.ingest import Document, SourceFile
from attnswitch.documents.permissions import Access
from attnswitch.indexing.records import (
    RUN_LOCK_WAIT_S,
    ChunkLike,
    StoredDocument,
    SyncPlan,
    Unencoded,
    indexed_sha,
    is_fresh_row,
    root_key,
)
from attnswitch.indexing.store import StoreWriting
from attnswitch.indexing.store_errors import StoreBusyError, StoreInputError

# How many listed files a plan looks up in one statement (`IndexWriter.plan`).
PLAN_BATCH = 1000


class IndexWriter:
    """The writer of `store` (see the module doc). `wait_s`: how long taking the run lock
    waits for another process's before `StoreBusyError`. Not thread-safe: one thread
    drives a writer, as one connection serves a store."""

    def __init__(self, store: StoreWriting, *, wait_s: float = RUN_LOCK_WAIT_S):
        self.store = store
        self.wait_s = wait_s
        self._lock: contextlib.ExitStack | None = None  # the run lock, while held
        self._run_took_lock = False  # begin_run took the lock: finish_run releases it
        self._run_id: int | None = None  # the run begun and not finished
        self._wrote = False  # a write since the lock was taken

    # -- the run lock -------------------------------------------------------------------

    @property
    def locked(self) -> bool:
        """Whether this writer holds the store's run lock."""
        return self._lock is not None

    def lock(self) -> None:
        """Take the store's run lock (see the module doc); `StoreBusyError` when this
        writer, another writer of the store or another process holds it."""
        if self._lock is not None:
            raise StoreBusyError(f"{self.store.location}: this writer holds the run lock already")
        stack = contextlib.ExitStack()
        stack.enter_context(self.store.exclusive(self.wait_s))
        self._lock, self._wrote = stack, False

    def unlock(self, *, sync: bool = True) -> None:
        """Release the run lock (nothing when not held); with `sync`, after bringing the
        store's derived index up to date when this writer wrote (`Store.sync_index`)."""
        if self._lock is None:
            return
        try:
            if sync and self._wrote:
                self.store.sync_index()
        finally:
            lock, self._lock, self._wrote = self._lock, None, False
            self._run_took_lock = False
            lock.close()

    def sync(self) -> None:
        """Bring the store's derived indexes up to date now, mid-run, when this writer has
        written since it took the lock (`Store.sync_index`): a plain run does when its quick
        pass ends, so that searches during the full pass find the quick vectors' graph
        (SQLite) or index (PostgreSQL) rather than each making its own."""
        if self._lock is not None and self._wrote:
            self.store.sync_index()

    def __enter__(self) -> Self:
        self.lock()
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.unlock(sync=kind is None)

    def check_unlocked(self, wait_s: float = 0.0) -> None:
        """Raise `StoreBusyError` when another writer holds the store's run lock for longer
        than `wait_s` seconds (takes it and lets go at once: a writer may take it right
        after)."""
        self.store.check_unlocked(wait_s)

    def _check_locked(self) -> None:
        if self._lock is None:
            raise StoreInputError(
                "writer",
                "a writer holding the run lock (`with IndexWriter(store)` or `begin_run`)",
                f"one of {self.store.location} that does not",
            )
        self._wrote = True

    # -- runs ---------------------------------------------------------------------------

    def begin_run(self, root: str | os.PathLike[str] | None = None, config: str = "") -> int:
        """Record a run of `root` under `config` (runs left "running" by a killed process
        become "interrupted") and return its id; takes the run lock first when this writer
        does not hold it, and then holds it until `finish_run`."""
        took = self._lock is None
        if took:
            self.lock()
        try:
            run_id = self.store.open_run(root, config)
        except BaseException:
            if took:
                self.unlock(sync=False)
            raise
        self._run_took_lock, self._run_id = took, run_id
        return run_id

    def finish_run(
        self,
        run_id: int,
        status: str = "completed",
        *,
        counts: dict[str, Any] | None = None,
        summary: dict[str, Any] | None = None,
    ) -> None:
        """Close run `run_id` with its status ("completed", "failed", "interrupted"), counts
        and a JSON-serialisable summary (a completed one brings the derived index up to
        date); the run lock goes when `begin_run` took it."""
        release = self._run_took_lock
        try:
            self.store.close_run(run_id, status, counts=counts, summary=summary)
            self._wrote = False  # close_run synced a completed run's writes
        finally:
            self._run_id = None
            if release:
                self.unlock(sync=False)

    @property
    def run_id(self) -> int | None:
        """The run begun and not yet finished, or None."""
        return self._run_id

    # -- planning -----------------------------------------------------------------------

    def plan(
        self, root: str | os.PathLike[str], entries: Iterable[SourceFile], config: str = ""
    ) -> SyncPlan:
        """Compare a complete listing of `root` (`ingest.scan(root)`) with the stored state
        (`SyncPlan`): the stored rows of the listed files in one statement per
        `PLAN_BATCH` files, and the root's stored sources in one more. Every entry must
        belong to `root`, each source once (`StoreInputError`)."""
        key = root_key(root)
        listed: dict[str, SourceFile] = {}
        for entry in entries:
            if entry.root != key:
                raise StoreInputError(
                    "entries", f"files under root {key!r}", f"{entry.source!r} under {entry.root!r}"
                )
            if entry.source in listed:
                raise StoreInputError("entries", "each source once", f"{entry.source!r} twice")
            listed[entry.source] = entry
        sources = list(listed)
        rows: dict[tuple[str, str], StoredDocument] = {}
        for start in range(0, len(sources), PLAN_BATCH):
            rows.update(
                self.store.lookup_many((key, s) for s in sources[start : start + PLAN_BATCH])
            )
        stored = {source: rows.get((key, source)) for source in sources}
        to_read: list[SourceFile] = []
        fresh: list[SourceFile] = []
        for source, entry in listed.items():
            (fresh if is_fresh_row(stored[source], entry, config) else to_read).append(entry)
        deleted = tuple(sorted(self.store.sources(key) - set(stored)))
        return SyncPlan(
            key,
            tuple(to_read),
            tuple(fresh),
            deleted,
            {e.source: stored[e.source] for e in to_read},
        )

    def is_fresh(self, entry: SourceFile, config: str = "") -> bool:
        """`records.is_fresh_row` of `entry`'s stored row: True when a run may skip
        reading it."""
        return is_fresh_row(self.store.lookup(entry.root, entry.source), entry, config)

    def classify(self, doc: Document, config: str = "") -> str:
        """ "skipped", "new", "changed" or "unchanged" for one ingested document."""
        if not doc.ok:
            return "skipped"
        row = self.store.lookup(doc.root, doc.source)
        if row is None:
            return "new"
        return "unchanged" if indexed_sha(row, config) == doc.sha256 else "changed"

    # -- duplicates ---------------------------------------------------------------------

    def indexed_sizes(self, config: str) -> set[int]:
        """The sizes of the documents indexed under `config`: only a file of one of these
        sizes can be a copy of one of them (what a run hashes before reading)."""
        return self.store.indexed_sizes(config)

    def copies_of(self, sha256: str, config: str) -> list[StoredDocument]:
        """The documents indexed under `config` whose content hash is `sha256`, oldest
        first."""
        return self.store.copies_of(sha256, config)

    def vectors_by_key(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """vector key -> stored vector (float32 `[dim]`) of those of `keys` that a stored
        chunk has: what a run reuses instead of encoding."""
        return self.store.vectors_by_key(keys)

    def copy_document(
        self, original: StoredDocument, doc: Document, *, run_id: int | None = None
    ) -> int:
        """Index `doc` (the bytes of `original`, at another path) with a copy of
        `original`'s chunks and vectors, in one transaction; the new document's id.
        `run_id`: default the run begun."""
        self._check_locked()
        return self.store.copy_document(original, doc, run_id=self._run(run_id))

    def move_document(self, root: str | os.PathLike[str], old_source: str, doc: Document) -> bool:
        """Give the stored document `old_source` of `root` the path of `doc` (moved or
        renamed within the root: its chunks and vectors kept); False when not stored."""
        self._check_locked()
        return self.store.move_document(root, old_source, doc)

    # -- writes and deletes -------------------------------------------------------------

    def write_document(
        self,
        doc: Document,
        chunks: Sequence[ChunkLike],
        vectors: Any,
        *,
        quick: Any = None,
        config: str = "",
        run_id: int | None = None,
        vector_fingerprint: str | None = None,
    ) -> int:
        """Replace `doc`'s stored chunks and vectors (`[len(chunks), dim]`, or None: none
        yet) with these, and their quick vectors (`quick`, or None), in one transaction
        (`Store.write_document`); the document's id. `run_id`: default the run begun."""
        self._check_locked()
        return self.store.write_document(
            doc,
            chunks,
            vectors,
            quick=quick,
            config=config,
            run_id=self._run(run_id),
            vector_fingerprint=vector_fingerprint,
        )

    def expect_dim(self, dim: int) -> None:
        """Tell the store the full vectors' dimension before any is written, so that it
        prepares for them while it holds few chunks (`Store.expect_dim`: PostgreSQL types
        its column; typing it under millions of quick-only chunks rewrote them all). The
        store's dimension is still set by its first full vector."""
        self._check_locked()
        self.store.expect_dim(dim)

    def set_quick_model(self, fingerprint: str, dim: int) -> None:
        """Name the static model whose quick vectors are written from now on (quick
        vectors of another one are dropped: `Store.set_quick_model`)."""
        self._check_locked()
        self.store.set_quick_model(fingerprint, dim)

    def unencoded(self, limit: int) -> list[Unencoded]:
        """Up to `limit` chunks still without a full vector, the most recently modified
        documents' first (`Store.unencoded`)."""
        return self.store.unencoded(limit)

    def unencoded_of(self, doc_id: int) -> list[Unencoded]:
        """The chunks of document `doc_id` without a full vector, in order."""
        return self.store.unencoded_of(doc_id)

    def unencoded_count(self) -> int:
        """How many chunks have no full vector yet (`Store.unencoded_count`)."""
        return self.store.unencoded_count()

    def fill_vectors(self, ids: Sequence[int], keys: Sequence[str | None], vectors: Any) -> int:
        """Write these chunks' full vectors where they have none and their text is still
        the one keyed (`Store.fill_vectors`), in one transaction; how many were written."""
        self._check_locked()
        return self.store.fill_vectors(ids, keys, vectors)

    def record_skip(self, doc: Document, *, config: str = "", run_id: int | None = None) -> int:
        """Record that `doc` was skipped, with its reason; any chunks it had go."""
        self._check_locked()
        return self.store.record_skip(doc, config=config, run_id=self._run(run_id))

    def touch(self, doc: Document) -> None:
        """Record the size and mtime of an unchanged document, so the next plan finds it
        fresh."""
        self._check_locked()
        self.store.touch(doc)

    def refresh_access(
        self, root: str | os.PathLike[str], accesses: Mapping[str, Access | None]
    ) -> int:
        """Record the access now of these stored documents of `root` (source -> access; a
        chmod, chown or ACL change since they were read), nothing read again
        (`Store.refresh_access`); how many changed."""
        self._check_locked()
        return self.store.refresh_access(root, accesses)

    def remove(self, root: str | os.PathLike[str], sources: Iterable[str]) -> int:
        """Delete these documents of `root` with their chunks, in one transaction; how many
        went."""
        self._check_locked()
        return self.store.remove(root, sources)

    def forget(self, root: str | os.PathLike[str], source: str = "") -> int:
        """Remove the document `source` of `root`, or every document below it when it is a
        folder ("": the whole root), with their chunks and vectors, in one transaction;
        how many documents went."""
        self._check_locked()
        return self.store.forget(root, source)

    def _run(self, run_id: int | None) -> int | None:
        return self._run_id if run_id is None else run_id
