"""The suite's `xdist_group` marks hold: under `make test`'s `-n 2 --dist loadgroup`, the
tests of one group run in one worker (the Ray tests share one cluster, the quantisation
tests one build, the conformance tests of a compiling backend its compiled kernels). A
pytest or pytest-xdist release that stops honouring the marks fails here, not as a slower
or flakier suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GROUPED = """
import os
import pytest

pytestmark = pytest.mark.xdist_group("together")


@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    out = os.path.join(os.environ["GROUPED_OUT"], f"{i}-{os.environ['PYTEST_XDIST_WORKER']}")
    open(out, "w").close()


@pytest.mark.parametrize("i", range(6))
def test_free(i):
    pass
"""


def test_a_group_runs_in_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    out = tmp_path / "workers"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-p",
            "no:cacheprovider",
            "--basetemp",
            str(tmp_path / "base"),
            "test_grouped.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "GROUPED_OUT": str(out)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = sorted(p.name for p in out.iterdir())
    assert len(ran) == 6, ran
    assert len({name.split("-", 1)[1] for name in ran}) == 1, f"one group, workers: {ran}"
