"""The PostgreSQL store's own failures, on real servers: a wrong URL, a server that is down,
a server without pgvector (Debian's PostgreSQL without postgresql-NN-pgvector) each give
one clear line, through the API and the CLI; a store and a model of other dimensions are
refused with both numbers; dense queries can take pgvector's HNSW index."""

from __future__ import annotations

import json
import socket
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnswitch.documents.ingest import ingest
from attnswitch.indexing.location import open_store
from attnswitch.indexing.postgres_segments import layout, parts
from attnswitch.indexing.store import ChunkRecord, StoreConnectError, StoreInputError

pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")


def invoke(*args: str):
    from attnswitch.cli import app

    return CliRunner().invoke(app, list(args))


def one_line(message: str) -> bool:
    return "\n" not in message.strip() and "Traceback" not in message


@pytest.mark.parametrize(
    ("raw", "seconds"), [(None, 30.0), ("", 30.0), (" 120 ", 120.0), ("0", 0.0), ("2.5", 2.5)]
)
def test_the_reconnect_window_comes_from_the_environment(raw: str | None, seconds: float) -> None:
    from attnswitch.indexing.store_postgres import RECONNECT_ENV, reconnect_window

    assert reconnect_window({} if raw is None else {RECONNECT_ENV: raw}) == seconds


@pytest.mark.parametrize("raw", ["-1", "soon", "inf", "nan", "30s"])
def test_a_reconnect_window_that_is_no_number_of_seconds_is_one_clear_error(raw: str) -> None:
    from attnswitch.indexing.store_postgres import RECONNECT_ENV, reconnect_window

    with pytest.raises(StoreInputError) as caught:
        reconnect_window({RECONNECT_ENV: raw})
    assert str(caught.value) == (
        f"$ATTNSWITCH_PG_RECONNECT_S: expected seconds, 0 or more, got {raw!r}"
    )


def test_a_store_takes_its_reconnect_window_from_the_environment(pg_url, monkeypatch) -> None:
    monkeypatch.setenv("ATTNSWITCH_PG_RECONNECT_S", "90")
    with open_store(pg_url) as store:
        assert store.reconnect_for_s == 90.0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "postgresql://attnswitch@127.0.0.1:{port}/postgres",
            "expected a PostgreSQL server answering at postgresql://attnswitch@127.0.0.1:{port}",
        ),
        (
            "postgresql://u:secret@127.0.0.1:{port}/db?bogus=1",
            "expected a URL like postgresql://USER@HOST:PORT/DBNAME",
        ),
        (
            "postgresql://u:secret@127.0.0.1:notaport/db",
            "expected a URL like postgresql://USER@HOST:PORT/DBNAME",
        ),
    ],
)
def test_server_down_or_wrong_url_is_one_clear_line(url: str, expected: str) -> None:
    port = _closed_port()
    url, expected = url.format(port=port), expected.format(port=port)
    with pytest.raises(StoreConnectError) as caught:
        open_store(url)
    assert expected in str(caught.value) and one_line(str(caught.value))
    assert "secret" not in str(caught.value)
    result = invoke("status", "--db", url, "--json")
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert expected in error and one_line(error) and "secret" not in error


def test_missing_pgvector_is_one_clear_line() -> None:
    from pg_local import LocalCluster, pick_server, remove

    server = pick_server(pgvector=False)
    if server is None:
        pytest.skip("every PostgreSQL server here has pgvector: no server to refuse")
    folder = Path(tempfile.mkdtemp(prefix="attnswitch-pg-"))
    try:
        with LocalCluster.start(folder, server) as cluster:
            with pytest.raises(StoreConnectError) as caught:
                open_store(cluster.url)
            message = str(caught.value)
            assert "expected the pgvector extension" in message and one_line(message)
            assert 'extension "vector" is not available' in message
            result = invoke("run", str(folder), "--db", cluster.url, "--json")
            assert result.exit_code == 1
            assert "expected the pgvector extension" in json.loads(result.stdout)["error"]
    finally:
        remove(folder)


