"""Conformance verdicts, stored per fingerprint in the user cache directory, with provenance.

A fingerprint names what was judged and by which cases:
- the *subject*: backend, its library versions, attnswitch version, device name and the
  conformance rule revision;
- the *case set*: its kind ("full" grid, "quick" grid, "first-use" self-check, or "partial"
  for any other selection) and a digest of the exact cases run.

One verdict is kept per fingerprint; the verdicts of one subject together give its *standing*
(`standing`):
- a failure quarantines the backend (the planner skips it) until a later pass that ran every
  case the failure ran supersedes it. A quick or first-use pass therefore never clears a
  full-grid failure; only a full run does (`attnswitch conformance --backend NAME`);
- a full-grid pass verifies the backend for every call; other passes verify the calls whose
  features (`conformance.call_features`) the passed cases cover;
- a verdict whose cases no longer exist or have changed (the grid moved) is stale and ignored;
- a new subject (a library upgrade, another device, a new rule) has no verdict: *unverified*.

The cache directory is `platformdirs.user_cache_dir("attnswitch")`, or
`$ATTNSWITCH_CACHE_DIR` when set. Verdicts are kept in memory too, so a read-only cache
directory costs a re-check per process, never a wrong answer.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import tempfile
import time
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from attnswitch.attention.arrays import DeviceInfo
from attnswitch.attention.backend import Backend

PASS, FAIL, UNVERIFIED = "pass", "fail", "unverified"
FULL, QUICK, FIRST_USE, PARTIAL = "full", "quick", "first-use", "partial"


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


def subject(backend: Backend, device: DeviceInfo) -> dict:
    """What a verdict is about: the backend as installed here, on this device, by this rule."""
    from attnswitch import __version__
    from attnswitch.attention.conformance import RULE_REVISION

    return {
        "backend": backend.name,
        "versions": dict(_versions(backend.name, backend)),
        "attnswitch": __version__,
        "device": device_name(device),
        "rule": RULE_REVISION,
    }


def fingerprint(backend: Backend, device: DeviceInfo, case_set: str) -> dict:
    """The subject plus the case set judged (`conformance.case_set_id`, e.g. `full-1f0c9a2b7d3e`)."""
    return {**subject(backend, device), "cases": case_set}


def fingerprint_key(fp: dict) -> str:
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:20]


@dataclass
class Verdict:
    """The outcome of one conformance run of one backend on one fingerprint.

    kind: "full", "quick", "first-use" or "partial" (the case set's kind, also named in the
    fingerprint). labels: every case run (passed, failed or errored); declined: cases the
    backend declined (not run). failures: "label: reasons" for each case not passed, with the
    measured error and its bound. uncovered: call features a first-use check was asked to
    cover that no case this backend serves exercises (they stay unchecked, and are shown)."""

    fingerprint: dict
    passed: bool
    cases: int
    failures: list[str] = field(default_factory=list)
    when: float = field(default_factory=time.time)
    kind: str = PARTIAL
    labels: list[str] = field(default_factory=list)
    declined: list[str] = field(default_factory=list)
    uncovered: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return PASS if self.passed else FAIL


@dataclass(frozen=True)
class Standing:
    """A backend's verification state on one subject, from its current verdicts.

    status: "pass" (some pass stands and no failure), "fail" (a failure stands: quarantined)
    or "unverified". full: a full-grid pass stands. passed: labels of the cases passed (first-
    use, quick or partial runs included); covered: the call features those cases cover;
    unchecked: features a first-use check found no served case for (accepted, and shown).
    failure: the standing failure's first reason ("case: error vs bound"), with its kind;
    failed_run: every case the standing failures ran (a pass must run them all to clear them)."""

    status: str = UNVERIFIED
    full: bool = False
    passed: frozenset[str] = frozenset()
    covered: frozenset[str] = frozenset()
    unchecked: frozenset[str] = frozenset()
    kinds: tuple[str, ...] = ()
    failure: str | None = None
    failure_kind: str | None = None
    failed_run: frozenset[str] = frozenset()

    def as_dict(self) -> dict[str, Any]:
        """For JSON output (`attnswitch doctor --json`)."""
        return {
            "status": self.status, "full_grid": self.full, "passed": sorted(self.passed),
            "kinds": list(self.kinds), "unchecked": sorted(self.unchecked),
            "failure": self.failure, "failure_kind": self.failure_kind, "summary": self.summary,
        }

    def covers(self, features: Iterable[str]) -> bool:
        """Whether the passed cases vouch for a call with these features (no failure stands)."""
        if self.status == FAIL:
            return False
        return self.full or set(features) <= self.covered | self.unchecked

    @property
    def summary(self) -> str:
        """One line for plans and `doctor`."""
        if self.status == FAIL:
            return f"fail ({self.failure_kind}): {self.failure}"
        if self.full:
            return "pass (full grid)"
        if self.status == PASS:
            text = f"pass ({'+'.join(self.kinds)}: {', '.join(sorted(self.passed)) or 'no case'})"
            if self.unchecked:
                text += f"; no case it serves checks {', '.join(sorted(self.unchecked))}"
            return text
        return "never checked"


class _Store:
    """The JSON file of verdicts, re-read when another process rewrites it, plus the verdicts
    recorded in this process (kept when the file cannot be written)."""

    def __init__(self) -> None:
        self._data: dict[str, dict] = {}
        self._local: dict[Path, dict[str, dict]] = {}
        self._path: Path | None = None
        self._mtime: tuple[int, int, int] | None = None
        self._checked = 0.0
        self._standing: dict[tuple, Standing] = {}
        self._writes = 0

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
        except OSError:  # absent, or not readable: verdicts of this process only
            mtime = None
        if path != self._path or mtime != self._mtime:
            self._path, self._mtime = path, mtime
            try:
                self._data = json.loads(path.read_text()) if mtime is not None else {}
            except (OSError, ValueError):
                self._data = {}
            self._standing.clear()

    @property
    def generation(self) -> tuple:
        self._refresh()
        return (str(self._path), self._mtime, self._writes)

    def _entries(self) -> dict[str, dict]:
        local = self._local.get(self._path, {})  # type: ignore[arg-type]
        return {**self._data, **local} if local else self._data

    def get(self, backend: Backend, device: DeviceInfo, case_set: str) -> Verdict | None:
        self._refresh()
        entry = self._entries().get(fingerprint_key(fingerprint(backend, device, case_set)))
        return _verdict(entry)

    def verdicts(self, backend: Backend, device: DeviceInfo) -> list[Verdict]:
        """Every stored verdict on this backend's subject, oldest first."""
        self._refresh()
        want = subject(backend, device)
        found = []
        for entry in self._entries().values():
            fp = entry.get("fingerprint", {})
            if {k: fp.get(k) for k in want} == want and (v := _verdict(entry)) is not None:
                found.append(v)
        return sorted(found, key=lambda v: v.when)

    def standing(self, backend: Backend, device: DeviceInfo) -> Standing:
        from attnswitch.attention import conformance

        self._refresh()
        key = (fingerprint_key(subject(backend, device)), self._writes,
               conformance.catalogue_token())
        cached = self._standing.get(key)
        if cached is None:
            cached = _standing(self.verdicts(backend, device))
            self._standing[key] = cached
        return cached

    def put(self, verdict: Verdict) -> None:
        self._refresh(force=True)
        key, entry = fingerprint_key(verdict.fingerprint), asdict(verdict)
        path = store_path()
        self._local.setdefault(path, {})[key] = entry
        self._writes += 1
        self._standing.clear()
        self._data[key] = entry
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Write-then-rename so a reader never sees half a file.
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".verdicts.")
            with os.fdopen(fd, "w") as f:
                json.dump(self._data, f, indent=1, sort_keys=True)
            os.replace(tmp, path)
        except OSError as exc:
            warnings.warn(
                f"attnswitch: verdicts could not be stored in {path} ({exc}); they hold for "
                "this process only", RuntimeWarning, stacklevel=3,
            )
        self._refresh(force=True)


