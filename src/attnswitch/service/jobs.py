"""Indexing jobs: `attnswitch run` on a folder of the server, in a thread, with progress,
each job a row of the server's store (its jobs table), so that the list outlives the process.

Jobs are off unless the server was given a jobs root (`serve --jobs-root DIR`): without
one, `POST /v1/jobs` answers 403 (`jobs_disabled`), so a server started in a home folder
exposes nothing to index.

`JobManager.start(path)` checks the path: not empty or blank (422), no hidden component
(a name starting with "."; 403), inside `jobs_root` once resolved, links included (403),
an existing folder (422, with one message whatever is there instead, so that the answer
never says whether a file exists). It checks that no other process holds the store's run
lock past `LOCK_WAIT_S` (409), then runs `attnswitch.jobs.run.run` on the folder in a
thread of its own, against the service's store (`serve --db`: a data folder or a PostgreSQL
URL, `Index.open_store`): the same resumable, per-document transactional
pipeline as the CLI, recorded in the store's runs table. One job runs at a time (409 while
one does).

Paths in answers are relative to the jobs root (`shown`); a job's summary and error never
carry the server's absolute paths (the index's, the jobs root's, the model folder's). A
summary lists at most `LISTED_FILES` skipped files and as many notes, and counts the rest
(`skipped_files_more`, `notes_more`); `skipped_by_reason` counts every skipped file, and
the store keeps each with its reason (`attnswitch status --json`). A path that is not
valid UTF-8 (a lone surrogate in the JSON, or a folder whose name has other bytes) is
refused (422): the store and the answers hold text.

The job encodes through the service's encoder on the model's executor (`encode` below), so
its encoder calls take turns with request batches instead of competing for the CPU.

`cancel(id)` (`POST /v1/jobs/{id}/cancel`) ends one job for good: a running job stops at its
next progress point as `stop()` stops it (interrupted where it is past `STOP_GRACE_S`),
keeping every document it committed, and its status becomes "cancelled", which no server
resumes; a queued job, or an interrupted one waiting to be resumed, becomes "cancelled"
without running. A finished job (completed, failed, cancelled) is refused (409), as is a
job that another process on the same store runs (409 `job_elsewhere`: cancel it there).

`stop()` asks a running job to end: at its next progress point the run is interrupted (its
runs-table row says "interrupted"; every document is either fully committed or untouched,
so the next job or `attnswitch run` finishes it). A job that reaches no progress point
within `STOP_GRACE_S` (chunking one large file) is interrupted where it is.

Jobs outlive the process: a job's row is written when it is created, when it starts and
ends, and with its progress at most every `PROGRESS_EVERY_S` (the running job's live state
is kept in memory and shown in answers). `resume()`, called once the model is loaded and
before the server is ready, marks the jobs a dead server left queued or running as
interrupted and runs every interrupted job marked for resuming (those, and those stopped by
a drain) again, queued until it runs, oldest first, under the same id (`attempts` counts
its starts): the pipeline's resume is exact, so the store ends as an uninterrupted run
leaves it. A running job holds the store's run lock, so a server started beside another
one on the same store (or beside `attnswitch run`) leaves that process's jobs alone.
`GET /v1/jobs` lists the store's rows, across restarts.
Rows are read and written on a thread of their own, with a store connection of their own.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePath
from typing import Any

from attnswitch.service.errors import ServiceError
from attnswitch.service.index import INDEX_NAME, connection_lost, store_errors_unavailable

log = logging.getLogger("attnswitch.service")
KEEP_JOBS = 100
# Seconds a stopping job has to reach a progress point before it is interrupted where it is.
STOP_GRACE_S = 2.0
# Files listed by name in a job's summary (skipped ones, and ones handled with a note); the
# counts by reason cover them all, and the store keeps every skipped file with its reason.
LISTED_FILES = 20
STATUSES = ("queued", "running", "completed", "failed", "interrupted", "cancelled")
# Statuses of a job that has ended and will not run again: cancelling one is refused (409).
FINISHED = ("completed", "failed", "cancelled")
# Seconds `cancel` waits for a running job to stop before answering with it as it stands.
CANCEL_WAIT_S = 10.0
# Seconds between two writes of a running job's progress to its row.
PROGRESS_EVERY_S = 1.0
# Seconds a new job waits for another process's run on the store before it is refused.
LOCK_WAIT_S = 5.0
INTERRUPTED_BY_CRASH = (
    "the server stopped while this job ran; it is resumed by the next server on this store"
)
INTERRUPTED_BY_DRAIN = (
    "stopped by server shutdown; the next server on this store resumes it (or run again to finish)"
)
CANCELLED = (
    "cancelled by a client; every document it committed is kept, and it is not "
    "resumed (start a job on the folder again to finish)"
)


def _hidden(parts: tuple[str, ...]) -> bool:
    """Whether a path has a hidden component (a name starting with ".", not "." or "..")."""
    return any(part.startswith(".") and part not in (".", "..") for part in parts)


def _model_name(path: str) -> str:
    """How answers name a model folder: by its name (`runtime.model_name`'s rule)."""
    p = Path(path)
    return p.parent.name if p.name == "model" else p.name


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _hidden_refused() -> ServiceError:
    return ServiceError(
        403,
        "path: expected a folder without hidden components (names starting with '.'), got one with",
        code="path_forbidden",
        param="path",
    )


def bounded(summary: dict[str, Any]) -> dict[str, Any]:
    """A run's summary as a job keeps it: without the store's location, and its lists of
    files cut to the first `LISTED_FILES`, with `skipped_files_more` and `notes_more`
    counting the rest (so that neither the server's memory nor `GET /v1/jobs` grows with
    the number of files)."""
    out = {k: v for k, v in summary.items() if k != "db"}
    for key in ("skipped_files", "notes"):
        files = out.get(key) or []
        out[key] = files[:LISTED_FILES]
        out[f"{key}_more"] = max(0, len(files) - LISTED_FILES)
    return out


class _StopRequested(KeyboardInterrupt):
    """Raised from the progress callback (or into the job's thread, `_raise_in`): the run
    records itself as interrupted."""


def _unless_held_elsewhere(call: Callable[[Any], Any]) -> Callable[[Any], tuple[bool, Any]]:
    """`call(store)` as `(False, its result)`, or `(True, None)` where it met the store's run
    lock held by another process (`StoreBusyError`: another server's job, or an
    `attnswitch run`, on the same store)."""

    def run(store: Any) -> tuple[bool, Any]:
        from attnswitch.indexing.store_errors import StoreBusyError

        try:
            return False, call(store)
        except StoreBusyError:
            return True, None

    return run


def _raise_in(thread: threading.Thread, exc_type: type[BaseException]) -> None:
    """Raise `exc_type` in `thread` at its next Python instruction (CPython's
    `PyThreadState_SetAsyncExc`; a thread waiting in C code gets it when the call returns)."""
    import ctypes

    if thread.ident is None:
        return
    ident = ctypes.c_ulong(thread.ident)
    if ctypes.pythonapi.PyThreadState_SetAsyncExc(ident, ctypes.py_object(exc_type)) > 1:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ident, None)  # never more than one


