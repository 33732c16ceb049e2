"""Top-k cosine search over a real store, checked against brute force in float64, and on
part of the shipped corpus with a bag-of-words embedding (no model needed); the
Makefile's demo query on the whole corpus with the default model."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from attnswitch.documents.ingest import ingest
from attnswitch.indexing.search import VectorIndex, keyword_text, search
from attnswitch.indexing.store import ChunkRecord, SQLiteStore, StoreInputError

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
DIM = 16


@pytest.fixture
def filled(tmp_path: Path):
    """A store with 3 documents of 7 chunks each and the vectors written, by chunk id."""
    root = tmp_path / "docs"
    root.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (root / name).write_text(f"document {name} " * 20)
    rng = np.random.default_rng(7)
    written: dict[int, np.ndarray] = {}
    with SQLiteStore(tmp_path / "index.sqlite3") as store:
        for doc in ingest(root):
            chunks = [
                ChunkRecord(f"{doc.source} part {i}", 3, 10 * i, 10 * i + 10) for i in range(7)
            ]
            vecs = rng.normal(size=(7, DIM))
            store.write_document(doc, chunks, vecs)
            for row, v in zip(store.document_chunks(root, doc.source), vecs, strict=True):
                written[row.id] = v
        yield store, written


def brute_force(written: dict[int, np.ndarray], query: np.ndarray) -> list[tuple[float, int]]:
    """(cosine, chunk id), best first, in float64, over the written vectors as the store
    keeps them: normalised, each element rounded to float16 (records.VECTOR_DTYPE)."""
    q = query.astype(np.float64) / np.linalg.norm(query)
    scored = [(float(stored(v) @ q), cid) for cid, v in written.items()]
    return sorted(scored, key=lambda s: (-s[0], s[1]))


def stored(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32).astype(np.float16).astype(np.float64)


@pytest.mark.parametrize("k", [1, 5, 21, 50])
def test_top_k_matches_brute_force(filled, k: int) -> None:
    store, written = filled
    query = np.random.default_rng(k).normal(size=DIM)
    hits = search(store, query, k)
    expected = brute_force(written, query)[:k]
    assert [h.chunk_id for h in hits] == [cid for _, cid in expected]
    np.testing.assert_allclose([h.score for h in hits], [s for s, _ in expected], atol=1e-6)
    # and the float16 rounding moved no score by more than 2^-11 (each element's bound)
    q = query / np.linalg.norm(query)
    np.testing.assert_allclose(
        [h.score for h in hits],
        [written[h.chunk_id] @ q / np.linalg.norm(written[h.chunk_id]) for h in hits],
        atol=2.0**-11,
    )
    rows = store.chunks(h.chunk_id for h in hits)
    for h in hits:
        assert (h.source, h.text, h.ordinal, h.start) == (
            rows[h.chunk_id].source,
            rows[h.chunk_id].text,
            rows[h.chunk_id].ordinal,
            rows[h.chunk_id].start,
        )
        assert h.text.startswith(h.source)


def test_a_stored_vector_finds_itself_first(filled) -> None:
    store, written = filled
    cid, vec = list(written.items())[9]
    (hit,) = search(store, vec * 3.0, k=1)
    assert hit.chunk_id == cid and hit.score == pytest.approx(1.0, abs=2.0**-11)


def test_ties_are_broken_by_chunk_id(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "same.txt").write_text("same vectors")
    with SQLiteStore(tmp_path / "i.sqlite3") as store:
        (doc,) = ingest(root)
        vecs = np.tile(np.eye(4)[0], (40, 1))
        vecs[::7] = np.eye(4)[1]  # c0, c7, c14, ... score 0; the others tie at 1
        chunks = [ChunkRecord(f"c{i}", 1, 0, 1) for i in range(40)]
        store.write_document(doc, chunks, vecs)
        hits = search(store, np.eye(4)[0], k=5)
        assert [h.text for h in hits] == ["c1", "c2", "c3", "c4", "c5"]
        assert [h.text for h in search(store, np.eye(4)[1], k=3)] == ["c0", "c7", "c14"]


def test_search_many_equals_one_by_one(filled) -> None:
    store, _ = filled
    queries = np.random.default_rng(3).normal(size=(4, DIM))
    index = VectorIndex(store)
    assert len(index) == 21
    many = index.search_many(queries, k=3)
    assert [[h.chunk_id for h in hits] for hits in many] == [
        [h.chunk_id for h in index.search(q, k=3)] for q in queries
    ]


@pytest.mark.parametrize(
    ("query", "k", "message"),
    [
        (np.ones(DIM + 1), 3, "query: expected dimension 16"),
        (np.zeros(DIM), 3, "query: expected a non-zero vector"),
        (np.full(DIM, np.nan), 3, "query: expected finite values"),
        (np.ones((2, 2, DIM)), 3, "query: expected one vector"),
        (np.ones(DIM), 0, "k: expected an int >= 1"),
    ],
)
def test_bad_queries(filled, query, k, message: str) -> None:
    store, _ = filled
    with pytest.raises(StoreInputError, match=message):
        search(store, query, k)


def test_empty_store(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "empty.sqlite3") as store:
        assert search(store, np.ones(DIM), k=3) == []


def bag_of_words(text: str, dim: int = 1024) -> np.ndarray:
    """A deterministic hashed bag-of-words vector: a stand-in embedding for search tests."""
    v = np.zeros(dim)
    for word in re.findall(r"[a-z]{3,}", text.lower()):
        v[zlib.crc32(word.encode()) % dim] += 1.0
    return v


def paragraphs(text: str, size: int = 800) -> list[ChunkRecord]:
    out, start = [], 0
    while start < len(text):
        end = min(start + size, len(text))
        out.append(ChunkRecord(text[start:end], len(text[start:end].split()), start, end))
        start = end
    return [c for c in out if re.search(r"[a-z]{3,}", c.text.lower())]


def test_corpus_search_finds_the_right_page(tmp_path: Path) -> None:
    root = CORPUS / "sqlite"
    with SQLiteStore(tmp_path / "corpus.sqlite3") as store:
        docs = list(ingest(root))
        assert all(doc.ok for doc in docs) and len(docs) >= 10
        for doc in docs:
            chunks = paragraphs(doc.text)
            store.write_document(doc, chunks, np.stack([bag_of_words(c.text) for c in chunks]))
        index = VectorIndex(store)
        for query, page in [
            ("write-ahead log wal checkpoint readers writers", "wal.html"),
            ("json functions json_extract json_object arrays", "json1.html"),
            ("type affinity storage class integer real text blob", "datatype3.html"),
        ]:
            hits = index.search(bag_of_words(query), k=3)
            assert hits[0].source == page, [(h.source, round(h.score, 3)) for h in hits]


# -- modes: dense, keyword, hybrid, on both stores ---------------------------------------------

MODE_TEXTS = [
    "The connection pool returned error ERR_CONN_42 after the timeout expired.",
    "Set max_wal_senders in postgresql.conf before enabling replication.",
    "Vacuum reclaims storage occupied by dead tuples in the table.",
    "Connection failures are retried with exponential backoff by the client.",
    "The planner estimates row counts from the statistics gathered by analyze.",
]


@pytest.fixture
def modes_store(location, tmp_path: Path):
    """Five one-chunk documents with bag-of-words vectors, in each store."""
    from attnswitch.indexing.location import open_store

    root = tmp_path / "modes"
    root.mkdir()
    for i, text in enumerate(MODE_TEXTS):
        (root / f"t{i}.txt").write_text(text)
    with open_store(location) as store:
        for doc in sorted(ingest(root), key=lambda d: d.source):
            store.write_document(
                doc,
                [ChunkRecord(doc.text, 9, 0, len(doc.text))],
                bag_of_words(doc.text, 64)[None, :],
            )
        yield store


def sources(hits) -> list[str]:
    return [h.source for h in hits]


def test_keyword_finds_exact_terms(modes_store) -> None:
    hits = search(modes_store, None, 3, text="ERR_CONN_42", mode="keyword")
    assert sources(hits) == ["t0.txt"]
    hits = search(modes_store, None, 5, text="max_wal_senders replication", mode="keyword")
    assert sources(hits)[0] == "t1.txt" and hits[0].score > 0
    assert search(modes_store, None, 5, text="zyzzyva", mode="keyword") == []


def test_keyword_ranks_a_chunk_with_every_word_above_one_repeating_a_word(
    location, tmp_path: Path
) -> None:
    """Any of the query's words may match, and a chunk holding each of them once ranks above
    chunks that repeat one of them many times, in both stores (PostgreSQL's cover density,
    `ts_rank_cd`, ranked it last: it counts the occurrences)."""
    from attnswitch.indexing.location import open_store

    texts = {
        "every.txt": "Rows in a table are changed with the update command.",
        "update.txt": "Update the update log; every update is kept, and each update of "
        "an update is logged as an update.",
        "table.txt": "Table of contents: the table lists the table of the tables, a "
        "table in a table.",
    }
    root = tmp_path / "words"
    root.mkdir()
    for name, text in texts.items():
        (root / name).write_text(text)
    with open_store(location) as store:
        for doc in sorted(ingest(root), key=lambda d: d.source):
            store.write_document(
                doc,
                [ChunkRecord(doc.text, 9, 0, len(doc.text))],
                bag_of_words(doc.text, 64)[None, :],
            )
        hits = search(store, None, 3, text="update rows in a table", mode="keyword")
    assert sorted(sources(hits)) == sorted(texts)
    assert sources(hits)[0] == "every.txt"


@pytest.mark.parametrize(
    "text, words, found",
    [
        ('"vacuum', "vacuum", ["t2.txt"]),
        ("NEAR(vacuum tuples", "NEAR vacuum tuples", ["t2.txt"]),
        ("replication AND OR NOT *", "replication AND OR NOT", ["t1.txt"]),
        ("planner:* & !statistics | (analyze", "planner statistics analyze", ["t4.txt"]),
        ("'; -- backoff", "backoff", ["t3.txt"]),
    ],
)
def test_query_syntax_is_taken_as_words(
    modes_store, text: str, words: str, found: list[str]
) -> None:
    """Query syntax of either engine (FTS5, tsquery, SQL) is read as the words in it: the
    hits are those of the words alone, and they are the documents with those words."""
    hits = search(modes_store, None, 5, text=text, mode="keyword")
    assert sources(hits) == found
    plain = search(modes_store, None, 5, text=words, mode="keyword")
    assert [(h.source, h.score) for h in hits] == [(h.source, h.score) for h in plain]


def plain_fusion(store, vector, text: str) -> tuple[dict[int, float], dict[int, str]]:
    """chunk id -> the convex combination of the dense and keyword lists' min-max normalised
    scores, computed here from the modes' own lists (the reference hybrid is checked
    against); and chunk id -> source."""
    from attnswitch.indexing.search import CANDIDATES, DENSE_WEIGHT

    dense = search(store, vector, CANDIDATES, mode="dense")
    keyword = search(store, None, CANDIDATES, text=text, mode="keyword")
    fused: dict[int, float] = {}
    for weight, ranked in ((DENSE_WEIGHT, dense), (1 - DENSE_WEIGHT, keyword)):
        hi, lo = ranked[0].score, ranked[-1].score
        for h in ranked:
            scaled = (h.score - lo) / (hi - lo) if hi > lo else 1.0
            fused[h.chunk_id] = fused.get(h.chunk_id, 0.0) + weight * scaled
    return fused, {h.chunk_id: h.source for h in dense + keyword}


def test_hybrid_is_the_convex_combination_of_both_normalised_scores(modes_store) -> None:
    text = "connection error timeout"
    vector = bag_of_words("connection failures retried client", 64)
    expected, _ = plain_fusion(modes_store, vector, text)
    order = sorted(expected.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    hybrid = search(modes_store, vector, 3, text=text)  # hybrid: the default with text
    assert [h.chunk_id for h in hybrid] == [cid for cid, _ in order]
    assert [h.score for h in hybrid] == pytest.approx([score for _, score in order])
    assert sources(hybrid)[0] in {"t0.txt", "t3.txt"}
    assert all(0.0 <= h.score <= 1.0 for h in hybrid)


def test_a_chunk_near_the_top_of_both_lists_by_score_beats_one_first_by_rank() -> None:
    """The demo query's case: keyword ranks first a chunk that repeats the query's common
    words, a little above the answer; dense ranks the answer second, a hair under a chunk
    keyword does not have, and that repeated-words chunk third but far below by similarity.
    Rank fusion puts the repeated-words chunk first (ranks 1 and 3 against 2 and 2); the
    fusion of scores puts the answer first, near the top of both lists by score."""
    from attnswitch.indexing.search import fuse

    answer, repeats, near = 1, 2, 3
    dense = [(near, 0.470), (answer, 0.467), (repeats, 0.30), (4, 0.25), (5, 0.20)]
    keyword = [(repeats, 9.0), (answer, 8.8), (8, 4.0), (9, 1.0)]
    by_rank = reciprocal_rank_fusion(dense, keyword)
    assert [cid for cid, _ in by_rank[:2]] == [repeats, answer]  # the case: ranks mislead
    fused = fuse(dense, keyword)
    assert [cid for cid, _ in fused[:3]] == [answer, near, repeats]
    assert dict(fused)[answer] == pytest.approx(0.8 * 0.267 / 0.27 + 0.2 * 7.8 / 8.0)
    assert dict(fused)[near] == pytest.approx(0.8)  # first in dense, not in keyword


def reciprocal_rank_fusion(*lists: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The fusion before `fuse` (Cormack et al., 2009): each chunk scores the sum of
    1 / (60 + its rank) over the lists holding it; best first, ties by chunk id."""
    scores: dict[int, float] = {}
    for ranked in lists:
        for rank, (cid, _) in enumerate(ranked, start=1):
            scores[cid] = scores.get(cid, 0.0) + 1.0 / (60 + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


@pytest.mark.parametrize("seed", range(20))
def test_fusion_orders_by_its_scores_and_a_better_score_never_ranks_lower(seed: int) -> None:
    """`fuse` of random lists: every chunk of either once, score descending then chunk id
    ascending, each score the documented convex combination; and a chunk whose dense or
    keyword score alone rises ranks no lower than before."""
    from attnswitch.indexing.search import DENSE_WEIGHT, fuse, min_max

    rng = np.random.default_rng(seed)
    ids = rng.permutation(30)[: rng.integers(1, 30)].tolist()
    dense = sorted(
        (
            (int(c), float(rng.choice([-0.3, 0.1, 0.5, rng.uniform(-1, 1)])))
            for c in rng.choice(ids, rng.integers(0, len(ids) + 1), replace=False)
        ),
        key=lambda item: -item[1],
    )
    keyword = sorted(
        (
            (int(c), float(rng.choice([1.0, 4.0, rng.uniform(0, 20)])))
            for c in rng.choice(ids, rng.integers(0, len(ids) + 1), replace=False)
        ),
        key=lambda item: -item[1],
    )
    fused = fuse(dense, keyword)
    assert sorted(cid for cid, _ in fused) == sorted({c for c, _ in dense + keyword})
    assert fused == sorted(fused, key=lambda item: (-item[1], item[0]))
    d, k = min_max(dense), min_max(keyword)
    for cid, score in fused:
        assert score == pytest.approx(
            DENSE_WEIGHT * d.get(cid, 0.0) + (1 - DENSE_WEIGHT) * k.get(cid, 0.0)
        )
    for ranked, other, first in ((dense, keyword, True), (keyword, dense, False)):
        if not ranked:
            continue
        cid, score = ranked[int(rng.integers(len(ranked)))]
        better = [(c, s + 0.5 if c == cid else s) for c, s in ranked]
        after = fuse(better, other) if first else fuse(other, better)
        position = [c for c, _ in fused].index(cid)
        assert [c for c, _ in after].index(cid) <= position


@pytest.mark.parametrize(
    "dense, keyword, expected",
    [
        ([], [], []),
        ([(1, 0.5)], [], [(1, 0.8)]),  # one score: the list's best and its worst
        ([], [(1, 3.0), (2, 3.0)], [(1, 0.2), (2, 0.2)]),  # equal scores: all the best
        ([(1, 0.9), (2, 0.1)], [(2, 5.0), (1, 1.0)], [(1, 0.8), (2, 0.2)]),
        ([(1, -0.2), (2, -0.4)], [(2, 2.0), (3, 1.0)], [(1, 0.8), (2, 0.2), (3, 0.0)]),
    ],
)
def test_fusion_of_awkward_lists(dense, keyword, expected) -> None:
    """Empty lists, one entry, equal scores, negative similarities: every chunk of either
    list, scores in [0, 1], ties broken by chunk id."""
    from attnswitch.indexing.search import fuse

    got = fuse(dense, keyword)
    assert [cid for cid, _ in got] == [cid for cid, _ in expected]
    assert [score for _, score in got] == pytest.approx([score for _, score in expected])


def test_a_chunk_holding_the_query_as_a_phrase_ranks_first_in_hybrid(modes_store) -> None:
    """Fusion alone ranks the chunk that the dense vector favours first; the chunk that
    holds the query's words as a phrase (case and punctuation aside) goes first instead,
    its score raised by the phrase bonus, and the order below it stays the fusion's."""
    from attnswitch.indexing.search import PHRASE_BONUS

    text = "CONNECTION failures, are retried"  # t3: "Connection failures are retried"
    vector = bag_of_words(MODE_TEXTS[0] + " pool pool error", 64)  # dense rank 1: t0
    fused, by_source = plain_fusion(modes_store, vector, text)
    order = sorted(fused, key=lambda cid: (-fused[cid], cid))
    assert by_source[order[0]] == "t0.txt"  # what plain fusion would answer
    hybrid = search(modes_store, vector, 5, text=text)
    assert sources(hybrid)[0] == "t3.txt"
    assert hybrid[0].score == pytest.approx(fused[hybrid[0].chunk_id] + PHRASE_BONUS)
    rest = [cid for cid in order if by_source[cid] != "t3.txt"][:4]
    assert [h.chunk_id for h in hybrid[1:]] == rest
    assert [h.score for h in hybrid[1:]] == pytest.approx([fused[cid] for cid in rest])


@pytest.mark.parametrize(
    "query, holds",
    [
        ("json dumps", True),
        ("JSON.dumps()", True),
        ("dumps json", False),
        ("json", True),
        ("DUMPS", True),
        ("son", False),
        ("json load", False),
        ("son dumps", False),
        ("json  dumps is", False),
    ],
)
def test_a_phrase_is_the_words_in_order_with_only_punctuation_between(
    query: str, holds: bool
) -> None:
    """Whole words, in order, only spaces or punctuation between them; a one-word query's
    phrase is its word; a part of a word does not match."""
    from attnswitch.indexing.search import PHRASE_BONUS, phrase_first

    texts = {1: "Serialize obj with json.dumps(obj) to a str.", 2: "Other text."}
    top, low = 1.0, 0.0  # the most and the least a fused score can be
    out = dict(phrase_first([(2, top), (1, low)], texts, query))
    assert (out[1] == low + PHRASE_BONUS) is holds and out[2] == top
    assert list(out) == ([1, 2] if holds else [2, 1])


def test_a_phrase_ranks_first_whatever_its_bonus() -> None:
    """The phrase chunks go first by rule, not by the size of the bonus: on a tie of the
    raised score with the best other chunk (the default bonus of 1 on a fused 0), and with
    a bonus too small to lift it (a benchmark's own), the phrase chunk still ranks first,
    its score raised by exactly the bonus."""
    from attnswitch.indexing.search import phrase_first

    texts = {1: "Serialize obj with json.dumps(obj) to a str.", 2: "Other text."}
    assert phrase_first([(2, 1.0), (1, 0.0)], texts, "json dumps") == [(1, 1.0), (2, 1.0)]
    assert phrase_first([(2, 1.0), (1, 0.0)], texts, "json dumps", bonus=0.25) == [
        (1, 0.25),
        (2, 1.0),
    ]


def test_each_hit_carries_its_score_parts(modes_store) -> None:
    """A hybrid hit shows its cosine similarity and keyword score, each with its rank in its
    own list (None where the chunk is not in that list); a dense or keyword hit shows its
    own list's part and None for the other. Every hit has its rank, path, chunk id and a
    one-line snippet of its text."""
    from attnswitch.indexing.search import CANDIDATES

    text = "connection error timeout"
    vector = bag_of_words("connection failures retried client", 64)
    dense = search(modes_store, vector, CANDIDATES, mode="dense")
    keyword = search(modes_store, None, CANDIDATES, text=text, mode="keyword")
    hybrid = search(modes_store, vector, 5, text=text)
    assert len(keyword) < len(hybrid) == len(dense) == 5  # some hits are dense-only
    by_dense = {h.chunk_id: (h.rank, h.score) for h in dense}
    by_keyword = {h.chunk_id: (h.rank, h.score) for h in keyword}
    for h in hybrid:
        assert (h.dense_rank, h.dense_similarity) == by_dense[h.chunk_id]
        assert (h.keyword_rank, h.keyword_score) == by_keyword.get(h.chunk_id, (None, None))
    assert any(h.keyword_rank is None for h in hybrid)
    assert [h.rank for h in hybrid] == [1, 2, 3, 4, 5]
    q = vector / np.linalg.norm(vector)
    with_vectors = dict(zip(*modes_store.vectors()))
    for h in dense:
        assert (
            h.dense_similarity
            == h.score
            == pytest.approx(float(with_vectors[h.chunk_id] @ q), abs=1e-5)
        )
        assert (h.dense_rank, h.keyword_score, h.keyword_rank) == (h.rank, None, None)
        assert h.path == h.source and h.snippet == " ".join(h.text.split())
    for h in keyword:
        assert (h.keyword_score, h.keyword_rank, h.dense_similarity) == (h.score, h.rank, None)
    assert set(hybrid[0].to_dict()) >= {
        "rank",
        "score",
        "path",
        "root",
        "chunk_id",
        "dense_similarity",
        "dense_rank",
        "keyword_score",
        "keyword_rank",
        "snippet",
        "text",
    }


@pytest.mark.parametrize("ef", [0, 5000, 2.5])
def test_a_bad_beam_is_refused_by_its_argument_name(modes_store, ef) -> None:
    with pytest.raises(
        StoreInputError, match=rf"^ef: expected an integer from 1 to 1000, got {ef!r}$"
    ):
        search(modes_store, np.ones(64), 3, text="vacuum", ef=ef)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "keyword"}, "text: expected the query's text for mode 'keyword'"),
        ({"mode": "hybrid", "text": "  "}, "text: expected the query's text for mode 'hybrid'"),
        ({"mode": "fuzzy", "text": "x"}, "mode: expected one of hybrid, dense, keyword"),
    ],
)
def test_modes_refuse_what_they_cannot_use(modes_store, kwargs, message: str) -> None:
    with pytest.raises(StoreInputError, match=message):
        search(modes_store, np.ones(64), 3, **kwargs)
    with pytest.raises(StoreInputError, match="query: expected the query's vector"):
        search(modes_store, None, 3, text="vacuum", mode="dense")


