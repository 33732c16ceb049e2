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
from collections.abc import Mapping

from attnswitch.kernels.backend import Backend
from attnswitch.plugins import Registry, entry_point_objects

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


# The process's backends: the one registry of backends (plugins.Registry).
REGISTRY: Registry[Backend] = Registry("backend", _load)


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
    REGISTRY.register(backend.name, backend, replace=replace)


def unregister(name: str) -> None:
    """Remove the backend called `name` (nothing when there is none)."""
    REGISTRY.unregister(name)


def invalidate() -> None:
    """Mark cached plans stale: what a backend can serve here changed without a change of the
    registered set."""
    REGISTRY.invalidate()
