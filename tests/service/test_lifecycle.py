"""Warm-up, readiness and graceful shutdown of a real server process: /readyz says 503 while
the model loads and 200 after; requests then get 503 with Retry-After. On SIGTERM the
requests in flight are all answered 200, new ones are refused cleanly (connection refused
or 503), a running indexing job stops at a document boundary and the store stays
consistent; the process logs that no admitted request went unanswered."""

from __future__ import annotations

import json
import signal
import threading
import time

import httpx
import pytest
from service_testing import CORPUS, copy_corpus, start_server

from attnswitch.indexing.store import SQLiteStore

pytestmark = pytest.mark.xdist_group("service-lifecycle")
IN_FLIGHT = 6
SOURCES = tuple(
    sorted(str(p.relative_to(CORPUS)) for p in (CORPUS / "postgresql").glob("tutorial-*.html"))
)


def gauge(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics", timeout=30).text
    return next(
        float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")
    )


@pytest.fixture(scope="module")
def warming(tmp_path_factory):
    """A server of this module's own, watched from its first moment: a /v1 request and
    /readyz every 20 ms until ready. (server, that request's response, statuses seen, the
    server's folder holding `jobs/` and `data/`)."""
    tmp = tmp_path_factory.mktemp("lifecycle")
    jobs_root = tmp / "jobs"
    copy_corpus(jobs_root / "docs", SOURCES)
    srv = start_server(
        tmp / "server",
        "--db",
        str(tmp / "data"),
        "--jobs-root",
        str(jobs_root),
        "--drain-timeout",
        "120",
        "--max-items",
        "16",
        "--request-timeout",
        "120",
        wait_ready=False,
    )
    early = httpx.post(srv.url + "/v1/embeddings", json={"input": "too early"}, timeout=30)
    seen = []
    deadline = time.monotonic() + 180
    while not seen or seen[-1] != 200:
        assert time.monotonic() < deadline and srv.proc.poll() is None, srv.stderr()
        seen.append(httpx.get(srv.url + "/readyz", timeout=30).status_code)
        time.sleep(0.02)
    yield srv, early, seen, tmp
    srv.stop()


def test_readyz_is_503_while_warming_up_then_200(warming) -> None:
    srv, early, seen, _ = warming
    assert seen[0] == 503 and seen == [503] * (len(seen) - 1) + [200], seen
    assert early.status_code == 503
    assert early.json()["error"]["code"] == "warming_up"
    assert int(early.headers["retry-after"]) >= 1


def test_sigterm_answers_requests_in_flight_and_stops_cleanly(warming) -> None:
    srv, _, _, tmp = warming
    data, jobs_root = tmp / "data", tmp / "jobs"
    deadline = time.monotonic() + 180
    texts = ["a long enough text to keep the model busy for a while " * 4] * 16
    try:
        # One request first: admission then knows the encoder's speed (before it, it
        # admits one encoder call's worth of texts only, fewer than IN_FLIGHT requests).
        warm = httpx.post(srv.url + "/v1/embeddings", json={"input": texts}, timeout=300)
        assert warm.status_code == 200, warm.text[:300]
        job = httpx.post(srv.url + "/v1/jobs", json={"path": "docs"}, timeout=30)
        assert job.status_code == 202, job.text

        results: list[httpx.Response | Exception] = [None] * IN_FLIGHT  # type: ignore

        def send(i: int) -> None:
            try:
                results[i] = httpx.post(
                    srv.url + "/v1/embeddings", json={"input": texts}, timeout=300
                )
            except Exception as exc:  # reported below
                results[i] = exc

        threads = [threading.Thread(target=send, args=(i,)) for i in range(IN_FLIGHT)]
        for t in threads:
            t.start()
        while gauge(srv.url, "attnswitch_service_in_flight") < IN_FLIGHT + 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        srv.proc.send_signal(signal.SIGTERM)

        time.sleep(0.05)
        try:  # after SIGTERM: refused, one way or the other
            late = httpx.post(srv.url + "/v1/embeddings", json={"input": "late"}, timeout=30)
            assert late.status_code == 503 and late.json()["error"]["code"] == "draining"
        except httpx.TransportError:
            pass

        for t in threads:
            t.join(300)
        for r in results:
            assert isinstance(r, httpx.Response), r
            assert r.status_code == 200, r.text[:300]
            assert len(r.json()["data"]) == len(texts)
        assert srv.proc.wait(180) in (0, -signal.SIGTERM)
    finally:
        srv.stop()

    log = srv.stderr()
    stopped = json.loads(log.split("attnswitch serve: stopped ", 1)[1].splitlines()[0])
    assert stopped["unanswered"] == 0 and stopped["completed"] >= IN_FLIGHT, stopped
    assert stopped["job_stopped"] is True
    with SQLiteStore(data) as store:
        runs = store.runs()
        assert runs and runs[0].status in ("interrupted", "completed")
        indexed, chunks = store.root_counts(jobs_root / "docs")
        assert store.status().chunks == chunks  # every document whole, or absent
        if runs[0].status == "interrupted":
            assert indexed < len(SOURCES)


def test_a_failed_warm_up_keeps_readyz_at_503_with_the_reason(tmp_path) -> None:
    srv = start_server(
        tmp_path / "server",
        "--db",
        str(tmp_path / "data"),
        "--model",
        str(tmp_path / "no-model-here"),
        wait_ready=False,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            ready = httpx.get(srv.url + "/readyz", timeout=30)
            if ready.json()["status"] != "warming up" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert ready.status_code == 503 and ready.json()["status"] == "failed"
        assert "config.json" in ready.json()["reason"]  # the model folder's problem
        assert httpx.get(srv.url + "/livez", timeout=30).status_code == 200
        r = httpx.post(srv.url + "/v1/embeddings", json={"input": "x"}, timeout=30)
        assert r.status_code == 503 and r.json()["error"]["code"] == "failed"
    finally:
        assert srv.stop() in (0, -signal.SIGTERM)
