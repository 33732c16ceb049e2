"""Plug-ins: the one registry of named plug-ins (`Registry`) and the one loader of entry
points (`entry_point_objects`) that the backend, engine and reader registries share
(`kernels/registry.py`, `engines/registry.py`, `documents/readers/registry.py`)."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Mapping
from importlib import metadata
from types import MappingProxyType
from typing import Any, Generic, TypeVar

T = TypeVar("T")
D = TypeVar("D")


def entry_point_objects(
    group: str, kind: str, accepts: Callable[[Any], bool], expected: str
) -> list[Any]:
    """The object each entry point of `group` names (a class is instantiated), in the
    order found. One that fails to load, or that `accepts` refuses, is skipped with a
    warning naming it (`kind`: "backend", "engine"; `expected`: what it should have been):
    a broken plug-in must not break attnswitch."""
    found = []
    for ep in metadata.entry_points(group=group):
        try:
            obj = ep.load()
            obj = obj() if isinstance(obj, type) else obj
        except Exception as exc:
            warnings.warn(
                f"attnswitch: {kind} entry point {ep.name!r} failed to load: {exc}", stacklevel=2
            )
            continue
        if not accepts(obj):
            warnings.warn(
                f"attnswitch: {kind} entry point {ep.name!r}: expected {expected}, "
                f"got {type(obj).__name__}",
                stacklevel=2,
            )
            continue
        found.append(obj)
    return found


class Registry(Generic[T]):
    """A process's plug-ins of one `kind` ("backend", "engine", "reader") by name, in the
    order `load` gives them (the built-ins, then the entry points): found on first use
    (`table`), changed by `register` and `unregister`, marked changed by `invalidate`,
    forgotten by `reset` (found again at next use). Every change bumps `generation`, which
    caches of what the plug-ins decide key on (the attention plans). Changes are made under
    `lock` and replace the table (copy on write): a table once returned never changes, and
    reading takes no lock. `derived` keeps a value computed from the table (a reader's
    extensions) until the next change."""

    def __init__(self, kind: str, load: Callable[[], Mapping[str, T]]) -> None:
        self.kind = kind
        self.lock = threading.Lock()
        self._load = load
        self._table: Mapping[str, T] | None = None
        self._derived: Mapping[str, Any] = MappingProxyType({})
        self._generation = 0

    @property
    def generation(self) -> int:
        """The count of changes."""
        return self._generation

    def table(self) -> Mapping[str, T]:
        """The registered plug-ins by name (read-only)."""
        table = self._table
        if table is None:
            with self.lock:
                table = self._locked_table()
        return table

    def _locked_table(self) -> Mapping[str, T]:
        if self._table is None:
            self._table = MappingProxyType(dict(self._load()))
        return self._table

    def _replace(self, table: Mapping[str, T] | None) -> None:  # under the lock
        self._table = None if table is None else MappingProxyType(dict(table))
        self._derived = MappingProxyType({})
        self._generation += 1

    def register(self, name: str, item: T, *, replace: bool = False) -> None:
        """Add `item` as `name`; a name already registered is a `ValueError` unless
        `replace`."""
        with self.lock:
            table = dict(self._locked_table())
            if name in table and not replace:
                raise ValueError(
                    f"{self.kind}: expected a new name, got {name!r} (already registered)"
                )
            table[name] = item
            self._replace(table)

    def unregister(self, name: str) -> None:
        """Remove the plug-in called `name` (nothing when there is none)."""
        with self.lock:
            table = dict(self._locked_table())
            table.pop(name, None)
            self._replace(table)

    def invalidate(self) -> None:
        """Count a change that is not one of the table's: what a plug-in can do here
        changed (caches keyed on `generation` are stale)."""
        with self.lock:
            self._replace(self._locked_table())

    def reset(self) -> None:
        """Forget the table: the built-ins and entry points are found again at next use,
        and plug-ins added by `register` are gone (tests that install a plug-in)."""
        with self.lock:
            self._replace(None)

    def derived(self, name: str, compute: Callable[[Mapping[str, T]], D]) -> D:
        """`compute(table)`, computed once per change of the table and kept as `name`."""
        derived = self._derived
        if name in derived:
            return derived[name]  # type: ignore[no-any-return]
        with self.lock:
            table = self._locked_table()
            if name not in self._derived:
                self._derived = MappingProxyType({**self._derived, name: compute(table)})
            return self._derived[name]  # type: ignore[no-any-return]
