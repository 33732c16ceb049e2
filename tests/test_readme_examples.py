"""The README's examples, as a reader runs them.

- The first session (README.md, "A first session" and "From Python"): `attnswitch run
  examples/corpus` in a fresh folder with an empty cache and the defaults a user has
  (no engine or precision forced), then the Python example copied from the README. The
  run's summary has the README's rows, with the same documents, chunks and tokens; the
  Python example prints exactly the README's lines; the JSON hit the README shows is the
  first hit `search --json` prints for `make run`'s query (its fields, path, heading,
  snippet and marks); the serve line is the one the service prints.
- The attention guide's first example (docs/attention.md), copied into a fresh process with
  an empty cache: it runs, and no call it makes (nor a first-use check before one) goes to a
  backend whose first call compiles for tens of seconds on CPU.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
ATTENTION = ROOT / "docs" / "attention.md"
REPORT = """
import json
from attnswitch.kernels import registry
stats = asw.stats()
used = set(stats["calls"]) | set(stats["verified"]) | set(stats["fallbacks"])
print("USED", json.dumps(sorted(used)))
print("SLOW", json.dumps(sorted(n for n in used if getattr(registry.get(n), "slow_first_call",
                                                               None))))
"""
MAKE_RUN_QUERY = "how do I update rows in a table"  # the Makefile's `make run`


def section(text: str, title: str) -> str:
    return re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", text, re.S | re.M).group(1)


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def first_python_block(path: Path = ATTENTION) -> str:
    return blocks(path.read_text(), "python")[0]


def test_the_attention_guide_s_first_example_compiles_nothing(tmp_path: Path) -> None:
    code = first_python_block()
    assert "softcap=30.0" in code  # the example this guards
    done = subprocess.run(
        [sys.executable, "-c", code + REPORT],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "ATTNSWITCH_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stderr
    lines = dict(
        line.split(" ", 1)
        for line in done.stdout.splitlines()
        if line.startswith(("USED ", "SLOW "))
    )
    assert json.loads(lines["USED"]), done.stdout
    assert json.loads(lines["SLOW"]) == [], done.stdout
    # the plan it prints says which backend would compile on its first call
    if "chosen        torch-flex" in done.stdout:
        assert "the first call of a shape compiles" in done.stdout


def _rows(table: str) -> dict[str, str]:
    """A rich summary table's rows: label -> its text, continuation lines joined."""
    rows: dict[str, str] = {}
    label = None
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) != 2 or line.lstrip()[:1] != "│":
            continue
        label = cells[0] or label
        rows[label] = (rows.get(label, "") + " " + cells[1]).strip()
    return rows


@pytest.mark.slow  # indexes the whole example corpus (about 2,900 chunks) with the model
def test_the_first_session_prints_what_the_readme_shows(tmp_path: Path) -> None:
    text = README.read_text()
    session, python = section(text, "A first session"), section(text, "From Python")
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ATTNSWITCH_ENGINE", "ATTNSWITCH_PRECISION")
    }  # a user's defaults
    env.update({"ATTNSWITCH_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "92"})

    # `attnswitch run examples/corpus`: the README's rows, the corpus's counts
    console = blocks(session, "console")[0]
    assert "$ attnswitch run examples/corpus\n" in console
    shown = console.split("$ attnswitch run examples/corpus\n", 1)[1]
    done = subprocess.run(
        [sys.executable, "-m", "attnswitch.cli", "run", "examples/corpus"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    want, got = _rows(shown), _rows(done.stdout)
    # shown only where it has samples, and where the engine makes attention calls (a fused
    # runtime such as onnxruntime or OpenVINO makes none; torch and JAX do)
    optional = {"memory watch", "attention"}
    assert set(want) - optional <= set(got) <= set(want) | optional, (sorted(want), sorted(got))
    for label in ("documents", "chunks", "tokens"):
        assert got[label] == want[label], label

    # the Python example prints the README's lines
    (code,) = blocks(python, "python")
    (printed,) = blocks(python, "text")
    ran = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.strip() == printed.strip()

    # the JSON hit of the document engine's section is the first hit of `make run`'s query
    found = subprocess.run(
        [sys.executable, "-m", "attnswitch.cli", "search", MAKE_RUN_QUERY, "-k", "3", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert found.returncode == 0, found.stderr[-2000:]
    first = json.loads(found.stdout)["data"][0]
    (example,) = blocks(section(text, "The document engine (the main job)"), "json")
    hit = json.loads(example)
    assert list(hit) == list(first)
    for field in (
        "path",
        "heading_path",
        "ordinal",
        "snippet",
        "snippet_start",
        "highlights",
        "also_at",
        "start",
        "end",
    ):
        assert hit[field] == first[field], field

    # the serve line is what the service prints (`launch` reads the address from it)
    from attnswitch.service.launch import _LISTENING

    serve = next(b for b in blocks(session, "console") if "$ attnswitch serve" in b)
    assert _LISTENING.search(serve.split("$ attnswitch serve", 1)[1])
