"""The store statements a search issues: a fixed number whatever `k` is, on both stores,
counted at the driver (SQLite's statement trace, libpq's protocol trace): the chunks of
the ranked lists read once per round, their documents and the kept ones' copies in one
statement each, the index config at most once."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from attnswitch.documents.ingest import ingest
from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.location import open_store
from attnswitch.indexing.records import MAX_K
from attnswitch.indexing.search import search
from attnswitch.indexing.store import ChunkRecord
from store_testing import statements

DIM = 64
WORDS = (
    "vacuum index table query planner storage backup replication checkpoint "
    "connection timeout statistics"
).split()
DOCUMENTS = 80  # with the copies, more chunks than a search of k = MAX_K asks for
CHUNKS = 3
COPIES = ("copies/a.txt", "copies/b.txt", "copies/c.txt")
OTHERS = ("other/o1.txt", "other/o2.txt")  # what the filters leave out
# Per round: the dense and keyword lists with what the store reads around them (the
# filter's documents, PostgreSQL's transaction and settings of its dense query), the
# chunks, their documents, the copies; plus the vector's dimension and the index config.
MOST_STATEMENTS = 20


def bag_of_words(text: str) -> np.ndarray:
    """A deterministic hashed bag-of-words vector (a stand-in embedding)."""
    v = np.zeros(DIM)
    for word in re.findall(r"[a-z]{3,}", text.lower()):
        v[zlib.crc32(word.encode()) % DIM] += 1.0
    return v


def chunk_texts(i: int) -> list[str]:
    """Document `i`'s chunks: each holds several of `WORDS`, so every query word matches
    many chunks."""
    return [
        " ".join(WORDS[(i + j + w) % len(WORDS)] for w in range(5)) + f" doc{i} part{j}"
        for j in range(CHUNKS)
    ]


@pytest.fixture
def store(location, tmp_path: Path):
    """`DOCUMENTS` documents of `CHUNKS` chunks, and one more stored at three paths
    (copies: the same bytes), in each store."""
    root = tmp_path / "docs"
    (root / "copies").mkdir(parents=True)
    (root / "other").mkdir()
    for i in range(DOCUMENTS):
        (root / f"d{i:02}.txt").write_text("\n".join(chunk_texts(i)))
    for i, name in enumerate(OTHERS):
        (root / name).write_text("\n".join(chunk_texts(DOCUMENTS + 1 + i)))
    for name in COPIES:
        (root / name).write_text("\n".join(chunk_texts(DOCUMENTS)))
    with open_store(location) as opened:
        for doc in sorted(ingest(root), key=lambda d: d.source):
            texts = doc.text.split("\n")
            chunks = [ChunkRecord(t, 5, 0, len(t)) for t in texts]
            opened.write_document(doc, chunks, np.stack([bag_of_words(t) for t in texts]))
        yield opened


SEARCHES = {
    "dense": dict(mode="dense"),
    "keyword": dict(mode="keyword"),
    "hybrid": dict(mode="hybrid"),
    "hybrid, filtered": dict(mode="hybrid", where=SearchFilter.of(path=["copies/", "d*"])),
    "dense, filtered": dict(mode="dense", where=SearchFilter.of(path=["copies/", "d*"])),
    "keyword, filtered": dict(mode="keyword", where=SearchFilter.of(path=["copies/", "d*"])),
}


@pytest.mark.parametrize("kind", SEARCHES)
def test_a_search_issues_the_same_statements_whatever_k(store, kind: str) -> None:
    """k = 1, 50 and 100 (`MAX_K`), each in one round (the lists' first 2k chunks hold k
    distinct results): the same statements, and few; the copies are among the hits, each
    chunk of theirs one result listing the other places."""
    text = "vacuum checkpoint backup"
    vector = bag_of_words(text)
    options = SEARCHES[kind]
    search(store, vector, 3, text=text, **options)  # what the store keeps between searches
    counts, found, sent_by_k = {}, {}, {}
    for k in (1, 50, MAX_K):
        with statements(store) as sent:
            found[k] = search(store, vector, k, text=text, **options)
        counts[k], sent_by_k[k] = len(sent), sent
        assert sum("'index'" in line for line in sent) <= 1  # the index config, once
    # each statement's head in the message (a whole trace line is too long to survive
    # pytest's truncation): a count that differs says which one
    heads = {k: [_head(line) for line in sent] for k, sent in sent_by_k.items()}
    assert counts[50] == counts[MAX_K] <= MOST_STATEMENTS, (counts, heads)
    # PostgreSQL's HNSW is approximate (its graph differs build to build): the 2 chunks of
    # k = 1 may hold a copy's chunk but not the one of the copy shown, which is then read
    # (`search._copy_chunk`): one statement more, and only with a copy as the hit
    extra = counts[1] - counts[50]
    assert extra == 0 or (extra == 1 and found[1][0].path in COPIES), (counts, heads)
    assert [len(found[k]) for k in counts] == list(counts)
    if "where" in options:
        assert not {h.path for h in found[MAX_K]} & set(OTHERS)
    copies = [h for h in found[MAX_K] if h.path in COPIES]
    assert copies and len({h.ordinal for h in copies}) == len(copies)  # one result each
    for hit in copies:
        assert sorted(a["path"] for a in hit.also_at) == sorted(set(COPIES) - {hit.path})


def test_documents_and_copies_read_in_bulk_are_those_read_one_by_one(
    location, tmp_path: Path
) -> None:
    """`lookup_many` and `copies_of_many` give what `lookup` and `copies_of` give each
    place and hash, names with quotes, commas, braces and other scripts included, and
    leave out what is not stored."""
    root = tmp_path / "docs"
    names = ["plain.txt", 'it\'s, {odd} "name".txt', "日本語/ドキュメント.txt", "über.txt"]
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("the same bytes" if name != "plain.txt" else "other bytes")
    with open_store(location) as opened:
        for doc in ingest(root):
            opened.write_document(
                doc,
                [ChunkRecord(doc.text, 3, 0, len(doc.text))],
                bag_of_words(doc.text)[None, :],
                config="c1",
            )
        places = [(str(root), name) for name in names] + [
            (str(root), "absent.txt"),
            (str(tmp_path), "plain.txt"),
        ]
        many = opened.lookup_many(places)
        one = {(d.root, d.source): d for p in places if (d := opened.lookup(*p)) is not None}
        assert many == one and len(many) == len(names)
        keys = {(d.sha256, d.config) for d in one.values()} | {("0" * 64, "c1")}
        keys |= {(d.sha256, "other config") for d in one.values()}
        copies = opened.copies_of_many(keys)
        assert copies == {key: found for key in keys if (found := opened.copies_of(*key))}
        assert sorted(len(v) for v in copies.values()) == [1, 3]
        assert opened.lookup_many([]) == {} and opened.copies_of_many([]) == {}


def _head(statement: str) -> str:
    """A statement as `statements` gives it, cut to its kind and first words: SQLite's SQL,
    or a PostgreSQL trace line's message type and SQL or parameters."""
    return re.sub(r"^.*?\t(Bind|Query)\t", r"\1 ", statement)[:70]
