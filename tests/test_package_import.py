"""`import attnswitch` (which every command pays first) imports its public names on first
use (src/attnswitch/__init__.py), and the transformers hooks' wrapt only with transformers
(src/attnswitch/integrations/__init__.py); checked in fresh processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = (
    "numpy",
    "wrapt",
    "prometheus_client",
    "importlib.metadata",
    "attnswitch.kernels.plan",
    "attnswitch.engines",
    "torch",
    "transformers",
)


def _fresh(code: str) -> list:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
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
import attnswitch.kernels.plan, attnswitch.kernels.entry  # the subpackage, by full name
from attnswitch import attention, explain
import numpy as np
q = np.ones((1, 3, 2, 8), np.float32)
print(json.dumps([attnswitch.attention is attention, callable(attention),
                  attnswitch.explain is explain, attnswitch.__version__ != "",
                  attnswitch.attention(q, q, q).shape == q.shape,
                  sorted(set(attnswitch.__all__) - set(dir(attnswitch)))]))
""")
    assert got == [True, True, True, True, True, []]
    missing = subprocess.run(
        [sys.executable, "-c", "import attnswitch; attnswitch.nothing"],
        capture_output=True,
        text=True,
    )
    assert "module 'attnswitch' has no attribute 'nothing'" in missing.stderr


def _module_names() -> list[str]:
    """Every module and package under src/attnswitch, by dotted name; not the `__main__`
    modules, which are programs (importing one runs its command)."""
    import attnswitch

    root = Path(attnswitch.__file__).parent
    names = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return names


def test_every_module_imports_by_its_dotted_name() -> None:
    """`import attnswitch.a.b as m` binds the module itself, for every module: no public
    name of a package hides one of its subpackages or modules. Run in one fresh process
    after `import attnswitch`, as a user's script would; a module whose optional extra is
    not installed here must fail only with that extra's ModuleNotFoundError."""
    names = _module_names()
    assert "attnswitch.kernels.plan" in names and "attnswitch.indexing.store" in names
    got = _fresh(f"""
import importlib, json
import attnswitch
out = {{}}
for name in {names!r}:
    try:
        exec(f"import {{name}} as module")
    except ModuleNotFoundError as exc:
        out[name] = ["missing", exc.name or ""]
        continue
    except Exception as exc:
        out[name] = ["error", f"{{type(exc).__name__}}: {{exc}}"]
        continue
    out[name] = ["ok" if module is importlib.import_module(name) and module.__name__ == name
                 else "bound to another object", ""]
print(json.dumps(out))
""")
    assert set(got) == set(names)
    wrong = {
        name: why
        for name, why in got.items()
        if why[0] not in ("ok", "missing")
        or (why[0] == "missing" and why[1].split(".")[0] == "attnswitch")
    }
    assert not wrong, wrong
    # Only optional extras may be missing, and most modules import on a plain install.
    assert sum(why[0] == "ok" for why in got.values()) > 0.8 * len(names)
