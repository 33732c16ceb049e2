"""What a filter keeps in a SQLite store, kept between searches (`sqlite_allowed`): a
second search with the same filter reads no document or chunk list again, and any
committed write (this connection's, another connection's, a permission refresh) is seen
by the next search, in both of the dense search's paths (exact over the allowed vectors,
the graph searched wider)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from attnswitch.documents.ingest import ingest
from attnswitch.documents.permissions import Access, Step
from attnswitch.indexing import sqlite_allowed
from attnswitch.indexing.access import Reader
from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.sqlite_allowed import AllowedChunks
from attnswitch.indexing.store import ChunkRecord, SQLiteStore

DIM = 16
PER_DOC = 5
OPEN = Access((Step("root", "root", 0o755), Step("root", "root", 0o644)))
CLOSED = Access((Step("root", "root", 0o700), Step("root", "root", 0o644)))


def vector(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def write(store: SQLiteStore, root: Path, names: list[str], near: np.ndarray | None = None):
    """Each file of `names` written and stored (PER_DOC chunks of random vectors, or of
    vectors close to `near`)."""
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"notes of {name}\n")
    docs = {d.source: d for d in ingest(root)}
    for name in names:
        rng = np.random.default_rng(abs(hash(name)) % 2**32)
        vectors = rng.normal(size=(PER_DOC, DIM)).astype(np.float32)
        if near is not None:
            vectors = near + 0.01 * vectors
        texts = [f"{name} " + "vacuum " * (1 + i % 3) + f"part {i}" for i in range(PER_DOC)]
        chunks = [ChunkRecord(t, 4, i, i + 1) for i, t in enumerate(texts)]
        store.write_document(docs[name], chunks, vectors)


def statements(store: SQLiteStore) -> list[str]:
    """The statements `store` runs from now on (SQLite's trace callback)."""
    seen: list[str] = []
    store._conn.set_trace_callback(seen.append)
    return seen


@pytest.fixture(params=[10**6, 8], ids=["exact", "graph"])
def store(request, tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "index.sqlite3", exact_below=request.param) as opened:
        write(opened, tmp_path / "drive", [f"{d}/{i}.txt" for d in "ab" for i in range(4)])
        yield opened


def found(store: SQLiteStore, where: SearchFilter, k: int = 50) -> set[str]:
    hits = store.dense(vector(0)[None, :], k, None, where)[0]
    return {row.source for row in store.chunks([cid for cid, _ in hits]).values()}


def test_a_filters_lists_are_read_once_until_the_store_changes(store: SQLiteStore) -> None:
    where = SearchFilter.of(path="a/")
    first = found(store, where)
    assert first == {f"a/{i}.txt" for i in range(4)}
    seen = statements(store)
    assert found(store, where) == first
    assert store.keyword("vacuum", 50, where)
    assert not [s for s in seen if "FROM documents" in s or "json_each" in s and "vector" in s]


def test_this_connections_write_is_seen_by_the_next_search(
    store: SQLiteStore, tmp_path: Path
) -> None:
    where = SearchFilter.of(path="a/")
    before = found(store, where, 5)
    write(store, tmp_path / "drive", ["a/new.txt"], near=vector(0))
    after = found(store, where, 5)
    assert after == {"a/new.txt"} != before
    assert len(store.keyword("vacuum", 100, where)) == 5 * PER_DOC


def test_another_connections_write_is_seen_by_the_next_search(
    store: SQLiteStore, tmp_path: Path
) -> None:
    where = SearchFilter.of(path="a/")
    found(store, where, 5)
    with SQLiteStore(store.path, exact_below=store.exact_below) as other:
        write(other, tmp_path / "drive", ["a/other.txt"], near=vector(0))
    assert found(store, where, 5) == {"a/other.txt"}


def test_a_permission_refresh_is_seen_by_the_next_search(store: SQLiteStore) -> None:
    where = SearchFilter.for_reader(None, Reader("daemon", frozenset({"daemon"})))
    assert where is not None
    sources = [f"{d}/{i}.txt" for d in "ab" for i in range(4)]
    drive = _root(store)
    store.refresh_access(drive, dict.fromkeys(sources, OPEN))
    assert found(store, where) == set(sources)
    store.refresh_access(drive, {s: CLOSED if s.startswith("b/") else OPEN for s in sources})
    assert found(store, where) == {s for s in sources if s.startswith("a/")}


@pytest.mark.parametrize("here_above", [0.0, 2.0], ids=["filtered-here", "by-sql"])
def test_a_filtered_keyword_search_is_the_plain_one_restricted(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch, here_above: float
) -> None:
    """Read wider and filtered here, or filtered by SQL: the first n allowed chunks of the
    plain ranking, ties in id order, for every n."""
    monkeypatch.setattr(sqlite_allowed, "FILTER_HERE_ABOVE", here_above)
    everything = store.keyword("vacuum part", 1000)
    rows = store.chunks([cid for cid, _ in everything])
    expected = [hit for hit in everything if rows[hit[0]].source.startswith("a/")]
    assert len(expected) == 4 * PER_DOC < len(everything)
    where = SearchFilter.of(path="a/")
    for n in (1, 3, len(expected) - 1, len(expected), len(expected) + 5):
        assert store.keyword("vacuum part", n, where) == expected[:n], n


def test_the_least_recently_used_filter_is_dropped(store: SQLiteStore) -> None:
    cache = AllowedChunks(kept=2)
    filters = [SearchFilter.of(path=p) for p in ("a/", "b/", "a/1.txt")]
    for where in filters:
        cache.of(store, where)
    seen = statements(store)
    cache.of(store, filters[2])
    cache.of(store, filters[1])
    assert not [s for s in seen if "FROM documents" in s]
    cache.of(store, filters[0])  # dropped when the third came in: read again
    assert [s for s in seen if "FROM documents" in s]


def _root(store: SQLiteStore) -> str:
    """The one root the fixture's documents were stored under."""
    ((root,),) = store._conn.execute("SELECT DISTINCT root FROM documents").fetchall()
    return str(root)
