"""The engines runtime: the process state of the engines in one object, held in one
`contextvars.ContextVar`, shaped like the attention runtime (`kernels/runtime.py`) one
layer down.

A `Runtime` has
- `settings`: a frozen `Settings` snapshot of the engine environment variables
  (`ENVIRONMENT`);
- `encoders`: the loaded encoders, one per (model folder, engine, precision), so that a
  process loads a model once; they change under `lock`, which also serialises loading and
  measuring (two threads asking for the same model load it once);
- `reset()`: the settings forgotten (the environment is read again at next use) and the
  encoders dropped; `reset(encoders=False)` forgets the settings only.

The one rule for the environment: `ATTNSWITCH_ENGINE`, `ATTNSWITCH_PRECISION`,
`ATTNSWITCH_QUERY_ENGINE` and `ATTNSWITCH_AUTO_INT8` are read when a runtime's settings are
first needed (in a process: at the first engine call) and again after `reset()`; never per
call. Values are kept as written (stripped; unset or empty is None): they are checked where
they are used (`engines._requested`, `engines._asked_precision`, `light.query_engine`),
which name the variable in their errors, as before. `configure(...)` changes the settings
of the runtime in force; `view(...)` gives a runtime with other settings that shares this
one's encoders (an encoder's key names everything it depends on, so views never mix them).

The registered engines are not runtime state: `engines/registry.py` is the process's
registry of engines (built-ins, entry points, `register`).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import threading
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from attnswitch import runtimes

ENVIRONMENT = MappingProxyType(
    {  # setting -> the environment variable that states it
        "engine": "ATTNSWITCH_ENGINE",
        "precision": "ATTNSWITCH_PRECISION",
        "query_engine": "ATTNSWITCH_QUERY_ENGINE",
        "auto_int8": "ATTNSWITCH_AUTO_INT8",
    }
)
TRUE = frozenset({"1", "true", "yes"})  # the values that turn ATTNSWITCH_AUTO_INT8 on


@dataclass(frozen=True)
class Settings:
    """engine: the engine `engine="auto"` stands for (`ATTNSWITCH_ENGINE`; None: measured).
    precision: the precision `precision="auto"` stands for (`ATTNSWITCH_PRECISION`; None or
    "auto": measured). query_engine: the engine a query is encoded with ("index", an
    engine's name; None: the quickest with the index's answers, `light.query_engine`).
    auto_int8: `precision="auto"` tries int8 too (`ATTNSWITCH_AUTO_INT8` is 1, true or
    yes)."""

    engine: str | None = None
    precision: str | None = None
    query_engine: str | None = None
    auto_int8: bool = False

    @classmethod
    def from_environment(cls, environ: Any = None) -> Settings:
        """The settings the environment variables (`ENVIRONMENT`) state."""
        env = os.environ if environ is None else environ
        text = lambda name: env.get(ENVIRONMENT[name], "").strip() or None  # noqa: E731
        return cls(
            engine=text("engine"),
            precision=text("precision"),
            query_engine=text("query_engine"),
            auto_int8=(text("auto_int8") or "") in TRUE,
        )


@dataclass
class _Caches:
    """What a runtime and its views share."""

    encoders: dict = dataclasses.field(default_factory=dict)
    lock: Any = dataclasses.field(default_factory=threading.RLock)


class Runtime(runtimes.Runtime[Settings, _Caches]):
    """Settings and loaded encoders (module docstring; the pattern: `attnswitch.runtimes`).
    Thread-safe: the encoders change under `lock` (re-entrant: a measurement loads encoders
    while holding it)."""

    settings_type = Settings
    caches_type = _Caches

    @property
    def encoders(self) -> dict:
        """(model folder, engine, precision) -> its loaded `Encoder` (change under `lock`)."""
        return self._caches.encoders

    def reset(self, *, encoders: bool = True) -> None:
        """Forget the settings (the environment is read again at next use) and, unless
        `encoders=False`, drop the loaded encoders."""
        with self.lock:
            self.forget_settings()
            if encoders:
                self._caches.encoders.clear()


# The process's runtime, shared on purpose (a mutable default).
_CURRENT: contextvars.ContextVar[Runtime] = contextvars.ContextVar(
    "attnswitch_engines_runtime",
    default=Runtime(),  # noqa: B039
)


def current() -> Runtime:
    """The runtime in force in this context (the process's unless a block set another)."""
    return _CURRENT.get()


def settings() -> Settings:
    """The settings of the runtime in force."""
    return current().settings


def using(runtime: Runtime) -> contextlib.AbstractContextManager[Runtime]:
    """Within this block (this context), `runtime` is in force."""
    return runtimes.using(_CURRENT, runtime)


def fresh() -> contextlib.AbstractContextManager[Runtime]:
    """A new, empty runtime for this block (no settings read yet, no encoder loaded)."""
    return using(Runtime())


__all__ = ["ENVIRONMENT", "Runtime", "Settings", "current", "fresh", "settings", "using"]
