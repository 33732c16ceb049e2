"""`serve` on any store (issue 29): `--db` takes what `run --db` takes, a data folder or a
`postgresql://` URL, and jobs and search work the same on both: a job indexes a folder into
the store, and `/v1/search` answers, in every mode, what the in-process search of that store
answers; no answer carries the store's path or URL."""

from __future__ import annotations

import httpx
import pytest
from service_testing import (
    LARGER,
    TUTORIAL_PAGES,
    assert_same_content,
    committed,
    connection_attempts,
    copy_corpus,
    finished_job,
    start_job_and_wait,
    start_server,
    store_content,
)

from attnswitch.indexing.location import open_store
from attnswitch.indexing.search import search
from attnswitch.indexing.store import SQLiteStore
from attnswitch.jobs import jobs_table
from attnswitch.jobs.run import RunOptions, run

QUERY = "which rows does an update change, and how is a table joined to itself"


def test_jobs_and_search_work_the_same_on_both_stores(served_location, tmp_path, reference) -> None:
    jobs_root = tmp_path / "jobs"
    folder = copy_corpus(jobs_root / "docs", LARGER)
    srv = start_server(tmp_path / "server", "--db", served_location, "--jobs-root", str(jobs_root))
    try:
        with httpx.Client(base_url=srv.url, timeout=120) as client:
            started = client.post("/v1/jobs", json={"path": "docs"})
            assert started.status_code == 202, started.text
            job = finished_job(client, started.json()["id"])
            assert job["status"] == "completed", job["error"]
            assert job["summary"]["indexed"] == len(LARGER) and job["attempts"] == 1
            assert [j["id"] for j in client.get("/v1/jobs").json()["data"]] == [job["id"]]
            with open_store(served_location) as store:
                for mode in ("dense", "hybrid", "keyword"):
                    r = client.post("/v1/search", json={"query": QUERY, "k": 5, "mode": mode})
                    assert r.status_code == 200, r.text
                    want = search(store, reference.encode([QUERY])[0], 5, text=QUERY, mode=mode)
                    assert len(want) == 5
                    got = r.json()["data"]
                    assert [(h["root"], h["source"], h["ordinal"]) for h in got] == [
                        ("docs", h.source, h.ordinal) for h in want
                    ]
                    for g, w in zip(got, want):
                        assert g["score"] == pytest.approx(w.score, abs=1e-5)
                    assert served_location not in r.text
                # by document (issue 53): k distinct documents, as the in-process search
                body = {"query": QUERY, "k": 3, "mode": "hybrid", "group": "document"}
                r = client.post("/v1/search", json=body)
                assert r.status_code == 200, r.text
                vector = reference.encode([QUERY])[0]
                want = search(store, vector, 3, text=QUERY, mode="hybrid", group="document")
                got = r.json()["data"]
                assert len({h["path"] for h in got}) == len(got) == 3
                assert [(h["path"], h["more_in_document"]) for h in got] == [
                    (h.path, h.more_in_document) for h in want
                ]
                assert any(h["more_in_document"] > 0 for h in got)
                got_content = store_content(store, folder)
                # a row of this store
                assert jobs_table.table(store).find(job["id"]).status == "completed"
            listing = client.get("/v1/jobs").text
            assert served_location not in listing and str(tmp_path) not in listing
    finally:
        srv.stop()
    with SQLiteStore(tmp_path / "reference") as store:  # the CLI's run of the same folder
        run(folder, store, RunOptions.of(chunks_per_call=32), get_encoder=lambda: reference)
        assert_same_content(got_content, store_content(store, folder))


def test_a_search_while_postgres_restarts_is_503_and_the_next_one_succeeds(
    pg_cluster, pg_url, tmp_path
) -> None:
    """PostgreSQL restarted under a running server (issue 29): a search while it is down
    answers 503 `index_unavailable` with a message (not the URL), embeddings stay up, and
    the first search after it is back answers as before, without restarting the service."""
    jobs_root = tmp_path / "jobs"
    copy_corpus(jobs_root / "docs", LARGER)
    srv = start_server(tmp_path / "server", "--db", pg_url, "--jobs-root", str(jobs_root))
    query = {"query": QUERY, "k": 5, "mode": "hybrid"}
    try:
        with httpx.Client(base_url=srv.url, timeout=120) as client:
            job = finished_job(client, client.post("/v1/jobs", json={"path": "docs"}).json()["id"])
            assert job["status"] == "completed", job["error"]
            before = client.post("/v1/search", json=query)
            assert before.status_code == 200, before.text
            pg_cluster.stop()
            try:
                for _ in range(2):  # the lost connection, then a refused one
                    down = client.post("/v1/search", json=query)
                    assert down.status_code == 503, down.text
                    error = down.json()["error"]
                    assert error["code"] == "index_unavailable"
                    assert "PostgreSQL server" in error["message"]
                    assert pg_url.split("@")[-1] not in down.text
                embedded = client.post("/v1/embeddings", json={"input": "still up"})
                assert embedded.status_code == 200, embedded.text
            finally:
                pg_cluster.start_again()
            after = client.post("/v1/search", json=query)
            assert after.status_code == 200, after.text
            assert after.json()["data"] == before.json()["data"]
    finally:
        srv.stop()


