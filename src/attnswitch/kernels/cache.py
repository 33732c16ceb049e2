"""The cache directory and the JSON tables kept in it (verdicts, autotune, engine plans).

The directory is `$ATTNSWITCH_CACHE_DIR` when set, else `platformdirs.user_cache_dir("attnswitch")`.
A `JsonTable` is one JSON object in that directory, shared by every process on the machine:
it is re-read when another process replaces the file, written by write-then-rename (a reader
never sees half a file), and what this process wrote is kept in memory too, so a read-only
cache directory costs a re-check per process, never a wrong answer.

Cache keys name the device a result was measured on: `device_name` (the CPU model on CPU,
which decides the kernels a library picks: AVX-512, AMX, NEON...).

Everything stored about a measurement is keyed one way, by its provenance
(`provenance_key`): what was measured, on which machine or device, with which library
versions and build revisions, as one JSON object, the *subject*. Attention verdicts, engine
plans and parity checks, precision picks, exported models and their calibrations all key
by it, and a table entry keeps its subject (`JsonTable.record`), so a lookup that finds no
fresh entry can say why (`JsonTable.why_stale`: the fields of the subject that changed
since the same thing was last measured). An index's config fingerprints use the same key.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attnswitch.kernels.arrays import DeviceInfo
from attnswitch.provenance import provenance_key, subject_changes

# How long a table trusts its last look at the file before it stats it again. Every planned
# call consults the tables, so they must not stat the file each time.
RECHECK_SECONDS = 1.0


def cache_file(name: str) -> Path:
    """`name` in the cache directory. Every planned call asks for it, so it is computed once
    per value of the variables that decide it."""
    return _cache_file(
        os.environ.get("ATTNSWITCH_CACHE_DIR"), os.environ.get("XDG_CACHE_HOME"), name
    )


@functools.cache
def _cache_file(override: str | None, xdg_cache_home: str | None, name: str) -> Path:
    # xdg_cache_home is only part of the cache key: platformdirs reads it from the environment
    if override:
        base = Path(override)
    else:
        import platformdirs

        base = Path(platformdirs.user_cache_dir("attnswitch"))
    return base / name


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


def cpu_flags() -> frozenset[str]:
    """The CPU's ISA flags as the kernel lists them (avx512_bf16, amx_tile, ...); empty where
    /proc/cpuinfo does not say."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def device_name(device: DeviceInfo) -> str:
    """The name results measured on `device` are keyed by."""
    return cpu_name() if device.kind == "cpu" else device.name


class JsonTable:
    """One JSON object in the cache directory, named by `name` (resolved on every look, so a
    change of `$ATTNSWITCH_CACHE_DIR` moves the table).

    `data()` is the object as last read plus what this process wrote; `generation` changes
    whenever that may have changed (another process replaced the file, or this one wrote),
    so caches of derived facts can key on it. `update(entries)` merges entries into the file
    and returns its path; it raises OSError when the file cannot be written, and the entries
    then hold for this process only."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._data: dict[str, Any] = {}
        self._local: dict[Path, dict[str, Any]] = {}
        self._path: Path | None = None
        self._stat: tuple[int, int, int] | None = None
        self._checked = 0.0
        self._writes = 0

    @property
    def path(self) -> Path:
        return cache_file(self.name)

    def _refresh(self, force: bool = False) -> Path:
        path = self.path
        now = time.monotonic()
        if not force and path == self._path and now - self._checked < RECHECK_SECONDS:
            return path
        self._checked = now
        try:
            st = path.stat()
            # Every write renames a new file into place: the inode and size tell two writes
            # apart even where file times are coarser than the writes are frequent.
            stat = (st.st_mtime_ns, st.st_ino, st.st_size)
        except OSError:  # absent, or not readable: what this process wrote only
            stat = None
        if path != self._path or stat != self._stat:
            self._path, self._stat = path, stat
            self._data = _read(path) if stat is not None else {}
        return path

    @property
    def generation(self) -> tuple:
        path = self._refresh()
        return (str(path), self._stat, self._writes)

    def data(self) -> dict[str, Any]:
        path = self._refresh()
        local = self._local.get(path)
        return {**self._data, **local} if local else self._data

    def get(self, key: str, default: Any = None) -> Any:
        return self.data().get(key, default)

    def update(self, entries: dict[str, Any]) -> Path:
        with self._lock:
            path = self._refresh(force=True)
            self._local.setdefault(path, {}).update(entries)
            self._writes += 1
            merged = {**_read(path), **self._local[path]}
            self._data = merged
            try:
                _write(path, merged)
            finally:
                self._refresh(force=True)
            return path

    def record(
        self,
        subject: Mapping[str, Any],
        value: Mapping[str, Any],
        *,
        length: int = 24,
        prefix: str = "",
    ) -> str:
        """Store `value` under `subject`'s key (`provenance_key`), the subject kept with it;
        returns the key. OSError as `update`."""
        key = provenance_key(subject, length, prefix)
        self.update({key: {**value, "subject": dict(subject)}})
        return key

    def fresh(self, subject: Mapping[str, Any], *, length: int = 24, prefix: str = "") -> Any:
        """The entry stored under `subject`'s key, or None."""
        return self.get(provenance_key(subject, length, prefix))

    def why_stale(self, subject: Mapping[str, Any], same: Sequence[str]) -> str | None:
        """Why no entry is fresh for `subject` although the same thing (equal on the fields
        `same`, say machine, model and precision) was recorded before: the fields that
        changed since its latest entry ("stale: attnswitch: 0.9 -> 0.10"); None when the
        same thing was never recorded (or the table keeps no subjects)."""
        latest: tuple[str, Mapping[str, Any]] | None = None
        for entry in self.data().values():
            old = entry.get("subject") if isinstance(entry, Mapping) else None
            if (
                isinstance(old, Mapping)
                and old.keys() == subject.keys()
                and all(old.get(f) == subject.get(f) for f in same)
                and dict(old) != dict(subject)
            ):
                when = str(entry.get("when", ""))
                if latest is None or when >= latest[0]:
                    latest = (when, old)
        if latest is None:
            return None
        return "stale: " + "; ".join(subject_changes(latest[1], subject))

    def forget(self) -> None:
        """Drop what this process wrote and look at the file again (tests)."""
        with self._lock:
            self._local.clear()
            self._path = None
            self._writes += 1


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
