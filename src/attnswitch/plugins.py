"""Plug-ins named by entry points: the one loader of the backend and engine registries."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from importlib import metadata
from typing import Any


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
