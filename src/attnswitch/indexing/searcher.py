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

Vectors of another kind (the next step; not built): a chunk may hold a cheap vector, a
full vector or both. That plugs in here as a vector source per kind: the `Searcher`
gets a mapping from kind ("full", "cheap") to a source that encodes a query for it (the
index's model for "full", a cheaper one for "cheap"), `search(vector=)` becomes a vector
per kind, and `search.search` asks the store for the list of each kind the index holds,
fused as dense and keyword lists are now; a request that needs no vector still loads no
model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from attnswitch.indexing.query import QuerySteps

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
    folder (`query.encode_query` refuses another model)."""

    def __init__(
        self,
        store: SQLiteStore | PostgresStore,
        searchable: Callable[[], IndexConfig],
        *,
        model: str | None = None,
    ):
        self._store = store
        self._searchable = searchable
        self.model = model

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
            )
            kept = (
                None
                if request.where is None or hits
                else len(self._store.allowed_documents(request.where))
            )
        steps.search_s = time.perf_counter() - searched
        return SearchResult(hits, kept, steps)
