"""The one pattern of process state (docs/architecture.md, "Process state"): a runtime
object holding a frozen settings snapshot, read from the environment when first needed,
and caches shared with its views, kept in force per context by a `contextvars.ContextVar`
(as JAX holds its config). The attention runtime (`kernels/runtime.py`) and the engines
runtime (`engines/runtime.py`) are its two instances, each adding its caches."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar


class _Caches(Protocol):
    lock: Any


class _Settings(Protocol):
    @classmethod
    def from_environment(cls, environ: Any = None) -> Any: ...


S = TypeVar("S", bound=_Settings)
C = TypeVar("C", bound=_Caches)
R = TypeVar("R", bound="Runtime[Any, Any]")


class Runtime(Generic[S, C]):
    """Settings (`settings_type`, a frozen dataclass with `from_environment`) and caches
    (`caches_type`, a dataclass with a re-entrant `lock`, shared with this runtime's
    views). Thread-safe: settings and caches change under `lock`."""

    settings_type: ClassVar[Any]  # a frozen dataclass with `from_environment()`
    caches_type: ClassVar[Any]  # a dataclass with a re-entrant `lock`

    def __init__(self, settings: S | None = None, *, _caches: C | None = None) -> None:
        self._settings = settings
        self._caches: C = _caches if _caches is not None else self.caches_type()

    @property
    def settings(self) -> S:
        """The settings in force; read from the environment the first time (and after
        `reset`)."""
        settings = self._settings
        if settings is None:
            with self.lock:
                settings = self._settings
                if settings is None:
                    settings = self._settings = self.settings_type.from_environment()
        return settings

    @property
    def lock(self) -> Any:
        return self._caches.lock

    def configure(self, **changes: Any) -> S:
        """Change settings (names of the settings); what is not named keeps its value.
        `changed()` runs after, under the lock."""
        with self.lock:
            settings: S = dataclasses.replace(self.settings, **changes)  # type: ignore[type-var]
            self._settings = settings
            self.changed()
            return settings

    def changed(self) -> None:
        """What a change of settings invalidates (nothing here; under `lock`)."""

    def view(self, **changes: Any) -> Self:
        """A runtime with these settings changed that shares this one's caches."""
        return type(self)(
            dataclasses.replace(self.settings, **changes),  # type: ignore[type-var]
            _caches=self._caches,
        )

    def forget_settings(self) -> None:
        """Forget the settings: the environment is read again at next use (under `lock`)."""
        with self.lock:
            self._settings = None


@contextlib.contextmanager
def using(var: contextvars.ContextVar[R], runtime: R) -> Iterator[R]:
    """Within this block (this context), `runtime` is the one `var` holds."""
    token = var.set(runtime)
    try:
        yield runtime
    finally:
        var.reset(token)
