"""The service's jobs table as a repository (`JobsTable`): one row per indexing job
(`JobRecord`), kept in the store the jobs index into, so that a server killed midway is
followed by one that resumes its jobs (`service/jobs.py`, through `jobs/jobs_table.py`).

The table is part of each store's schema (`indexing/sqlite_schema.py`,
`indexing/store_postgres.py`: one schema version per file). `SQLJobsTable` is its one
implementation, for both stores: its statements are the same SQL in SQLite's and
PostgreSQL's dialects but for the parameter mark, and each store hands it its mark, its
transactions, its reads and its run lock (`StoreBase.jobs_table`), which stay private to
the store (docs/architecture.md, "Layers")."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from attnswitch.indexing.store_errors import StoreInputError

# A job's statuses; "cancelled" (a client cancelled it) is never resumed, "interrupted" is.
JOB_STATUSES = ("queued", "running", "completed", "failed", "interrupted", "cancelled")


@dataclass(frozen=True)
class JobRecord:
    """A row of the jobs table: one indexing job of the service (`service.jobs`). `path`
    is the folder as the service shows it (relative to its jobs root); `progress` and
    `summary` are JSON objects; `attempts` counts its starts (a resumed job has more than
    one); `resume`: interrupted, to be finished by the next server on this store."""

    id: str
    path: str
    status: str
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    progress: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    error: str | None = None
    attempts: int = 0
    resume: bool = False


COLUMNS = tuple(f.name for f in dataclasses.fields(JobRecord))


class JobsTable(Protocol):
    """The jobs table of one store: what the service reads and writes of its jobs."""

    def save(self, job: JobRecord) -> None:
        """Insert or replace the row of `job` (atomic); `StoreInputError` for a status
        not in `JOB_STATUSES`, before anything is written."""
        ...

    def recent(self, limit: int | None = None) -> list[JobRecord]:
        """Jobs, newest first (by creation time, then id), at most `limit` when given."""
        ...

    def find(self, job_id: str) -> JobRecord | None:
        """The row of job `job_id`, or None."""
        ...

    def interrupt(self, error: str) -> list[str]:
        """Mark the jobs left queued or running by a server that died as interrupted, with
        `error`, to be resumed; the ids of every job to resume, oldest first.

        Only when no other process runs on this store: a job that is running holds the
        store's run lock, so while another process holds it (a second server on the same
        store, or `attnswitch run`), its rows are its own, and this raises
        `StoreBusyError` without marking any (after `RUN_LOCK_WAIT_S`: the lock of a
        process killed a moment ago may take that long to go)."""
        ...


@dataclass(frozen=True)
class SQLJobsTable:
    """`JobsTable` over a store's connection: `mark`, its parameter placeholder ("?" or
    "%s"); `transaction()`, a connection inside one transaction (`execute(sql, params)`);
    `read(sql, params)`, the rows of one query; `exclusive()`, the run lock held for a
    block."""

    mark: str
    transaction: Callable[[], contextlib.AbstractContextManager[Any]]
    read: Callable[[str, Sequence[Any]], list[Any]]
    exclusive: Callable[[], contextlib.AbstractContextManager[None]]

    def save(self, job: JobRecord) -> None:
        if job.status not in JOB_STATUSES:
            raise StoreInputError("status", f"one of {JOB_STATUSES}", repr(job.status))
        values = [getattr(job, c) for c in COLUMNS]
        values[COLUMNS.index("progress")] = json.dumps(job.progress, sort_keys=True)
        values[COLUMNS.index("summary")] = (
            None if job.summary is None else json.dumps(job.summary, sort_keys=True, default=str)
        )
        values[COLUMNS.index("resume")] = int(job.resume)
        marks = ", ".join([self.mark] * len(values))
        updates = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS if c != "id")
        with self.transaction() as conn:
            conn.execute(
                f"INSERT INTO jobs ({', '.join(COLUMNS)}) VALUES ({marks}) "
                f"ON CONFLICT (id) DO UPDATE SET {updates}",
                values,
            )

    def recent(self, limit: int | None = None) -> list[JobRecord]:
        sql = f"SELECT {', '.join(COLUMNS)} FROM jobs ORDER BY created_at DESC, id"
        rows = self.read(sql + (f" LIMIT {self.mark}" if limit else ""), (limit,) if limit else ())
        return [_record(r) for r in rows]

    def find(self, job_id: str) -> JobRecord | None:
        rows = self.read(f"SELECT {', '.join(COLUMNS)} FROM jobs WHERE id = {self.mark}", (job_id,))
        return _record(rows[0]) if rows else None

    def interrupt(self, error: str) -> list[str]:
        m = self.mark
        with self.exclusive(), self.transaction() as conn:
            conn.execute(
                f"UPDATE jobs SET status = 'interrupted', error = {m}, resume = 1, "
                f"finished_at = {m} WHERE status IN ('queued', 'running')",
                (error, time.time()),
            )
            return [
                str(r[0])
                for r in conn.execute(
                    "SELECT id FROM jobs WHERE status = 'interrupted' AND resume = 1 "
                    "ORDER BY created_at, id"
                ).fetchall()
            ]


def _record(row: Sequence[Any]) -> JobRecord:
    values = dict(zip(COLUMNS, row))
    values["progress"] = json.loads(values["progress"] or "{}")
    values["summary"] = None if values["summary"] is None else json.loads(values["summary"])
    values["resume"] = bool(values["resume"])
    return JobRecord(**values)
