"""The README's first Python example, as a reader runs it: copied from README.md into a
fresh process with an empty cache, it runs, and no call it makes (nor a first-use check
before one) goes to a backend whose first call compiles for tens of seconds on CPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
REPORT = """
import json
from attnswitch.attention import registry
stats = asw.stats()
used = set(stats["calls"]) | set(stats["verified"]) | set(stats["fallbacks"])
print("USED", json.dumps(sorted(used)))
print("SLOW", json.dumps(sorted(n for n in used if getattr(registry.get(n), "slow_first_call",
                                                               None))))
"""


def first_python_block() -> str:
    return re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)


def test_the_first_readme_example_compiles_nothing(tmp_path: Path) -> None:
    code = first_python_block()
    assert "softcap=30.0" in code  # the example this guards
    done = subprocess.run(
        [sys.executable, "-c", code + REPORT], capture_output=True, text=True, timeout=600,
        env={**os.environ, "ATTNSWITCH_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines()
                 if line.startswith(("USED ", "SLOW ")))
    assert json.loads(lines["USED"]), done.stdout
    assert json.loads(lines["SLOW"]) == [], done.stdout
    # the plan it prints says which backend would compile on its first call
    if "chosen        torch-flex" in done.stdout:
        assert "the first call of a shape compiles" in done.stdout
