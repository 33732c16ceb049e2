"""One search can no longer stall every search (issue 50, defect 1, the service's half): the
service searched on one thread, and a search it had answered 504 ran on, so one expensive
search held every other search behind it for minutes. Now searches run side by side on a
few threads, each with its own connection to the store, and each stops its own work at its
request's deadline: a SQLite statement by its progress handler, a PostgreSQL one by its
statement timeout, a loop in Python over documents by a look at the clock.

The expensive search is a real one, within every limit of the filter: 100 globs (the most
a filter takes) of 1,023 characters each (a glob takes 1,024), over an index of 4,000
documents whose paths are 4,000 characters deep (20 folders of 199-character names, as a
file system allows). Each glob is matched in time linear in the path, and that is still
milliseconds a document: tens of seconds of CPU per pass over the documents, which a
search makes more than once. The servers are real `attnswitch serve` processes on
loopback, one per store (SQLite and PostgreSQL); every wait is on an answer or a metric,
bounded."""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from security_testing import STARTUP_TIMEOUT_S

from attnswitch.documents.ingest import Document
from attnswitch.indexing.location import open_store
from attnswitch.indexing.records import ChunkRecord
from attnswitch.indexing.store_errors import StoreDeadlineError, is_store_error
from attnswitch.jobs.run import RunOptions, run
from attnswitch.service import launch
from attnswitch.service.index import SEARCH_WORKERS
from corpus_testing import copy_corpus

DOCUMENTS = 4_000  # short notes deep down, besides a few real pages
DEEP = "/".join(["d" * 199] * 20)  # the notes' folder: 3,999 characters
# 100 globs that match no path, each as costly to match against a long path as any
EXPENSIVE_FILTER = {"path": ["?" * 1019 + f"Z{i:03d}" for i in range(100)]}
EXPENSIVE = {"query": "harbour", "mode": "keyword", "filter": EXPENSIVE_FILTER}
QUERY = "how is a table joined to itself"
# Seconds a request may take (`X-Request-Timeout`): an expensive search still running
# while others are served; expensive searches that must stop; a cheap search on a loaded
# machine, far less than what an expensive one would go on costing if it did not stop.
RUNNING_S = 10
STOPPED_S = 3
CHEAP_S = 10
WAIT_S = 60.0  # bound of every wait on a metric
REAL_PAGES = ("postgresql/tutorial-join.html", "postgresql/tutorial-update.html")