def _verdict(entry: dict | None) -> Verdict | None:
    """A stored entry as a Verdict; None for entries of an older format (no case set)."""
    if not entry or "cases" not in entry.get("fingerprint", {}):
        return None
    known = {f for f in Verdict.__dataclass_fields__}
    return Verdict(**{k: v for k, v in entry.items() if k in known})


def _standing(history: list[Verdict]) -> Standing:
    """The rules in the module docstring, over one subject's verdicts (oldest first)."""
    from attnswitch.attention import conformance

    current = [v for v in history if conformance.still_current(v.labels, v.fingerprint["cases"])]
    failures = [
        f for i, f in enumerate(current) if not f.passed and not any(
            p.passed and set(p.labels) >= set(f.labels) for p in current[i + 1:]
        )
    ]
    passes = [v for v in current if v.passed]
    if failures:
        worst = failures[-1]
        return Standing(FAIL, failure=worst.failures[0] if worst.failures else "failed",
                        failure_kind=worst.kind,
                        failed_run=frozenset(label for f in failures for label in f.labels))
    if not passes:
        return Standing()
    full_labels = conformance.full_grid_labels()
    passed = frozenset(label for v in passes for label in v.labels)
    seen = passed | frozenset(label for v in passes for label in v.declined)
    covered = frozenset().union(*(conformance.case_features(conformance.case_by_label(label))
                                  for label in passed))
    return Standing(
        PASS, full=full_labels <= seen, passed=passed, covered=covered,
        unchecked=frozenset(f for v in passes for f in v.uncovered) - covered,
        kinds=tuple(dict.fromkeys(v.kind for v in passes)),
    )


STORE = _Store()


def standing(backend: Backend, device: DeviceInfo) -> Standing:
    """This backend's verification state on this device with these versions."""
    return STORE.standing(backend, device)


def status(backend: Backend, device: DeviceInfo) -> str:
    """"pass", "fail" or "unverified" for this backend on this device and these versions."""
    return STORE.standing(backend, device).status


def record(backend: Backend, device: DeviceInfo, results: list[Any], kind: str | None = None,
           uncovered: list[str] | None = None) -> Verdict:
    """Store the verdict of `results` (`conformance.CaseResult`s of one backend; declined and
    unavailable ones are listed as declined, not run). `kind` defaults to what the cases are:
    the full grid, the quick grid, or partial. `uncovered`: see `Verdict`."""
    from attnswitch.attention import conformance

    ran = [r for r in results if r.status in (conformance.PASSED, conformance.FAILED,
                                              conformance.ERROR)]
    declined = [r.case.label for r in results if r not in ran]
    kind = kind or conformance.case_set_kind([r.case for r in results])
    case_set = conformance.case_set_id(kind, [r.case for r in ran])
    failures = [f"{r.case.label}: {'; '.join(r.reasons)}" for r in ran
                if r.status != conformance.PASSED]
    verdict = Verdict(
        fingerprint(backend, device, case_set), not failures, len(ran), failures,
        kind=kind, labels=[r.case.label for r in ran], declined=declined,
        uncovered=list(uncovered or []),
    )
    STORE.put(verdict)
    return verdict
