"""Cancelling a job (issue 30, `POST /v1/jobs/{id}/cancel`): a running job stops at its next
safe point, keeps every document it committed, ends "cancelled", and the next server on
the same store does not resume it; a finished job is 409, an unknown id 404, a request
without the key 401; on both stores."""

from __future__ import annotations

import time

import httpx
import pytest
from service_testing import (
    SMALL,
    committed,
    copy_corpus,
    finished_job,
    start_job_and_wait,
    start_server,
)
from service_testing import (
    TUTORIAL_PAGES as DOCUMENTS,
)

from attnswitch.indexing.location import open_store
from attnswitch.jobs import jobs_table


def test_a_cancelled_job_keeps_its_documents_and_is_not_resumed(served_location, tmp_path) -> None:
    assert len(DOCUMENTS) >= 20
    jobs_root = tmp_path / "jobs"
    folder = copy_corpus(jobs_root / "docs", DOCUMENTS)
    copy_corpus(jobs_root / "small", SMALL[:1])
    args = ("--db", served_location, "--jobs-root", str(jobs_root))
    first = start_server(tmp_path / "first", *args)
    try:
        with httpx.Client(base_url=first.url, timeout=120) as client:
            job_id = start_job_and_wait(client, served_location, folder, 2)
            r = client.post(f"/v1/jobs/{job_id}/cancel")
            assert r.status_code == 200, r.text
            job = finished_job(client, job_id)
            assert job["status"] == "cancelled", job
            assert job["error"].startswith("cancelled by a client") and "\n" not in job["error"]
            kept = committed(served_location, folder)
            assert 2 <= kept < len(DOCUMENTS), kept  # stopped in the middle, nothing undone
            again = client.post(f"/v1/jobs/{job_id}/cancel")  # cancelled is finished
            assert again.status_code == 409, again.text
            assert again.json()["error"]["code"] == "job_finished"
            assert "cancelled" in again.json()["error"]["message"]
            assert [j["status"] for j in client.get("/v1/jobs").json()["data"]] == ["cancelled"]
    finally:
        first.stop()
    with open_store(served_location) as store:
        row = jobs_table.table(store).find(job_id)
        assert (row.status, row.resume) == ("cancelled", False)
        assert [r.status for r in store.runs()[:1]] == ["interrupted"]  # the pipeline's view

    second = start_server(tmp_path / "second", *args)
    try:
        with httpx.Client(base_url=second.url, timeout=120) as client:
            assert client.get(f"/v1/jobs/{job_id}").json()["status"] == "cancelled"
            # a job that completed: cancelling it is refused, in one line
            done = finished_job(
                client, client.post("/v1/jobs", json={"path": "small"}).json()["id"]
            )
            assert done["status"] == "completed", done
            r = client.post(f"/v1/jobs/{done['id']}/cancel")
            assert r.status_code == 409 and r.json()["error"]["code"] == "job_finished"
            assert "\n" not in r.json()["error"]["message"]
        assert "resuming" not in second.stderr()
    finally:
        second.stop()
    assert committed(served_location, folder) == kept  # not resumed


def test_a_job_waiting_to_be_resumed_is_cancelled_without_running(
    served_location, tmp_path
) -> None:
    """Two jobs a stopped server left interrupted: the next server resumes them oldest first;
    the second, cancelled while it waits (or before the resume reads it), never runs."""
    from attnswitch.jobs.jobs_table import JobRecord

    jobs_root = tmp_path / "jobs"
    copy_corpus(jobs_root / "docs", DOCUMENTS)
    waiting = copy_corpus(jobs_root / "small", SMALL[:1])
    with open_store(served_location) as store:
        for i, path in enumerate(("docs", "small")):
            jobs_table.table(store).save(
                JobRecord(
                    id=f"left{i}",
                    path=path,
                    status="interrupted",
                    created_at=100.0 + i,
                    error="stopped",
                    attempts=1,
                    resume=True,
                ),
            )
    srv = start_server(tmp_path / "server", "--db", served_location, "--jobs-root", str(jobs_root))
    try:
        with httpx.Client(base_url=srv.url, timeout=120) as client:
            r = client.post("/v1/jobs/left1/cancel")
            assert r.status_code == 200, r.text
            assert (r.json()["status"], r.json()["attempts"]) == ("cancelled", 1)
            deadline = time.monotonic() + 120
            while client.get("/v1/jobs/left0").json()["status"] != "running":
                assert time.monotonic() < deadline, "the first job was not resumed"
                time.sleep(0.05)
            r = client.post("/v1/jobs/left0/cancel")  # the first one too: the test ends
            assert r.status_code == 200, r.text
            first = finished_job(client, "left0")
            assert (first["status"], first["attempts"]) == ("cancelled", 2), first
            second = client.get("/v1/jobs/left1").json()
            assert (second["status"], second["attempts"]) == ("cancelled", 1), second
    finally:
        srv.stop()
    assert committed(served_location, waiting) == 0  # never ran


@pytest.mark.parametrize("job_id", ["0123456789abcdef", "nope", "a" * 300])
def test_cancelling_an_unknown_job_is_404(client, job_id) -> None:
    r = client.post(f"/v1/jobs/{job_id}/cancel")
    assert r.status_code == 404, r.text
    assert r.json()["error"]["code"] == "job_not_found"


def test_cancelling_without_the_key_is_401(server) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as bare:
        r = bare.post("/v1/jobs/0123456789abcdef/cancel")
    assert r.status_code == 401, r.text
