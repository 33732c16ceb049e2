"""Indexing jobs: `attnswitch run` on a folder of the server, in a thread, with progress.

Jobs are off unless the server was given a jobs root (`serve --jobs-root DIR`): without
one, `POST /v1/jobs` answers 403 (`jobs_disabled`), so a server started in a home folder
exposes nothing to index.

`JobManager.start(path)` checks the path: not empty or blank (422), no hidden component
(a name starting with "."; 403), inside `jobs_root` once resolved, links included (403),
an existing folder (422, with one message whatever is there instead, so that the answer
never says whether a file exists). It checks that no other process holds the store's run
lock (409), then runs `attnswitch.pipeline.run.run` on the folder in a thread of its own,
against the service's data folder: the same resumable, per-document transactional
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

`stop()` asks a running job to end: at its next progress point the run is interrupted (its
runs-table row says "interrupted"; every document is either fully committed or untouched,
so the next job or `attnswitch run` finishes it). A job that reaches no progress point
within `STOP_GRACE_S` (chunking one large file) is interrupted where it is.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path, PurePath
from typing import Any

from attnswitch.service.errors import ServiceError
from attnswitch.service.index import INDEX_NAME, store_errors_unavailable

log = logging.getLogger("attnswitch.service")
KEEP_JOBS = 100
# Seconds a stopping job has to reach a progress point before it is interrupted where it is.
STOP_GRACE_S = 2.0
# Files listed by name in a job's summary (skipped ones, and ones handled with a note); the
# counts by reason cover them all, and the store keeps every skipped file with its reason.
LISTED_FILES = 20
STATUSES = ("queued", "running", "completed", "failed", "interrupted")


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
    return ServiceError(403, "path: expected a folder without hidden components (names "
                        "starting with '.'), got one with", code="path_forbidden",
                        param="path")


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

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "object": "job", **{k: v for k, v in dataclasses.asdict(self)
                                                   .items() if k != "id"}}


class JobManager:
    """Runs and remembers indexing jobs (see the module doc). `encoder` returns the encoder
    for a job; `options` the `RunOptions` to run with."""

    def __init__(self, index_path: Path, jobs_root: Path | None, encoder: Callable[[], Any],
                 options: Callable[[], Any]):
        self.index_path = index_path
        self.jobs_root = jobs_root
        self._encoder = encoder
        self._options = options
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def get(self, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise ServiceError(404, f"job: expected the id of a job of this server, got "
                               f"{job_id[:80]!r}", code="job_not_found", param="id")
        return job

    def recent(self) -> list[Job]:
        """The jobs remembered (the last `KEEP_JOBS`), newest first."""
        with self._lock:
            return list(reversed(self._jobs.values()))

    def resolve(self, path: str) -> Path:
        """The folder a job may index for `path` (relative paths are under jobs_root)."""
        if self.jobs_root is None:
            raise ServiceError(403, "jobs: expected a server started with --jobs-root DIR, got "
                               "none: indexing jobs are off", code="jobs_disabled")
        if not path.strip():
            raise ServiceError(422, "path: expected a folder path, got "
                               f"{'an empty string' if not path else 'only whitespace'}",
                               code="invalid_path", param="path")
        if "\x00" in path:
            raise ServiceError(422, "path: expected a folder path, got a NUL character",
                               code="invalid_path", param="path")
        if not _is_utf8(path):  # JSON may carry lone surrogates ("\udcff")
            raise ServiceError(422, "path: expected Unicode text, got an unpaired surrogate",
                               code="invalid_path", param="path")
        if _hidden(PurePath(path).parts):
            raise _hidden_refused()
        try:
            folder = (self.jobs_root / path).resolve()
        except (OSError, RuntimeError, ValueError) as exc:
            raise ServiceError(422, f"path: expected a folder path, got one that does not "
                               f"resolve ({type(exc).__name__})", code="invalid_path",
                               param="path") from None
        if not folder.is_relative_to(self.jobs_root):
            raise ServiceError(403, "path: expected a folder inside the server's jobs root "
                               "(serve --jobs-root), got one outside it", code="path_forbidden",
                               param="path")
        if _hidden(folder.relative_to(self.jobs_root).parts):  # through a link
            raise _hidden_refused()
        try:
            is_folder = folder.is_dir()
        except OSError:  # e.g. a name too long for the file system
            is_folder = False
        if not is_folder:  # one answer whatever is there: a file's existence stays private
            raise ServiceError(422, "path: expected an existing folder inside the jobs root, "
                               "got no such folder", code="not_a_folder", param="path")
        if not _is_utf8(str(folder)):  # the store and the answers hold text
            raise ServiceError(422, "path: expected a folder whose path is valid UTF-8, got "
                               "one with other bytes", code="invalid_path", param="path")
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
            self._jobs[job.id] = job
            while len(self._jobs) > KEEP_JOBS:
                self._jobs.popitem(last=False)
            self._thread = threading.Thread(target=self._run, args=(job, folder, root_id),
                                            name=f"attnswitch-job-{job.id}", daemon=True)
            self._thread.start()
        return job

    @staticmethod
    def _pin(folder: Path) -> tuple[int, int]:
        """The checked folder's (device, inode), opened without following links: the job
        walks that folder and no other, even if its path is swapped for a link later."""
        from attnswitch.pipeline.ingest import folder_id

        try:
            return folder_id(folder)
        except OSError:  # swapped for a link (or removed) since it was checked
            raise ServiceError(422, "path: expected an existing folder inside the jobs root, "
                               "got no such folder", code="not_a_folder",
                               param="path") from None

    def _refuse_while_busy(self) -> None:
        """503 while draining, 409 while a job runs (call with the lock held)."""
        if self._stop.is_set():
            raise ServiceError(503, "server: draining, not starting jobs", code="draining")
        if self._thread is not None and self._thread.is_alive():
            running = next((j.id for j in reversed(self._jobs.values())
                            if j.status in ("queued", "running")), "?")
            raise ServiceError(409, f"jobs: expected no job running, got job {running}; "
                               "one job runs at a time", code="job_running")

    def _check_store(self) -> None:
        """409 while another process (an `attnswitch run` on the same data folder) holds
        the store's run lock, 503 when the store's file is unusable."""
        from attnswitch.pipeline.store import SQLiteStore, StoreBusyError

        with store_errors_unavailable():
            try:
                with SQLiteStore(self.index_path) as store:
                    store.check_unlocked()
            except StoreBusyError:
                raise ServiceError(409, "index: expected no other run writing the server's "
                                   "index, got one (an `attnswitch run` on the same data "
                                   "folder); retry when it has finished",
                                   code="index_busy") from None

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
        paths = [(self.index_path, INDEX_NAME), (self.index_path.resolve(), INDEX_NAME)]
        if model and os.path.isabs(model):
            paths += [(Path(model), _model_name(model)),
                      (Path(model).resolve(), _model_name(model))]
        for path, name in paths:
            text = text.replace(str(path), name)
        if self.jobs_root is not None:
            text = text.replace(str(self.jobs_root) + os.sep, "").replace(
                str(self.jobs_root), ".")
        return text

    def _run(self, job: Job, folder: Path, root_id: tuple[int, int]) -> None:
        from attnswitch.pipeline.run import run
        from attnswitch.pipeline.store import SQLiteStore
        from attnswitch.pipeline.store_errors import describe, is_store_error

        job.status, job.started_at = "running", time.time()

        def progress(p: Any) -> None:
            job.progress = {"stage": p.stage, "files_done": p.files_done,
                            "files_total": p.files_total, "bytes_done": p.bytes_done,
                            "bytes_total": p.bytes_total, "chunks": p.chunks,
                            "tokens": p.tokens}
            if self._stop.is_set():
                raise _StopRequested()

        model = None
        try:
            options = self._options()
            model = options.model
            with SQLiteStore(self.index_path) as store:
                summary = run(folder, store, options, get_encoder=self._encoder,
                              on_progress=progress, root_id=root_id)
            job.summary = {**self._public(bounded(summary.to_dict()), model),
                           "root": job.path}
            job.status = "completed"
        except KeyboardInterrupt:
            job.status, job.error = "interrupted", "stopped by server shutdown; run again to finish"
        except Exception as exc:
            log.warning("job %s failed: %s: %s", job.id, type(exc).__name__, exc)
            error = (describe(exc, INDEX_NAME) if is_store_error(exc)
                     else f"{type(exc).__name__}: {exc}")
            job.status, job.error = "failed", self._public(error, model)
        finally:
            job.finished_at = time.time()

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

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
        with self._lock:
            out = dict.fromkeys(STATUSES, 0)
            for job in self._jobs.values():
                out[job.status] += 1
        return out
