"""Process state lives in the runtime (`attention/runtime.py`), not in module globals.

Every module of `attnswitch.attention` and `attnswitch.integrations` is imported and its
globals listed when they hold a mutable value (dict, list, set, bytearray, deque, a
ContextVar, an instance of a non-frozen attnswitch class), and every `global` statement
(a function rebinding module state) is read from the source. What is found must be exactly
the allow-list below, and each allowed name must be documented in docs/architecture.md
("Process state"). Memoised functions (`functools.cache`/`lru_cache` of their arguments:
environment facts, compiled kernels) are caches of pure functions, not listed here.
"""

from __future__ import annotations

import ast
import collections
import contextvars
import dataclasses
import importlib
import pkgutil
import re
import types
from pathlib import Path

import pytest

from attnswitch.attention import runtime

PACKAGES = ("attnswitch.attention", "attnswitch.integrations")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"

# module name (without "attnswitch.") and global -> why it may exist
ALLOWED = {
    "attention.runtime._CURRENT": "the ContextVar holding the runtime in force",
    "attention.registry._backends": "the process's registry of backends",
    "attention.registry.generation": "the registry's change count (plans key on it)",
    "attention.plan.PRIORITY": "the documented fixed priority per device kind",
    "attention.verdicts.TABLE": "the verdicts file (cache.JsonTable)",
    "attention.verdicts.STORE": "the verdict store over that file",
    "attention.autotune.TABLE": "the autotune file (cache.JsonTable)",
    "integrations.transformers._capture": "explain_model's per-context capture",
    "integrations._installed": "install()'s once-flag: import hooks are process-wide",
}
BACKEND_INSTANCE = "BACKEND"  # each backend module's instance, the registry's entries


def _modules() -> list[types.ModuleType]:
    found = []
    for name in PACKAGES:
        package = importlib.import_module(name)
        found.append(package)
        for info in pkgutil.walk_packages(package.__path__, name + "."):
            found.append(importlib.import_module(info.name))
    return found


def _mutable(value: object) -> bool:
    if isinstance(value, (dict, list, set, bytearray, collections.deque,
                          contextvars.ContextVar)):
        return True
    kind = type(value)
    if isinstance(value, (type, types.ModuleType, types.FunctionType)) or callable(value):
        return False
    if not kind.__module__.startswith("attnswitch"):
        return False
    return not (dataclasses.is_dataclass(kind) and kind.__dataclass_params__.frozen)


def _rebound(module: types.ModuleType) -> set[str]:
    """Names a `global` statement in the module's source rebinds."""
    path = getattr(module, "__file__", None)
    if path is None:
        return set()
    tree = ast.parse(Path(path).read_text())
    return {n for node in ast.walk(tree) if isinstance(node, ast.Global) for n in node.names}


def mutable_globals() -> set[str]:
    found = set()
    for module in _modules():
        short = module.__name__.removeprefix("attnswitch.")
        for name, value in vars(module).items():
            if name.startswith("__") or name == BACKEND_INSTANCE:
                continue
            if _mutable(value):
                found.add(f"{short}.{name}")
        found.update(f"{short}.{name}" for name in _rebound(module))
    return found


def test_module_state_is_only_the_documented_registries() -> None:
    found = mutable_globals()
    assert found - set(ALLOWED) == set(), "mutable module globals outside the runtime"
    assert set(ALLOWED) - found == set(), "allow-listed names that no longer exist"


def test_allowed_state_is_documented() -> None:
    text = DOCS.read_text()
    section = re.search(r"^## Process state\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, "docs/architecture.md: expected a '## Process state' section"
    missing = [n for n in ALLOWED if n.split(".", 1)[1] not in section.group(1)]
    assert not missing, f"docs/architecture.md, Process state: expected {missing}"


def test_the_check_sees_a_planted_global(monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: a module-level set added to an attention module is reported."""
    from attnswitch.attention import masks

    monkeypatch.setattr(masks, "_seen", set(), raising=False)
    assert "attention.masks._seen" in mutable_globals()


def test_runtime_reset_and_fresh_runtimes(fresh_runtime: runtime.Runtime,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime reads the environment once, keeps configure() until reset, and warns
    once per key; a fresh runtime shares nothing with the one in force before."""
    monkeypatch.setenv("ATTNSWITCH_STRICT", "1")
    assert fresh_runtime.settings.strict
    monkeypatch.setenv("ATTNSWITCH_STRICT", "0")
    assert fresh_runtime.settings.strict  # not read per call
    fresh_runtime.configure(verify="off")
    with pytest.warns(RuntimeWarning, match="once"):
        assert fresh_runtime.warn_once(("k",), "once")
    assert not fresh_runtime.warn_once(("k",), "once")
    with runtime.fresh() as other:
        assert runtime.current() is other and other.settings.verify == "first-use"
        with pytest.warns(RuntimeWarning, match="again"):
            assert other.warn_once(("k",), "again")
    assert runtime.current() is fresh_runtime
    fresh_runtime.reset()
    assert not fresh_runtime.settings.strict and fresh_runtime.settings.verify == "first-use"
