"""A broken store (issue rows 7 and 9): every CLI command says in one line which file is
wrong and what to do (and `{"error": ...}` on stdout with --json), never a traceback; the
service keeps embeddings up and answers search 503 with the reason, and heals when the file
is replaced. Real SQLite files: corrupt bytes, another program's schema, a vector of the
wrong length."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path

import httpx
import numpy as np
import pytest
from security_testing import corrupt_index
from typer.testing import CliRunner

from attnswitch.cli import app
from attnswitch.documents.ingest import Document
from attnswitch.indexing.store import ChunkRecord, SQLiteStore

pytestmark = pytest.mark.xdist_group("security")


def wrong_schema(folder: Path) -> Path:
    """An SQLite database another program made, under the index's name."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "index.sqlite3"
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE documents (id INTEGER PRIMARY KEY, title TEXT)")
    return path


def wrong_vector_length(folder: Path) -> Path:
    """A real index of the default model (its config recorded, as `attnswitch run` leaves
    it) with two chunks, one of whose stored vectors lost a byte."""
    from attnswitch.engines.model import ModelSpec
    from attnswitch.indexing.config import META_KEY, IndexConfig

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "index.sqlite3"
    doc = Document(
        root=str(folder.resolve()),
        source="a.txt",
        path=folder / "a.txt",
        size=9,
        mtime_ns=1,
        sha256="0" * 64,
        kind="text",
        text="some text",
    )
    config = IndexConfig.build(ModelSpec.load(None), None, "torch", "fp32")
    with SQLiteStore(path) as store:
        store.set_meta(META_KEY, config.to_json())
        store.write_document(
            doc,
            [ChunkRecord("some", 1, 0, 4), ChunkRecord("text", 1, 5, 9)],
            np.eye(2, config.dim, dtype=np.float32),
        )
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:  # closed: WAL folded in
        conn.execute("UPDATE chunks SET vector = substr(vector, 1, 767) WHERE ordinal = 1")
    return path


BROKEN = {
    "corrupt": (corrupt_index, "not a readable attnswitch index"),
    "schema": (wrong_schema, "not an attnswitch index of a schema"),
    "vector": (wrong_vector_length, "expected vectors of 768 bytes"),
}


@pytest.mark.parametrize(
    "kind, command",
    [
        (kind, command)
        for kind in sorted(BROKEN)
        for command in (["status"], ["search", "some text"], ["run", "docs"])
        if kind != "vector" or command[0] == "search"
    ],
)  # only search reads the vectors
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_every_command_names_the_broken_file_in_one_line(
    tmp_path, monkeypatch, kind, command, as_json
) -> None:
    make, what = BROKEN[kind]
    path = make(tmp_path / "data")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("some text to index\n")
    monkeypatch.chdir(tmp_path)
    args = [*command, "--db", "data"] + (["--json"] if as_json else [])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert lines[0].startswith(f"attnswitch {command[0]}: ")
    assert str(Path("data") / "index.sqlite3") in lines[0] and what in lines[0]
    if as_json:
        assert json.loads(result.stdout) == {"error": lines[0].split(": ", 1)[1]}
    else:
        assert result.stdout == ""
    assert path.exists()  # nothing stored is lost: the file is left for its owner
    if kind == "schema":  # not even a table added to another program's database
        with contextlib.closing(sqlite3.connect(path)) as conn:
            assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["documents"]


def test_a_broken_store_keeps_embeddings_up_and_search_says_why(broken, broken_data) -> None:
    with httpx.Client(base_url=broken.url, timeout=60) as c:
        assert c.get("/readyz").status_code == 200  # warm-up did not need the store
        r = c.post("/v1/embeddings", json={"input": ["still up"]})
        assert r.status_code == 200 and len(r.json()["data"][0]["embedding"]) == 384
        r = c.post("/v1/search", json={"query": "anything"})
        assert r.status_code == 503, r.text
        error = r.json()["error"]
        assert error["code"] == "index_unavailable"
        assert "not a readable attnswitch index" in error["message"]
        assert str(broken_data) not in error["message"]  # no server path

        fixed = broken_data.parent / "replacement"  # the operator swaps in another file
        wrong_vector_length(fixed)
        os.replace(fixed / "index.sqlite3", broken_data / "index.sqlite3")
        r = c.post("/v1/search", json={"query": "anything"})
        assert r.status_code == 503 and "expected vectors of 768 bytes" in r.text, r.text
        assert "internal_error" not in r.text
        assert c.post("/v1/embeddings", json={"input": "up"}).status_code == 200
