"""`import attnswitch` (which every command pays first) imports its public names on first
use (src/attnswitch/__init__.py), and the transformers hooks' wrapt only with transformers
(src/attnswitch/integrations/__init__.py); checked in fresh processes."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("numpy", "wrapt", "prometheus_client", "importlib.metadata",
         "attnswitch.attention.plan", "attnswitch.engines", "torch", "transformers")


def _fresh(code: str) -> list:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def test_importing_the_package_imports_none_of_its_heavy_parts() -> None:
    loaded = _fresh(f"""
import importlib.util, json, sys
import attnswitch
importlib.util.find_spec("transformers")  # a look-up, as engines make: not an import
print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))
""")
    assert loaded == []


def test_the_public_names_resolve_on_first_use() -> None:
    got = _fresh("""
import json, sys
import attnswitch
import attnswitch.attention.plan, attnswitch.attention.entry  # the subpackage, by full name
from attnswitch import attention, explain
import numpy as np
q = np.ones((1, 3, 2, 8), np.float32)
print(json.dumps([attnswitch.attention is attention, callable(attention),
                  attnswitch.explain is explain, attnswitch.__version__ != "",
                  attnswitch.attention(q, q, q).shape == q.shape,
                  sorted(set(attnswitch.__all__) - set(dir(attnswitch)))]))
""")
    assert got == [True, True, True, True, True, []]
    missing = subprocess.run([sys.executable, "-c", "import attnswitch; attnswitch.nothing"],
                             capture_output=True, text=True)
    assert "module 'attnswitch' has no attribute 'nothing'" in missing.stderr
