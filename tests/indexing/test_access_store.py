"""The stores' recorded access (`store_access`): chains kept once, a store of schema 10
(no access recorded) upgraded in place with every document the admin's alone until its
access is refreshed, and `refresh_access` counting only what changed. Both stores."""

from __future__ import annotations

import numpy as np
import pytest

from attnswitch.documents import permissions
from attnswitch.documents.ingest import ingest
from attnswitch.indexing.access import Reader
from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.location import open_store
from attnswitch.indexing.store import ChunkRecord, SQLiteStore
from permission_tree import files, permission_tree, require

DAEMON = Reader("daemon", frozenset({"daemon"}))


@pytest.fixture
def tree():
    require()
    with permission_tree() as top:
        yield top


def _open(location):
    return open_store(location) if isinstance(location, str) else SQLiteStore(location)


def _fill(store, root) -> None:
    run = store.begin_run(root)
    for doc in ingest(root):
        vectors = np.eye(4, dtype=np.float32)[:1]
        store.write_document(doc, [ChunkRecord(f"{doc.source} text", 2, 0, 1)], vectors)
    store.finish_run(run)


def _to_schema_10(store) -> None:
    """Undo schema 11 as a store of version 10 lacks it."""
    with store._transaction() as conn:
        conn.execute("DROP INDEX IF EXISTS documents_access")
        conn.execute("ALTER TABLE documents DROP COLUMN access")
        conn.execute("DROP TABLE access")
        if isinstance(store, SQLiteStore):
            conn.execute("PRAGMA user_version=10")


def test_chains_are_kept_once(location, tree) -> None:
    for name in ("more-a.txt", "more-b.txt"):  # the chain of open/public.txt again
        (tree / "open" / name).write_text("more text\n")
        (tree / "open" / name).chmod(0o644)
    with _open(location) as store:
        _fill(store, tree)
        (n_chains,) = store._read("SELECT COUNT(*) FROM access")[0]
        (n_distinct, n_docs) = store._read(
            "SELECT COUNT(DISTINCT access), COUNT(access) FROM documents"
        )[0]
        assert n_chains == n_distinct == n_docs - 2 == len(files(tree))


def test_an_old_store_is_upgraded_and_its_documents_are_the_admins_until_refreshed(
    location, tree
) -> None:
    with _open(location) as store:
        _fill(store, tree)
        readable = store.allowed_documents(SearchFilter.for_reader(None, DAEMON))
        assert readable
        _to_schema_10(store)
    with _open(location) as store:
        assert store.allowed_documents(SearchFilter.for_reader(None, DAEMON)) == []
        every = SearchFilter.of(type="text")  # an admin: no reader
        assert len(store.allowed_documents(every)) == len(files(tree))
        key = str(tree.resolve())
        with store.exclusive():
            accesses = dict(
                zip(
                    files(tree),
                    permissions.of_many(tree / r for r in files(tree)),
                    strict=True,
                )
            )
            assert store.refresh_access(key, accesses) == len(files(tree))
            assert store.refresh_access(key, accesses) == 0
        assert store.allowed_documents(SearchFilter.for_reader(None, DAEMON)) == readable


def test_of_many_equals_of_for_each_file(tree) -> None:
    paths = [tree / r for r in files(tree)] + [tree / "gone.txt"]
    assert permissions.of_many(paths) == [permissions.of_file(p) for p in paths]
    assert permissions.of_many(paths)[-1] is None
