"""`Index.open`, the one place a location is resolved and opened, on both stores: what a
location names, the errors that name `db`, the config and count read once per Index and
again only when another connection committed (`refresh`), and the read-side views."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from attnswitch.documents.ingest import ingest
from attnswitch.indexing.config import META_KEY, IndexConfig
from attnswitch.indexing.index import Index, IndexEmptyError, IndexMissingError
from attnswitch.indexing.store import ChunkRecord, StoreInputError
from store_testing import statements

DIM = 8


def config(name: str = "m") -> IndexConfig:
    """An index config of a made-up model (no model is loaded here)."""
    return IndexConfig(
        model=None,
        model_name=name,
        model_fingerprint="f" * 64,
        dim=DIM,
        pooling="mean",
        normalize=True,
        max_seq_length=128,
        engine="torch",
        precision="fp32",
        max_tokens=100,
        overlap=0,
    )


def fill(location: str | Path, root: Path) -> None:
    """Two documents of two chunks each, and the index config, at `location`."""
    root.mkdir(parents=True)
    (root / "a.txt").write_text("vacuum and analyze\ncheckpoint tuning")
    (root / "b.txt").write_text("replication slots\nbackup and restore")
    rng = np.random.default_rng(5)
    with Index.open_store(location) as store:
        for doc in sorted(ingest(root), key=lambda d: d.source):
            texts = doc.text.split("\n")
            chunks = [ChunkRecord(t, 3, 0, len(t)) for t in texts]
            store.write_document(doc, chunks, rng.normal(size=(len(texts), DIM)))
        store.set_meta(META_KEY, config().to_json())


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, Path(".attnswitch") / "index.sqlite3"),
        ("team-index", Path("team-index") / "index.sqlite3"),
        ("team-index/", Path("team-index/") / "index.sqlite3"),
        ("my.db", Path("my.db")),
        ("postgresql://u@h:5/d", "postgresql://u@h:5/d"),
        ("postgres://u@h/d", "postgres://u@h/d"),
    ],
)
def test_resolve_reads_a_location_as_db_does(given, expected, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert Index.resolve(given) == expected
    assert type(Index.resolve(given)) is type(expected)


def test_resolve_takes_an_existing_folder_or_file(tmp_path) -> None:
    (tmp_path / "folder.d").mkdir()
    (tmp_path / "file").write_bytes(b"")
    assert Index.resolve(tmp_path / "folder.d") == tmp_path / "folder.d" / "index.sqlite3"
    assert Index.resolve(str(tmp_path / "file")) == tmp_path / "file"


@pytest.mark.parametrize("bad", [3, b"index", ["a"]])
def test_resolve_refuses_what_is_no_location(bad) -> None:
    with pytest.raises(StoreInputError, match=r"^db: expected a path or a postgresql:// URL"):
        Index.resolve(bad)


def test_a_missing_sqlite_index_is_named_and_not_made(tmp_path) -> None:
    missing = tmp_path / "none"
    with pytest.raises(IndexMissingError) as error:
        Index.open(missing)
    assert str(error.value) == (
        "db: expected an index made by attnswitch.index(folder, db=...) or `attnswitch run`, "
        f"got {str(missing / 'index.sqlite3')!r}, which does not exist"
    )
    assert error.value.argument == "db" and error.value.path == missing / "index.sqlite3"
    assert not missing.exists()


def test_an_empty_index_is_named(location) -> None:
    with Index.open(location, create=True) as index:
        assert index.config is None and index.count() == 0
        with pytest.raises(IndexEmptyError) as error:
            index.check_searchable()
    assert (
        str(error.value)
        == f"db: expected an index with documents, got the empty index at {index.where}"
    )


def test_the_config_and_count_are_read_once_per_index(location, tmp_path) -> None:
    fill(location, tmp_path / "docs")
    with Index.open(location) as index, statements(index._store) as sent:
        for _ in range(3):
            assert index.config == config()
            assert index.count() == 4
            index.check_searchable()
    assert sum("'index'" in line for line in sent) == 1
    assert sum("COUNT(*)" in line.upper() for line in sent) <= 1


def test_refresh_reads_again_only_what_another_connection_changed(location, tmp_path) -> None:
    fill(location, tmp_path / "docs")
    with Index.open(location) as index:
        assert index.refresh()  # the first look
        assert index.config.model_name == "m"
        with statements(index._store) as sent:
            unchanged = index.refresh()
            assert index.config.model_name == "m"
        with Index.open_store(location) as other:
            other.set_meta(META_KEY, config("n").to_json())
        assert index.refresh()
        assert index.config.model_name == "n"
    if index.path is None:  # PostgreSQL: written by other nodes at any time, read again
        assert unchanged
    else:  # SQLite: one PRAGMA, nothing read again
        assert not unchanged and len(sent) == 1 and "data_version" in sent[0]


def test_the_read_side_views(location, tmp_path) -> None:
    root = tmp_path / "docs"
    fill(location, root)
    with Index.open(location) as index:
        status = index.status()
        assert (status.documents, status.chunks, status.dim) == (2, 4, DIM)
        assert index.indexed_bytes() == sum(p.stat().st_size for p in root.iterdir())
        assert index.runs() == [] and isinstance(index.languages(), list)
        rows = index.document_chunks(str(root), "a.txt")
        assert [r.text for r in rows] == ["vacuum and analyze", "checkpoint tuning"]
        assert index.chunks([rows[1].id])[rows[1].id].text == "checkpoint tuning"
        assert index.lookup(str(root), "a.txt").n_chunks == 2
        assert index.lookup(str(root), "none.txt") is None
        assert index.migrated is None


def test_a_server_index_can_fail_at_once_on_a_lost_connection(pg_url) -> None:
    with Index.open(pg_url, reconnect_for_s=0.0) as index:
        assert index.path is None and index.location == pg_url
        assert index._store.reconnect_for_s == 0.0


def test_closing_closes_the_store(tmp_path) -> None:
    with Index.open(tmp_path / "db", create=True) as index:
        assert index.path == tmp_path / "db" / "index.sqlite3"
    with pytest.raises(sqlite3.ProgrammingError):
        index.refresh()
    assert os.path.isfile(tmp_path / "db" / "index.sqlite3")