# -- questions: keyword search ranks on what is asked, not on how -----------------------------


def test_keyword_text_drops_the_opening_of_a_question() -> None:
    assert keyword_text("how do I update rows in a table") == "update rows in a table"
    assert keyword_text("What is MVCC?") == "MVCC?"
    assert keyword_text("Can I use SQLite in my product?") == "use SQLite in my product?"
    # one such word is no question opening: SQL keywords and headings keep every word
    assert keyword_text("WHERE clause") == "WHERE clause"
    assert keyword_text("How WAL works") == "How WAL works"
    assert keyword_text("how do I") == "how do I"  # nothing would be left


FAQ = (
    "How do I create an AUTOINCREMENT field? How do I list all tables? How do I add, "
    "delete or rename columns? How do I use a string literal with a quote in it? How "
    "do I get the size of a database? How do I turn on the WAL mode?"
)


def test_a_question_finds_the_answer_not_a_page_of_questions(location, tmp_path: Path) -> None:
    from attnswitch.indexing.location import open_store

    root = tmp_path / "questions"
    root.mkdir()
    (root / "faq.txt").write_text(FAQ)
    (root / "vacuum.txt").write_text(MODE_TEXTS[2])
    with open_store(location) as store:
        for doc in ingest(root):
            store.write_document(
                doc,
                [ChunkRecord(doc.text, 9, 0, len(doc.text))],
                bag_of_words(doc.text, 64)[None, :],
            )
        hits = search(store, None, 2, text="How do I vacuum the table?", mode="keyword")
        assert sources(hits)[0] == "vacuum.txt", [(h.source, h.score) for h in hits]


