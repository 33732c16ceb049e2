"""Jobs outlive the process (issue 29): a server killed with SIGKILL in the middle of a job
leaves the job's row "running"; the next server on the same store marks it interrupted,
resumes it under the same id (a second attempt), lists it across the restart, and the store
ends holding what an uninterrupted run of the folder gives; on both stores."""

from __future__ import annotations

import signal
import time

import httpx
import pytest
from service_testing import (
    TUTORIAL_PAGES as DOCUMENTS,
)
from service_testing import (
    assert_same_content,
    committed,
    copy_corpus,
    copy_corpus_marked,
    finished_job,
    start_job_and_wait,
    start_server,
    store_content,
)

from attnswitch.indexing.location import open_store
from attnswitch.indexing.store import SQLiteStore
from attnswitch.jobs import jobs_table
from attnswitch.jobs.run import RunOptions, run


@pytest.mark.slow
def test_a_job_killed_with_its_server_is_resumed_by_the_next_one(
    served_location, tmp_path, reference
) -> None:
    assert len(DOCUMENTS) >= 20
    jobs_root = tmp_path / "jobs"
    folder = copy_corpus(jobs_root / "docs", DOCUMENTS)
    args = ("--db", served_location, "--jobs-root", str(jobs_root))
    first = start_server(tmp_path / "first", *args)
    try:
        with httpx.Client(base_url=first.url, timeout=120) as client:
            job_id = start_job_and_wait(client, served_location, folder, 3)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(30)
    finally:
        first.stop()
    done_before = committed(served_location, folder)
    assert 3 <= done_before < len(DOCUMENTS), done_before  # killed in the middle
    with open_store(served_location) as store:
        # what the killed server left
        assert jobs_table.table(store).find(job_id).status == "running"

    second = start_server(tmp_path / "second", *args)
    try:
        with httpx.Client(base_url=second.url, timeout=120) as client:
            job = finished_job(client, job_id)
            assert job["status"] == "completed", job
            assert job["attempts"] == 2 and job["error"] is None
            assert job["summary"]["unchanged"] >= done_before  # resumed, not redone
            summary = job["summary"]
            assert summary["indexed"] == summary["new"] + summary["unchanged"] == len(DOCUMENTS)
            listed = client.get("/v1/jobs").json()["data"]
            assert [(j["id"], j["status"]) for j in listed] == [(job_id, "completed")]
        assert "resuming 1 interrupted job(s): " + job_id in second.stderr()
    finally:
        assert second.stop() in (0, -signal.SIGTERM)
    with open_store(served_location) as store:
        got = store_content(store, folder)
        runs = store.runs()
        assert [r.status for r in runs[:2]] == ["completed", "interrupted"]
    with SQLiteStore(tmp_path / "reference") as store:
        run(folder, store, RunOptions.of(chunks_per_call=32), get_encoder=lambda: reference)
        assert_same_content(got, store_content(store, folder))


@pytest.mark.slow
def test_a_second_server_on_the_same_store_leaves_the_first_one_s_job_alone(
    served_location, tmp_path
) -> None:
    """Two servers on one store: the second one starts while the first one's job runs. The
    running job holds the store's run lock, so the second server marks nothing interrupted
    and resumes nothing (it says so in its log), the job's row stays the first server's
    (running, first attempt), the second server refuses to cancel it (409 `job_elsewhere`:
    its cancel would only have marked the row), and the first server cancels it."""
    jobs_root = tmp_path / "jobs"
    folder = jobs_root / "docs"
    for copy in range(40):  # a job that outlasts a server's start, each document quick
        copy_corpus_marked(folder / f"copy{copy}", DOCUMENTS, f"copy{copy}")
    args = ("--db", served_location, "--jobs-root", str(jobs_root))
    first = start_server(tmp_path / "first", *args)
    second = None
    try:
        with httpx.Client(base_url=first.url, timeout=120) as client:
            job_id = start_job_and_wait(client, served_location, folder, 1)
            second = start_server(tmp_path / "second", *args)
            deadline = time.monotonic() + 60
            while "another process runs on this store" not in second.stderr():
                assert client.get(f"/v1/jobs/{job_id}").json()["status"] == "running"
                assert time.monotonic() < deadline, second.stderr()
                time.sleep(0.1)
            assert "resuming" not in second.stderr()
            with httpx.Client(base_url=second.url, timeout=120) as other:
                refused = other.post(f"/v1/jobs/{job_id}/cancel")
                assert refused.status_code == 409, refused.text
                assert refused.json()["error"]["code"] == "job_elsewhere"
                row = other.get(f"/v1/jobs/{job_id}").json()
            assert (row["status"], row["attempts"], row["error"]) == ("running", 1, None), row
            assert client.post(f"/v1/jobs/{job_id}/cancel").status_code == 200
            assert finished_job(client, job_id)["status"] == "cancelled"
    finally:
        if second is not None:
            second.stop()
        first.stop()
