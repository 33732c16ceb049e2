"""Helpers of the security suite: the attack layout's names and secret, a corrupt index
file, deadlines, and waiting for a job to end."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
DOCUMENT = "postgresql/tutorial-start.html"
SECRET = "SECRET-MARKER-7f3a root:x:0:0 private key material"
STARTUP_TIMEOUT_S = 180.0
SHORT_TIMEOUT_S = 2.0
JOB_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Layout:
    base: Path
    jobs_root: Path
    outside: Path
    data: Path


def corrupt_index(folder: Path) -> Path:
    """A data folder whose index file is not a database (what a disk error or a stray
    copy leaves)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "index.sqlite3"
    path.write_bytes(b"this is not an SQLite database, only bytes where one should be\n" * 64)
    return path


def finished(client: Any, job: dict) -> dict:
    """`job` (a /v1/jobs answer) once it is no longer queued or running, polled through
    `client` (an httpx.Client on the server); fails past JOB_TIMEOUT_S."""
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while job["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
        job = client.get(f"/v1/jobs/{job['id']}").json()
    return job
