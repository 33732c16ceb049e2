"""Conformance verdicts, stored per fingerprint in the user cache directory.

A fingerprint is (backend, its library versions, attnswitch version, device name, the
conformance rule and grid it was judged by). A new fingerprint (a library upgrade, another
GPU, a changed rule or grid) has no verdict: the backend is *unverified*. A
stored failure *quarantines* the backend: the planner skips it until it passes again.

The cache directory is `platformdirs.user_cache_dir("attnswitch")`, or
`$ATTNSWITCH_CACHE_DIR` when set.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from attnswitch.attention.arrays import DeviceInfo
from attnswitch.attention.backend import Backend

PASS, FAIL, UNVERIFIED = "pass", "fail", "unverified"


def cache_file(name: str) -> Path:
    """`name` in the cache directory. Every planned call asks for it, so it is computed once
    per value of the variables that decide it."""
    return _cache_file(os.environ.get("ATTNSWITCH_CACHE_DIR"), os.environ.get("XDG_CACHE_HOME"),
                       name)


@functools.cache
def _cache_file(override: str | None, xdg_cache_home: str | None, name: str) -> Path:
    # xdg_cache_home is only part of the cache key: platformdirs reads it from the environment
    if override:
        base = Path(override)
    else:
        import platformdirs

        base = Path(platformdirs.user_cache_dir("attnswitch"))
    return base / name


def store_path() -> Path:
    return cache_file("verdicts.json")


@functools.cache
def cpu_name() -> str:
    """The CPU model, which decides the CPU kernels a library picks (AVX-512, AMX, NEON...)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device: DeviceInfo) -> str:
    return cpu_name() if device.kind == "cpu" else device.name


@functools.cache
def _versions(backend_name: str, backend: Backend) -> tuple[tuple[str, str], ...]:
    versions = getattr(backend, "versions", None)
    return tuple(sorted(versions().items())) if versions else ()


def fingerprint(backend: Backend, device: DeviceInfo) -> dict:
    from attnswitch import __version__
    from attnswitch.attention.conformance import rule_id

    return {
        "backend": backend.name,
        "versions": dict(_versions(backend.name, backend)),
        "attnswitch": __version__,
        "device": device_name(device),
        "conformance": rule_id(),
    }


def fingerprint_key(fp: dict) -> str:
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:20]


@dataclass
class Verdict:
    """The outcome of one conformance run of one backend on one fingerprint."""

    fingerprint: dict
    passed: bool
    cases: int
    failures: list[str] = field(default_factory=list)
    when: float = field(default_factory=time.time)

    @property
    def status(self) -> str:
        return PASS if self.passed else FAIL


class _Store:
    """The JSON file of verdicts, re-read when another process rewrites it."""

    def __init__(self) -> None:
        self._data: dict[str, dict] = {}
        self._path: Path | None = None
        self._mtime: tuple[int, int, int] | None = None
        self._checked = 0.0

    def _refresh(self, force: bool = False) -> None:
        path = store_path()
        now = time.monotonic()
        if not force and path == self._path and now - self._checked < 1.0:
            return
        self._checked = now
        try:
            st = path.stat()
            # Every write renames a new file into place: the inode and size tell two writes
            # apart even where file times are coarser than the writes are frequent.
            mtime = (st.st_mtime_ns, st.st_ino, st.st_size)
        except FileNotFoundError:
            mtime = None
        if path != self._path or mtime != self._mtime:
            self._path, self._mtime = path, mtime
            try:
                self._data = json.loads(path.read_text()) if mtime is not None else {}
            except (OSError, ValueError):
                self._data = {}

    @property
    def generation(self) -> tuple:
        self._refresh()
        return (str(self._path), self._mtime)

    def get(self, backend: Backend, device: DeviceInfo) -> Verdict | None:
        self._refresh()
        entry = self._data.get(fingerprint_key(fingerprint(backend, device)))
        return Verdict(**entry) if entry else None

    def put(self, verdict: Verdict) -> None:
        self._refresh(force=True)
        self._data[fingerprint_key(verdict.fingerprint)] = asdict(verdict)
        path = store_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write-then-rename so a reader never sees half a file.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".verdicts.")
        with os.fdopen(fd, "w") as f:
            json.dump(self._data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
        self._refresh(force=True)


STORE = _Store()


def status(backend: Backend, device: DeviceInfo) -> str:
    """"pass", "fail" or "unverified" for this backend on this device and these versions."""
    verdict = STORE.get(backend, device)
    return UNVERIFIED if verdict is None else verdict.status


def record(backend: Backend, device: DeviceInfo, cases: int, failures: list[str]) -> Verdict:
    verdict = Verdict(fingerprint(backend, device), not failures, cases, failures)
    STORE.put(verdict)
    return verdict