@pytest.mark.slow
def test_a_job_outlives_a_postgres_restart_in_its_middle(
    pg_cluster, pg_url, tmp_path, reference, monkeypatch
) -> None:
    """PostgreSQL restarted while a service job writes (issue 29): the job's store connection
    is opened again with backoff, the document whose transaction was lost is written again,
    and the job completes with the store equal to an uninterrupted run's. The server gets a
    reconnect window of 300 s (`$ATTNSWITCH_PG_RECONNECT_S`): the restart below takes two
    connection attempts and a cluster start, which on a loaded machine can pass the 30 s
    default."""
    monkeypatch.setenv("ATTNSWITCH_PG_RECONNECT_S", "300")
    documents = TUTORIAL_PAGES
    jobs_root = tmp_path / "jobs"
    folder = copy_corpus(jobs_root / "docs", documents)
    srv = start_server(tmp_path / "server", "--db", pg_url, "--jobs-root", str(jobs_root))
    try:
        with httpx.Client(base_url=srv.url, timeout=120) as client:
            job_id = start_job_and_wait(client, pg_url, folder, 3)
            done = committed(pg_url, folder)
            pg_cluster.stop()
            try:
                # the job meets the lost connection and tries again while the server is
                # down: a listener on its port takes two tries and hangs up on each
                connection_attempts(pg_cluster.port, 2, timeout=20)
            finally:
                pg_cluster.start_again()  # refused until it listens
            job = finished_job(client, job_id)
            assert job["status"] == "completed", job["error"]
            assert job["attempts"] == 1 and job["error"] is None
            assert job["summary"]["indexed"] == len(documents)
            with open_store(pg_url) as store:
                assert store.root_counts(folder)[0] == len(documents)
                got = store_content(store, folder)
    finally:
        srv.stop()
    assert done < len(documents)  # restarted in the middle, not after the end
    with SQLiteStore(tmp_path / "reference") as store:
        run(folder, store, RunOptions.of(chunks_per_call=32), get_encoder=lambda: reference)
        assert_same_content(got, store_content(store, folder))


def test_an_index_still_filling_in_says_so_in_search_and_the_index_view(
    served_location, tmp_path, reference
) -> None:
    """After the quick pass only (issue 52), `/v1/search` answers with hits and a
    `coverage_note`, the search keeps the vectors it encoded, and `/v1/index` has the
    `coverage` that `status --json` has; once full, no note."""
    folder = copy_corpus(tmp_path / "docs", TUTORIAL_PAGES)
    with open_store(served_location) as store:
        run(folder, store, RunOptions.of(quick=True), get_encoder=lambda: reference)
        chunks = store.coverage().chunks
    srv = start_server(tmp_path / "server", "--db", served_location)
    try:
        with httpx.Client(base_url=srv.url, timeout=120) as client:
            before = client.get("/v1/index").json()["coverage"]
            assert (before["chunks"], before["full"], before["quick"]) == (chunks, 0.0, 1.0)
            r = client.post("/v1/search", json={"query": QUERY, "k": 5, "mode": "hybrid"})
            assert r.status_code == 200, r.text
            assert len(r.json()["data"]) == 5
            note = r.json()["coverage_note"]
            assert note and "full pass is not done" in note
            after = client.get("/v1/index").json()["coverage"]
            assert 0 < after["full_chunks"] < chunks  # the search's candidates, kept
    finally:
        srv.stop()
    srv = start_server(tmp_path / "server0", "--db", served_location, "--query-fill", "0")
    try:  # a server told to encode nothing at query time: hits, the note, no vector kept
        with httpx.Client(base_url=srv.url, timeout=120) as client:
            r = client.post(
                "/v1/search", json={"query": "joining two tables", "k": 5, "mode": "hybrid"}
            )
            assert r.status_code == 200 and r.json()["data"], r.text
            assert "full pass is not done" in r.json()["coverage_note"]
            kept = client.get("/v1/index").json()["coverage"]["full_chunks"]
            assert kept == after["full_chunks"]
    finally:
        srv.stop()
    with open_store(served_location) as store:
        run(folder, store, RunOptions.of(), get_encoder=lambda: reference)
    srv = start_server(tmp_path / "server2", "--db", served_location)
    try:
        with httpx.Client(base_url=srv.url, timeout=120) as client:
            r = client.post("/v1/search", json={"query": QUERY, "k": 5, "mode": "hybrid"})
            assert r.json()["coverage_note"] is None
            assert client.get("/v1/index").json()["coverage"]["full"] == 1.0
    finally:
        srv.stop()