def test_the_score_s_documented_weights_are_the_ones_fusion_uses() -> None:
    """The API schema's description of a hit's score (what a service client reads) states
    the weights and the phrase bonus that `fuse` and `phrase_first` apply: a retune of the
    constants that leaves the description behind fails here."""
    pydantic = pytest.importorskip("pydantic")
    from attnswitch.indexing.search import DENSE_WEIGHT, PHRASE_BONUS, Hit

    schema = pydantic.TypeAdapter(Hit).json_schema()
    described = " ".join(schema["properties"]["score"]["description"].split())
    assert (
        f"{DENSE_WEIGHT:g} times the dense similarity and {1 - DENSE_WEIGHT:g} times "
        f"the keyword score"
    ) in described
    assert f"plus {PHRASE_BONUS:g} when the chunk holds the query's words" in described
    assert f"(so 0 to {1 + PHRASE_BONUS:g})" in described


# -- rows of a spreadsheet ---------------------------------------------------------------------

OWNERS = [
    "Amal Haddad",
    "Bruno Costa",
    "Chen Wei",
    "Dana Kowalski",
    "Eitan Levi",
    "Farah Aziz",
    "Goran Petrovic",
    "Hana Sato",
    "Ines Moreau",
    "Jonas Berg",
    "Kofi Mensah",
]
MODELS = [
    "ThinkPad T14",
    "Latitude 5440",
    "EliteBook 840",
    "MacBook Air",
    "Precision 3581",
    "XPS 13",
    "ProBook 450",
]
ROOMS = ["B2.14", "B2.16", "C1.03", "C1.05", "A0.11"]


