"""The service's jobs table (`jobs/jobs_table.py`, a repository of its own:
`indexing/jobs_sql.py`) on both stores: rows saved, listed and found again by a new
connection, a dead server's jobs marked to resume but not while a writer holds the run
lock, and a table made before jobs could be cancelled upgraded with its rows."""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from pathlib import Path

import pytest

from attnswitch.indexing.location import open_store
from attnswitch.indexing.store_errors import StoreBusyError, StoreInputError
from attnswitch.indexing.writer import IndexWriter
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
        table = jobs_table.table(store)
        for job in jobs:
            table.save(job)
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
        table.save(done)
        with pytest.raises(StoreInputError, match="status"):
            table.save(JobRecord(id="x", path="x", status="lost", created_at=1.0))
    with open_store(location) as store:
        table = jobs_table.table(store)
        assert [j.id for j in table.recent()] == ["j3", "j2", "j1", "j0"]
        assert [j.id for j in table.recent(limit=2)] == ["j3", "j2"]
        assert table.find("j0") == done and table.find("nope") is None
        assert table.interrupt("the server stopped") == ["j1", "j2"]
        again = {j.id: j for j in table.recent()}
        assert {k: (j.status, j.resume) for k, j in again.items()} == {
            "j0": ("completed", False),
            "j1": ("interrupted", True),
            "j2": ("interrupted", True),
            "j3": ("failed", False),
        }
        assert again["j1"].error == "the server stopped" and again["j1"].finished_at
        table.save(dataclasses.replace(again["j1"], status="running", resume=False))
        assert table.interrupt("again") == ["j1", "j2"]
        # a cancelled job is finished: a dead server's next start leaves it as it is
        table.save(dataclasses.replace(again["j2"], status="cancelled", resume=False))
        assert table.interrupt("once more") == ["j1"]
        assert table.find("j2").status == "cancelled"


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
        jobs_table.table(store).save(kept)
    _narrow_jobs_check(location)
    with open_store(location) as store:
        table = jobs_table.table(store)
        assert table.find("old") == kept
        table.save(dataclasses.replace(kept, status="cancelled", resume=False))
        assert table.find("old").status == "cancelled"
        assert store.migrated is None  # the chunks did not change: nothing to tell


def test_a_dead_server_s_jobs_are_not_marked_while_a_writer_holds_the_run_lock(location) -> None:
    """A running job holds the store's run lock (its writer): `interrupt` then refuses
    (`StoreBusyError`) and marks no row; once the writer lets go it marks them."""
    with open_store(location) as store:
        table = jobs_table.table(store)
        table.save(JobRecord(id="live", path="docs", status="running", created_at=1.0))
        with IndexWriter(store, wait_s=0):
            with pytest.raises(StoreBusyError):
                table.interrupt("the server stopped")
            assert table.find("live").status == "running"
        assert table.interrupt("the server stopped") == ["live"]
        assert table.find("live").status == "interrupted"
