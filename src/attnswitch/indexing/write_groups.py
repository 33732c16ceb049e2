"""One document's chunks as a store writes them, checked first and made into rows a group
at a time (docs/architecture.md, "Two passes").

A long document (a changelog of 13,000 chunks) was made into rows all at once: every
chunk's row, language and vector key, and its vectors normalised and converted, beside
the document itself. `document_rows` checks what it can see whole (the vectors' shapes and
values, every chunk's token count) before a store opens its transaction, and
`DocumentRows.groups` then makes the rows, the stored full vectors and the stored quick
vectors of `WRITE_GROUP` chunks at a time, which the store writes in the same transaction:
what a document holds beyond its chunks and vectors is bounded by the group, not by its
length. A chunk that fails its checks in a later group raises `StoreInputError` inside the
transaction, which rolls back: the document's stored chunks are kept.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnswitch.indexing.records import ChunkLike
from attnswitch.indexing.store_base import (
    ChunkValues,
    checked_vectors,
    chunk_rows,
    stored_form,
    token_total,
)
from attnswitch.indexing.store_passes import checked_quick, stored_quick

# Chunks made into rows and written at a time.
WRITE_GROUP = 1024


@dataclass(frozen=True)
class RowGroup:
    """The rows (`store_base.chunk_rows`) of a document's chunks from ordinal `first` on,
    with their full and quick vectors as stored (float16 `[len(rows), dim]`, or None)."""

    first: int
    rows: list[ChunkValues]
    vectors: np.ndarray | None
    quick: np.ndarray | None


@dataclass(frozen=True)
class DocumentRows:
    """A document's `chunks`, checked whole: `vectors` their full vectors (float32
    `[n, dim]`, normalised: `checked_vectors`) and `quick` their quick vectors (float32
    `[n, quick dim]`: `checked_quick`), or None; `n_tokens` their model tokens."""

    chunks: Sequence[ChunkLike]
    vector_fingerprint: str | None
    vectors: np.ndarray | None
    quick: np.ndarray | None
    n_tokens: int

    def groups(self) -> Iterator[RowGroup]:
        """The rows and stored vectors, `WRITE_GROUP` chunks at a time, in order."""
        for first in range(0, len(self.chunks), WRITE_GROUP):
            end = first + WRITE_GROUP
            yield RowGroup(
                first,
                chunk_rows(self.chunks[first:end], self.vector_fingerprint, first=first),
                None if self.vectors is None else stored_form(self.vectors[first:end]),
                None if self.quick is None else stored_quick(self.quick[first:end]),
            )


def document_rows(
    chunks: Sequence[ChunkLike],
    vectors: Any,
    quick: Any,
    quick_dim: int | None,
    vector_fingerprint: str | None,
) -> DocumentRows:
    """`write_document`'s chunks, `vectors` (full, `[n, dim]` or None) and `quick` (`[n,
    quick_dim]` or None; `quick_dim` None: any), checked (`StoreInputError` naming what is
    wrong); their rows are made by `DocumentRows.groups`."""
    n_tokens = token_total(chunks)
    return DocumentRows(
        chunks,
        vector_fingerprint,
        None if vectors is None else checked_vectors(vectors, len(chunks)),
        checked_quick(quick, len(chunks), quick_dim),
        n_tokens,
    )


__all__ = ["WRITE_GROUP", "DocumentRows", "RowGroup", "document_rows"]
