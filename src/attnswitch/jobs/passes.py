"""The two passes of a run (docs/architecture.md, "Two passes").

- The quick pass (`QuickPass`, `attnswitch run --quick`): each new or changed document is
  written as soon as it is chunked, with its chunks' quick vectors (the static model's,
  `engines/static_model.py`: thousands of chunks a second) and no full vector. The folder
  is searchable, by words and by meaning, at the speed it is read.
  A changed document's chunks whose full vector the store holds (same encoder text and
  vector fingerprint, this document's old chunks or another's) keep it: they are given it
  right after the document is written (`IndexWriter.fill_vectors`), not encoded again.
- The full pass (`full_pass`): the chunks stored without a full vector are encoded by the
  transformer, the most recently modified documents first, `chunks_per_call` at a time,
  each call's vectors committed in one transaction (`IndexWriter.fill_vectors`): a vector
  stored already for the same text (`vectors_by_key`) is reused, not encoded. Killed at
  any point, it loses at most the call in flight; the next run goes on where it stopped.
  Searches may fill some of the same chunks meanwhile: a fill writes only where none is.
  A call the encoder fails is tried again one text at a time; a text that fails alone is
  left without a full vector (still found by its words and quick vector), logged, and
  tried again by the next run.

A plain run (`attnswitch run`, encoding in this process) is the quick pass, then the full
pass: the folder is searchable when the first ends (`RunProgress.searchable_s`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from attnswitch.jobs.record import MAX_FAILURES_IN_ROW

if TYPE_CHECKING:
    from attnswitch.documents.chunk import Chunk
    from attnswitch.documents.ingest import Document
    from attnswitch.engines.model import ModelSpec
    from attnswitch.engines.static_model import StaticEncoder
    from attnswitch.indexing.records import Unencoded
    from attnswitch.indexing.writer import IndexWriter

log = logging.getLogger(__name__)


class QuickPass:
    """Writes documents with quick vectors only, through `writer` (which holds the run
    lock), by the static model of `spec`'s model (made on first use when the cache has
    none; `load_static`). `config`, `run_id`, `vector_fingerprint`: as `write_document`
    takes them."""

    def __init__(self, writer: IndexWriter, spec: ModelSpec, encoder: Any | None = None) -> None:
        from attnswitch.engines.static_model import load_static

        self.writer = writer
        self.static: StaticEncoder = load_static(spec, encoder)[0]
        writer.set_quick_model(self.static.fingerprint, self.static.dim)
        writer.expect_dim(spec.dim)  # the full pass's vectors, typed for while chunks are few

    def write(
        self,
        doc: Document,
        chunks: list[Chunk],
        *,
        config: str,
        run_id: int | None,
        vector_fingerprint: str,
    ) -> int:
        """Store `doc` with `chunks` and their quick vectors, in one transaction, then give
        the chunks whose full vector the store held before (`vectors_by_key`) that vector.
        How many chunks kept a stored vector."""
        from attnswitch.indexing.records import vector_key

        writer = self.writer
        keys = [vector_key(vector_fingerprint, c.encoder_text) for c in chunks]
        stored = writer.vectors_by_key(keys)
        quick = self.static.encode([c.encoder_text for c in chunks])
        doc_id = writer.write_document(
            doc,
            chunks,
            None,
            quick=quick,
            config=config,
            run_id=run_id,
            vector_fingerprint=vector_fingerprint,
        )
        if not stored:
            return 0
        kept = [u for u in writer.unencoded_of(doc_id) if u.vector_key in stored]
        if not kept:
            return 0
        return writer.fill_vectors(
            [u.id for u in kept],
            [u.vector_key for u in kept],
            np.stack([stored[u.vector_key] for u in kept if u.vector_key]),
        )


@dataclass
class FullPassCounts:
    """What a full pass did: chunks `encoded` by the transformer (`tokens` of them),
    `reused` (a vector stored for the same text), `refused` (the encoder failed on their
    text alone), and `left` without a full vector when it stopped (0 when done; chunks
    whose text changed under it, and refused ones, are left to the next); `seconds` it
    took (what a rate and an ETA are measured over)."""

    encoded: int = 0
    tokens: int = 0
    reused: int = 0
    refused: int = 0
    left: int = 0
    seconds: float = 0.0


def full_pass(
    writer: IndexWriter,
    encode: Callable[[list[str]], np.ndarray],
    chunks_per_call: int,
    on_call: Callable[[FullPassCounts], None] = lambda counts: None,
    until: Callable[[], bool] = lambda: False,
) -> FullPassCounts:
    """Fill in the full vectors of every chunk stored without one (see the module doc):
    `encode(texts)` gives their vectors `[len(texts), dim]`; `on_call(counts)` after each
    committed call. `until()`, asked after each call: stop there when True (what is left
    is counted; `watch` fills in slices between changes). `MAX_FAILURES_IN_ROW` texts
    refused one after another raise the last error: the encoder is at fault, not the
    texts."""
    counts = FullPassCounts()
    started = time.perf_counter()
    tried: set[int] = set()  # ids of calls not all written (kept small: rare)
    refused_in_row = 0
    while True:
        batch = [u for u in writer.unencoded(chunks_per_call) if u.id not in tried]
        if not batch:
            counts.left = writer.unencoded_count()
            counts.seconds = time.perf_counter() - started
            return counts
        stored = writer.vectors_by_key([u.vector_key for u in batch if u.vector_key])
        reuse = [u for u in batch if u.vector_key in stored]
        fresh = [u for u in batch if u.vector_key not in stored]
        written = 0
        if reuse:
            written = writer.fill_vectors(
                [u.id for u in reuse],
                [u.vector_key for u in reuse],
                np.stack([stored[u.vector_key] for u in reuse if u.vector_key]),
            )
            counts.reused += written
        for part, vectors in _encoded_parts(encode, fresh):
            if isinstance(vectors, Exception):
                counts.refused += len(part)
                refused_in_row += 1
                if refused_in_row >= MAX_FAILURES_IN_ROW:  # the encoder's fault, not the texts'
                    raise vectors
                continue
            refused_in_row = 0
            encoded = writer.fill_vectors(
                [u.id for u in part], [u.vector_key for u in part], vectors
            )
            distinct = min(encoded, len({u.encoder_text for u in part}))
            counts.encoded += distinct  # a text repeated in the call: encoded once, reused
            counts.reused += encoded - distinct
            counts.tokens += sum(u.n_tokens for u in part)
            written += encoded
        if written < len(batch):  # re-chunked meanwhile, or refused: not asked for again
            tried.update(u.id for u in batch)
        counts.seconds = time.perf_counter() - started
        on_call(counts)
        if until():
            counts.left = writer.unencoded_count()
            counts.seconds = time.perf_counter() - started
            return counts


def _encoded_parts(
    encode: Callable[[list[str]], np.ndarray], chunks: list[Unencoded]
) -> list[tuple[list[Unencoded], np.ndarray | Exception]]:
    """`chunks` with their vectors, each distinct encoder text encoded once: all in one
    call, or, when that call fails, one call per distinct text, a text the encoder fails
    on alone given its error (logged)."""
    groups: dict[str, list[Unencoded]] = {}
    for u in chunks:
        groups.setdefault(u.encoder_text, []).append(u)
    if not groups:
        return []
    try:
        vectors = np.asarray(encode(list(groups)), np.float32)
    except Exception as exc:
        if len(groups) == 1:
            log.warning(
                "full pass: the encoder failed on a chunk of %d tokens (%s: %s); it keeps "
                "its words and quick vector, and the next run tries it again",
                chunks[0].n_tokens,
                type(exc).__name__,
                exc,
            )
            return [(chunks, exc)]
        log.warning(
            "full pass: an encode call of %d texts failed (%s: %s); trying them one at a time",
            len(groups),
            type(exc).__name__,
            exc,
        )
        return [part for one in groups.values() for part in _encoded_parts(encode, one)]
    parts = list(groups.values())
    ordered = [u for part in parts for u in part]
    return [(ordered, np.repeat(vectors, [len(part) for part in parts], axis=0))]


__all__ = ["FullPassCounts", "QuickPass", "full_pass"]
