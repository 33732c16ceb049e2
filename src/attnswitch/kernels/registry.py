"""The set of known backends: the built-in ones, entry-point plug-ins and programmatic ones.

This is the process's registry of backends (docs/architecture.md, "Process state"): one
table for every runtime, `REGISTRY`, changed only here and under its lock; its
`generation()` counts the changes, so cached plans know they are stale.

Built-in backend modules are imported here, but each imports its heavy library (torch, jax,
flash_attn) only when probed or run. Third-party packages add backends through the
entry-point group `attnswitch.backends`; an entry point names a backend instance or class.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping
from types import MappingProxyType

from attnswitch.kernels.backend import Backend
from attnswitch.plugins import entry_point_objects

ENTRY_POINT_GROUP = "attnswitch.backends"

BUILTIN_MODULES = (
    "reference",
    "torch_math",
    "torch_sdpa",
    "torch_flex",
    "flash_attn",
    "flash_attn3",
    "jax_xla",
    "jax_cudnn",
    "jax_blockwise",
    "pallas_flash",
    "pallas_splash",
)


def _load() -> dict[str, Backend]:
    found: dict[str, Backend] = {}
    for module_name in BUILTIN_MODULES:
        try:
            module = importlib.import_module(f"attnswitch.kernels.backends.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"attnswitch.kernels.backends.{module_name}":
                continue
            raise
        backend = module.BACKEND
        found[backend.name] = backend
    for backend in entry_point_objects(
        ENTRY_POINT_GROUP,
        "backend",
        lambda b: isinstance(b, Backend),
        "an object with name, framework, unavailable, declines and run",
    ):
        found.setdefault(backend.name, backend)
    return found


class Registry:
    """The registered backends by name, found on first use (`table`: the built-ins, then
    the entry points), changed by `register`, `unregister` and `invalidate`, each of which
    bumps `generation`. Changes are made under `lock` and replace the table (copy on
    write): a table once returned never changes, and reading takes no lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._backends: Mapping[str, Backend] | None = None
        self._generation = 0

    @property
    def generation(self) -> int:
        """The count of changes (cached plans key on it)."""
        return self._generation

    def table(self) -> Mapping[str, Backend]:
        """The registered backends (read-only)."""
        backends = self._backends
        if backends is None:
            with self.lock:
                backends = self._locked_table()
        return backends

    def _locked_table(self) -> Mapping[str, Backend]:
        if self._backends is None:
            self._backends = MappingProxyType(_load())
        return self._backends

    def change(
        self, add: Backend | None = None, remove: str | None = None, replace: bool = False
    ) -> None:
        """Add `add` (a name already registered is a `ValueError` unless `replace`) and/or
        remove the backend called `remove`; the generation is bumped either way."""
        with self.lock:
            backends = dict(self._locked_table())
            if add is not None:
                if add.name in backends and not replace:
                    raise ValueError(
                        f"backend: expected a new name, got {add.name!r} (already registered)"
                    )
                backends[add.name] = add
            if remove is not None:
                backends.pop(remove, None)
            self._backends = MappingProxyType(backends)
            self._generation += 1


REGISTRY = Registry()


def generation() -> int:
    """The registry's change count (plans key on it)."""
    return REGISTRY.generation


def _all() -> Mapping[str, Backend]:
    return REGISTRY.table()


def backends() -> list[Backend]:
    """Every registered backend, available here or not."""
    return list(_all().values())


def names() -> list[str]:
    return list(_all())


def get(name: str) -> Backend | None:
    return _all().get(name)


def register(backend: Backend, *, replace: bool = False) -> None:
    """Add a backend programmatically (the entry-point group is the packaged way); a name
    already registered is a `ValueError` unless `replace`."""
    REGISTRY.change(add=backend, replace=replace)


def unregister(name: str) -> None:
    """Remove the backend called `name` (nothing when there is none)."""
    REGISTRY.change(remove=name)


def invalidate() -> None:
    """Mark cached plans stale: what a backend can serve here changed without a change of the
    registered set."""
    REGISTRY.change()
