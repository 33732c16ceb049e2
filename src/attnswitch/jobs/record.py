"""What a run records of each document it finishes (`RunRecord`): a skip (in the store and
the counts), a document written with its vectors (the store, the counts, its notes), a
document that failed to encode, and the progress after each. Both phases of a run finish
documents through it: the read phase (skips, unchanged and copied files, the quick pass)
and the encode phase (the documents an encode call settles)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from attnswitch.documents.readers.skip import Skip
from attnswitch.jobs.phases import Phases
from attnswitch.jobs.run_state import EncodeQueue, Resolution, RunCounts, RunProgress, RunTarget

if TYPE_CHECKING:
    from attnswitch.documents.chunk import Chunk
    from attnswitch.documents.ingest import Document
    from attnswitch.jobs.run_state import Vectors

# Documents failing to encode one after another point at the engine or device, not at them.
MAX_FAILURES_IN_ROW = 3


class RunRecord:
    """Finishes documents of the run into `target` under `resolution`'s config, counted in
    `counts`, `progress` reported to `on_progress` after each, the store's time timed as
    `phases`' "store"; a written document's kept vectors come from `queue`
    (`EncodeQueue.restore`). It is the `encode_phase.DocumentSink` of the encode phase."""

    def __init__(
        self,
        target: RunTarget,
        resolution: Resolution,
        counts: RunCounts,
        progress: RunProgress,
        phases: Phases,
        queue: EncodeQueue,
        on_progress: Callable[[RunProgress], None],
    ) -> None:
        self.target, self.resolution = target, resolution
        self.counts, self.progress, self.phases, self.queue = counts, progress, phases, queue
        self.on_progress = on_progress

    def advance(self, doc: Document, chunks: Sequence[Chunk] = ()) -> None:
        """Count `doc` (with `chunks`) as done, and report the progress."""
        p = self.progress
        p.files_done += 1
        p.bytes_done += max(doc.size, 0)
        p.chunks += len(chunks)
        p.tokens += sum(c.n_tokens for c in chunks)
        self.on_progress(p)

    def skip(self, doc: Document) -> None:
        """Record `doc`, a skip (`doc.skip` says why), in the store and the counts."""
        with self.phases.part("store"):
            self.target.writer.record_skip(
                doc, config=self.resolution.config.fingerprint, run_id=self.target.run_id
            )
        self.counts.skipped += 1
        self.counts.skips.append(doc)
        self.advance(doc)

    def write(self, doc: Document, chunks: list[Chunk], vectors: Vectors | None) -> None:
        """Write `doc` with the vectors of `chunks` (None: an encoder wrote it already)."""
        if vectors is not None:
            config = self.resolution.config
            with self.phases.part("store"):
                self.target.writer.write_document(
                    doc,
                    chunks,
                    vectors,
                    config=config.fingerprint,
                    run_id=self.target.run_id,
                    vector_fingerprint=config.vector_fingerprint,
                )
        self.written(doc, chunks)

    def written(self, doc: Document, chunks: list[Chunk]) -> None:
        """Account for a document whose `chunks` (those encoded) were committed."""
        c = self.counts
        c.chunks += len(chunks)
        c.tokens += sum(chunk.n_tokens for chunk in chunks)
        self.stored(doc, chunks)

    def stored(self, doc: Document, chunks: Sequence[Chunk]) -> None:
        """Account for a document committed with `chunks` (the quick pass: with quick
        vectors, encoded later): what its reading noted, and the progress."""
        c = self.counts
        c.failures_in_row = 0
        if doc.encoding_detected:
            c.notes.append(
                {"source": doc.source, "note": f"not UTF-8: decoded as {doc.encoding} (detected)"}
            )
        if doc.pages_failed:
            why = f": {'; '.join(doc.failed)}" if doc.failed else ""
            c.notes.append(
                {
                    "source": doc.source,
                    "note": f"text of {doc.pages_failed} page(s) or part(s) not read{why}",
                }
            )
        self.advance(doc, chunks)

    def reused(self, repeats: Sequence[Chunk]) -> None:
        """Count `repeats`, chunks of an encode call given the vector of another chunk of
        it with the same text, as reused, not encoded (`written` counts every chunk)."""
        c = self.counts
        c.reused += len(repeats)
        c.chunks -= len(repeats)
        c.tokens -= sum(chunk.n_tokens for chunk in repeats)

    def fail(self, doc: Document, kind: str, exc: Exception) -> None:
        """Record `doc` ("new" or "changed") as failed to encode (a skip: "encode failed");
        raise `exc` when `MAX_FAILURES_IN_ROW` failed in a row."""
        c = self.counts
        c.failures_in_row += 1
        if c.failures_in_row >= MAX_FAILURES_IN_ROW:
            raise exc
        c.add_kind(kind, -1)
        c.failed += 1
        self.skip(
            dataclasses.replace(
                doc, text=None, skip=Skip.ENCODE_FAILED, detail=f"{type(exc).__name__}: {exc}"
            )
        )


__all__ = ["MAX_FAILURES_IN_ROW", "RunRecord"]
