"""Copies shown by one rule, results grouped by document, and hybrid's guards (keyword's
finds kept, a document's chunks spread), on both stores; the newcomer's two queries of
issue 53 on a folder built the same way, with the default model."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from newcomer_folder import PYTHON_LIBRARY, newcomer_folder
from test_search_queries import bag_of_words

from attnswitch.documents.ingest import ingest
from attnswitch.indexing.copies import is_marked, shown_copy
from attnswitch.indexing.diversity import keep_keyword_finds, spread
from attnswitch.indexing.location import open_store
from attnswitch.indexing.records import StoredDocument
from attnswitch.indexing.search import search
from attnswitch.indexing.store import ChunkRecord, StoreInputError

ORIGINAL = "Reports/2024 Q3/backup.txt"
COPY = "Ops/Runbooks/backup policy (copy).txt"
LATER = "Archive/backup.txt"  # no marker, but newer than the original


def doc(source: str, mtime_ns: int) -> StoredDocument:
    return StoredDocument(1, "/r", source, "h", 1, mtime_ns, "indexed", None, "", 1)


@pytest.mark.parametrize(
    ("path", "marked"),
    [
        ("Ops/backup policy (copy).pdf", True),
        ("Copy of notes.txt", True),
        ("notes - Copy.txt", True),
        ("notes_copy.txt", True),
        ("notes (1).txt", True),
        ("Kopie von notes.txt", True),
        ("Copy of Reports/notes.txt", True),
        ("copyright.txt", False),
        ("Reports/2024 Q3/backup.pdf", False),
        ("copying/notes.txt", False),
    ],
)
def test_copy_markers(path: str, marked: bool) -> None:
    assert is_marked(path) is marked


def test_the_rule_prefers_unmarked_then_oldest_then_shortest_then_alphabetical() -> None:
    assert shown_copy([doc("a (copy).txt", 1), doc("b/original.txt", 9)]).source == (
        "b/original.txt"
    )
    assert shown_copy([doc("new.txt", 9), doc("old.txt", 1)]).source == "old.txt"
    assert shown_copy([doc("long/name.txt", 5), doc("n.txt", 5)]).source == "n.txt"
    assert shown_copy([doc("b.txt", 5), doc("a.txt", 5)]).source == "a.txt"
    with pytest.raises(ValueError, match="copies: expected at least one"):
        shown_copy([])


def test_keyword_finds_are_kept_near_the_top() -> None:
    fused = [(i, 1.0 - i / 100) for i in range(1, 11)] + [(99, 0.2)]
    dense = [(i, 0.6) for i in range(1, 11)]
    kept = keep_keyword_finds(fused, dense, [(99, 9.0), (5, 6.0)])
    assert [cid for cid, _ in kept][:4] == [1, 2, 99, 3]  # 5 is in dense: it does not move
    assert keep_keyword_finds(fused, dense, [(1, 9.0)]) == fused  # nothing to keep


@pytest.mark.parametrize(("find", "held", "moves"), [(8.4, 6.0, True), (8.3, 6.0, False)])
def test_a_keyword_find_moves_only_when_its_words_lead_what_dense_holds(
    find: float, held: float, moves: bool
) -> None:
    """1.4 times the best keyword score among dense's own chunks, or it stays: dense's
    candidates match the words about as well, and its judgement of meaning stands."""
    fused = [(i, 1.0 - i / 100) for i in range(1, 11)] + [(99, 0.2)]
    dense = [(i, 0.6) for i in range(1, 11)]
    kept = keep_keyword_finds(fused, dense, [(99, find), (7, held), (3, held / 2)])
    assert ([cid for cid, _ in kept][2] == 99) is moves
    assert keep_keyword_finds(fused, dense[:2], [(99, 0.1), (7, 9.0)])[2][0] == 99  # 7 not held


def test_spread_puts_every_documents_first_chunks_first() -> None:
    ranked = [(1, "a"), (2, "a"), (3, "a"), (4, "a"), (5, "b"), (6, "c"), (7, "a")]
    assert [ranked[i][0] for i in spread(ranked, 2)] == [1, 2, 5, 6, 3, 4, 7]


def write(opened, root: Path, names: dict[str, str], mtimes: dict[str, int]) -> None:
    """Each file of `names` (path -> text, one chunk a line) written and stored, with the
    modification times of `mtimes` (ns), in the order given."""
    for name, text in names.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if name in mtimes:
            os.utime(path, ns=(mtimes[name], mtimes[name]))
    docs = {d.source: d for d in ingest(root)}
    for name in names:
        texts = docs[name].text.split("\n")
        chunks = [ChunkRecord(t, 5, 0, len(t)) for t in texts]
        opened.write_document(docs[name], chunks, np.stack([bag_of_words(t) for t in texts]))


@pytest.mark.parametrize("mode", ["dense", "keyword", "hybrid"])
def test_the_copy_shown_is_the_original_in_every_mode(location, tmp_path: Path, mode) -> None:
    text = "backup policy nightly snapshots\nretention of weekly archives"
    names = {COPY: text, LATER: text, ORIGINAL: text, "other.txt": "unrelated words here"}
    with open_store(location) as opened:
        # the copy is stored first (its chunks have the lowest ids: ties rank it first)
        write(opened, tmp_path / "drive", names, {ORIGINAL: 10**18, LATER: 2 * 10**18})
        query = "backup policy nightly snapshots"
        hits = search(opened, bag_of_words(query), 3, text=query, mode=mode)
    assert hits[0].path == ORIGINAL
    assert [a["path"] for a in hits[0].also_at] == [LATER, COPY]  # in the rule's order
    assert all(h.path not in (COPY, LATER) for h in hits)


def test_per_document_gives_k_distinct_documents(location, tmp_path: Path) -> None:
    long = "\n".join(f"vacuum table storage part {i}" for i in range(12))
    names = {"long.txt": long, **{f"d{i}.txt": f"vacuum notes {i}\nother" for i in range(4)}}
    with open_store(location) as opened:
        write(opened, tmp_path / "drive", names, {})
        query = "vacuum table storage"
        for mode in ("dense", "keyword", "hybrid"):
            chunks = search(opened, bag_of_words(query), 5, text=query, mode=mode)
            grouped = search(
                opened, bag_of_words(query), 5, text=query, mode=mode, group="document"
            )
            assert len({h.path for h in grouped}) == len(grouped) == 5, mode
            assert grouped[0].path == "long.txt"
            assert grouped[0].more_in_document == 11  # its other passages that matched
            assert all(h.more_in_document == 0 for h in chunks)
        with pytest.raises(StoreInputError, match="group: expected one of chunk, document"):
            search(opened, None, 5, text=query, mode="keyword", group="file")


def test_hybrid_spreads_one_documents_chunks(location, tmp_path: Path) -> None:
    long = "\n".join(f"vacuum table storage part {i}" for i in range(12))
    names = {"long.txt": long, **{f"d{i}.txt": f"vacuum notes {i}\nother" for i in range(4)}}
    with open_store(location) as opened:
        write(opened, tmp_path / "drive", names, {})
        query = "vacuum table storage"
        hits = search(opened, bag_of_words(query), 10, text=query, mode="hybrid")
    assert sum(h.path == "long.txt" for h in hits[:6]) == 2
    assert len({h.path for h in hits}) == 5


@pytest.mark.slow
@pytest.mark.skipif(not PYTHON_LIBRARY.is_dir(), reason="python3-doc not installed")
@pytest.mark.parametrize(
    ("query", "answer"),
    [
        ("arbitrary precision calculator", "bc/README"),
        ("give machines IP addresses automatically", "network/dhcp.pdf"),
    ],
)
def test_the_newcomers_queries_find_their_answer(
    query: str, answer: str, newcomer_index: Path, encoder
) -> None:
    import attnswitch

    keyword = [h.path for h in attnswitch.search(query, newcomer_index, 10, "keyword")]
    hits = [h.path for h in attnswitch.search(query, newcomer_index, 10, "hybrid")]
    assert answer in hits[:3], (hits, keyword)
    assert len(set(hits)) >= 4  # not one page ten times


@pytest.fixture(scope="module")
def newcomer_index(tmp_path_factory) -> Path:
    """The folder of `newcomer_folder` indexed by `attnswitch.index`, default options."""
    import attnswitch

    root = newcomer_folder(tmp_path_factory.mktemp("drive"))
    db = tmp_path_factory.mktemp("index") / "index.sqlite3"
    attnswitch.index(root, db=db)
    return db
