"""Search: top-k chunks by cosine similarity to a query vector, with source and text.

The store keeps vectors L2-normalised, so the score of a chunk is the dot product of its
vector with the normalised query, in [-1, 1]. Ties are broken by chunk id, so results
are deterministic. Encoding the query text is the engine's job; this takes its vector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from attnswitch.pipeline.store import Store, StoreInputError


@dataclass(frozen=True)
class Hit:
    score: float
    source: str
    text: str
    root: str
    chunk_id: int
    ordinal: int
    start: int
    end: int


class VectorIndex:
    """The store's vectors loaded once (`[N, dim]` float32) for repeated queries."""

    def __init__(self, store: Store):
        self.store = store
        self.ids, self.matrix = store.vectors()

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: Any, k: int = 5) -> list[Hit]:
        """The `k` chunks most similar to one query vector `[dim]`, best first."""
        q = np.asarray(query, dtype=np.float32)
        if q.ndim != 1:
            raise StoreInputError("query", "one vector [dim]", f"shape {list(q.shape)}")
        return self.search_many(q[None, :], k)[0]

    def search_many(self, queries: Any, k: int = 5) -> list[list[Hit]]:
        """Top `k` for each row of `queries` `[Q, dim]`."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise StoreInputError("k", "an int >= 1", repr(k))
        q = _normalised(queries, self.matrix.shape[1] if len(self) else self.store.dim)
        if len(self) == 0:
            return [[] for _ in range(len(q))]
        scores = q @ self.matrix.T  # [Q, N]
        k = min(int(k), len(self))
        picked = []
        for row in scores:
            if k < len(row):  # the k best, plus any tied with the k-th, then sorted
                kth = row[np.argpartition(-row, k - 1)[k - 1]]
                top = np.flatnonzero(row >= kth)
            else:
                top = np.arange(len(row))
            order = np.lexsort((self.ids[top], -row[top]))[:k]  # score desc, then id asc
            picked.append([(float(row[i]), int(self.ids[i])) for i in top[order]])
        rows = self.store.chunks({cid for hits in picked for _, cid in hits})
        return [[Hit(score, rows[cid].source, rows[cid].text, rows[cid].root, cid,
                     rows[cid].ordinal, rows[cid].start, rows[cid].end)
                 for score, cid in hits] for hits in picked]


def search(store: Store, query: Any, k: int = 5) -> list[Hit]:
    """One query against `store`: `VectorIndex(store).search(query, k)`."""
    return VectorIndex(store).search(query, k)


def _normalised(queries: Any, dim: int | None) -> np.ndarray:
    try:
        q = np.asarray(queries, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise StoreInputError("query", "a numeric array", f"{type(queries).__name__} "
                              f"({exc})") from None
    if q.ndim != 2:
        raise StoreInputError("queries", "shape [Q, dim]", list(q.shape))
    if dim is not None and q.shape[1] != dim:
        raise StoreInputError("query", f"dimension {dim} (this store's)", q.shape[1])
    if not np.isfinite(q).all():
        raise StoreInputError("query", "finite values", "NaN or inf")
    norms = np.linalg.norm(q, axis=1, keepdims=True)
    if (norms == 0).any():
        raise StoreInputError("query", "a non-zero vector", "a zero vector")
    return q / norms
