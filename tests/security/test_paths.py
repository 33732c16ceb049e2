"""What a job and a folder walk may reach (issue rows 1, 2, 8 and the path items of 10):
links never lead out of the root, hidden folders are never jobs, jobs are off unless the
operator names a jobs root, blank paths are refused, a missing jobs root is refused at
start, a 422 never tells whether a file exists, and no answer carries an absolute server
path. Through real servers, the real CLI and the real store."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from security_testing import SECRET, finished
from typer.testing import CliRunner

from attnswitch.cli import app
from attnswitch.indexing.store import SQLiteStore

pytestmark = pytest.mark.xdist_group("security")


@pytest.fixture(scope="module")
def indexed(keyless, layout) -> dict:
    """The `docs` folder indexed by a job (links out of the root included)."""
    import httpx

    with httpx.Client(base_url=keyless.url, timeout=60) as client:
        r = client.post("/v1/jobs", json={"path": "docs"})
        assert r.status_code == 202, r.text
        job = finished(client, r.json())
    assert job["status"] == "completed", job
    return job


def test_links_out_of_the_root_are_skipped_and_never_searchable(client, indexed, layout) -> None:
    """Row 1: `docs/passwd -> outside/passwd` and `docs/etc -> outside/etc` are listed as
    skipped with the reason, and nothing of theirs is stored or found."""
    skipped = {f["source"]: f["reason"] for f in indexed["summary"]["skipped_files"]}
    assert skipped == {
        "passwd": "link not followed: its target is outside the root",
        "etc": "link not followed: its target is outside the root",
    }
    assert indexed["summary"]["indexed"] == 1
    r = client.post("/v1/search", json={"query": SECRET, "k": 100})
    assert r.status_code == 200, r.text
    assert r.json()["data"] and not any("SECRET" in h["text"] for h in r.json()["data"])
    with SQLiteStore(layout.data) as store:
        ids, _ = store.vectors()
        assert not any("SECRET" in c.text for c in store.chunks(ids).values())


@pytest.mark.parametrize("path", [".ssh", "./.ssh", "docs/../.ssh", ".ssh/", "keys"])
def test_hidden_folders_are_never_jobs(client, path) -> None:
    """Row 2: a hidden folder, by name, through `..`, or through a link to it."""
    r = client.post("/v1/jobs", json={"path": path})
    assert r.status_code == 403, r.text
    assert r.json()["error"]["code"] == "path_forbidden"
    assert "hidden" in r.json()["error"]["message"]


def test_jobs_are_off_without_a_jobs_root(broken) -> None:
    """Row 2: the default is safe: a server started without --jobs-root runs no job."""
    import httpx

    r = httpx.post(f"{broken.url}/v1/jobs", json={"path": "."}, timeout=60)
    assert r.status_code == 403 and r.json()["error"]["code"] == "jobs_disabled", r.text


@pytest.mark.parametrize("path", ["", " ", "\t\n"])
def test_blank_job_paths_are_refused(client, path) -> None:
    """Row 8, the service's side: a blank path would mean the whole jobs root."""
    r = client.post("/v1/jobs", json={"path": path})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_path", r.text


@pytest.mark.parametrize(
    "args", [["run", ""], ["run", "  "], ["status", "--db", ""], ["search", "q", "--db", " "]]
)
def test_blank_cli_paths_are_refused(tmp_path, monkeypatch, args) -> None:
    """Row 8: `attnswitch run ""` (an unset shell variable) indexes nothing."""
    (tmp_path / "a.txt").write_text("text that must not be indexed\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "expected a path, got" in result.output
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]  # no data folder made


def test_a_job_while_a_cli_run_holds_the_store_is_409(client, layout, indexed) -> None:
    """Row 10: a job posted while another process runs on the same store is refused at
    once, not accepted and failed later."""
    with SQLiteStore(layout.data) as store:
        run_id = store.begin_run(layout.jobs_root / "docs")  # as `attnswitch run` does
        try:
            r = client.post("/v1/jobs", json={"path": "docs"})
        finally:
            store.finish_run(run_id, "interrupted")
    assert r.status_code == 409 and r.json()["error"]["code"] == "index_busy", r.text
    assert (
        finished(client, client.post("/v1/jobs", json={"path": "docs"}).json())["status"]
        == "completed"
    )  # free again


def test_a_missing_jobs_root_is_refused_at_start(tmp_path) -> None:
    """Row 10: `serve --jobs-root /nonexistent` exits 2 before loading anything."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnswitch.service",
            "--port",
            "0",
            "--jobs-root",
            str(tmp_path / "nonexistent"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "jobs_root: expected an existing folder" in proc.stderr


def test_not_a_folder_says_nothing_of_what_is_there(client) -> None:
    """Row 10: a file, nothing and an unusable name get one and the same answer."""
    answers = [
        client.post("/v1/jobs", json={"path": p}).json()
        for p in ("notes.txt", "no-such-thing", "n" * 4000)
    ]
    assert [a["error"]["code"] for a in answers] == ["not_a_folder"] * 3
    assert len({a["error"]["message"] for a in answers}) == 1


def test_answers_carry_no_absolute_server_path(client, indexed, layout) -> None:
    """Row 10: jobs and search results name folders relative to the jobs root."""
    assert indexed["path"] == "docs" and indexed["summary"]["root"] == "docs"
    hits = client.post("/v1/search", json={"query": "getting started", "k": 5}).json()["data"]
    assert hits and all(h["root"] == "docs" and h["path"] == h["source"] for h in hits)
    jobs = client.get("/v1/jobs").text
    for text in (jobs, json.dumps(hits)):
        assert str(layout.base) not in text and str(layout.base.resolve()) not in text
