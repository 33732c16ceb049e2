"""A run's read phase: list the root, read the files that changed, chunk them, and store
what needs no encoder; queue the rest for the encode phase (`encode_phase`).

- `list_root`: the root's files by the run's `DocumentSource` (read here: `run.LocalSource`;
  on a Ray cluster: `ray_run.RaySource`), less the store's own files;
- `ReadPhase.prepare`: delete what left the root and plan what to read
  (`IndexWriter.plan`: a file stored at its size, mtime and config is not read, but who may
  read it is looked at again, `IndexWriter.refresh_access`: a chmod, chown or ACL change
  of it or a folder above it is recorded, counted as `permissions_changed`); with a
  source whose files are at hand, files that may be copies are hashed first
  (`reuse_identical`: unchanged, moved or copied without being read);
- `ReadPhase.admit`: classify a read document against the store (skipped, unchanged, new
  or changed) and chunk a new or changed one: with the quick pass it is written at once
  with quick vectors; else its chunks whose vector the store holds keep it, and the others
  are queued (`run_state.EncodeQueue`);
- `ReadPhase.copy_deferred`: the second files with the content of one read in this round
  are copied from it once it is written.

Every document it finishes goes through `record.RunRecord` (the store, counts, progress).
"""

from __future__ import annotations

import dataclasses
from collections import Counter, deque
from collections.abc import Callable, Generator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from attnswitch.documents import permissions
from attnswitch.documents.chunk import Chunk, chunk_document
from attnswitch.documents.ingest import Document, SourceFile, digest
from attnswitch.documents.readers.skip import Skip
from attnswitch.documents.rules import meta_key as rules_meta_key
from attnswitch.documents.rules import rules_for
from attnswitch.indexing.config import META_KEY, IndexConfig, stored_config
from attnswitch.indexing.records import StoredDocument, SyncPlan, indexed_sha
from attnswitch.indexing.store import is_own
from attnswitch.jobs.options import ReadOptions
from attnswitch.jobs.phases import Phases
from attnswitch.jobs.record import RunRecord
from attnswitch.jobs.run_state import EncodeQueue, RunTarget

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from attnswitch.jobs.passes import QuickPass

# A document read, with its chunks when the source cut them (None: cut by the read phase).
Read = tuple[Document, list[Chunk] | None]


@dataclass(frozen=True)
class ReadRequest:
    """What a source is asked to read: `entries` (with `read`'s options), for a run under
    `config` whose store holds the rows `stored` of them (None: not stored). A source that
    reads as the run waits times each wait as `phases`' "read" and reports each document
    taken to `on_read`. The source takes each entry off the front of `entries` as it sends
    it to be read, so a run holds the entries of the files still to read only: a listing
    takes about 680 bytes a file in memory (170 MB for the 250,000 files of 10 GB of a
    shared drive; docs/results/drive.md, "1 GB with the listing let go and fresh reading
    workers")."""

    entries: deque[SourceFile]
    read: ReadOptions
    config: IndexConfig
    stored: Mapping[str, StoredDocument | None]
    phases: Phases
    on_read: Callable[[Document], None]


class DocumentSource(Protocol):
    """Where a run's files are listed and read (see the module doc)."""

    @property
    def files_at_hand(self) -> bool:
        """Whether this process reads the files: then files that may be copies of indexed
        ones are hashed before reading (`ReadPhase.reuse_identical`)."""

    def listing(self, target: RunTarget, read: ReadOptions) -> list[SourceFile]:
        """The files of `target.root` its `rules` keep (`ingest.scan`)."""

    def documents(self, request: ReadRequest) -> Generator[Read, None, None]:
        """The documents of `request.entries` (taken off it as they are sent to be read), in
        any order; closing the generator stops the readers."""


def list_root(source: DocumentSource, target: RunTarget, read: ReadOptions) -> list[SourceFile]:
    """The files of the root (`target.rules` set to the root's rules: `read.rules`, else
    those stored for it), less the store's own files and the folders that hold them (a
    store inside the root is not the user's: not indexed, not listed as skipped)."""
    target.rules = rules_for(target.store, target.key, read.rules)
    own = target.store.own_files()
    holders = {parent for path in own for parent in path.parents}
    return [
        e for e in source.listing(target, read) if not is_own(e.path, own) and e.path not in holders
    ]


