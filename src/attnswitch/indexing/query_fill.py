"""A search that spends the transformer where people look (docs/architecture.md, "Two
passes"): before an index's full pass is done, a search by meaning encodes its own best
candidates that lack a full vector, scores them, and keeps their vectors.

`fill_candidates` takes, from the chunks without a full vector, the best of the keyword
list (hybrid mode) and of the quick list (the chunks' quick vectors against the query's,
by the index's static model), in turn, up to `budget` chunks; encodes them with the
index's own encoder (the engine that encodes its queries); and writes their vectors
(`Store.fill_vectors`: only where a chunk still has none and the same text), so that the
search's dense list, read after it, holds them, and no later search encodes them again.

The quick list's other chunks are given to the dense list too, each scored by the best
vector it has: its quick cosine mapped onto the full vectors' scale by a line fitted to
this query's candidates that now have both (least squares over at least `MIN_PAIRS`
of them, rising); without such a line, they are left out rather than mixed in at another
scale. A budget of 0 encodes nothing (and no quick chunk is scored).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from attnswitch.indexing.store_errors import StoreInputError

if TYPE_CHECKING:
    from attnswitch.engines.static_model import StaticEncoder
    from attnswitch.indexing.config import IndexConfig
    from attnswitch.indexing.query import QuerySteps
    from attnswitch.indexing.requests import SearchRequest
    from attnswitch.indexing.store import Store

log = logging.getLogger(__name__)

# Chunks a search may encode at most, by default: about 20 chunks of 200 tokens take 0.1-0.6 s
# on a 2-core CPU (docs/architecture.md, "Two passes").
QUERY_FILL = 20
# The most a setting may allow (about 1,000 chunks: 5-30 s of encoding on that CPU).
MAX_QUERY_FILL = 1000
# Candidates with both scores needed to map the quick scale onto the full one.
MIN_PAIRS = 3


def check_fill(fill: object, name: str = "fill") -> int:
    """`fill` (the chunks without a full vector one search may encode) as an int from 0
    to `MAX_QUERY_FILL`; else `StoreInputError` naming `name`."""
    if isinstance(fill, bool) or not isinstance(fill, int) or not 0 <= fill <= MAX_QUERY_FILL:
        raise StoreInputError(name, f"an integer from 0 to {MAX_QUERY_FILL}", repr(fill))
    return fill


@dataclass
class Filled:
    """What `fill_candidates` did: `extra`, the quick-only chunks as (chunk id, score on
    the full vectors' scale) for the dense list; `encoded_ids` the chunks encoded here,
    `written` of them stored (0 when the store refused the write: the vectors served this
    search only); `seconds` spent; `unencoded` chunks still without a full vector before
    it."""

    extra: list[tuple[int, float]]
    encoded_ids: list[int]
    written: int
    seconds: float
    unencoded: int

    @property
    def encoded(self) -> int:
        """How many chunks this search encoded."""
        return len(self.encoded_ids)


def fill_candidates(
    store: Store,
    request: SearchRequest,
    vector: np.ndarray,
    config: IndexConfig,
    *,
    budget: int = QUERY_FILL,
    model: str | None = None,
    steps: QuerySteps | None = None,
) -> Filled | None:
    """Encode and store this search's best candidates that lack a full vector (see the
    module doc); None when every chunk has one. With `budget` 0 nothing is encoded and
    the quick list is not read (no scores to map it by), but the count is told."""
    from attnswitch.indexing.search import keyword_text

    unencoded = store.unencoded_count()
    if unencoded == 0:
        return None
    if budget <= 0:
        return Filled([], [], 0, 0.0, unencoded)
    started = time.perf_counter()
    where = request.where
    keyword_ids: list[int] = []
    if request.mode.needs_text:
        keyword_ids = [cid for cid, _ in store.keyword(keyword_text(request.query), budget, where)]
    quick_hits: list[tuple[int, float]] = []
    static = static_encoder(store, config, model)
    if static is not None:
        query = static.encode([request.query])
        if query.any():
            quick_hits = store.quick(query, max(budget, 4 * budget), where)[0]
    pending = {u.id: u for u in store.unencoded_among(keyword_ids + [c for c, _ in quick_hits])}
    order = [c for c in _interleave(keyword_ids, [c for c, _ in quick_hits]) if c in pending]
    order = order[:budget]
    scores: dict[int, float] = {}
    written = 0
    if order:
        from attnswitch.indexing.query import index_encoder

        encoder = index_encoder(config, model, steps)
        vectors = np.asarray(encoder.encode([pending[c].encoder_text for c in order]), np.float32)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        q = np.asarray(vector, np.float32)
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        scores = dict(zip(order, (vectors @ q).tolist(), strict=True))
        written = _store(store, order, [pending[c].vector_key for c in order], vectors)
    extra = [(c, s) for c, s in scores.items()]
    extra += _calibrated(quick_hits, scores)
    return Filled(extra, order, written, time.perf_counter() - started, unencoded)


def static_encoder(store: Store, config: IndexConfig, model: str | None) -> StaticEncoder | None:
    """The static model that made the store's quick vectors (`Store.quick_model`), when
    it is the index model's; None when the store has no quick vectors or they were made by
    another static model."""
    made = store.quick_model()
    if made is None:
        return None
    from attnswitch.engines.model import ModelSpec
    from attnswitch.engines.static_model import load_static, static_fingerprint

    spec = ModelSpec.load(model if model is not None else config.model)
    if static_fingerprint(spec) != made.get("fingerprint"):
        log.warning("the index's quick vectors are another static model's: not searched")
        return None
    return load_static(spec)[0]


def _interleave(first: list[int], second: list[int]) -> list[int]:
    """The ids of both lists, best of each in turn, each once."""
    out: list[int] = []
    seen: set[int] = set()
    for pair in zip(first, second, strict=False):
        for c in pair:
            if c not in seen:
                seen.add(c)
                out.append(c)
    for c in first[len(second) :] + second[len(first) :]:
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


def _store(store: Store, ids: list[int], keys: list[str | None], vectors: np.ndarray) -> int:
    """Write the vectors; a store that refuses (read-only, busy past its timeout, the
    server gone) costs this search nothing but their keeping."""
    try:
        return store.fill_vectors(ids, keys, vectors)
    except Exception as exc:  # noqa: BLE001 - any store error: the search goes on
        log.warning("vectors a search encoded were not stored: %s", exc)
        return 0


def _calibrated(
    quick_hits: list[tuple[int, float]], full: dict[int, float]
) -> list[tuple[int, float]]:
    """The quick hits not encoded, their quick score mapped onto the full scale by the
    least-squares line through the hits that have both (see the module doc)."""
    pairs = [(s, full[c]) for c, s in quick_hits if c in full]
    rest = [(c, s) for c, s in quick_hits if c not in full]
    if not rest or len(pairs) < MIN_PAIRS:
        return []
    x, y = np.array(pairs, np.float64).T
    if np.ptp(x) <= 1e-6:
        return []
    slope, intercept = np.polyfit(x, y, 1)
    if slope <= 0:
        return []
    return [(c, float(slope * s + intercept)) for c, s in rest]


__all__ = [
    "MAX_QUERY_FILL",
    "MIN_PAIRS",
    "QUERY_FILL",
    "Filled",
    "check_fill",
    "fill_candidates",
    "static_encoder",
]