@dataclasses.dataclass
class Job:
    id: str
    path: str
    status: str = "queued"
    created_at: float = dataclasses.field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    progress: dict[str, Any] = dataclasses.field(default_factory=dict)
    summary: dict[str, Any] | None = None
    error: str | None = None
    attempts: int = 0
    resume: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "job",
            **{k: v for k, v in dataclasses.asdict(self).items() if k not in ("id", "resume")},
            "attempts": max(1, self.attempts),
        }

    def record(self) -> Any:
        """The row of this job (`jobs_table.JobRecord`)."""
        from attnswitch.jobs.jobs_table import JobRecord

        return JobRecord(**dataclasses.asdict(self))

    @classmethod
    def of(cls, record: Any) -> Job:
        return cls(**dataclasses.asdict(record))


class JobManager:
    """Runs indexing jobs and keeps them as rows of the store at `location`
    (`ServiceConfig.store_location`: a SQLite file, or a PostgreSQL URL); see the module
    doc. `encoder` returns the encoder for a job; `options` the `RunOptions` to run with."""

    def __init__(
        self,
        location: str | os.PathLike,
        jobs_root: Path | None,
        encoder: Callable[[], Any],
        options: Callable[[], Any],
    ):
        from attnswitch.indexing.index import is_url

        self.location = location
        self.index_path = None if is_url(location) else Path(location)  # a SQLite file
        self.jobs_root = jobs_root
        self._encoder = encoder
        self._options = options
        self._current: Job | None = None  # the running job's live state
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._cancel_ids: set[str] = set()  # jobs a client cancelled (only ever added to)
        self._thread: threading.Thread | None = None
        self._rows_thread = ThreadPoolExecutor(1, thread_name_prefix="attnswitch-jobs")
        self._rows_store: Any = None  # used on `_rows_thread` only
        self._last_saved = 0.0

    # -- rows ------------------------------------------------------------------------------

    def _rows(self, fn: Callable[[Any], Any]) -> Any:
        """`fn(store)` on the rows' thread and connection; a store that fails is reopened
        by the next call. Store errors become 503 (`index.store_errors_unavailable`)."""

        def call() -> Any:
            from attnswitch.indexing.index import Index

            if self._rows_store is None:
                self._rows_store = Index.open_store(self.location)
            try:
                return fn(self._rows_store)
            except BaseException:
                self._forget_rows()
                raise

        with store_errors_unavailable():
            return self._rows_thread.submit(call).result()

    def _forget_rows(self) -> None:
        if self._rows_store is not None:
            try:
                self._rows_store.close()
            except Exception:  # a connection already lost
                pass
            self._rows_store = None

    def _save(self, job: Job) -> None:
        """Write `job`'s row; a store that fails is logged, the job goes on (its row is
        written again at its next change)."""
        from attnswitch.jobs import jobs_table

        record = job.record()
        try:
            self._rows(lambda store: jobs_table.table(store).save(record))
            self._last_saved = time.monotonic()
        except ServiceError as exc:
            log.warning("job %s: its row could not be written: %s", job.id, exc.message)

    def _has_rows(self) -> bool:
        """Whether the store exists yet (a SQLite file is made by the first job)."""
        return self.index_path is None or self.index_path.is_file()

    def get(self, job_id: str) -> Job:
        from attnswitch.jobs import jobs_table

        current = self._current
        if current is not None and current.id == job_id:
            return current
        record = (
            self._rows(lambda store: jobs_table.table(store).find(job_id))
            if self._has_rows()
            else None
        )
        if record is None:
            raise ServiceError(
                404,
                f"job: expected the id of a job of this server, got {job_id[:80]!r}",
                code="job_not_found",
                param="id",
            )
        return Job.of(record)

    def recent(self) -> list[Job]:
        """The last `KEEP_JOBS` jobs of the store, newest first (the running one as it
        stands now)."""
        from attnswitch.jobs import jobs_table

        records = (
            self._rows(lambda store: jobs_table.table(store).recent(KEEP_JOBS))
            if self._has_rows()
            else []
        )
        current = self._current
        return [
            current if current is not None and r.id == current.id else Job.of(r) for r in records
        ]

    # -- starting --------------------------------------------------------------------------
    def resolve(self, path: str) -> Path:
        """The folder a job may index for `path` (relative paths are under jobs_root)."""
        if self.jobs_root is None:
            raise ServiceError(
                403,
                "jobs: expected a server started with --jobs-root DIR, got "
                "none: indexing jobs are off",
                code="jobs_disabled",
            )
        if not path.strip():
            raise ServiceError(
                422,
                "path: expected a folder path, got "
                f"{'an empty string' if not path else 'only whitespace'}",
                code="invalid_path",
                param="path",
            )
        if "\x00" in path:
            raise ServiceError(
                422,
                "path: expected a folder path, got a NUL character",
                code="invalid_path",
                param="path",
            )
        if not _is_utf8(path):  # JSON may carry lone surrogates ("\udcff")
            raise ServiceError(
                422,
                "path: expected Unicode text, got an unpaired surrogate",
                code="invalid_path",
                param="path",
            )
        if _hidden(PurePath(path).parts):
            raise _hidden_refused()
        try:
            folder = (self.jobs_root / path).resolve()
        except (OSError, RuntimeError, ValueError) as exc:
            raise ServiceError(
                422,
                f"path: expected a folder path, got one that does not "
                f"resolve ({type(exc).__name__})",
                code="invalid_path",
                param="path",
            ) from None
        if not folder.is_relative_to(self.jobs_root):
            raise ServiceError(
                403,
                "path: expected a folder inside the server's jobs root "
                "(serve --jobs-root), got one outside it",
                code="path_forbidden",
                param="path",
            )
        if _hidden(folder.relative_to(self.jobs_root).parts):  # through a link
            raise _hidden_refused()
        try:
            is_folder = folder.is_dir()
        except OSError:  # e.g. a name too long for the file system
            is_folder = False
        if not is_folder:  # one answer whatever is there: a file's existence stays private
            raise ServiceError(
                422,
                "path: expected an existing folder inside the jobs root, got no such folder",
                code="not_a_folder",
                param="path",
            )
        if not _is_utf8(str(folder)):  # the store and the answers hold text
            raise ServiceError(
                422,
                "path: expected a folder whose path is valid UTF-8, got one with other bytes",
                code="invalid_path",
                param="path",
            )
        return folder

    def shown(self, path: str | Path) -> str:
        """How a server path appears in answers: relative to the jobs root when inside it,
        else only its last name."""
        p = Path(path)
        if self.jobs_root is not None and p.is_relative_to(self.jobs_root):
            return p.relative_to(self.jobs_root).as_posix()
        return p.name

    def start(self, path: str) -> Job:
        folder = self.resolve(path)
        root_id = self._pin(folder)
        with self._lock:
            self._refuse_while_busy()
        self._check_store()  # outside the lock: opening the store may wait for a writer
        with self._lock:
            self._refuse_while_busy()
            job = Job(id=secrets.token_hex(8), path=self.shown(folder))
            self._save(job)
            self._current = job
            self._thread = threading.Thread(
                target=self._run_all,
                args=([(job, folder, root_id)],),
                name=f"attnswitch-job-{job.id}",
                daemon=True,
            )
            self._thread.start()
        return job

    def resume(self) -> list[str]:
        """Mark the jobs a dead server left queued or running as interrupted, and run again,
        oldest first and under their ids, every interrupted job marked for resuming (called
        once the model is loaded, before the server is ready); the ids resumed, each queued
        until it runs. A job whose folder is gone or refused now fails with the reason.
        While another process runs on the store (its run lock held), its jobs are left to
        it and none is resumed."""
        from attnswitch.jobs import jobs_table

        if not self._has_rows() or self.jobs_root is None:
            return []
        try:
            elsewhere, ids = self._rows(
                _unless_held_elsewhere(
                    lambda store: jobs_table.table(store).interrupt(INTERRUPTED_BY_CRASH)
                )
            )
        except ServiceError as exc:
            log.warning("attnswitch serve: interrupted jobs not resumed: %s", exc.message)
            return []
        if elsewhere:  # another server's (or `run`'s) jobs: left to it
            log.warning(
                "attnswitch serve: another process runs on this store; the jobs it "
                "left unfinished are its own, and none is resumed here"
            )
            return []
        work = []
        for job_id in ids:
            job = Job.of(self._rows(lambda store, i=job_id: jobs_table.table(store).find(i)))
            try:
                folder = self.resolve(job.path)
                work.append((job, folder, self._pin(folder)))
            except ServiceError as exc:
                job.status, job.resume, job.error = "failed", False, f"not resumed: {exc.message}"
                job.finished_at = time.time()
                self._save(job)
        for job, _, _ in work:  # waiting to run again: a client polling it waits too
            job.status = "queued"
            self._save(job)
        if work:
            log.warning(
                "attnswitch serve: resuming %d interrupted job(s): %s",
                len(work),
                ", ".join(j.id for j, _, _ in work),
            )
            with self._lock:
                self._current = work[0][0]
                self._thread = threading.Thread(
                    target=self._run_all, args=(work,), name="attnswitch-job-resume", daemon=True
                )
                self._thread.start()
        return [job.id for job, _, _ in work]

    @staticmethod
    def _pin(folder: Path) -> tuple[int, int]:
        """The checked folder's (device, inode), opened without following links: the job
        walks that folder and no other, even if its path is swapped for a link later."""
        from attnswitch.documents.ingest import folder_id

        try:
            return folder_id(folder)
        except OSError:  # swapped for a link (or removed) since it was checked
            raise ServiceError(
                422,
                "path: expected an existing folder inside the jobs root, got no such folder",
                code="not_a_folder",
                param="path",
            ) from None

    def _refuse_while_busy(self) -> None:
        """503 while draining, 409 while a job runs (call with the lock held)."""
        if self._stop.is_set():
            raise ServiceError(503, "server: draining, not starting jobs", code="draining")
        if self._thread is not None and self._thread.is_alive():
            running = self._current.id if self._current is not None else "?"
            raise ServiceError(
                409,
                f"jobs: expected no job running, got job {running}; one job runs at a time",
                code="job_running",
            )

    def _check_store(self) -> None:
        """409 while another process (an `attnswitch run` on the same store) holds the
        store's run lock past `LOCK_WAIT_S`, 503 when the store is unusable."""
        from attnswitch.indexing.index import Index

        with store_errors_unavailable(), Index.open_store(self.location) as store:
            elsewhere, _ = _unless_held_elsewhere(
                lambda opened: opened.check_unlocked(LOCK_WAIT_S)
            )(store)
        if elsewhere:
            raise ServiceError(
                409,
                "index: expected no other run writing the server's "
                "index, got one (an `attnswitch run` on the same data "
                "folder); retry when it has finished",
                code="index_busy",
            )

    def _public(self, value: Any, model: str | None = None) -> Any:
        """`value` (text, or lists and dicts of it) without the server's absolute paths
        (the index's, the jobs root's, and the folder of `model`, shown by its name)."""
        if isinstance(value, dict):
            return {k: self._public(v, model) for k, v in value.items()}
        if isinstance(value, list):
            return [self._public(v, model) for v in value]
        if not isinstance(value, str):
            return value
        text = value
        if self.index_path is not None:
            paths = [(self.index_path, INDEX_NAME), (self.index_path.resolve(), INDEX_NAME)]
        else:
            from attnswitch.indexing.index import Index

            paths = [(self.location, INDEX_NAME), (Index.shown(self.location), INDEX_NAME)]
        if model and os.path.isabs(model):
            paths += [
                (Path(model), _model_name(model)),
                (Path(model).resolve(), _model_name(model)),
            ]
        for path, name in paths:
            text = text.replace(str(path), name)
        if self.jobs_root is not None:
            text = text.replace(str(self.jobs_root) + os.sep, "").replace(str(self.jobs_root), ".")
        return text

    def _run_all(self, work: list[tuple[Job, Path, tuple[int, int]]]) -> None:
        """Run each (job, folder, pinned root) in turn, on this thread; what is left when
        the server stops stays interrupted, to be resumed."""
        for job, folder, root_id in work:
            if self._stop.is_set():
                break
            if job.id in self._cancel_ids:  # cancelled while it waited (its row says so)
                continue
            # (cancelled from here on, it stops at its first progress point)
            self._current = job
            self._run(job, folder, root_id)

    def _run(self, job: Job, folder: Path, root_id: tuple[int, int]) -> None:
        from attnswitch.indexing.index import Index
        from attnswitch.indexing.store_errors import describe, is_store_error
        from attnswitch.jobs.run import run

        job.status, job.started_at, job.finished_at = "running", time.time(), None
        job.attempts, job.resume, job.error = job.attempts + 1, False, None
        self._save(job)

        def progress(p: Any) -> None:
            job.progress = {
                "stage": p.stage,
                "files_read": p.files_read,
                "files_done": p.files_done,
                "files_total": p.files_total,
                "bytes_done": p.bytes_done,
                "bytes_total": p.bytes_total,
                "chunks": p.chunks,
                "tokens": p.tokens,
            }
            if time.monotonic() - self._last_saved >= PROGRESS_EVERY_S:
                self._save(job)
            if self._stop.is_set() or job.id in self._cancel_ids:
                raise _StopRequested()

        model = None
        try:
            options = self._options()
            model = options.encode.model
            with Index.open_store(self.location) as store:
                summary = run(
                    folder,
                    store,
                    options,
                    get_encoder=self._encoder,
                    on_progress=progress,
                    root_id=root_id,
                )
            job.summary = {**self._public(bounded(summary.to_dict()), model), "root": job.path}
            job.status = "completed"
        except KeyboardInterrupt:
            if job.id in self._cancel_ids:
                job.status, job.error, job.resume = "cancelled", CANCELLED, False
            else:
                job.status, job.error, job.resume = "interrupted", INTERRUPTED_BY_DRAIN, True
        except Exception as exc:
            log.warning("job %s failed: %s: %s", job.id, type(exc).__name__, exc)
            if connection_lost(exc):
                error = (
                    "the PostgreSQL server refused or lost the connection; every "
                    "document is committed whole or not at all: start the job again "
                    "to finish"
                )
            elif is_store_error(exc):
                error = describe(exc, INDEX_NAME)
            else:
                error = f"{type(exc).__name__}: {exc}"
            job.status, job.error = "failed", self._public(error, model)
        finally:
            job.finished_at = time.time()
            self._save(job)

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def cancel(self, job_id: str) -> Job:
        """Cancel the job `job_id` (see the module doc) and return it: "cancelled" once it
        has stopped, or still "running" when it has not within `CANCEL_WAIT_S` (it becomes
        "cancelled" when it does). 404 for an unknown id, 409 for a finished job."""
        with self._lock:
            current = self._current
            live = (
                current is not None
                and current.id == job_id
                and self.running()
                and current.status in ("queued", "running")
            )
            if live:
                self._cancel_ids.add(job_id)
        if live:
            return self._wait_cancelled(current)
        job = self.get(job_id)
        if job.status in FINISHED:
            raise ServiceError(
                409,
                f"job: expected a queued or running job, got job "
                f"{job.id} {job.status}; only an unfinished job can be "
                "cancelled",
                code="job_finished",
                param="id",
            )
        if not self.running() and self._store_runs_elsewhere():
            raise ServiceError(
                409,
                f"job: expected a job of this server, got job {job.id} "
                f"{job.status} in another process on the same store; cancel "
                "it through the server that runs it",
                code="job_elsewhere",
                param="id",
            )
        with self._lock:  # queued, or interrupted and waiting to be resumed
            self._cancel_ids.add(job_id)
        job.status, job.resume, job.error = "cancelled", False, CANCELLED
        job.finished_at = time.time()
        self._save(job)
        return job

    def _store_runs_elsewhere(self) -> bool:
        """Whether another process holds the store's run lock (a job of another server on
        the same store, or `attnswitch run`), while this server runs nothing."""
        elsewhere, _ = self._rows(_unless_held_elsewhere(lambda store: store.check_unlocked()))
        return elsewhere

    def _wait_cancelled(self, job: Job) -> Job:
        """Wait for the running `job`, told to cancel, to stop: at its next progress point,
        or, past `STOP_GRACE_S`, where it is (as `stop` does); at most `CANCEL_WAIT_S`."""
        start = time.monotonic()
        raised = False
        while job.status in ("queued", "running"):
            waited = time.monotonic() - start
            if waited >= CANCEL_WAIT_S:
                break
            thread = self._thread
            if (
                not raised
                and waited >= STOP_GRACE_S
                and thread is not None
                and (self._current is job and job.status == "running")
            ):
                _raise_in(thread, _StopRequested)
                raised = True
            time.sleep(0.05)
        return job

    def request_stop(self) -> None:
        """Refuse new jobs and ask a running one to end (returns at once)."""
        self._stop.set()

    def stop(self, timeout: float) -> bool:
        """Stop taking jobs, interrupt a running one, wait up to `timeout` s; True when no
        job is left running. A job that has not reached a progress point within
        `STOP_GRACE_S` (it is chunking or reading one large file) is interrupted where it
        is, as Ctrl-C interrupts `attnswitch run`: its run is recorded as interrupted and
        every document is committed whole or not at all."""
        self._stop.set()
        thread = self._thread
        if thread is None:
            return True
        end = time.monotonic() + timeout
        thread.join(min(timeout, STOP_GRACE_S))
        if thread.is_alive():
            _raise_in(thread, _StopRequested)
            thread.join(max(0.0, end - time.monotonic()))
        return not thread.is_alive()

    def counts(self) -> dict[str, int]:
        """The store's recent jobs (`recent`) by status (none counted when the store
        cannot be read)."""
        out = dict.fromkeys(STATUSES, 0)
        try:
            jobs = self.recent()
        except ServiceError:
            return out
        for job in jobs:
            out[job.status] += 1
        return out

    def close(self) -> None:
        """Close the rows' connection and thread (after `stop`)."""
        try:
            self._rows_thread.submit(self._forget_rows).result(timeout=5)
        except Exception:
            pass
        self._rows_thread.shutdown(wait=False)
