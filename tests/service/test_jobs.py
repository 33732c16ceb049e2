"""Indexing jobs through a real server: a job runs the pipeline on a folder of the server
(one at a time), reports progress and its run summary, and lands in the store's runs table
as `attnswitch run` would; paths outside the jobs root or not folders are refused."""

from __future__ import annotations

import time
import uuid

import pytest
from service_testing import LARGER, copy_corpus, wait_for_jobs

from attnswitch.indexing.store import SQLiteStore

pytestmark = pytest.mark.xdist_group("service")


def test_a_job_indexes_a_folder_and_reports_progress(client, service_dirs) -> None:
    wait_for_jobs(client)
    name = f"job-{uuid.uuid4().hex[:8]}"
    folder = copy_corpus(service_dirs["jobs_root"] / name, LARGER)
    r = client.post("/v1/jobs", json={"path": name})
    assert r.status_code == 202, r.text
    job = r.json()
    assert r.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["path"] == name and job["status"] in ("queued", "running")  # relative

    busy = client.post("/v1/jobs", json={"path": name})  # still running: one at a time
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "job_running"

    deadline = time.monotonic() + 300
    while job["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.2)
        job = client.get(f"/v1/jobs/{job['id']}").json()
    assert job["status"] == "completed", job
    summary, progress = job["summary"], job["progress"]
    assert (summary["new"], summary["indexed"], summary["failed"]) == (len(LARGER),) * 2 + (0,)
    assert progress["files_done"] == progress["files_total"] == len(LARGER)
    assert progress["chunks"] == summary["chunks_encoded"] > 0
    # the server was started with no --engine: its pick was not "forced by argument"
    from attnswitch.engines import explain_engine

    assert summary["engine_reason"] == explain_engine(None, "auto", "fp32").reason()
    assert summary["engine_reason"] != "forced by argument"
    assert client.get("/v1/jobs").json()["data"][0]["id"] == job["id"]
    with SQLiteStore(service_dirs["data"]) as store:
        run = next(x for x in store.runs() if x.id == summary["run_id"])
        assert run.status == "completed" and run.root == str(folder.resolve())
        assert store.root_counts(folder) == (len(LARGER), summary["chunks_stored"])


@pytest.mark.parametrize(
    "path, status, code",
    [
        ("/", 403, "path_forbidden"),
        ("..", 403, "path_forbidden"),
        ("docs/../../..", 403, "path_forbidden"),
        ("no-such-folder", 422, "not_a_folder"),
        ("docs/postgresql/tutorial-start.html", 422, "not_a_folder"),
        ("bad\u0000path", 422, "invalid_path"),
        ("n" * 4000, 422, "not_a_folder"),  # longer than a file name may be
        ("d/" * 3000, 422, "not_a_folder"),  # longer than a path may be
    ],
)
def test_paths_outside_the_root_or_not_folders_are_refused(client, path, status, code) -> None:
    r = client.post("/v1/jobs", json={"path": path})
    assert r.status_code == status and r.json()["error"]["code"] == code


def test_unknown_job_is_404(client) -> None:
    r = client.get("/v1/jobs/" + "0" * 16)
    assert r.status_code == 404 and r.json()["error"]["code"] == "job_not_found"


@pytest.mark.parametrize("held_s", [1.5, 60.0])
def test_a_job_waits_a_bounded_time_for_another_process_s_run(client, service_dirs, held_s) -> None:
    """A store locked by another process's run (issue 29): a new job waits for it up to
    `jobs.LOCK_WAIT_S`, so a run that ends meanwhile lets the job start (202); past that
    the job is refused with 409 `index_busy`, saying to retry."""
    from attnswitch.service.jobs import LOCK_WAIT_S
    from store_testing import hold_run_lock

    wait_for_jobs(client)
    SQLiteStore(service_dirs["data"]).close()
    holder = hold_run_lock(service_dirs["data"], held_s)
    try:
        started = time.monotonic()
        r = client.post("/v1/jobs", json={"path": "docs"})
        waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait(30)
    if held_s < LOCK_WAIT_S:
        assert r.status_code == 202, r.text
        assert wait_for_jobs(client)[0]["status"] == "completed"
    else:
        assert r.status_code == 409 and waited >= LOCK_WAIT_S, r.text
        assert r.json()["error"]["code"] == "index_busy"
        assert "retry when it has finished" in r.json()["error"]["message"]
