"""The set of known backends: the built-in ones, entry-point plug-ins and programmatic ones.

This is the process's registry of backends (docs/architecture.md, "Process state"): one
table for every runtime, changed only here and under `_lock`; `generation` counts its
changes, so cached plans know they are stale.

Built-in backend modules are imported here, but each imports its heavy library (torch, jax,
flash_attn) only when probed or run. Third-party packages add backends through the
entry-point group `attnswitch.backends`; an entry point names a backend instance or class.
"""

from __future__ import annotations

import importlib
import threading

from attnswitch.attention.backend import Backend
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

_lock = threading.Lock()
_backends: dict[str, Backend] | None = None
generation = 0  # bumped on every change, so cached plans know they are stale


def _load() -> dict[str, Backend]:
    found: dict[str, Backend] = {}
    for module_name in BUILTIN_MODULES:
        try:
            module = importlib.import_module(f"attnswitch.attention.backends.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"attnswitch.attention.backends.{module_name}":
                continue
            raise
        backend = module.BACKEND
        found[backend.name] = backend
    for backend in entry_point_objects(
            ENTRY_POINT_GROUP, "backend", lambda b: isinstance(b, Backend),
            "an object with name, framework, unavailable, declines and run"):
        found.setdefault(backend.name, backend)
    return found


def _all() -> dict[str, Backend]:
    global _backends
    if _backends is None:
        with _lock:
            if _backends is None:
                _backends = _load()
    return _backends


def backends() -> list[Backend]:
    """Every registered backend, available here or not."""
    return list(_all().values())


def names() -> list[str]:
    return list(_all())


def get(name: str) -> Backend | None:
    return _all().get(name)


def register(backend: Backend, *, replace: bool = False) -> None:
    """Add a backend programmatically (the entry-point group is the packaged way)."""
    table = _all()
    with _lock:
        if backend.name in table and not replace:
            raise ValueError(
                f"backend: expected a new name, got {backend.name!r} (already registered)")
        table[backend.name] = backend
        _bump()


def unregister(name: str) -> None:
    table = _all()
    with _lock:
        table.pop(name, None)
        _bump()


def invalidate() -> None:
    """Mark cached plans stale: what a backend can serve here changed without a change of the
    registered set."""
    with _lock:
        _bump()


def _bump() -> None:
    """A new generation (under `_lock`)."""
    global generation
    generation += 1
