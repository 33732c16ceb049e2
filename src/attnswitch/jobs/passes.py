"""The two passes of a run (docs/architecture.md, "Two passes").

- The quick pass (`QuickPass`, `attnswitch run --quick`): each new or changed document is
  written as soon as it is chunked, with its chunks' quick vectors (the static model's,
  `engines/static_model.py`: thousands of chunks a second) and no full vector. The folder
  is searchable, by words and by meaning, at the speed it is read.
- The full pass (`full_pass`): the chunks stored without a full vector are encoded by the
  transformer, the most recently modified documents first, `chunks_per_call` at a time,
  each call's vectors committed in one transaction (`IndexWriter.fill_vectors`): a vector
  stored already for the same text (`vectors_by_key`) is reused, not encoded. Killed at
  any point, it loses at most the call in flight; the next run goes on where it stopped.
  Searches may fill some of the same chunks meanwhile: a fill writes only where none is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from attnswitch.documents.chunk import Chunk
    from attnswitch.documents.ingest import Document
    from attnswitch.engines.model import ModelSpec
    from attnswitch.engines.static_model import StaticEncoder
    from attnswitch.indexing.records import Unencoded
    from attnswitch.indexing.writer import IndexWriter


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

    def write(
        self,
        doc: Document,
        chunks: list[Chunk],
        *,
        config: str,
        run_id: int | None,
        vector_fingerprint: str,
    ) -> None:
        """Store `doc` with `chunks` and their quick vectors, in one transaction."""
        quick = self.static.encode([c.encoder_text for c in chunks])
        self.writer.write_document(
            doc,
            chunks,
            None,
            quick=quick,
            config=config,
            run_id=run_id,
            vector_fingerprint=vector_fingerprint,
        )


@dataclass
class FullPassCounts:
    """What a full pass did: chunks `encoded` by the transformer (`tokens` of them),
    `reused` (a vector stored for the same text), and `left` without a full vector when
    it stopped (0 when done; chunks whose text changed under it are left to the next)."""

    encoded: int = 0
    tokens: int = 0
    reused: int = 0
    left: int = 0


def full_pass(
    writer: IndexWriter,
    encode: Callable[[list[str]], np.ndarray],
    chunks_per_call: int,
    on_call: Callable[[FullPassCounts], None] = lambda counts: None,
) -> FullPassCounts:
    """Fill in the full vectors of every chunk stored without one (see the module doc):
    `encode(texts)` gives their vectors `[len(texts), dim]`; `on_call(counts)` after each
    committed call."""
    counts = FullPassCounts()
    tried: set[int] = set()  # ids of calls not all written (kept small: rare)
    while True:
        batch = [u for u in writer.unencoded(chunks_per_call) if u.id not in tried]
        if not batch:
            counts.left = writer.unencoded_count()
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
        if fresh:
            vectors = _encode_distinct(encode, fresh)
            encoded = writer.fill_vectors(
                [u.id for u in fresh], [u.vector_key for u in fresh], vectors
            )
            counts.encoded += encoded
            counts.tokens += sum(u.n_tokens for u in fresh)
            written += encoded
        if written < len(batch):  # a chunk re-chunked meanwhile: not asked for again
            tried.update(u.id for u in batch)
        on_call(counts)


def _encode_distinct(
    encode: Callable[[list[str]], np.ndarray], chunks: list[Unencoded]
) -> np.ndarray:
    """The vectors of `chunks`, each distinct encoder text encoded once."""
    where: dict[str, int] = {}
    for u in chunks:
        where.setdefault(u.encoder_text, len(where))
    vectors = np.asarray(encode(list(where)), np.float32)
    return vectors[[where[u.encoder_text] for u in chunks]]


__all__ = ["FullPassCounts", "QuickPass", "full_pass"]