def serial(i: int) -> str:
    return f"PF{(7919 * (i + 1)) % 100_000:05d}K"


def inventory_csv() -> str:
    """A hardware inventory as an office keeps it: 120 rows whose owners, models and rooms
    repeat, a serial number naming each row."""
    lines = ["serial,model,owner,room,purchased"]
    for i in range(120):
        lines.append(
            f"{serial(i)},{MODELS[i % 7]},{OWNERS[i % 11]},{ROOMS[i % 5]},"
            f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}"
        )
    return "\n".join(lines) + "\n"


def test_a_keyword_query_for_one_rows_values_finds_that_rows_chunk(
    location, tmp_path: Path
) -> None:
    """Each row of a sheet sits in a small chunk with its column names, so a query for a
    row's values (its serial number and model) ranks a chunk of a few rows holding that row
    first, and the hit names its rows (before, the chunk was a window of ten rows)."""
    from attnswitch.documents.chunk import ROWS_PER_CHUNK, chunk_document
    from attnswitch.documents.readers.blocks import Location
    from attnswitch.engines import ModelSpec
    from attnswitch.indexing.config import chunk_tokenizer
    from attnswitch.indexing.location import open_store

    root = tmp_path / "sheets"
    root.mkdir()
    (root / "inventory.csv").write_text(inventory_csv())
    tokenizer = chunk_tokenizer(ModelSpec.load(None))
    with open_store(location) as store:
        (doc,) = ingest(root)
        chunks = chunk_document(doc.text, doc.blocks, tokenizer, max_tokens=254)
        store.write_document(doc, chunks, np.stack([bag_of_words(c.text, 64) for c in chunks]))
        for i in (3, 40, 77, 118):
            owner, model = OWNERS[i % 11], MODELS[i % 7]
            hits = search(store, None, 3, text=f"{serial(i)} {model}", mode="keyword")
            row = i + 2  # the file's line: the header is line 1
            rows = Location.from_dict(hits[0].location).rows
            assert rows is not None and rows[0] <= row <= rows[1], (row, hits[0].text)
            assert rows[1] - rows[0] < ROWS_PER_CHUNK
            assert f"model: {model} | owner: {owner}" in hits[0].text


