"""The `attnswitch` command line, run for real (subprocess, as a user runs it) and in-process
through typer's CliRunner. A plug-in backend registered through the `attnswitch.backends`
entry-point group, from a package built in a temporary directory, shows both that a failing
backend makes `conformance` exit non-zero and that third-party registration works."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from attnswitch.cli import app
from attnswitch.kernels import conformance, registry, verdicts
from attnswitch.kernels.arrays import CPU
from attnswitch.kernels.backends.reference import Reference

PLUGIN_BACKEND = "plugin-drops-causal"
PLUGIN_SOURCE = '''
"""A third-party backend with one regression: it ignores `causal`."""
import dataclasses

from attnswitch.kernels.backends.reference import Reference


class DropsCausal(Reference):
    name = "plugin-drops-causal"
    libraries = ("attnswitch-test-plugin", "numpy")

    def run(self, q, k, v, call):
        return super().run(q, k, v, dataclasses.replace(call, causal=False))


BACKEND = DropsCausal()
'''


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m attnswitch.cli ARGS` in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "attnswitch.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        timeout=300,
    )


@pytest.fixture
def plugin_path(tmp_path: Path) -> Path:
    """A directory holding the plug-in module and its dist-info (METADATA, entry points), as
    `pip install` would leave them; on PYTHONPATH, importlib.metadata finds the entry point."""
    root = tmp_path / "plugin"
    root.mkdir()
    (root / "attnswitch_test_plugin.py").write_text(PLUGIN_SOURCE)
    info = root / "attnswitch_test_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: attnswitch-test-plugin\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        "[attnswitch.backends]\ndrops-causal = attnswitch_test_plugin:BACKEND\n"
    )
    return root


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def test_console_script_help() -> None:
    script = Path(sys.executable).parent / "attnswitch"
    if not script.exists():
        pytest.skip(f"console script not installed next to {sys.executable}")
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "conformance" in done.stdout and "doctor" in done.stdout


def test_help_does_not_import_frameworks() -> None:
    """`attnswitch --help` stays fast: neither torch nor jax is imported."""
    code = (
        "import sys\nfrom attnswitch.cli import app\n"
        "try:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('HEAVY', sorted(m for m in ('torch', 'jax') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in done.stdout, done.stdout + done.stderr


def test_conformance_reference_passes(cache_dir: Path) -> None:
    done = _cli("conformance", "--quick", "--backend", "reference")
    assert done.returncode == 0, done.stdout + done.stderr
    for case in conformance.cases(quick=True):
        assert f"│ reference │ {case.label} " in done.stdout
    assert not re.search(r"│ (fail|error) +│", done.stdout)
    (entry,) = json.loads((cache_dir / "verdicts.json").read_text()).values()
    assert entry["fingerprint"]["backend"] == "reference" and entry["passed"]


def test_plugin_backend_fails_conformance_and_is_quarantined(
    cache_dir: Path, plugin_path: Path
) -> None:
    env = {"PYTHONPATH": os.pathsep.join([str(plugin_path), os.environ.get("PYTHONPATH", "")])}
    done = _cli("conformance", "--quick", "--backend", PLUGIN_BACKEND, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"│ {PLUGIN_BACKEND} │ causal-203x113/float32 " in done.stdout
    assert "out: error" in done.stdout
    assert f"│ {PLUGIN_BACKEND} │ plain-113x203/float32 " in done.stdout  # passing rows too

    (entry,) = json.loads((cache_dir / "verdicts.json").read_text()).values()
    assert entry["fingerprint"]["versions"] == {
        "attnswitch-test-plugin": "0.1",
        "numpy": entry["fingerprint"]["versions"]["numpy"],
    }
    assert not entry["passed"]

    # A fresh process sees the plug-in, its failed verdict, and quarantines it.
    code = textwrap.dedent(f"""
        import numpy as np, attnswitch
        q = np.zeros((1, 4, 2, 8), np.float32)
        plan = attnswitch.explain(q, q, q, causal=True)
        print("STATUS", plan.status("{PLUGIN_BACKEND}"))
        print("REASON", *plan.reasons("{PLUGIN_BACKEND}"))
    """)
    seen = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
    assert "STATUS quarantined" in seen.stdout, seen.stdout + seen.stderr
    assert f"attnswitch conformance --backend {PLUGIN_BACKEND}" in seen.stdout


def test_doctor_lists_every_backend() -> None:
    done = _cli("doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for name in registry.names():
        assert sum(line.startswith(f"│ {name} ") for line in lines) == 1, name
    assert "Planner's choice" in done.stdout
    assert "numpy" in done.stdout
    reference = next(line for line in lines if line.startswith("│ reference "))
    cells = [c.strip() for c in reference.split("│")[1:-1]]
    assert cells[2] == "yes" and float(cells[5]) > 0  # available, timed


def test_doctor_json(cache_dir: Path) -> None:
    result = _invoke("doctor", "--json", "--no-timing")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [r["backend"] for r in report["backends"]] == registry.names()
    ref = next(r for r in report["backends"] if r["backend"] == "reference")
    assert ref["available"] and ref["verdict"] == "unverified" and ref["median_ms"] is None
    assert len(report["plans"]) == 3
    for row in report["plans"]:
        assert row["plans"]["numpy"]["chosen"] in registry.names()
        assert row["plans"]["numpy"]["source"].startswith("priority:")
    assert report["versions"]["numpy"]


class _CompilesFirst(Reference):
    name = "cli-test-compiles-first"
    slow_first_call = "first call compiles (a test backend)"


def test_doctor_times_a_compiling_backend_only_when_asked(monkeypatch, cache_dir: Path) -> None:
    slow = _CompilesFirst()
    registry.register(slow)
    try:
        monkeypatch.setattr(registry, "backends", lambda: [registry.get("reference"), slow])

        def rows(*flags: str) -> dict[str, dict]:
            report = json.loads(_invoke("doctor", "--json", *flags).stdout)
            return {row["backend"]: row for row in report["backends"]}

        found = rows()
        plain, compiling = found["reference"], found[slow.name]
        assert plain["median_ms"] > 0
        assert not (plain["timing_note"] or "").startswith("not timed")  # "median of 1" may be
        assert compiling["median_ms"] is None
        assert compiling["timing_note"] == (
            "not timed: first call compiles (a test backend); --timing-all"
        )
        assert rows("--timing-all")[slow.name]["median_ms"] > 0
    finally:
        registry.unregister(slow.name)


def test_conformance_json_records_verdict(cache_dir: Path) -> None:
    _invoke("conformance", "--quick", "--backend", "reference", "--no-record")
    assert not (cache_dir / "verdicts.json").exists()
    assert verdicts.status(registry.get("reference"), CPU) == verdicts.UNVERIFIED

    result = _invoke("conformance", "--quick", "--backend", "reference", "--json")
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.stdout)
    assert report["verdict"] == "pass" and report["failed"] == 0
    assert len(report["results"]) == len(conformance.cases(quick=True))
    assert all(r["error"] <= r["bound"] for r in report["results"])
    assert verdicts.status(registry.get("reference"), CPU) == verdicts.PASS


@pytest.fixture
def extra_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    backend = request.param
    registry.register(backend)
    try:
        yield backend.name
    finally:
        registry.unregister(backend.name)


class _Nowhere(Reference):
    name = "cli-test-nowhere"

    def unavailable(self) -> str | None:
        return "needs hardware this test does not have"


class _DenseOnly(Reference):
    name = "cli-test-dense-only"

    def extra_declines(self, call: Any) -> list[str]:
        return ["packed input is not wired"] if call.packed else []


@pytest.mark.parametrize("extra_backend", [_Nowhere()], indirect=True)
def test_requested_unavailable_backend_exits_nonzero(extra_backend: str, cache_dir: Path) -> None:
    result = _invoke("conformance", "--quick", "--backend", extra_backend)
    assert result.exit_code == 1
    assert "needs hardware this test does not have" in result.stdout
    assert not (cache_dir / "verdicts.json").exists()


@pytest.mark.parametrize("extra_backend", [_DenseOnly()], indirect=True)
def test_declined_cases_are_summarised(extra_backend: str, cache_dir: Path) -> None:
    packed = [c.label for c in conformance.cases(quick=True) if c.packed is not None]
    result = _invoke("conformance", "--quick", "--backend", extra_backend)
    assert result.exit_code == 0, result.output
    assert f"declined: packed input is not wired ({len(packed)})" in result.stdout
    assert all(f" {label} " not in result.stdout for label in packed)

    shown = _invoke("conformance", "--quick", "--backend", extra_backend, "--show-declined")
    for label in packed:
        assert f"│ {extra_backend} │ {label} " in shown.stdout


def test_unknown_backend_is_a_usage_error(cache_dir: Path) -> None:
    result = _invoke("conformance", "--backend", "no-such-backend")
    assert result.exit_code == 2
    assert "no-such-backend" in result.output


class _Scaled(Reference):
    """The oracle returning 1.01x its answer (a library that silently changed)."""

    name = "cli-test-scaled"
    scale = 1.01

    def run(self, q: Any, k: Any, v: Any, call: Any) -> Any:
        out = super().run(q, k, v, call)
        return out if self.scale == 1.0 else out * self.scale  # float32 dense calls only


@pytest.mark.parametrize("extra_backend", [_Scaled()], indirect=True)
def test_doctor_shows_each_backend_verification(
    extra_backend: str, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never checked, passed first-use cases (which), failed (which case, error vs bound),
    passed the full grid: each as doctor shows it."""
    import warnings

    import numpy as np

    import attnswitch
    from attnswitch.kernels import plan

    def verification() -> dict[str, dict]:
        report = json.loads(_invoke("doctor", "--json", "--no-timing").stdout)
        assert report["verify"] == "first-use"
        return {r["backend"]: r["verification"] for r in report["backends"]}

    assert verification()[extra_backend]["summary"] == "never checked"
    monkeypatch.setitem(plan.PRIORITY, "cpu", (extra_backend, "reference"))
    q = np.ones((1, 5, 2, 64), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        attnswitch.attention(q, q, q)
    rows = verification()
    failed, ref = rows[extra_backend], rows["reference"]
    assert failed["status"] == "fail" and failed["failure_kind"] == "first-use"
    assert re.fullmatch(
        r"fail \(first-use\): self-128/float32: out: error \S+ > bound \S+", failed["summary"]
    ), failed["summary"]
    assert ref["status"] == "pass" and ref["passed"] == ["self-128/float32"]
    assert ref["summary"] == "pass (first-use: self-128/float32)"

    result = _invoke("doctor", "--no-timing")
    assert re.search(rf"│ {extra_backend} .*fail \(first-use\): self-128/float32", result.stdout)


@pytest.mark.parametrize("extra_backend", [_Scaled()], indirect=True)
def test_full_run_reruns_the_cases_of_a_first_use_failure(
    extra_backend: str, cache_dir: Path
) -> None:
    """A first-use failure on a case outside the grid (float16 here) is cleared only by a run
    that passes it again: the full conformance run includes it."""
    backend = registry.get(extra_backend)
    off_grid = conformance.case_by_label("padding/float16")
    assert off_grid.label not in conformance.full_grid_labels()
    verdicts.run([extra_backend], [off_grid], kind=verdicts.FIRST_USE)
    assert verdicts.status(backend, CPU) == verdicts.FAIL

    backend.scale = 1.0  # fixed, same fingerprint
    result = _invoke("conformance", "--backend", extra_backend, "--json")
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.stdout)
    assert "padding/float16" in {r["case"] for r in report["results"]}
    standing = verdicts.standing(backend, CPU)
    assert standing.status == verdicts.PASS and standing.full
