"""The attention runtime: the process state of attnswitch's attention path in one object,
held in one `contextvars.ContextVar` (as JAX holds its config).

A `Runtime` has
- `settings`: a frozen `Settings` snapshot (strict, debug, verify, backend, Pallas
  interpret mode, autotune);
- `plans`: the plan cache (`plan.plan_for`);
- `warned`: the warn-once registry (`warn_once`);
- `probes`: each backend's cached availability (`BackendBase.unavailable`);
- `counters`: plain counts of what happened here (plan cache hits and misses, warnings);
  the Prometheus metrics (`observe/metrics.py`) stay process-wide, as Prometheus wants;
- `reset()`: all of it emptied, the environment read again.

The one rule for the environment: `ATTNSWITCH_STRICT`, `ATTNSWITCH_DEBUG`,
`ATTNSWITCH_VERIFY`, `ATTNSWITCH_BACKEND`, `ATTNSWITCH_PALLAS_INTERPRET` and
`ATTNSWITCH_AUTOTUNE` are read when a runtime's settings are first needed (in a process: at the first attention call) and again
after `reset()`; never per call. `configure(...)` changes the settings of the runtime in
force (the environment's values stay for what it does not name); `use(name)` and
`pallas_common.interpret()` change them for a block only, in a view that shares the
runtime's caches. Tests get a fresh runtime each (`fresh()`, a pytest fixture).

The registered backends are not runtime state: `kernels/registry.py` is the process's
registry of backends (built-ins, entry points, `register`); plans are keyed on its
generation. The engines keep their own runtime of this shape, one layer up
(`engines/runtime.py`).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import threading
import warnings
from collections import Counter
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from attnswitch import runtimes

FIRST_USE, OFF, FULL = "first-use", "off", "full"
POLICIES = (FIRST_USE, OFF, FULL)  # verification policies (kernels/verify.py)
ENVIRONMENT = MappingProxyType(
    {  # setting -> the environment variable that states it
        "strict": "ATTNSWITCH_STRICT",
        "debug": "ATTNSWITCH_DEBUG",
        "verify": "ATTNSWITCH_VERIFY",
        "backend": "ATTNSWITCH_BACKEND",
        "pallas_interpret": "ATTNSWITCH_PALLAS_INTERPRET",
        "autotune": "ATTNSWITCH_AUTOTUNE",
    }
)


class SettingError(ValueError):
    """A setting (or its environment variable) has a value outside its domain. The
    attention contract re-raises it as its `AttentionInputError`."""

    def __init__(self, name: str, expected: str, got: Any):
        self.argument, self.expected, self.got = name, expected, got
        super().__init__(f"{name}: expected {expected}, got {got}")


@dataclass(frozen=True)
class Settings:
    """strict: every fallback is an error. debug: device `cu_seqlens` values are read and
    checked even when that synchronises. verify: "first-use", "full" or "off". backend: a
    backend every call without `backend=` must use (`ATTNSWITCH_BACKEND`; None: plan). use:
    the same, set by `with use(name):` for a block. pallas_interpret: Pallas kernels run in
    interpret mode off TPU (tests). autotune: the measured order of the autotune table is
    preferred over the fixed priority (`ATTNSWITCH_AUTOTUNE`: on unless "0" or "false")."""

    strict: bool = False
    debug: bool = False
    verify: str = FIRST_USE
    backend: str | None = None
    use: str | None = None
    pallas_interpret: bool = False
    autotune: bool = True

    @classmethod
    def from_environment(cls, environ: Any = None) -> Settings:
        """The settings the environment variables (`ENVIRONMENT`) state."""
        env = os.environ if environ is None else environ
        flag = lambda name: env.get(ENVIRONMENT[name], "") not in ("", "0", "false", "False")  # noqa: E731
        verify = env.get(ENVIRONMENT["verify"]) or FIRST_USE
        check_policy(verify, ENVIRONMENT["verify"])
        return cls(
            strict=flag("strict"),
            debug=flag("debug"),
            verify=verify,
            backend=env.get(ENVIRONMENT["backend"]) or None,
            pallas_interpret=flag("pallas_interpret"),
            autotune=env.get(ENVIRONMENT["autotune"], "1") not in ("0", "false"),
        )


def check_policy(policy: Any, argument: str) -> None:
    if policy not in POLICIES:
        raise SettingError(argument, f"one of {', '.join(POLICIES)}", repr(policy))


@dataclass
class _Caches:
    """What a runtime and its views share."""

    plans: dict = dataclasses.field(default_factory=dict)
    warned: set = dataclasses.field(default_factory=set)
    probes: dict = dataclasses.field(default_factory=dict)
    counters: Counter = dataclasses.field(default_factory=Counter)
    lock: Any = dataclasses.field(default_factory=threading.RLock)


class Runtime(runtimes.Runtime[Settings, _Caches]):
    """Settings, plan cache, warn-once registry, probe cache and counters (module
    docstring; the pattern: `attnswitch.runtimes`). Thread-safe: the caches change under
    `lock`."""

    settings_type = Settings
    caches_type = _Caches

    @property
    def plans(self) -> dict:
        return self._caches.plans

    @property
    def probes(self) -> dict:
        return self._caches.probes

    @property
    def counters(self) -> Counter:
        return self._caches.counters

    def changed(self) -> None:
        """Cached plans are dropped when the settings change."""
        self.plans.clear()

    def warn_once(self, key: tuple, message: str, stacklevel: int = 2) -> bool:
        """Warn `message` (RuntimeWarning) unless `key` warned before in this runtime; True
        when it warned."""
        with self.lock:
            if key in self._caches.warned:
                return False
            self._caches.warned.add(key)
            self.counters["warnings"] += 1
        warnings.warn(message, RuntimeWarning, stacklevel=stacklevel + 1)
        return True

    def reset(self) -> None:
        """Empty every cache and forget the settings (the environment is read again)."""
        with self.lock:
            self.forget_settings()
            self._caches.plans.clear()
            self._caches.warned.clear()
            self._caches.probes.clear()
            self._caches.counters.clear()


# The process's runtime, shared on purpose (a mutable default).
_CURRENT: contextvars.ContextVar[Runtime] = contextvars.ContextVar(
    "attnswitch_runtime",
    default=Runtime(),  # noqa: B039
)


def current() -> Runtime:
    """The runtime in force in this context (the process's unless a block set another)."""
    return _CURRENT.get()


def using(runtime: Runtime) -> contextlib.AbstractContextManager[Runtime]:
    """Within this block (this context), `runtime` is in force."""
    return runtimes.using(_CURRENT, runtime)


def fresh() -> contextlib.AbstractContextManager[Runtime]:
    """A new, empty runtime for this block (tests: one per test)."""
    return using(Runtime())
