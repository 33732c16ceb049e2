"""Search: the top-k chunks for a query, by meaning (dense), by words (keyword) or both
(hybrid, the default), with source and text.

- dense: cosine similarity of the query's vector to the chunks' (the store keeps vectors
  L2-normalised, so a dot product, in [-1, 1]); the store answers exactly or from its ANN
  index (`Store.dense`).
- keyword: the store's full-text ranking of the query's words (SQLite FTS5 BM25,
  PostgreSQL `ts_rank_cd`), any word matching; exact terms such as error codes, function
  names and config keys are found even where the embedding misses them.
- hybrid: both lists fused by reciprocal rank fusion (Cormack et al., SIGIR 2009): a
  chunk's score is the sum over the lists it is in of 1 / (RRF_K + rank), rank from 1.
  Each list is `max(k, CANDIDATES)` long.

The keyword list (keyword and hybrid) is ranked on the query's words less the opening of
a question ("how do I", "what is", "can I", `keyword_text`): those words say how the
query is asked, not what it is about, and matched they rank pages that ask many
questions (an FAQ) over the answer. Only a leading run of at least two such words goes,
so "WHERE clause" or "How WAL works" keep every word; the dense vector is of the whole
query.

Ties are broken by chunk id, so results are deterministic. Encoding the query text is the
engine's job; this takes its vector (dense, hybrid) and its text (keyword, hybrid).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from attnswitch.pipeline.ann import exact_top_k
from attnswitch.pipeline.store import Store, StoreInputError, check_ef_search

MODES = ("hybrid", "dense", "keyword")
# Words that open a question: interrogatives, auxiliaries and the asker ("how do I ...").
QUESTION_OPENING = frozenset(
    "how what why when where which who whom whose can could should would will shall may "
    "might must do does did is are was were am i we you one to".split())
RRF_K = 60  # the constant of the RRF paper: damps the weight of the very first ranks
CANDIDATES = 50


@dataclass(frozen=True)
class Hit:
    """One result. `score`: cosine similarity (dense), the store's keyword rank score
    (keyword; higher is better) or the RRF score (hybrid)."""

    score: float
    source: str
    text: str
    root: str
    chunk_id: int
    ordinal: int
    start: int
    end: int


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise StoreInputError("mode", f"one of {', '.join(MODES)}", repr(mode))
    return mode


def check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise StoreInputError("k", "an int >= 1", repr(k))
    return int(k)


def search(store: Store, query: Any = None, k: int = 5, *, text: str | None = None,
           mode: str | None = None, ef: int | None = None) -> list[Hit]:
    """The `k` best chunks of `store`, best first. `query` is the query's vector `[dim]`
    (dense and hybrid), `text` its text (keyword and hybrid); `mode` None is hybrid when
    `text` is given, else dense. `ef`: the ANN search beam of a large store (wider finds
    more of the exact nearest chunks, slower; default the store's `ef_search`)."""
    k = check_k(k)
    if ef is not None:  # also where no dense search will use it (mode "keyword")
        check_ef_search(ef)
    mode = check_mode(mode if mode is not None else "hybrid" if text is not None else "dense")
    if mode != "keyword" and query is None:
        raise StoreInputError("query", f"the query's vector for mode {mode!r}", None)
    if mode != "dense" and (not isinstance(text, str) or not text.strip()):
        raise StoreInputError("text", f"the query's text for mode {mode!r}", repr(text))
    n = k if mode != "hybrid" else max(k, CANDIDATES)
    lists = []
    if mode != "keyword":
        if np.ndim(query) != 1:
            raise StoreInputError("query", "one vector [dim]", f"shape {list(np.shape(query))}")
        q = normalised(np.asarray(query)[None, :], store.dim)
        lists.append(store.dense(q, n, ef)[0])
    if mode != "dense":
        lists.append(store.keyword(keyword_text(text), n))
    ranked = lists[0][:k] if len(lists) == 1 else fuse(lists, k)
    return _hits(store, [ranked])[0]


def keyword_text(text: str) -> str:
    """The words of `text` that keyword search ranks on: all of them less a leading run of
    at least two question-opening words (`QUESTION_OPENING`), when words remain after it."""
    words = text.split()
    opening = 0
    while opening < len(words) and _bare(words[opening]) in QUESTION_OPENING:
        opening += 1
    if opening < 2 or opening == len(words):
        return text
    return " ".join(words[opening:])


def _bare(word: str) -> str:
    return word.strip("¿?¡!.,;:'\"()").lower()


def fuse(lists: list[list[tuple[int, float]]], k: int) -> list[tuple[int, float]]:
    """Reciprocal rank fusion of ranked (chunk id, score) lists: the `k` best (chunk id,
    RRF score), score descending, then chunk id ascending."""
    scores: dict[int, float] = {}
    for ranked in lists:
        for rank, (cid, _) in enumerate(ranked, start=1):
            scores[cid] = scores.get(cid, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]


class VectorIndex:
    """A store's vectors loaded once (`[N, dim]` float32) for repeated exact dense
    queries: the reference the ANN index is measured against, and the search of small
    stores (`ann.exact_top_k`)."""

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
        k = check_k(k)
        q = normalised(queries, self.matrix.shape[1] if len(self) else self.store.dim)
        return _hits(self.store, exact_top_k(self.ids, self.matrix, q, k))


def _hits(store: Store, ranked: list[list[tuple[int, float]]]) -> list[list[Hit]]:
    rows = store.chunks({cid for hits in ranked for cid, _ in hits})
    return [[Hit(score, rows[cid].source, rows[cid].text, rows[cid].root, cid,
                 rows[cid].ordinal, rows[cid].start, rows[cid].end)
             for cid, score in hits if cid in rows] for hits in ranked]


def normalised(queries: Any, dim: int | None) -> np.ndarray:
    """`queries` `[Q, dim]` as float32 rows of norm 1; refuses another dimension than the
    store's, non-finite and zero vectors."""
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
