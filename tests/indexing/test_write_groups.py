"""A document's chunks written a group at a time (`write_groups`), on both stores: the
rows, full vectors and quick vectors are those of one group, ordinals run on across the
groups, the document counts all their tokens; a bad chunk in a later group is refused
naming it, with the document's stored chunks kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnswitch.documents.ingest import ingest
from attnswitch.indexing import write_groups
from attnswitch.indexing.location import open_store
from attnswitch.indexing.store import ChunkRecord, StoreInputError
from attnswitch.indexing.store_postgres import PostgresStore

QUICK_DIM, FULL_DIM = 8, 12
N = 7
SOURCES = ("grouped.txt", "whole.txt")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for source in SOURCES:
        (folder / source).write_text(f"the text of {source} " * 20)
    return folder


def chunks(n: int = N) -> list[ChunkRecord]:
    words = ("alpha beta", "gamma delta", "der Hund und die Katze", "le chat et le chien")
    return [
        ChunkRecord(f"{words[i % len(words)]} {i}", i + 1, 10 * i, 10 * i + 9, (f"part {i}",))
        for i in range(n)
    ]


def vectors(n: int, dim: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


def stored(store, source: str) -> list[tuple]:
    """The document's chunk rows as stored, by ordinal, less their ids."""
    postgres = isinstance(store, PostgresStore)
    full = "embedding::text" if postgres else "vector"
    quick = "quick::text" if postgres else "quick"
    m = store._mark
    return [
        tuple(row)
        for row in store._read(
            "SELECT c.ordinal, c.text, c.n_tokens, c.char_start, c.char_end, c.heading_path,"
            f" c.location, c.vector_key, c.language, c.prefix, c.{full}, c.{quick}"
            f" FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.source = {m}"
            " ORDER BY c.ordinal",
            (source,),
        )
    ]


def write(store, doc, group: int, monkeypatch: pytest.MonkeyPatch, items=None) -> None:
    monkeypatch.setattr(write_groups, "WRITE_GROUP", group)
    items = chunks() if items is None else items
    store.write_document(
        doc,
        items,
        vectors(len(items), FULL_DIM, 1),
        quick=vectors(len(items), QUICK_DIM, 2),
        vector_fingerprint="fp",
    )


@pytest.mark.parametrize("group", [1, 3, N, 1024])
def test_groups_store_what_one_group_stores(
    location, root: Path, group: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = {d.source: d for d in ingest(root)}
    with open_store(location) as store:
        store.set_quick_model("static-test", QUICK_DIM)
        write(store, docs["whole.txt"], 1024, monkeypatch)
        write(store, docs["grouped.txt"], group, monkeypatch)
        grouped, whole = stored(store, "grouped.txt"), stored(store, "whole.txt")
        assert [row[0] for row in grouped] == list(range(N))
        assert grouped == whole
        assert {row[8] for row in grouped} >= {"de", "fr"}  # languages detected per chunk
        assert store.lookup(root, "grouped.txt").n_chunks == N
        totals = store._read(
            f"SELECT n_tokens FROM documents WHERE source = {store._mark}", ("grouped.txt",)
        )
        assert [tuple(r) for r in totals] == [(sum(range(1, N + 1)),)]


@pytest.mark.parametrize("bad_at", [0, 5])
def test_a_bad_chunk_in_any_group_is_refused_and_the_stored_chunks_kept(
    location, root: Path, bad_at: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = {d.source: d for d in ingest(root)}["grouped.txt"]
    with open_store(location) as store:
        store.set_quick_model("static-test", QUICK_DIM)
        write(store, doc, 2, monkeypatch)
        before = stored(store, "grouped.txt")
        items = chunks()
        items[bad_at] = ChunkRecord("x", 1, 5, 2)  # ends before it starts
        with pytest.raises(
            StoreInputError, match=rf"^chunks\[{bad_at}\]\.end: expected >= start 5"
        ):
            write(store, doc, 2, monkeypatch, items)
        items[bad_at] = ChunkRecord("x", -1, 0, 1)  # counted before the transaction
        with pytest.raises(
            StoreInputError, match=rf"^chunks\[{bad_at}\]\.n_tokens: expected an int >= 0"
        ):
            write(store, doc, 2, monkeypatch, items)
        assert stored(store, "grouped.txt") == before
