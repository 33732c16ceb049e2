"""Helpers of the security suite: the attack layout's names and secret, a corrupt index
file, and deadlines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
DOCUMENT = "postgresql/tutorial-start.html"
SECRET = "SECRET-MARKER-7f3a root:x:0:0 private key material"
STARTUP_TIMEOUT_S = 180.0
SHORT_TIMEOUT_S = 2.0


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
