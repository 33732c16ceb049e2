"""Indexing jobs: `attnswitch run` on a folder of the server, in a thread, with progress.

`JobManager.start(path)` checks the path (a folder inside `jobs_root`; 403 outside it, 422
when it is not a folder), then runs `attnswitch.pipeline.run.run` on it in a thread of its
own, against the service's data folder: the same resumable, per-document transactional
pipeline as the CLI, recorded in the store's runs table. One job runs at a time (409 while
one does; the store's run lock also refuses while a CLI run writes the same store).

The job encodes through the service's encoder on the model's executor (`encode` below), so
its encoder calls take turns with request batches instead of competing for the CPU.

`stop()` asks a running job to end: at its next progress point the run is interrupted (its
runs-table row says "interrupted"; every document is either fully committed or untouched,
so the next job or `attnswitch run` finishes it).
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnswitch.service.errors import ServiceError

log = logging.getLogger("attnswitch.service")
KEEP_JOBS = 100
STATUSES = ("queued", "running", "completed", "failed", "interrupted")


class _StopRequested(KeyboardInterrupt):
    """Raised from the progress callback: the run records itself as interrupted."""


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

    def __init__(self, index_path: Path, jobs_root: Path, encoder: Callable[[], Any],
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
        if "\x00" in path:
            raise ServiceError(422, "path: expected a folder path, got a NUL character",
                               code="invalid_path", param="path")
        try:
            folder = (self.jobs_root / path).resolve()
        except (OSError, RuntimeError, ValueError) as exc:
            raise ServiceError(422, f"path: expected a folder path, got one that does not "
                               f"resolve ({type(exc).__name__})", code="invalid_path",
                               param="path") from None
        if folder != self.jobs_root and self.jobs_root not in folder.parents:
            raise ServiceError(403, "path: expected a folder inside the server's jobs root "
                               "(serve --jobs-root), got one outside it", code="path_forbidden",
                               param="path")
        try:
            found = "a folder" if folder.is_dir() else "a file" if folder.exists() else "nothing"
        except OSError as exc:  # e.g. a name too long for the file system
            found = f"an unusable path ({exc.strerror or type(exc).__name__})"
        if found != "a folder":
            raise ServiceError(422, f"path: expected an existing folder on the server, got "
                               f"{found} there", code="not_a_folder", param="path")
        return folder

    def start(self, path: str) -> Job:
        folder = self.resolve(path)
        with self._lock:
            if self._stop.is_set():
                raise ServiceError(503, "server: draining, not starting jobs", code="draining")
            if self._thread is not None and self._thread.is_alive():
                running = next((j.id for j in reversed(self._jobs.values())
                                if j.status in ("queued", "running")), "?")
                raise ServiceError(409, f"jobs: expected no job running, got job {running}; "
                                   "one job runs at a time", code="job_running")
            job = Job(id=secrets.token_hex(8), path=str(folder))
            self._jobs[job.id] = job
            while len(self._jobs) > KEEP_JOBS:
                self._jobs.popitem(last=False)
            self._thread = threading.Thread(target=self._run, args=(job, folder),
                                            name=f"attnswitch-job-{job.id}", daemon=True)
            self._thread.start()
        return job

    def _run(self, job: Job, folder: Path) -> None:
        from attnswitch.pipeline.run import run
        from attnswitch.pipeline.store import SQLiteStore

        job.status, job.started_at = "running", time.time()

        def progress(p: Any) -> None:
            job.progress = {"stage": p.stage, "files_done": p.files_done,
                            "files_total": p.files_total, "bytes_done": p.bytes_done,
                            "bytes_total": p.bytes_total, "chunks": p.chunks,
                            "tokens": p.tokens}
            if self._stop.is_set():
                raise _StopRequested()

        try:
            with SQLiteStore(self.index_path) as store:
                summary = run(folder, store, self._options(), get_encoder=self._encoder,
                              on_progress=progress)
            job.summary = summary.to_dict()
            job.status = "completed"
        except KeyboardInterrupt:
            job.status, job.error = "interrupted", "stopped by server shutdown; run again to finish"
        except Exception as exc:
            job.status, job.error = "failed", f"{type(exc).__name__}: {exc}"
            log.warning("job %s failed: %s", job.id, job.error)
        finally:
            job.finished_at = time.time()

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def request_stop(self) -> None:
        """Refuse new jobs and ask a running one to end (returns at once)."""
        self._stop.set()

    def stop(self, timeout: float) -> bool:
        """Stop taking jobs, interrupt a running one, wait up to `timeout` s; True when no
        job is left running."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def counts(self) -> dict[str, int]:
        with self._lock:
            out = dict.fromkeys(STATUSES, 0)
            for job in self._jobs.values():
                out[job.status] += 1
        return out