def _database(pg_cluster, name: str) -> str:
    import psycopg

    with psycopg.connect(pg_cluster.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return pg_cluster.url.rsplit("/", 1)[0] + "/" + name


def _fill(location: str, folder: Path, encoder) -> None:
    """A few real pages indexed by `run` (the served model's config recorded), then
    `DOCUMENTS` notes of one chunk each in `DEEP` (50 texts, encoded by the same model,
    over and over)."""
    with open_store(location) as store:
        summary = run(folder, store, RunOptions(), get_encoder=lambda: encoder)
        assert summary.status == "completed" and summary.indexed == len(REAL_PAGES)
        texts = [f"note {i}: the harbour log of day {i}" for i in range(50)]
        vectors = encoder.encode(texts)
        root = str(folder.resolve())
        for i in range(DOCUMENTS):
            text, source = texts[i % len(texts)], f"{DEEP}/{i:05d}.txt"
            store.write_document(
                Document(
                    root=root,
                    source=source,
                    path=folder / source,
                    size=len(text),
                    mtime_ns=1,
                    sha256=f"{i:064x}",
                    kind="text",
                    text=text,
                ),
                [ChunkRecord(text, 12, 0, len(text))],
                vectors[i % len(texts)][None],
            )


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(request, tmp_path_factory, encoder):
    """A server over an index of `DOCUMENTS` notes and a few pages, on each store."""
    base = tmp_path_factory.mktemp(f"deadline-{request.param}")
    if request.param == "postgres":
        location = _database(request.getfixturevalue("pg_cluster"), f"deadline_{id(base):x}")
    else:
        (base / "data").mkdir()
        location = str(base / "data")
    _fill(location, copy_corpus(base / "pages", REAL_PAGES), encoder)
    srv = launch.start(base / "server", "--db", location, timeout=STARTUP_TIMEOUT_S)
    yield srv
    srv.stop()


def search(client: httpx.Client, body: dict, timeout_s: float) -> httpx.Response:
    return client.post("/v1/search", json=body, headers={"X-Request-Timeout": str(timeout_s)})


def busy(client: httpx.Client) -> float | None:
    """The server's search threads at work (`attnswitch_service_search_busy`), None when
    it does not say."""
    found = re.search(
        r"^attnswitch_service_search_busy (\S+)$", client.get("/metrics").text, re.MULTILINE
    )
    return None if found is None else float(found.group(1))


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"expected {what} within {WAIT_S} s"
        time.sleep(0.05)


def assert_answers(client: httpx.Client) -> None:
    """A cheap search of each mode answers, with hits, within `CHEAP_S`."""
    for mode in ("keyword", "hybrid", "dense"):
        r = search(client, {"query": QUERY, "k": 3, "mode": mode}, CHEAP_S)
        assert r.status_code == 200, r.text
        assert r.json()["data"], r.text


def assert_stopped_in_time(r: httpx.Response) -> None:
    assert r.status_code == 504, r.text
    assert r.json()["error"]["code"] == "deadline_exceeded", r.text


@pytest.mark.slow
def test_other_searches_answer_while_one_runs_to_its_deadline(served) -> None:
    with httpx.Client(base_url=served.url, timeout=120) as client, ThreadPoolExecutor(1) as pool:
        expensive = pool.submit(search, client, EXPENSIVE, RUNNING_S)
        wait_for(
            lambda: (busy(client) or 0) >= 1 or expensive.done(),
            "the expensive search on a search thread",
        )
        assert_answers(client)
        assert not expensive.done(), "answered beside the expensive search, not after it"
        assert_stopped_in_time(expensive.result())
        wait_for(lambda: busy(client) == 0, "every search thread free after the 504")
        assert_answers(client)


@pytest.mark.slow
def test_searches_past_their_deadline_stop_and_free_their_threads(served) -> None:
    """As many expensive searches as there are search threads, each with a short deadline:
    each answers 504 and stops, so a cheap search after them answers at once (before, the
    one search thread went on with the first of them for minutes, and the cheap one got
    its own 504)."""
    with (
        httpx.Client(base_url=served.url, timeout=120) as client,
        ThreadPoolExecutor(SEARCH_WORKERS) as pool,
    ):
        expensive = [
            pool.submit(search, client, EXPENSIVE, STOPPED_S) for _ in range(SEARCH_WORKERS)
        ]
        wait_for(
            lambda: busy(client) == SEARCH_WORKERS or all(f.done() for f in expensive),
            "every search thread on an expensive search",
        )
        for future in expensive:
            assert_stopped_in_time(future.result())
        assert_answers(client)
        wait_for(lambda: busy(client) == 0, "every search thread free")


# The stores' own part, without a server: the statement running at the deadline is
# interrupted, and the store goes on answering.
COUNT_TO = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {m}) "
    "SELECT count(*) FROM c"
)  # 10^12 rows: days of work


def test_a_statement_running_at_its_deadline_is_interrupted(location) -> None:
    with open_store(location) as store:  # raw SQL through the store's own read (`_read`)
        statement = COUNT_TO.format(m=store._mark)
        with pytest.raises(StoreDeadlineError) as stopped:
            with store.deadline(time.monotonic() + 0.5):
                store._read(statement, (10**12,))
        assert not is_store_error(stopped.value)  # no 503, no connection dropped
        assert str(stopped.value).startswith("deadline: expected ")
        assert store._read("SELECT 1") == [(1,)]  # the same connection, no deadline left
        if store._mark == "%s":  # PostgreSQL: the session's timeout is its own again
            assert store._read("SHOW statement_timeout") == [("0",)]
        assert store._read(statement, (1000,))[0][0] == 1000
        with pytest.raises(StoreDeadlineError):  # a deadline already past: nothing runs
            with store.deadline(time.monotonic() - 1):
                store._read("SELECT 1")


def test_a_filter_over_many_documents_stops_at_its_deadline(location, encoder) -> None:
    """The documents a filter keeps are checked in Python, one by one: a deadline stops
    that loop too, in `indexing.search.search` as in the service."""
    from attnswitch.indexing.filters import SearchFilter
    from attnswitch.indexing.search import search as search_store

    where = SearchFilter.from_mapping(EXPENSIVE_FILTER)
    with open_store(location) as store:
        vectors = encoder.encode(["the harbour log"])
        for i in range(500):  # seconds per pass of the filter
            text, source = f"note {i}: the harbour log", f"{DEEP}/{i:05d}.txt"
            store.write_document(
                Document(
                    root="/notes",
                    source=source,
                    path=Path("/notes", source),
                    size=len(text),
                    mtime_ns=1,
                    sha256=f"{i:064x}",
                    kind="text",
                    text=text,
                ),
                [ChunkRecord(text, 8, 0, len(text))],
                vectors,
            )
        with pytest.raises(StoreDeadlineError):
            search_store(
                store, vectors[0], 5, text="harbour", where=where, deadline=time.monotonic() + 0.3
            )
        assert search_store(store, vectors[0], 5, text="harbour")  # then answers as before