def test_dimension_mismatch_names_both_numbers(pg_url: str, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text("alpha " * 20)
    (root / "b.txt").write_text("beta " * 20)
    a, b = sorted(ingest(root), key=lambda d: d.source)
    chunks = [ChunkRecord("alpha", 1, 0, 5), ChunkRecord("alpha again", 2, 5, 16)]
    with open_store(pg_url) as store:
        store.write_document(a, chunks, np.ones((2, 384)))
        with pytest.raises(StoreInputError, match=r"dimension 384 \(this store's\), got 768"):
            store.write_document(b, chunks, np.ones((2, 768)))
        assert store.dim == 384 and store.count() == 2
        with pytest.raises(StoreInputError, match=r"dimension 384 \(this store's\), got 8"):
            from attnswitch.indexing.search import search

            search(store, np.ones(8), 3)


def test_run_refuses_a_model_of_another_dimension(pg_url: str, docs: Path) -> None:
    from attnswitch.indexing.config import IndexMismatchError
    from attnswitch.jobs.run import RunOptions, run

    with open_store(pg_url) as store:
        doc = next(iter(ingest(docs)))
        store.write_document(doc, [ChunkRecord("x", 1, 0, 1)], np.ones((1, 16)))
        with pytest.raises(
            IndexMismatchError, match=r"expected vectors of dimension 16 .* got 384"
        ):
            run(docs, store, RunOptions.of(max_tokens=32, overlap=4))


def test_dense_search_uses_the_hnsw_index(pg_url: str, tmp_path: Path) -> None:
    from pgvector import HalfVector

    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text("text " * 10)
    (doc,) = ingest(root)
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(300, 32))
    with open_store(pg_url) as store:
        store.write_document(doc, [ChunkRecord(f"c{i}", 1, 0, 1) for i in range(300)], vectors)
        store.seal_at = 300
        store.sync_index()  # the tail of 300 made the first segment
        generation, segments = layout(store._conn)
        assert generation == 1 and [(s.lo, s.hi, s.rows) for s in segments] == [(0, 1, 300)]
        q = vectors[17] / np.linalg.norm(vectors[17])
        # 300 rows are cheaper to scan exactly, as the planner knows; at scale it takes
        # the index (benchmarks/store_scale.py), here it is told to.
        store._conn.execute("SET enable_seqscan = off")
        among, _tail = parts(generation, segments)
        plan = store._conn.execute(
            f"EXPLAIN SELECT id FROM chunks WHERE {among[0]} ORDER BY embedding <#> %s LIMIT 5",
            (HalfVector(q),),
        ).fetchall()  # a float16 query and the segment's condition, as `dense` sends them
        assert "Index Scan using chunks_full_0_1" in " ".join(r[0] for r in plan)
        (best, score), *_ = store.dense(q[None, :].astype(np.float32), 5)[0]
        # the vector and the query both rounded to float16: each element within 2^-11
        assert store.chunks([best])[best].text == "c17"
        assert score == pytest.approx(1, abs=2.0**-10)
        store.ef_search = 1  # a beam narrower than n is widened to n: n rows, not 1
        assert len(store.dense(q[None, :].astype(np.float32), 50)[0]) == 50
        assert len(store.dense(q[None, :].astype(np.float32), 30, ef=2)[0]) == 30
        with pytest.raises(
            StoreInputError, match="ef_search: expected an integer from 1 to 1000, got 1001"
        ):
            store.dense(q[None, :].astype(np.float32), 5, ef=1001)
        # The beam is set for the query's own transaction, not left on the session.
        assert store._conn.execute("SHOW hnsw.ef_search").fetchone()[0] == "40"


def test_cli_run_status_and_search_on_postgres(pg_url: str, docs: Path) -> None:
    fast = ["--max-tokens", "32", "--overlap", "4", "--chunks-per-call", "8"]
    result = invoke("run", str(docs), "--db", pg_url, "--json", *fast)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["status"] == "completed" and summary["db"] == pg_url
    status = json.loads(invoke("status", "--db", pg_url, "--json").stdout)
    assert status["documents"] == 4 and status["dim"] == 384
    assert status["chunks"] == summary["chunks_stored"] > 0
    for mode in ("hybrid", "dense", "keyword"):
        found = json.loads(
            invoke(
                "search",
                "UPDATE weather SET temp_hi",
                "-k",
                "3",
                "--mode",
                mode,
                "--db",
                pg_url,
                "--json",
            ).stdout
        )
        assert found["mode"] == mode and len(found["data"]) == 3
        assert found["data"][0]["source"] == "postgresql/tutorial-update.html", mode
    narrow = json.loads(
        invoke(
            "search",
            "UPDATE weather SET temp_hi",
            "-k",
            "3",
            "--mode",
            "dense",
            "--ef",
            "1",
            "--db",
            pg_url,
            "--json",
        ).stdout
    )
    assert len(narrow["data"]) == 3  # the beam is widened to k
    result = invoke("search", "rows", "--ef", "5000", "--db", pg_url)
    assert result.exit_code != 0 and one_line(result.output)
    assert "--ef: expected an integer from 1 to 1000, got 5000" in result.output


