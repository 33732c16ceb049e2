"""Process state lives in the runtimes (`kernels/runtime.py`, `engines/runtime.py`), not in
module globals, and their settings' environment variables are read by the runtimes only.

Every module of `attnswitch` (all of src/, less the `__main__` entry points, which run on
import) is imported and its globals listed when they hold a mutable value (dict, list, set,
bytearray, deque, a ContextVar, an instance of a non-frozen attnswitch class), and every
`global` statement (a function rebinding module state) is read from the source of every
file. What is found must be exactly the allow-list below, and each allowed name must be
documented in docs/architecture.md ("Process state"); the only `global` statement is the
read workers' (`GLOBAL_STATEMENTS`). Constant tables are read-only
(`MappingProxyType`, `frozenset`, tuples). Memoised functions (`functools.cache`/`lru_cache`
of their arguments: environment facts, compiled kernels) are caches of pure functions, not
listed here.
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

from attnswitch.kernels import runtime

PACKAGE = "attnswitch"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"

# module name (without "attnswitch.") and global -> why it may exist
ALLOWED = {
    "kernels.runtime._CURRENT": "the ContextVar holding the attention runtime in force",
    "kernels.registry.REGISTRY": "the process's registry of backends, and its generation",
    "kernels.plan.PRIORITY": "the documented fixed priority per device kind",
    "kernels.verdicts.TABLE": "the verdicts file (cache.JsonTable)",
    "kernels.verdicts.STORE": "the verdict store over that file",
    "kernels.autotune.TABLE": "the autotune file (cache.JsonTable)",
    "integrations.transformers._capture": "explain_model's per-context capture",
    "integrations._INSTALL": "install()'s once-flag: import hooks are process-wide",
    "engines.runtime._CURRENT": "the ContextVar holding the engines runtime in force",
    "engines.registry.REGISTRY": "the process's registry of engines",
    "documents.readers.registry.REGISTRY": "the process's registry of readers",
    "engines.autopick._TABLE": "the engine measurements file (cache.JsonTable)",
    "engines.autoprecision._TABLE": "the precision measurements file (cache.JsonTable)",
    "jobs.read_pool._started": "a read worker's channel for the files it starts",
    "jobs.api.open_indexes": "the indexes attnswitch.search keeps open, per thread",
}
# the one `global` statement left: a worker process's per-process state, which
# `multiprocessing` passes through a pool's initializer only
GLOBAL_STATEMENTS = {"jobs.read_pool._started"}
# the runtimes and the environment variables their settings are read from; no other module
# reads these variables (the runtime is read instead)
RUNTIMES = ("kernels.runtime", "engines.runtime")
# each backend's and engine's module instance: the entries of the two registries
REGISTRY_ENTRIES = ("BACKEND", "ENGINE")


def _modules() -> list[types.ModuleType]:
    """Every module of the package that imports here (one whose optional dependency is not
    installed is left out: its globals cannot exist in this process)."""
    package = importlib.import_module(PACKAGE)
    found = [package]
    for info in pkgutil.walk_packages(package.__path__, PACKAGE + "."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue
        try:
            found.append(importlib.import_module(info.name))
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith(PACKAGE):
                raise
    return found


def _sources() -> list[Path]:
    return sorted(Path(importlib.import_module(PACKAGE).__file__).parent.rglob("*.py"))


def _mutable(value: object) -> bool:
    if isinstance(value, (dict, list, set, bytearray, collections.deque, contextvars.ContextVar)):
        return True
    kind = type(value)
    if isinstance(value, (type, types.ModuleType, types.FunctionType)) or callable(value):
        return False
    if not kind.__module__.startswith("attnswitch"):
        return False
    return not (dataclasses.is_dataclass(kind) and kind.__dataclass_params__.frozen)


def _rebound(path: Path) -> set[str]:
    """Names a `global` statement in the file rebinds."""
    tree = ast.parse(path.read_text())
    return {n for node in ast.walk(tree) if isinstance(node, ast.Global) for n in node.names}


def _module_name(path: Path) -> str:
    root = Path(importlib.import_module(PACKAGE).__file__).parent
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def global_statements() -> set[str]:
    """Module globals rebound by a `global` statement, in every source file."""
    return {f"{_module_name(path)}.{name}" for path in _sources() for name in _rebound(path)}


def mutable_globals() -> set[str]:
    found = set()
    for module in _modules():
        short = module.__name__.removeprefix(PACKAGE).lstrip(".")
        for name, value in vars(module).items():
            if name.startswith("__") or name in REGISTRY_ENTRIES:
                continue
            if _mutable(value):
                found.add(f"{short}.{name}")
    return found | global_statements()


def test_module_state_is_only_the_documented_registries() -> None:
    found = mutable_globals()
    assert found - set(ALLOWED) == set(), "mutable module globals outside the runtime"
    assert set(ALLOWED) - found == set(), "allow-listed names that no longer exist"


def test_no_function_rebinds_module_state_but_the_read_workers() -> None:
    """State is held in objects (a runtime, a registry) that change under their lock, not
    rebound by `global` statements."""
    assert global_statements() == GLOBAL_STATEMENTS


def _setting_variables() -> dict[str, str]:
    """Each runtime's environment variable -> the runtime module that reads it."""
    return {
        variable: name
        for name in RUNTIMES
        for variable in importlib.import_module(f"{PACKAGE}.{name}").ENVIRONMENT.values()
    }


