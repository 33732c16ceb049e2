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

Verdicts live in `verdicts.json`, a `cache.JsonTable` in the cache directory (see
`kernels/cache.py`): shared by the processes of a machine, and kept in memory too, so a
read-only cache directory costs a re-check per process, never a wrong answer.

`run` runs conformance cases (`kernels/conformance.py`) and records their verdicts; this
module sits above conformance, which knows nothing of verdicts.
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from attnswitch._version import __version__
from attnswitch.kernels import arrays, conformance, registry
from attnswitch.kernels.arrays import DeviceInfo
from attnswitch.kernels.backend import Backend
from attnswitch.kernels.cache import JsonTable, device_name, provenance_key

PASS, FAIL, UNVERIFIED = "pass", "fail", "unverified"
# The kinds of case set a verdict ran (`conformance.case_set_kind`).
FULL, QUICK, FIRST_USE, PARTIAL = conformance.CASE_SET_KINDS


@functools.cache
def _versions(backend_name: str, backend: Backend) -> tuple[tuple[str, str], ...]:
    versions = getattr(backend, "versions", None)
    return tuple(sorted(versions().items())) if versions else ()


def subject(backend: Backend, device: DeviceInfo) -> dict:
    """What a verdict is about: the backend as installed here, on this device, by this rule."""
    return {
        "backend": backend.name,
        "versions": dict(_versions(backend.name, backend)),
        "attnswitch": __version__,
        "device": device_name(device),
        "rule": conformance.RULE_REVISION,
    }


def fingerprint(backend: Backend, device: DeviceInfo, case_set: str) -> dict:
    """The subject plus the case set judged (`conformance.case_set_id`, e.g. `full-1f0c9a2b7d3e`)."""
    return {**subject(backend, device), "cases": case_set}


def fingerprint_key(fp: dict) -> str:
    """A verdict's key: its fingerprint's provenance key (`cache.provenance_key`)."""
    return provenance_key(fp, 20)


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
            "status": self.status,
            "full_grid": self.full,
            "passed": sorted(self.passed),
            "kinds": list(self.kinds),
            "unchecked": sorted(self.unchecked),
            "failure": self.failure,
            "failure_kind": self.failure_kind,
            "summary": self.summary,
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


TABLE = JsonTable("verdicts.json")


class _Store:
    """The verdicts in `TABLE`, with each subject's standing cached until the table or the
    case catalogue changes."""

    def __init__(self) -> None:
        self._standing: dict[str, Standing] = {}
        self._standing_of: tuple | None = None

    @property
    def generation(self) -> tuple:
        return TABLE.generation

    def get(self, backend: Backend, device: DeviceInfo, case_set: str) -> Verdict | None:
        return _verdict(TABLE.get(fingerprint_key(fingerprint(backend, device, case_set))))

    def verdicts(self, backend: Backend, device: DeviceInfo) -> list[Verdict]:
        """Every stored verdict on this backend's subject, oldest first."""
        want = subject(backend, device)
        found = []
        for entry in TABLE.data().values():
            fp = entry.get("fingerprint", {}) if isinstance(entry, dict) else {}
            if {k: fp.get(k) for k in want} == want and (v := _verdict(entry)) is not None:
                found.append(v)
        return sorted(found, key=lambda v: v.when)

    def standing(self, backend: Backend, device: DeviceInfo) -> Standing:
        of = (TABLE.generation, conformance.catalogue_token())
        if of != self._standing_of:
            self._standing, self._standing_of = {}, of
        key = fingerprint_key(subject(backend, device))
        cached = self._standing.get(key)
        if cached is None:
            cached = _standing(self.verdicts(backend, device))
            self._standing[key] = cached
        return cached

    def put(self, verdict: Verdict) -> None:
        try:
            TABLE.update({fingerprint_key(verdict.fingerprint): asdict(verdict)})
        except OSError as exc:
            warnings.warn(
                f"attnswitch: verdicts could not be stored in {TABLE.path} ({exc}); they hold "
                "for this process only",
                RuntimeWarning,
                stacklevel=3,
            )