def test_a_run_lock_freed_a_moment_later_is_taken_not_refused(pg_url: str) -> None:
    """A run killed a moment ago holds its lock until the server notices its session is
    gone: a new run waits for the lock (up to `RUN_LOCK_WAIT_S`) instead of being refused.
    Here the holder's session ends 0.5 s after the new run asks."""
    with open_store(pg_url) as holder, open_store(pg_url) as store:
        holder.begin_run()
        ends = threading.Timer(0.5, holder.close)
        ends.start()
        started = time.monotonic()
        run = store.begin_run()
        assert time.monotonic() - started >= 0.4  # it did wait for the holder
        store.finish_run(run)
        ends.join()


def test_opening_a_store_while_a_run_writes_takes_no_table_lock(pg_url: str) -> None:
    """A search or status opens the store while a run's transaction holds the rows it
    wrote: opening reads the schema from the catalog and waits on no table, so it neither
    blocks behind the run nor deadlocks with it. The opener's `lock_timeout` turns any
    wait into an error."""
    import psycopg

    with open_store(pg_url):
        pass  # the schema exists
    with psycopg.connect(pg_url) as writer:
        writer.execute("LOCK TABLE documents, chunks IN ROW EXCLUSIVE MODE")
        with open_store(pg_url + "?options=-c%20lock_timeout%3D2000") as store:
            assert store.count() == 0
        writer.rollback()


class _StoppingEncoder:
    """`encoder`, calling `before()` ahead of each `encode`: the full pass encodes between
    reading the chunks it fills (`unencoded`) and writing their vectors (`fill_vectors`)."""

    def __init__(self, encoder, before):
        self.encoder, self.before = encoder, before

    def encode(self, texts, **kwargs):
        self.before()
        return self.encoder.encode(texts, **kwargs)

    def __getattr__(self, name):
        return getattr(self.encoder, name)


@pytest.mark.parametrize("during", ["quick", "full"])
@pytest.mark.parametrize("away_s", [2.0, None])
def test_a_run_outlives_a_postgres_restart_or_stops_resumably(
    pg_cluster, pg_url, docs, encoder, monkeypatch, away_s, during
) -> None:
    """PostgreSQL restarted in the middle of a run (issue 29): while the quick pass writes
    documents, or while the full pass encodes chunks it read (their vectors written on a
    connection that is gone). The store opens a new connection with backoff and writes
    the document (or the vectors) again, so a server back within `RECONNECT_FOR_S` lets
    the run complete with every document and vector; one that stays away stops the run
    with `StoreConnectError` saying to run again, and the next run, with the server back,
    finishes the index; no document is half-written either way."""
    from attnswitch.indexing import store_postgres
    from attnswitch.jobs.run import RunOptions, run

    monkeypatch.setattr(store_postgres, "RECONNECT_FOR_S", 6.0)
    options = RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=4)
    total = len(list(docs.rglob("*.html")))
    state = {"stopped": False}

    def restart_once() -> None:
        if not state["stopped"]:
            state["stopped"] = True
            pg_cluster.stop()
            if away_s is not None:
                threading.Timer(away_s, pg_cluster.start_again).start()

    def in_quick_pass(progress) -> None:
        if during == "quick" and progress.chunks > 0:
            restart_once()

    def full_encoder():
        return _StoppingEncoder(encoder, restart_once) if during == "full" else encoder

    kwargs = {"get_encoder": full_encoder, "on_progress": in_quick_pass}
    try:
        with open_store(pg_url) as store:
            if away_s is not None:
                summary = run(docs, store, options, **kwargs)
                assert summary.status == "completed" and summary.indexed == total
            else:
                with pytest.raises(StoreConnectError, match="run again when it is back"):
                    run(docs, store, options, **kwargs)
    finally:
        if away_s is None:
            pg_cluster.start_again()
        else:
            time.sleep(away_s + 1)  # the timer has started it again
    assert state["stopped"]
    with open_store(pg_url) as store:
        if away_s is None:
            summary = run(docs, store, options, get_encoder=lambda: encoder)
            assert summary.status == "completed"
        assert store.root_counts(docs)[0] == total
        assert store.unencoded_count() == 0
        for source in store.sources(docs):
            assert store.lookup(docs, source).n_chunks == len(store.document_chunks(docs, source))
