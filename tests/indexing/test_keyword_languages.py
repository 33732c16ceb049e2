"""Keyword search in many languages, on both stores: the analyzer's terms are what each
store indexes and what a query looks for, so both find the same chunks; a store whose
terms were made by another analyzer is indexed again on opening, vectors untouched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnswitch.documents.ingest import ingest
from attnswitch.indexing.location import open_store
from attnswitch.indexing.store import ChunkRecord

# One file per language, two sentences each, none sharing a content word with another.
FILES = {
    "en.txt": "The backup job copies the home folders every night. Old snapshots are "
    "pruned after thirty days.",
    "de.txt": "Die Druckerwarteschlange wird nach jedem Neustart geleert. Defekte "
    "Aufträge landen im Protokoll.",
    "fr.txt": "Les certificats du serveur de messagerie expirent chaque année. Le "
    "renouvellement se fait automatiquement.",
    "hi.txt": "डेटाबेस की प्रतिलिपि हर रात बनाई जाती है। पुरानी प्रतियाँ तीस दिन बाद हटा दी जाती हैं।",
    "ko.txt": "엔지니어가 새 하드웨어를 서버실에 설치했습니다. 전원 공급 장치도 교체했습니다.",
    "ja.txt": "ファイアウォールの規則は毎週見直されます。不要なポートは閉じられます。",
    "zh.txt": "邮件服务器的证书每年更新一次。续期过程是自动完成的。",
}
# (query, the file it is about): inflected, without the particle, without spaces.
QUERIES = [
    ("backups pruning snapshot", "en.txt"),
    ("Druckerwarteschlangen", "de.txt"),
    ("certificat messagerie", "fr.txt"),
    ("डेटाबेस प्रतिलिपि", "hi.txt"),
    ("하드웨어 설치", "ko.txt"),
    ("ポート", "ja.txt"),
    ("证书", "zh.txt"),
]
DIM = 8


def fill(store, root: Path) -> dict[str, int]:
    """Write each file of `root` as one chunk (random vectors: only keyword search is
    asked here); source -> chunk id."""
    rng = np.random.default_rng(3)
    for doc in ingest(root):
        store.write_document(
            doc, [ChunkRecord(doc.text, 1, 0, len(doc.text))], rng.normal(size=(1, DIM))
        )
    return {s: store.document_chunks(root, s)[0].id for s in store.sources(root)}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.mark.parametrize("query, answer", QUERIES, ids=[a for _, a in QUERIES])
def test_a_query_finds_its_file_first_in_every_language(
    location, root: Path, query: str, answer: str
) -> None:
    with open_store(location) as store:
        ids = fill(store, root)
        hits = store.keyword(query, 3)
    assert hits and hits[0][0] == ids[answer], (query, hits, ids)


# Two files per query hold its content words, the decoy twice each; only the answer holds
# its function words as well ("how", "to"; "wie", "wird").
FUNCTION_WORD_FILES = {
    "howto.txt": "This page explains how to install the server on a new machine.",
    "packages.txt": "Server install notes: install the server packages, then reboot.",
    "anleitung.txt": "Diese Seite erklärt, wie der Server auf einem neuen Rechner installiert "
    "wird.",
    "pakete.txt": "Server installiert: Server-Pakete installiert, dann Neustart.",
}


@pytest.mark.parametrize(
    "query, answer",
    [
        ("how to install the server", "howto.txt"),
        ("Wie wird der Server installiert", "anleitung.txt"),
    ],
)
def test_a_query_looks_for_its_function_words_too(
    location, root: Path, query: str, answer: str
) -> None:
    """No word is dropped from a query as a stop word: its function words tell the answer
    from a file that repeats its content words (dropped, the decoy ranked first)."""
    for name, text in FUNCTION_WORD_FILES.items():
        (root / name).write_text(text, encoding="utf-8")
    with open_store(location) as store:
        ids = fill(store, root)
        hits = store.keyword(query, 4)
    assert hits and hits[0][0] == ids[answer], (query, hits, ids)


def test_a_chunk_whose_words_stem_to_nothing_is_stored_and_found(location, root: Path) -> None:
    """Snowball's Nepali stemmer stems `को` and `यो` (suffixes alone) to nothing; such a
    chunk is stored on both stores (PostgreSQL refused the empty lexeme) and found by them."""
    text = "नेपालको राजधानी काठमाडौं हो। यो शहर को इतिहास धेरै पुरानो छ। यहाँ धेरै मन्दिरहरू छन्।"
    (root / "ne.txt").write_text(text, encoding="utf-8")
    with open_store(location) as store:
        ids = fill(store, root)
        assert "ne" in store.languages()
        hits = store.keyword("को इतिहास", 3)
    assert hits and hits[0][0] == ids["ne.txt"], hits


def test_the_stores_find_the_same_chunks(pg_url: str, tmp_path: Path, root: Path) -> None:
    """Each query matches the same files on SQLite and on PostgreSQL (their rankings are
    BM25 and `ts_rank`, so only the sets are compared)."""
    found = {}
    for location in (tmp_path / "db" / "index.sqlite3", pg_url):
        with open_store(location) as store:
            ids = fill(store, root)
            source = {cid: s for s, cid in ids.items()}
            found[str(location)] = [
                {source[cid] for cid, _ in store.keyword(q, 10)} for q, _ in QUERIES
            ]
            assert store.languages() == sorted({"de", "en", "fr", "hi", "ja", "ko", "zh"})
    sqlite, postgres = found.values()
    assert sqlite == postgres


def test_a_replaced_or_removed_chunk_leaves_no_terms_behind(location, root: Path) -> None:
    with open_store(location) as store:
        ids = fill(store, root)
        assert store.keyword("snapshots", 5)[0][0] == ids["en.txt"]
        (root / "en.txt").write_text("The mirror is rebuilt from scratch.", encoding="utf-8")
        (root / "ko.txt").unlink()
        fill(store, root)
        store.remove(root, ["ko.txt"])
        assert store.keyword("snapshots", 5) == []
        assert store.keyword("하드웨어", 5) == []
        (new,) = store.document_chunks(root, "en.txt")
        assert [cid for cid, _ in store.keyword("mirrors", 5)] == [new.id]


def test_a_store_analysed_by_another_analyzer_is_indexed_again_on_opening(
    location, root: Path
) -> None:
    """The terms follow the analyzer's fingerprint: one that differs (another version, an
    upgraded stemmer) makes the opening store index every chunk again; vectors and ids
    stay as they were."""
    with open_store(location) as store:
        ids = fill(store, root)
        before = store.vectors()
        store.set_meta("analyzer", "0:an older analyzer")
        if location == str(location):  # PostgreSQL: the old terms were another analyzer's
            store._conn.execute("UPDATE chunks SET terms = NULL, language = NULL")
        else:
            store._conn.execute("INSERT INTO chunks_terms (chunks_terms) VALUES ('delete-all')")
        assert store.keyword("Druckerwarteschlange", 3) == []
    with open_store(location) as store:
        assert store.meta("analyzer") != "0:an older analyzer"
        assert store.keyword("Druckerwarteschlange", 3)[0][0] == ids["de.txt"]
        assert store.languages() == sorted({"de", "en", "fr", "hi", "ja", "ko", "zh"})
        after = store.vectors()
    assert all(np.array_equal(a, b) for a, b in zip(before, after))