def _verdict(entry: dict | None) -> Verdict | None:
    """A stored entry as a Verdict; None for entries of an older format (no case set)."""
    if not entry or "cases" not in entry.get("fingerprint", {}):
        return None
    known = {f for f in Verdict.__dataclass_fields__}
    return Verdict(**{k: v for k, v in entry.items() if k in known})


def _standing(history: list[Verdict]) -> Standing:
    """The rules in the module docstring, over one subject's verdicts (oldest first)."""
    current = [v for v in history if conformance.still_current(v.labels, v.fingerprint["cases"])]
    failures = [
        f
        for i, f in enumerate(current)
        if not f.passed
        and not any(p.passed and set(p.labels) >= set(f.labels) for p in current[i + 1 :])
    ]
    passes = [v for v in current if v.passed]
    if failures:
        worst = failures[-1]
        return Standing(
            FAIL,
            failure=worst.failures[0] if worst.failures else "failed",
            failure_kind=worst.kind,
            failed_run=frozenset(label for f in failures for label in f.labels),
        )
    if not passes:
        return Standing()
    full_labels = conformance.full_grid_labels()
    passed = frozenset(label for v in passes for label in v.labels)
    seen = passed | frozenset(label for v in passes for label in v.declined)
    covered = frozenset().union(
        *(conformance.case_features(conformance.case_by_label(label)) for label in passed)
    )
    return Standing(
        PASS,
        full=full_labels <= seen,
        passed=passed,
        covered=covered,
        unchecked=frozenset(f for v in passes for f in v.uncovered) - covered,
        kinds=tuple(dict.fromkeys(v.kind for v in passes)),
    )


STORE = _Store()


def standing(backend: Backend, device: DeviceInfo) -> Standing:
    """This backend's verification state on this device with these versions."""
    return STORE.standing(backend, device)


def status(backend: Backend, device: DeviceInfo) -> str:
    """ "pass", "fail" or "unverified" for this backend on this device and these versions."""
    return STORE.standing(backend, device).status


def record(
    backend: Backend,
    device: DeviceInfo,
    results: list[Any],
    kind: str | None = None,
    uncovered: list[str] | None = None,
) -> Verdict:
    """Store the verdict of `results` (`conformance.CaseResult`s of one backend; declined and
    unavailable ones are listed as declined, not run). `kind` defaults to what the cases are:
    the full grid, the quick grid, or partial. `uncovered`: see `Verdict`."""
    ran = [r for r in results if r.status in conformance.RAN]
    declined = [r.case.label for r in results if r not in ran]
    kind = kind or conformance.case_set_kind([r.case for r in results])
    case_set = conformance.case_set_id(kind, [r.case for r in ran])
    failures = [
        f"{r.case.label}: {'; '.join(r.reasons)}" for r in ran if r.status != conformance.PASSED
    ]
    verdict = Verdict(
        fingerprint(backend, device, case_set),
        not failures,
        len(ran),
        failures,
        kind=kind,
        labels=[r.case.label for r in ran],
        declined=declined,
        uncovered=list(uncovered or []),
    )
    STORE.put(verdict)
    return verdict


def run(
    backends: Sequence[str],
    cases: Iterable[conformance.Case],
    *,
    device: str = "cpu",
    store: bool = True,
    force: bool = False,
    kind: str | None = None,
) -> list[conformance.CaseResult]:
    """Run `cases` on each backend (`conformance.check`); with `store`, store one verdict per
    backend under the case set run (`kind`: "full", "quick", "first-use" or "partial"; by
    default what the cases are). A backend that only declined or was unavailable gets none."""
    results: list[conformance.CaseResult] = []
    cases = list(cases)
    for name in backends:
        mine = [conformance.check(name, c, device=device, force=force) for c in cases]
        results.extend(mine)
        ran = any(r.status in conformance.RAN for r in mine)
        if store and ran:
            dev = arrays.CPU if device == "cpu" else conformance.device_info(name, device)
            record(registry.get(name), dev, mine, kind)
    return results