def job_bytes(target: RunTarget, listed: list[SourceFile]) -> int:
    """The bytes of the files of `listed` a run has to read: less the files stored at their
    size and mtime under the index's own config (all of them in a new index)."""
    stored = stored_config(target.store)
    entries = (
        listed
        if stored is None
        else target.writer.plan(target.root, listed, stored.fingerprint).to_read
    )
    return sum(max(e.size, 0) for e in entries)


class ReadPhase:
    """The read phase of one run (see the module doc): finishes documents through `record`,
    queues the rest on `queue`, reads by `source` with `read`'s options, chunks with
    `tokenizer`; `quick`: the quick pass's writer (every run that encodes here, and
    `--quick`; it gives a changed document's chunks the full vectors the store holds for
    their text, `passes.QuickPass.write`), else None (Ray: documents go to the encoder
    whole)."""

    def __init__(
        self,
        record: RunRecord,
        queue: EncodeQueue,
        source: DocumentSource,
        read: ReadOptions,
        tokenizer: Tokenizer,
        quick: QuickPass | None,
    ) -> None:
        self.record, self.queue, self.source, self.read = record, queue, source, read
        self.tokenizer, self.quick = tokenizer, quick
        self.target, self.counts = record.target, record.counts
        self.config = record.resolution.config
        # the store rows of the files to read, once planned
        self.stored: dict[str, StoredDocument | None] = {}
        # files whose content another file of this run has: (entry, its hashed document,
        # new?), copied once that one is written (`copy_deferred`)
        self.deferred: list[tuple[SourceFile, Document, bool]] = []

    def prepare(self, listed: list[SourceFile] | None) -> deque[SourceFile]:
        """List the root (`listed`: listed already by `list_root`), delete what left it,
        record the config and rules, and return the files to read: those the writer's plan
        finds not fresh (`IndexWriter.plan`), less the copies found by hashing (a deque for
        `request`, which the source drains)."""
        target = self.target
        entries = listed if listed is not None else list_root(self.source, target, self.read)
        target.store.set_meta(META_KEY, self.config.to_json())
        target.store.set_meta(rules_meta_key(target.key), target.rules.to_json())
        plan = target.writer.plan(target.root, entries, self.config.fingerprint)
        self.stored = plan.stored
        to_read, deleted = (
            self.reuse_identical(plan)
            if self.source.files_at_hand
            else (list(plan.to_read), plan.deleted)
        )
        if deleted:
            self.counts.deleted = target.writer.remove(plan.root, deleted)
        self.counts.unchanged += len(plan.fresh)
        if plan.fresh and self.source.files_at_hand:
            accesses = permissions.of_many(e.path for e in plan.fresh)
            self.counts.permissions_changed += target.writer.refresh_access(
                plan.root, {e.source: a for e, a in zip(plan.fresh, accesses, strict=True)}
            )
        p = self.record.progress
        p.files_total = len(entries)
        p.files_done = p.files_read = len(entries) - len(to_read) - len(self.deferred)
        p.bytes_total = sum(max(e.size, 0) for e in to_read)
        p.stage = "reading"
        self.record.on_progress(p)
        return deque(to_read)

    def request(self, entries: deque[SourceFile]) -> ReadRequest:
        """The source's request to read `entries` (after `prepare`; the source drains it)."""
        return ReadRequest(
            entries, self.read, self.config, self.stored, self.record.phases, self.was_read
        )

    def was_read(self, doc: Document) -> None:
        """Count `doc` as read (given to the run by a reader)."""
        p = self.record.progress
        p.files_read += 1
        p.bytes_read += max(doc.size, 0)
        self.record.on_progress(p)

    def reuse_identical(self, plan: SyncPlan) -> tuple[list[SourceFile], tuple[str, ...]]:
        """Hash the files to read that may be copies (of the same size as an indexed
        document, or as another file to read) and give up reading those whose content the
        store holds already: a file with its own stored hash is unchanged (touched), one
        with the hash of a document that left the root was moved (`IndexWriter.move_document`),
        one with the hash of another indexed document is a copy (`IndexWriter.copy_document`);
        a second file with the hash of one still to read waits in `deferred` until that
        one is written. Returns the files still to read and the sources deleted."""
        writer, fp, counts = self.target.writer, self.config.fingerprint, self.counts
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
                    pool.map(lambda e: digest(e, max_bytes=self.read.max_bytes), maybe),
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
                entry.root,
                entry.source,
                entry.path,
                size,
                mtime_ns,
                sha,
                kind=None,
                text=None,
                access=permissions.of_file(entry.path),
            )
            row = plan.stored.get(entry.source)
            if indexed_sha(row, fp) == sha:
                writer.touch(doc)
                counts.unchanged += 1
                continue
            copies = writer.copies_of(sha, fp)
            moved = next((c for c in copies if c.root == plan.root and c.source in gone), None)
            if row is None and moved is not None:
                writer.move_document(plan.root, moved.source, doc)
                del gone[moved.source]
                counts.moved += 1
            elif copies:
                writer.copy_document(copies[0], doc, run_id=self.target.run_id)
                counts.add_kind("new" if row is None else "changed")
                counts.copied += 1
            elif sha in first:
                self.deferred.append((entry, doc, row is None))
            else:
                first.add(sha)
                to_read.append(entry)
        return to_read, tuple(gone)

    def copy_deferred(self) -> list[SourceFile]:
        """Copy each deferred file (`reuse_identical`) from the document with its content
        indexed since; those whose original was not indexed (skipped, failed) are returned,
        to be read."""
        deferred, self.deferred = self.deferred, []
        writer, fp, record = self.target.writer, self.config.fingerprint, self.record
        left = []
        for entry, doc, new in deferred:
            with record.phases.part("store"):
                copies = [] if doc.sha256 is None else writer.copies_of(doc.sha256, fp)
                if copies:
                    writer.copy_document(copies[0], doc, run_id=self.target.run_id)
            if not copies:
                left.append(entry)
                continue
            self.counts.add_kind("new" if new else "changed")
            self.counts.copied += 1
            record.progress.files_read += 1
            record.progress.bytes_read += max(doc.size, 0)
            record.advance(doc)
        return left

    def admit(self, doc: Document, chunks: list[Chunk] | None = None) -> None:
        """Classify a read document against the store: record a skip, touch an unchanged
        one, or chunk a new or changed one (`chunks`: cut by the source already, None: cut
        here) and write it with quick vectors (the quick pass), or queue the chunks that
        need encoding."""
        record, config = self.record, self.config
        self.stored.pop(doc.source, None)  # what sources are asked for is read now
        with record.phases.part("store"):
            kind = self.target.writer.classify(doc, config.fingerprint)
        if kind == "skipped":
            record.skip(doc)
            return
        if kind == "unchanged":
            with record.phases.part("store"):
                self.target.writer.touch(doc)
            self.counts.unchanged += 1
            record.advance(doc)
            return
        if chunks is None:
            with record.phases.part("chunk"):
                chunks = chunk_document(
                    doc.text or "",
                    doc.blocks,
                    self.tokenizer,
                    chunking=config.chunking,
                    max_tokens=config.max_tokens,
                    overlap=config.overlap,
                    embed_headings=config.embed_headings,
                )
        if not chunks:
            record.skip(
                dataclasses.replace(
                    doc, text=None, skip=Skip.EMPTY, detail="no model tokens in the text"
                )
            )
            return
        self.counts.add_kind(kind)
        if self.quick is not None:
            with record.phases.part("store"):
                kept = self.quick.write(
                    doc,
                    chunks,
                    config=config.fingerprint,
                    run_id=self.target.run_id,
                    vector_fingerprint=config.vector_fingerprint,
                )
            self.counts.quick += len(chunks) - kept
            self.counts.reused += kept
            record.stored(doc, chunks)
            return
        self.queue.add(doc, chunks, kind)


__all__ = ["DocumentSource", "Read", "ReadPhase", "ReadRequest", "job_bytes", "list_root"]
