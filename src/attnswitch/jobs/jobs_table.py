"""The service's jobs table, as the jobs layer names it: one row per indexing job
(`JobRecord`), kept in the store the jobs index into, so that a server killed midway is
followed by one that resumes its jobs (`service/jobs.py`).

The table is a repository of its own (`JobsTable`: `save`, `recent`, `find`,
`interrupt`), opened on a store by `table(store)` (`Store.jobs_table()`); its SQL lives
with the stores (`indexing/jobs_sql.py`), beside the schema that holds the table, and
nothing here speaks SQL (docs/architecture.md, "Layers")."""

from __future__ import annotations

from attnswitch.indexing.jobs_sql import JOB_STATUSES, JobRecord, JobsTable
from attnswitch.indexing.store import Store

__all__ = ["JOB_STATUSES", "JobRecord", "JobsTable", "table"]


def table(store: Store) -> JobsTable:
    """The jobs table of `store` (its rows read and written on `store`'s connection)."""
    return store.jobs_table()