# -- snippets at the match and copies collapsed ------------------------------------------


def test_the_snippet_is_the_passage_with_the_query_s_words_marked() -> None:
    """A word deep in a long chunk is in its snippet (the chunk's start would not hold it),
    and each mark covers exactly a query word (case ignored, suffixes allowed)."""
    from attnswitch.indexing.search import SNIPPET_CHARS, highlight_terms, passage

    text = "Preamble about nothing in particular. " * 20 + (
        "To change rows, the UPDATE command updates the Table in place.\n\nTail " * 2
    )
    terms = highlight_terms("how do I update rows in a table")
    assert terms == ["update", "rows", "table"]
    shown, start, marks = passage(text, terms)
    assert len(shown) <= SNIPPET_CHARS and shown.startswith("…") and start > 600
    assert "UPDATE command updates the Table" in shown
    words = [shown[a:b].lower() for a, b in marks]
    assert {"rows", "update", "updates", "table"} <= set(words)
    assert all(any(w.startswith(t) for t in terms) for w in words)
    assert passage("nothing matches here", terms) == ("nothing matches here", 0, [])


def test_keyword_hits_mark_the_words_they_hold(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    filler = "Some words that say nothing about the question at all. " * 12
    (root / "long.txt").write_text(filler + "Here the vacuum command reclaims storage.")
    with SQLiteStore(tmp_path / "db.sqlite3") as store:
        for doc in ingest(root):
            store.write_document(
                doc, [ChunkRecord(doc.text, 9, 0, len(doc.text))], np.ones((1, 8), np.float32)
            )
        (hit,) = search(store, None, 1, text="vacuum storage", mode="keyword")
    assert "vacuum command reclaims storage" in hit.snippet
    assert sorted(hit.snippet[a:b] for a, b in hit.highlights) == ["storage", "vacuum"]
    assert hit.text[hit.snippet_start :].startswith(hit.snippet.lstrip("…")[:20])


@pytest.mark.parametrize("mode", ["dense", "keyword", "hybrid"])
def test_copies_of_a_document_are_one_result_listing_the_others(tmp_path: Path, mode: str) -> None:
    """Three copies of one page and two other pages: one result for the copies (also at
    the two others), and k distinct results still."""
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    page = "Backups: the vacuum command and its options, explained.\n"
    for name in ("a.txt", "b.txt", "sub/c.txt"):
        (root / name).write_text(page)
    (root / "d.txt").write_text("Indexes speed up queries; vacuum keeps them small.\n")
    (root / "e.txt").write_text("Vacuum now and then, the manual says.\n")
    with SQLiteStore(tmp_path / "db.sqlite3") as store:
        for doc in ingest(root):
            vector = bag_of_words(doc.text, 64)[None, :]
            store.write_document(doc, [ChunkRecord(doc.text, 9, 0, len(doc.text))], vector)
        query = bag_of_words("the vacuum command", 64)
        hits = search(store, query, 3, text="the vacuum command", mode=mode)
    assert len(hits) == 3 and len({h.path for h in hits}) == 3
    copies = [h for h in hits if h.path in ("a.txt", "b.txt", "sub/c.txt")]
    assert len(copies) == 1
    others = {a["path"] for a in copies[0].also_at}
    assert others == {"a.txt", "b.txt", "sub/c.txt"} - {copies[0].path}
    assert all(not h.also_at for h in hits if h is not copies[0])
