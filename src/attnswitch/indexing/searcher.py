"""One search, the same for every front end: `Index.searcher().search(request)`.

A `Searcher` takes a checked `requests.SearchRequest`, encodes its query only when the
request's mode needs a vector (`SearchRequest.needs_vector`) and the caller gave none, by
the index's own model, engine and precision (`query.encode_query`, with the config the
`Index` read once), and runs `search.search` (a fixed number of statements whatever `k`):
dense, keyword or hybrid, filtered, copies folded, snippets. The answer is a
`SearchResult`: the hits, and what a front end says when a filter left nothing
(`SearchResult.note`).

The CLI's `search`, `attnswitch.search` and the service all come here; the service
encodes the query on its own loaded model (batched with other requests) and passes the
vector in (`vector=`), with its request's deadline (`deadline=`).

Before an index's full pass is done (docs/architecture.md, "Two passes"), a search by
meaning also encodes its best candidates that lack a full vector, up to `fill` chunks
(`query_fill.fill_candidates`: from the keyword list and the quick vectors' list), and
keeps their vectors; the quick list's other chunks are scored on the full scale by a line
fitted to the candidates that have both. `SearchResult.filled` says what it did, and
`coverage_note` that the index is still being filled in. A request that needs no vector
still loads no model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from attnswitch.indexing.query import QuerySteps
from attnswitch.indexing.query_fill import QUERY_FILL, Filled, check_fill, fill_candidates

if TYPE_CHECKING:
    from collections.abc import Callable

    from attnswitch.indexing.config import IndexConfig
    from attnswitch.indexing.requests import SearchRequest
    from attnswitch.indexing.search import Hit
    from attnswitch.indexing.store import Store
    from attnswitch.indexing.store_postgres import PostgresStore
    from attnswitch.indexing.store_sqlite import SQLiteStore


@dataclass
class SearchResult:
    """The answer to one `SearchRequest`: `hits` best first; `kept`, when the request had
    a filter and no chunk was found, how many documents the filter keeps (else None);
    `steps`, the seconds of the query's encoding in this process and its engine
    (`query.QuerySteps`; empty when the query was not encoded here)."""

    hits: list[Hit]
    kept: int | None = None
    steps: QuerySteps = field(default_factory=QuerySteps)
    filled: Filled | None = None

    @property
    def coverage_note(self) -> str | None:
        """One line when the search ran before the index's full pass was done (None:
        every chunk had its full vector, or the mode needs none)."""
        if self.filled is None:
            return None
        return (
            f"the full pass is not done: {self.filled.unencoded:,} chunks had no full vector "
            f"yet ({self.filled.encoded} of this search's candidates encoded now)"
        )

    @property
    def note(self) -> str | None:
        """What to tell the user when the filter left nothing (None: nothing to say)."""
        if self.kept is None:
            return None
        if self.kept == 0:
            return "no document passes the filter"
        return f"no chunk matches the query in the {self.kept} documents the filter keeps"


class Searcher:
    """Searches one open index (made by `Index.searcher()`): its `store`, and `searchable`,
    which returns the index's config (read once per `Index`) or raises
    `index.IndexEmptyError` (`Index.check_searchable`). `model` may name the index's model
    folder (`query.encode_query` refuses another model). `fill`: the chunks without a full
    vector a search may encode (`query_fill.QUERY_FILL`; 0: none)."""

    def __init__(
        self,
        store: SQLiteStore | PostgresStore,
        searchable: Callable[[], IndexConfig],
        *,
        model: str | None = None,
        fill: int = QUERY_FILL,
    ):
        self._store = store
        self._searchable = searchable
        self.model = model
        self.fill = check_fill(fill)

    def search(
        self,
        request: SearchRequest,
        *,
        vector: np.ndarray | None = None,
        deadline: float | None = None,
    ) -> SearchResult:
        """The `request.k` best chunks for `request`, best first. `vector`: the query's
        vector `[dim]` when the caller encoded it (else it is encoded here, only for a
        mode that needs one). `deadline`: a `time.monotonic()` time by which the store's
        work stops (`StoreDeadlineError`); the encoding is not cut by it. An index with
        nothing to search raises `index.IndexEmptyError` before any model is loaded."""
        from attnswitch.indexing.search import search

        config = self._searchable()
        steps = QuerySteps()
        if request.needs_vector and vector is None:
            from attnswitch.indexing.query import encode_query

            vector = encode_query(request.query, config, self.model, steps)
        filled = None
        if request.needs_vector and vector is not None:
            filled = fill_candidates(
                cast("Store", self._store),
                request,
                vector,
                config,
                budget=self.fill,
                model=self.model,
                steps=steps,
            )
        searched = time.perf_counter()
        with self._store.deadline(deadline):
            hits = search(
                cast("Store", self._store),  # what `Store` declares, in both stores' types
                vector if request.needs_vector else None,
                request.k,
                text=request.query,
                mode=request.mode.value,
                ef=request.ef,
                where=request.where,
                deadline=deadline,
                config=config,
                extra_dense=() if filled is None else filled.extra,
                group=request.group,
            )
            kept = (
                None
                if request.where is None or hits
                else len(self._store.allowed_documents(request.where))
            )
        steps.search_s = time.perf_counter() - searched
        return SearchResult(hits, kept, steps, filled)
