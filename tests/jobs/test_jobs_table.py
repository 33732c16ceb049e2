"""The service's jobs table (`jobs/jobs_table.py`) on both stores: rows saved, listed and
found again by a new connection, a dead server's jobs marked to resume, and a table made
before jobs could be cancelled upgraded with its rows."""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from pathlib import Path

import pytest

from attnswitch.indexing.location import open_store
from attnswitch.indexing.store_errors import StoreInputError
from attnswitch.jobs import jobs_table
from attnswitch.jobs.jobs_table import JobRecord


def test_job_rows_survive_reopening_and_interrupted_ones_are_marked_to_resume(location) -> None:
    """Jobs are rows of the store: saved, updated, listed newest first and found again by a
    new connection (a restarted server); the ones a dead server left queued or running
    become interrupted and are named for resuming, oldest first; finished ones are not."""
    jobs = [
        JobRecord(id=f"j{i}", path=f"folder {i} é", status=status, created_at=100.0 + i)
        for i, status in enumerate(("completed", "running", "queued", "failed"))
    ]
    with open_store(location) as store:
        for job in jobs:
            jobs_table.save(store, job)
        done = JobRecord(
            id="j0",
            path="folder 0 é",
            status="completed",
            created_at=100.0,
            started_at=101.0,
            finished_at=102.5,
            progress={"files_done": 3},
            summary={"indexed": 3, "notes": ["a.txt: 2 pages"]},
            attempts=1,
        )
        jobs_table.save(store, done)
        with pytest.raises(StoreInputError, match="status"):
            jobs_table.save(store, JobRecord(id="x", path="x", status="lost", created_at=1.0))
    with open_store(location) as store:
        assert [j.id for j in jobs_table.recent(store)] == ["j3", "j2", "j1", "j0"]
        assert [j.id for j in jobs_table.recent(store, limit=2)] == ["j3", "j2"]
        assert jobs_table.find(store, "j0") == done and jobs_table.find(store, "nope") is None
        assert jobs_table.interrupt(store, "the server stopped") == ["j1", "j2"]
        again = {j.id: j for j in jobs_table.recent(store)}
        assert {k: (j.status, j.resume) for k, j in again.items()} == {
            "j0": ("completed", False),
            "j1": ("interrupted", True),
            "j2": ("interrupted", True),
            "j3": ("failed", False),
        }
        assert again["j1"].error == "the server stopped" and again["j1"].finished_at
        jobs_table.save(store, dataclasses.replace(again["j1"], status="running", resume=False))
        assert jobs_table.interrupt(store, "again") == ["j1", "j2"]
        # a cancelled job is finished: a dead server's next start leaves it as it is
        jobs_table.save(store, dataclasses.replace(again["j2"], status="cancelled", resume=False))
        assert jobs_table.interrupt(store, "once more") == ["j1"]
        assert jobs_table.find(store, "j2").status == "cancelled"


def _narrow_jobs_check(location: str | Path) -> None:
    """Give the store at `location` the jobs table of schema version 4 (no "cancelled"),
    as a store made before jobs could be cancelled has it."""
    from attnswitch.indexing.location import is_url

    old = "'queued', 'running', 'completed', 'failed', 'interrupted'"
    if is_url(str(location)):
        import psycopg

        with psycopg.connect(str(location), autocommit=True) as conn:
            conn.execute("ALTER TABLE jobs DROP CONSTRAINT jobs_status_check")
            conn.execute(
                f"ALTER TABLE jobs ADD CONSTRAINT jobs_status_check CHECK (status IN ({old}))"
            )
        return
    from attnswitch.indexing.store import resolve_path

    with sqlite3.connect(resolve_path(location)) as conn:
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'jobs'").fetchone()[0]
        narrowed = re.sub(r"CHECK \(status IN \([^)]*\)\)", f"CHECK (status IN ({old}))", sql)
        assert narrowed != sql
        conn.execute("ALTER TABLE jobs RENAME TO jobs_new")
        conn.execute(narrowed)
        conn.execute("INSERT INTO jobs SELECT * FROM jobs_new")
        conn.execute("DROP TABLE jobs_new")
        conn.execute("PRAGMA user_version = 4")


def test_a_store_made_before_cancelled_jobs_is_upgraded_keeping_its_jobs(location) -> None:
    """A jobs table whose CHECK knows no "cancelled" (a store of schema version 4) is
    upgraded when opened: its rows are kept and a job may then be cancelled."""
    kept = JobRecord(
        id="old",
        path="docs",
        status="interrupted",
        created_at=5.0,
        error="stopped",
        attempts=1,
        resume=True,
        progress={"files_done": 2},
    )
    with open_store(location) as store:
        jobs_table.save(store, kept)
    _narrow_jobs_check(location)
    with open_store(location) as store:
        assert jobs_table.find(store, "old") == kept
        jobs_table.save(store, dataclasses.replace(kept, status="cancelled", resume=False))
        assert jobs_table.find(store, "old").status == "cancelled"
        assert store.migrated is None  # the chunks did not change: nothing to tell
