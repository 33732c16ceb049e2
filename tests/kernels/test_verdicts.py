"""Verdicts: stored per fingerprint in the cache directory; a new fingerprint is unverified;
a failed verdict quarantines the backend in plans until a passing run requalifies it; an
explicit request still runs a quarantined backend, with a warning."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import attnswitch
from attnswitch.kernels import arrays, cache, conformance, plan, registry, runtime, verdicts
from attnswitch.kernels.arrays import CPU
from attnswitch.kernels.backends.reference import Reference
from attnswitch.kernels.contract import Call

# A few cases keep these tests fast; causal-203x113 is where dropping `causal` shows.
QUICK = [
    c
    for c in conformance.cases(quick=True, dtypes=("float32",))
    if c.name in ("plain-113x203", "causal-203x113", "packed")
]
_names = itertools.count()


class Fakelib(Reference):
    """The float64 oracle under another name, claiming to run on library `fakelib` of a given
    version; with `ignore_causal` set it drops `causal` (a regression to catch)."""

    def __init__(self, name: str = "fakelib", version: str = "1.0", ignore_causal: bool = False):
        self.name, self.version, self.ignore_causal = name, version, ignore_causal

    def versions(self) -> dict[str, str]:
        return {"fakelib": self.version}

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        if self.ignore_causal:
            call = dataclasses.replace(call, causal=False)
        return super().run(q, k, v, call)


@pytest.fixture
def fakelib(cache_dir: Path) -> Iterator[str]:
    """A fresh backend name (warnings are issued once per name) registered for one test."""
    name = f"fakelib-{next(_names)}"
    registry.register(Fakelib(name))
    try:
        yield name
    finally:
        registry.unregister(name)


def _replace(name: str, **kwargs: Any) -> Fakelib:
    """What a new process sees after an upgrade or a regression: a new backend instance."""
    backend = Fakelib(name, **kwargs)
    registry.register(backend, replace=True)
    return backend


def _inputs() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 5, 2, 8)).astype(np.float32)
    k = rng.standard_normal((1, 7, 2, 8)).astype(np.float32)
    v = rng.standard_normal((1, 7, 2, 8)).astype(np.float32)
    return q, k, v


def test_verdict_is_stored_per_fingerprint_in_cache_dir(cache_dir: Path) -> None:
    verdicts.run(["reference"], QUICK)
    stored = json.loads((cache_dir / "verdicts.json").read_text())
    (entry,) = stored.values()
    fp = entry["fingerprint"]
    assert fp == {
        "backend": "reference",
        "versions": {"numpy": np.__version__},
        "attnswitch": attnswitch.__version__,
        "device": cache.cpu_name(),
        "rule": conformance.RULE_REVISION,
        "cases": conformance.case_set_id(verdicts.PARTIAL, QUICK),
    }
    assert fp["cases"].startswith("partial-")
    assert entry["passed"] is True
    assert entry["cases"] == len(QUICK)
    assert entry["kind"] == verdicts.PARTIAL
    assert entry["labels"] == [c.label for c in QUICK]
    assert list(stored) == [verdicts.fingerprint_key(fp)]
    assert verdicts.status(registry.get("reference"), CPU) == verdicts.PASS


def test_new_fingerprint_is_unverified(fakelib: str) -> None:
    q, k, v = _inputs()
    assert verdicts.status(registry.get(fakelib), CPU) == verdicts.UNVERIFIED
    verdicts.run([fakelib], QUICK)
    assert verdicts.status(registry.get(fakelib), CPU) == verdicts.PASS
    assert attnswitch.explain(q, k, v).verdicts[fakelib] == verdicts.PASS

    upgraded = _replace(fakelib, version="2.0")
    assert verdicts.status(upgraded, CPU) == verdicts.UNVERIFIED
    p = attnswitch.explain(q, k, v)
    assert fakelib in p.candidates  # unverified is not quarantined
    assert p.verdicts[fakelib] == verdicts.UNVERIFIED

    # The old version's verdict is kept: going back finds it again.
    assert verdicts.status(_replace(fakelib, version="1.0"), CPU) == verdicts.PASS


def test_other_device_is_another_fingerprint(fakelib: str) -> None:
    verdicts.run([fakelib], QUICK)
    gpu = arrays.DeviceInfo("cuda", "Some GPU", 0, (9, 0))
    assert verdicts.status(registry.get(fakelib), CPU) == verdicts.PASS
    assert verdicts.status(registry.get(fakelib), gpu) == verdicts.UNVERIFIED


def test_changed_rule_is_another_fingerprint(fakelib: str, monkeypatch) -> None:
    verdicts.run([fakelib], QUICK)
    assert verdicts.status(registry.get(fakelib), CPU) == verdicts.PASS
    with monkeypatch.context() as m:
        m.setattr(conformance, "RULE_REVISION", conformance.RULE_REVISION + 1)
        assert verdicts.status(registry.get(fakelib), CPU) == verdicts.UNVERIFIED
    assert verdicts.status(registry.get(fakelib), CPU) == verdicts.PASS


def test_grid_changes_age_verdicts_case_by_case(fakelib: str, monkeypatch) -> None:
    """A verdict stands for the cases it ran, as they are: removing or changing one of them
    makes it stale (unverified); adding a case to the grid turns a full-grid pass into a pass
    of the cases it ran."""
    verdicts.run([fakelib], conformance.cases())
    backend = registry.get(fakelib)
    assert verdicts.standing(backend, CPU).full
    with monkeypatch.context() as m:
        m.setattr(conformance, "GRID", conformance.GRID[:-1])
        assert verdicts.status(backend, CPU) == verdicts.UNVERIFIED
    with monkeypatch.context() as m:
        m.setattr(
            conformance, "GRID", (*conformance.GRID, conformance.Case("new-case", seqlen_q=7))
        )
        standing = verdicts.standing(backend, CPU)
        assert standing.status == verdicts.PASS and not standing.full
    with monkeypatch.context() as m:
        changed = dataclasses.replace(conformance.GRID[0], seqlen_q=114)
        m.setattr(conformance, "GRID", (changed, *conformance.GRID[1:]))
        assert verdicts.status(backend, CPU) == verdicts.UNVERIFIED
    assert verdicts.standing(backend, CPU).full


def test_failure_quarantines_and_pass_requalifies(fakelib: str) -> None:
    q, k, v = _inputs()
    _replace(fakelib, ignore_causal=True)
    results = verdicts.run([fakelib], QUICK)
    assert any(r.status == conformance.FAILED for r in results)
    (stored,) = verdicts.STORE.verdicts(registry.get(fakelib), CPU)
    assert not stored.passed
    assert any(f.startswith("causal-203x113/") for f in stored.failures)

    for causal in (True, False):  # a verdict is about the backend, not one kind of call
        p = attnswitch.explain(q, k, v, causal=causal)
        assert p.status(fakelib) == plan.QUARANTINED
        assert fakelib not in p.candidates
        (reason,) = p.reasons(fakelib)
        assert f"attnswitch conformance --backend {fakelib}" in reason
        assert p.chosen is not None  # another backend serves it
        assert re.search(rf"^\s*quarantined\s*{fakelib}: ", str(p), re.MULTILINE)

    _replace(fakelib)  # fixed, same fingerprint
    verdicts.run([fakelib], QUICK)
    assert verdicts.status(registry.get(fakelib), CPU) == verdicts.PASS
    p = attnswitch.explain(q, k, v, causal=True)
    assert fakelib in p.candidates
    assert p.status(fakelib) != plan.QUARANTINED


@pytest.mark.parametrize("how", ["backend=", "use()", "ATTNSWITCH_BACKEND"])
def test_explicit_request_runs_quarantined_backend_with_warning(
    fakelib: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    q, k, v = _inputs()
    _replace(fakelib, ignore_causal=True)
    verdicts.run([fakelib], QUICK)
    assert verdicts.status(registry.get(fakelib), CPU) == verdicts.FAIL

    def attention(**kwargs: Any) -> Any:
        if how == "backend=":
            return attnswitch.attention(q, k, v, backend=fakelib, **kwargs)
        if how == "use()":
            with attnswitch.use(fakelib):
                return attnswitch.attention(q, k, v, **kwargs)
        monkeypatch.setenv("ATTNSWITCH_BACKEND", fakelib)
        runtime.current().reset()  # the environment is read when a runtime starts
        return attnswitch.attention(q, k, v, **kwargs)

    with pytest.warns(RuntimeWarning, match=f"{fakelib} failed conformance"):
        out = attention(causal=True)
    # It really ran the (broken) backend: causal was dropped.
    full = attnswitch.attention(q, k, v, causal=False, backend="reference")
    masked = attnswitch.attention(q, k, v, causal=True, backend="reference")
    np.testing.assert_allclose(out, full, rtol=1e-6)
    assert not np.allclose(out, masked)


def test_declined_only_records_nothing(cache_dir: Path) -> None:
    """A run where the backend declined or was unavailable for every case is no verdict."""
    packed = [c for c in QUICK if c.packed is not None]
    only_dense = Fakelib("fakelib-dense-only")
    only_dense.caps = dataclasses.replace(only_dense.caps, layouts=("dense",))
    registry.register(only_dense)
    try:
        results = verdicts.run([only_dense.name], packed)
    finally:
        registry.unregister(only_dense.name)
    assert {r.status for r in results} == {conformance.DECLINED}
    assert not (cache_dir / "verdicts.json").exists()
    assert verdicts.status(only_dense, CPU) == verdicts.UNVERIFIED
