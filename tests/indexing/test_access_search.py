"""A reader's search (`SearchFilter.for_reader`) on both stores, over a tree of per-folder
modes and ACLs whose documents' access was recorded when they were read: each reader gets
exactly the admin's results restricted to the files the kernel lets it read (asked as
that user), still k of them when k readable chunks exist; grants add their paths; a
document without recorded access is the admin's alone."""

from __future__ import annotations

import numpy as np
import pytest

from attnswitch.documents.ingest import ingest
from attnswitch.indexing.access import Reader
from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.location import open_store
from attnswitch.indexing.search import search
from attnswitch.indexing.store import ChunkRecord, SQLiteStore
from permission_tree import files, kernel_reads, permission_tree, principals, require

DIM = 16
PER_DOC = 6
K = 5


@pytest.fixture
def tree():
    require()
    with permission_tree("notes of {path}: vacuum and more vacuum\n") as top:
        yield top


def _open(location):
    return open_store(location) if isinstance(location, str) else SQLiteStore(location)


def _fill(store, root) -> np.ndarray:
    """Every file of the tree with PER_DOC chunks of random vectors; the query."""
    rng = np.random.default_rng(1)
    query = rng.normal(size=DIM).astype(np.float32)
    run = store.begin_run(root)
    for doc in ingest(root):
        assert doc.access is not None, doc.source
        vectors = rng.normal(size=(PER_DOC, DIM)).astype(np.float32)
        chunks = [ChunkRecord(f"{doc.source} vacuum part {i}", 4, i, i + 1) for i in range(PER_DOC)]
        store.write_document(doc, chunks, vectors)
    store.finish_run(run)
    return query


def _readable(top) -> dict[str, set[str]]:
    """principal name -> the tree's files the kernel lets it read."""
    rels = files(top)
    out = {}
    for who in principals():
        answers = kernel_reads(who, [top / r for r in rels])
        out[who.name] = {r for r, ok in zip(rels, answers, strict=True) if ok}
    return out


@pytest.mark.parametrize("mode", ["dense", "keyword"])
def test_a_readers_search_is_the_admins_restricted_to_what_it_may_read(
    location, tree, mode
) -> None:
    readable = _readable(tree)
    with _open(location) as store:
        query = _fill(store, tree)
        every = search(store, query, 100, text="vacuum", mode=mode)
        assert len(every) == len(files(tree)) * PER_DOC
        for who in principals():
            reader = Reader(who.name, who.groups)
            where = SearchFilter.for_reader(None, reader)
            hits = search(store, query, K, text="vacuum", mode=mode, where=where)
            allowed = [h.chunk_id for h in every if h.path in readable[who.name]]
            assert [h.chunk_id for h in hits] == allowed[:K], who.name
            assert len(hits) == min(K, len(allowed))
            assert {h.path for h in hits} <= readable[who.name]
            docs = store.allowed_documents(where)
            assert {
                store.chunks(_first_chunks(store, docs))[c].source
                for c in _first_chunks(store, docs)
            } == readable[who.name]


def _first_chunks(store, docs: list[int]) -> list[int]:
    m = store._mark
    return [
        int(store._read(f"SELECT MIN(id) FROM chunks WHERE doc_id = {m}", (d,))[0][0]) for d in docs
    ]


def test_k_hits_come_back_when_k_readable_chunks_exist(location, tree) -> None:
    with _open(location) as store:
        query = _fill(store, tree)
        who = principals()[0]
        where = SearchFilter.for_reader(None, Reader(who.name, who.groups))
        for mode in ("dense", "keyword", "hybrid"):
            assert len(search(store, query, K, text="vacuum", mode=mode, where=where)) == K


def test_grants_add_paths_and_unrecorded_documents_are_the_admins(location, tree) -> None:
    with _open(location) as store:
        _fill(store, tree)
        ids = {store.lookup(str(tree.resolve()), r).id: r for r in files(tree)}
        by_source = {r: i for i, r in ids.items()}
        plain = Reader("daemon", frozenset({"daemon"}))
        granted = Reader("daemon", frozenset({"daemon"}), ("closed/",))
        before = {ids[i] for i in store.allowed_documents(SearchFilter.for_reader(None, plain))}
        after = {ids[i] for i in store.allowed_documents(SearchFilter.for_reader(None, granted))}
        assert "closed/public.txt" not in before and after == before | {"closed/public.txt"}
        assert store.may_read(granted, by_source["closed/public.txt"])
        assert not store.may_read(plain, by_source["closed/public.txt"])
        assert store.may_read(None, by_source["closed/public.txt"])
        assert store.may_read(plain, by_source["open/public.txt"])
        # a document indexed before access was recorded: admins only (and grants)
        m = store._mark
        with store._transaction() as conn:
            conn.execute(
                f"UPDATE documents SET access = NULL WHERE id = {m}",
                (by_source["open/public.txt"],),
            )
        assert not store.may_read(plain, by_source["open/public.txt"])
        assert store.may_read(None, by_source["open/public.txt"])
        where = SearchFilter.for_reader(None, plain)
        assert "open/public.txt" not in {ids[i] for i in store.allowed_documents(where)}
        # filters and the reader combine
        narrowed = SearchFilter.for_reader(SearchFilter.of(path="acl/"), plain)
        assert {ids[i] for i in store.allowed_documents(narrowed)} == {
            s for s in before if s.startswith("acl/")
        }


def test_for_reader_without_a_reader_is_the_filter_itself() -> None:
    where = SearchFilter.of(path="docs/")
    assert SearchFilter.for_reader(where, None) is where
    assert SearchFilter.for_reader(None, None) is None
    assert SearchFilter.for_reader(None, Reader("x")).reader == Reader("x")