def environment_reads(path: Path, module: types.ModuleType | None) -> set[str]:
    """The environment variables a source file reads by name: `os.environ.get(X)`,
    `os.getenv(X)`, `os.environ[X]` and `X in os.environ`, X a string or a name of the
    module (`module`, where it is imported) bound to one."""

    def value(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name) and module is not None:
            bound = getattr(module, node.id, None)
            return bound if isinstance(bound, str) else None
        return None

    def is_environ(node: ast.AST) -> bool:
        return ast.unparse(node) in ("os.environ", "environ")

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        key = None
        if (
            isinstance(node, ast.Call)
            and node.args
            and (
                ast.unparse(node.func) in ("os.getenv", "getenv")
                or isinstance(node.func, ast.Attribute)
                and node.func.attr in ("get", "pop")
                and is_environ(node.func.value)
            )
        ):
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and is_environ(node.value):
            key = node.slice
        elif (
            isinstance(node, ast.Compare)
            and len(node.comparators) == 1
            and isinstance(node.ops[0], (ast.In, ast.NotIn))
            and is_environ(node.comparators[0])
        ):
            key = node.left
        if key is not None and (name := value(key)) is not None:
            found.add(name)
    return found


def test_settings_are_read_from_the_environment_by_their_runtime_only() -> None:
    """The runtime reads its variables once (at first use, and after `reset()`); a module
    that read one itself would read it per call, past `reset()` and `configure()`."""
    variables = _setting_variables()
    modules = {m.__name__.removeprefix(PACKAGE).lstrip("."): m for m in _modules()}
    readers = {}
    for path in _sources():
        name = _module_name(path)
        for variable in environment_reads(path, modules.get(name)) & set(variables):
            readers.setdefault(variable, set()).add(name)
    assert readers == {}, "setting variables read outside their runtime"


def test_the_environment_check_sees_each_way_of_reading(tmp_path: Path) -> None:
    """Control: every form `environment_reads` looks for is found, by string or by name."""
    module = types.ModuleType("planted")
    module.ENV = "ATTNSWITCH_ENGINE"
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import os\n"
        "a = os.environ.get('ATTNSWITCH_AUTOTUNE', '1')\n"
        "b = os.getenv(ENV)\n"
        "c = os.environ['ATTNSWITCH_PRECISION']\n"
        "d = 'ATTNSWITCH_QUERY_ENGINE' in os.environ\n"
        "e = os.environ.get('HOME')\n"
    )
    assert environment_reads(planted, module) == {
        "ATTNSWITCH_AUTOTUNE",
        "ATTNSWITCH_ENGINE",
        "ATTNSWITCH_PRECISION",
        "ATTNSWITCH_QUERY_ENGINE",
        "HOME",
    }
    assert {
        "ATTNSWITCH_AUTOTUNE",
        "ATTNSWITCH_ENGINE",
        "ATTNSWITCH_PRECISION",
        "ATTNSWITCH_QUERY_ENGINE",
        "ATTNSWITCH_AUTO_INT8",
    } <= set(_setting_variables())


def test_allowed_state_is_documented() -> None:
    text = DOCS.read_text()
    section = re.search(r"^## Process state\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, "docs/architecture.md: expected a '## Process state' section"
    missing = [n for n in ALLOWED if n.split(".", 1)[1] not in section.group(1)]
    assert not missing, f"docs/architecture.md, Process state: expected {missing}"


@pytest.mark.parametrize("module_name", ["kernels.masks", "documents.chunk", "service.errors"])
def test_the_check_sees_a_planted_global(monkeypatch: pytest.MonkeyPatch, module_name: str) -> None:
    """Control: a module-level set added to a module of any package is reported."""
    module = importlib.import_module(f"{PACKAGE}.{module_name}")
    monkeypatch.setattr(module, "_seen", set(), raising=False)
    assert f"{module_name}._seen" in mutable_globals()


def test_runtime_reset_and_fresh_runtimes(
    fresh_runtime: runtime.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
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


@pytest.mark.parametrize("which", ["kernels", "engines"])
def test_registrations_from_many_threads_all_land(which: str) -> None:
    """The registries change under their lock: registrations racing from several threads
    (the interpreter switching threads as often as it can) all land, and each bumps the
    backends' generation once."""
    import sys
    from concurrent.futures import ThreadPoolExecutor

    registry = importlib.import_module(f"{PACKAGE}.{which}.registry")
    generation = getattr(registry, "generation", lambda: 0)
    names = [f"racing-{which}-{i}" for i in range(200)]
    before, interval = generation(), sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: registry.register(types.SimpleNamespace(name=n)), names))
        assert set(names) <= set(registry.names())
        if which == "kernels":
            assert generation() == before + len(names)
    finally:
        sys.setswitchinterval(interval)
        for name in names:
            registry.unregister(name)
    assert not set(names) & set(registry.names())
