"""`pip install attnswitch` (no extra) gives a working attention contract: `import
attnswitch` and a numpy attention call run in an interpreter that sees only the source tree
and the core dependencies of pyproject.toml (with theirs), nothing else installed.

The interpreter is isolated (`python -I -S`: no site-packages, no PYTHONPATH); the core
distributions are linked into a folder on its path, found through `importlib.metadata`, so
the check needs no network and takes seconds. A core module importing anything outside the
core (typer, pypdf, torch...) fails it; the last test shows that on a copy of the source."""

from __future__ import annotations

import importlib.metadata as md
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]

# Sq != Sk with causal and GQA, against a direct numpy computation of the contract.
SNIPPET = """
import sys
sys.path[:0] = [{src!r}, {site!r}]
import numpy as np
import attnswitch as asw

rng = np.random.default_rng(0)
q = rng.standard_normal((2, 5, 4, 16)).astype(np.float32)
k = rng.standard_normal((2, 7, 2, 16)).astype(np.float32)
v = rng.standard_normal((2, 7, 2, 16)).astype(np.float32)
out = asw.attention(q, k, v, causal=True)
kk, vv = np.repeat(k, 2, axis=2), np.repeat(v, 2, axis=2)
logits = np.einsum("bqhd,bkhd->bhqk", q, kk) / 4.0
i, j = np.arange(5)[:, None], np.arange(7)[None, :]
logits = np.where(j <= i + 2, logits, -np.inf)
p = np.exp(logits - logits.max(-1, keepdims=True))
ref = np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), vv)
assert out.shape == q.shape and out.dtype == np.float32, (out.shape, out.dtype)
assert np.abs(out - ref).max() < 1e-5, np.abs(out - ref).max()
print("plan:", asw.explain(q, k, v, causal=True).chosen)
"""


def core_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def closure(requirements: list[Requirement]) -> set[str]:
    """The installed distributions the requirements need, theirs included (no extras)."""
    seen: set[str] = set()
    todo = [r for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})]
    while todo:
        req = todo.pop()
        dist = md.distribution(req.name)
        name = dist.metadata["Name"].lower()
        if name in seen:
            continue
        seen.add(name)
        for text in dist.requires or []:
            sub = Requirement(text)
            if sub.marker is None or sub.marker.evaluate({"extra": ""}):
                todo.append(sub)
    return seen


def link_distributions(names: set[str], site: Path) -> None:
    """Link each distribution's top-level files and folders (package, `.libs`, metadata)."""
    site.mkdir(parents=True, exist_ok=True)
    for name in names:
        dist = md.distribution(name)
        tops = {Path(str(f)).parts[0] for f in dist.files or []}
        for top in tops:
            source = Path(dist.locate_file(top))
            if top not in ("..", "") and source.exists() and not (site / top).exists():
                (site / top).symlink_to(source)


def run_isolated(src: Path, site: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "ATTNSWITCH_CACHE_DIR": str(cache),
        "HOME": str(cache),
    }
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", SNIPPET.format(src=str(src), site=str(site))],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.fixture(scope="module")
def core_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("core-site")
    link_distributions(closure(core_requirements()), site)
    return site


def test_the_core_dependencies_hold_no_document_or_cli_library() -> None:
    names = {r.name.lower() for r in core_requirements()}
    assert names.isdisjoint(
        {
            "typer",
            "rich",
            "pypdf",
            "beautifulsoup4",
            "charset-normalizer",
            "psutil",
            "usearch",
            "torch",
            "jax",
            "transformers",
        }
    ), names


def test_attention_runs_with_the_core_dependencies_only(core_site: Path, tmp_path: Path) -> None:
    done = run_isolated(ROOT / "src", core_site, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "plan: reference" in done.stdout  # numpy only: the float64 oracle serves


def test_a_core_module_importing_an_extra_fails_the_check(core_site: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(
        ROOT / "src" / "attnswitch",
        src / "attnswitch",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    contract = src / "attnswitch" / "kernels" / "contract.py"
    contract.write_text(contract.read_text() + "\nimport typer  # an extra's library\n")
    done = run_isolated(src, core_site, tmp_path)
    assert done.returncode != 0 and "No module named 'typer'" in done.stderr, done.stderr
