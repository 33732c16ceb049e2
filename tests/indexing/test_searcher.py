"""`Index.searcher().search(request)`, the one search of every front end, on both stores
over documents indexed by the real pipeline and model: the same hits as the store's
search with the query encoded by the index's model (the path the front ends took
before), a keyword request that loads no model, the index config read once per Index
whatever the searches, the filter's note, and an empty index refused before any model
loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnswitch.indexing.config import stored_config
from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.index import Index, IndexEmptyError
from attnswitch.indexing.query import encode_query
from attnswitch.indexing.requests import Mode, SearchRequest
from attnswitch.indexing.search import search
from attnswitch.indexing.store import StoreDeadlineError
from attnswitch.jobs.run import RunOptions, run
from store_testing import statements

QUERY = "how do I update rows in a table"


@pytest.fixture
def indexed(location, docs: Path, encoder) -> str | Path:
    """The four short pages of `docs`, indexed by `run` with the default model."""
    with Index.open_store(location) as store:
        summary = run(docs, store, RunOptions.of(read_workers=0), get_encoder=lambda: encoder)
    assert summary.status == "completed" and summary.indexed > 0
    return location


@pytest.mark.parametrize("mode", list(Mode))
def test_the_hits_are_those_of_the_store_search(indexed, mode: Mode) -> None:
    with Index.open(indexed) as index:
        searcher = index.searcher()
        results = {k: searcher.search(SearchRequest(QUERY, k, mode)) for k in (1, 4)}
    with Index.open_store(indexed) as store:
        vector = None if mode is Mode.KEYWORD else encode_query(QUERY, stored_config(store))
        want = {k: search(store, vector, k, text=QUERY, mode=mode.value) for k in (1, 4)}
    for k, result in results.items():
        assert want[k] and result.hits == want[k]
        assert result.kept is None and result.note is None
        assert bool(result.steps.engine) == mode.needs_vector


def test_a_given_vector_is_not_encoded_again(indexed, encoder) -> None:
    vector = encoder.encode([QUERY])[0]
    with Index.open(indexed) as index:
        result = index.searcher().search(SearchRequest(QUERY, 3, "dense"), vector=vector)
        want = search(index._store, vector, 3, text=QUERY, mode="dense")
    assert result.hits == want and result.steps.engine == "" and result.steps.encode_s == 0


FRESH_KEYWORD = """
import json, sys
from attnswitch.indexing.index import Index
from attnswitch.indexing.requests import SearchRequest
with Index.open(sys.argv[1]) as index:
    result = index.searcher().search(SearchRequest("update rows", 3, "keyword"))
print(json.dumps({
    "hits": len(result.hits),
    "engine": result.steps.engine,
    "loaded": sorted(m for m in sys.argv[2].split(",") if m in sys.modules),
}))
"""


def test_a_keyword_request_loads_no_model(indexed, model_frameworks) -> None:
    """In a fresh process: the search answers without importing a model framework."""
    done = subprocess.run(
        [sys.executable, "-c", FRESH_KEYWORD, str(indexed), ",".join(model_frameworks)],
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout)
    assert found["hits"] > 0 and found == {"hits": found["hits"], "engine": "", "loaded": []}


def test_the_config_is_read_once_per_index(indexed, encoder) -> None:
    """Hybrid searches weigh by the model's languages, from the config the Index read:
    the config is read once whatever the searches; dense and keyword ones read it too."""
    vector = encoder.encode([QUERY])[0]
    with Index.open(indexed) as index:
        searcher = index.searcher()
        with statements(index._store) as sent:
            for mode in ("hybrid", "dense", "keyword", "hybrid"):
                searcher.search(SearchRequest(QUERY, 3, mode), vector=vector)
    assert sum("'index'" in line for line in sent) == 1


def test_a_filter_that_keeps_nothing_says_so(indexed, docs: Path) -> None:
    with Index.open(indexed) as index:
        searcher = index.searcher()
        none = searcher.search(SearchRequest.of(QUERY, 3, "keyword", path="nowhere/"))
        unmatched = searcher.search(SearchRequest.of("zzqqxx", 3, "keyword", type="html"))
        kept = len(index.allowed_documents(SearchFilter.of(type="html")))
    assert none.hits == [] and none.kept == 0 and none.note == "no document passes the filter"
    assert unmatched.hits == [] and unmatched.kept == kept > 0
    assert unmatched.note == f"no chunk matches the query in the {kept} documents the filter keeps"


def test_an_empty_index_is_refused_before_a_model_loads(location) -> None:
    with Index.open(location, create=True) as index:
        with pytest.raises(IndexEmptyError, match=r"^db: expected an index with documents"):
            index.searcher(model="/no/such/model").search(SearchRequest(QUERY))


def test_a_search_past_its_deadline_stops(indexed) -> None:
    with Index.open(indexed) as index, pytest.raises(StoreDeadlineError):
        index.searcher().search(SearchRequest(QUERY, 3, "keyword"), deadline=0.0)
