"""Integrations with other libraries, registered lazily so that `import attnswitch` stays light.

`install()` (called by `import attnswitch`) makes `attn_implementation="attnswitch"` available
to Hugging Face transformers without importing transformers or torch itself: `import
transformers` costs about 1 s and its modeling code (which imports torch) about 5 s, against
a fraction of a second for attnswitch. If transformers' modeling code is already imported,
the attention and mask functions are registered at once; otherwise a post-import hook
(`wrapt.register_post_import_hook`, a maintained implementation of PEP 369's hooks)
registers each of them right after the transformers module that defines its interface
(`transformers.modeling_utils`, `transformers.masking_utils`) has run, which is always
before a model can be built. A failure there warns and never breaks the import of
transformers. `import attnswitch.integrations.transformers` registers explicitly.

wrapt itself is imported only once transformers is: importing it costs about 50 ms (its
package imports asyncio and importlib.metadata), which every `attnswitch` command would pay
at `import attnswitch`. Until then a finder at the front of `sys.meta_path`
(`_WhenImported`) gives the top-level `transformers` package a loader that registers the
hooks just before the package's own code runs (so before any of its modules is imported).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import sys
import threading
import warnings
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any


class _Once:
    """A flag that one caller claims, once per process (`claim`, under `lock`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._claimed = False

    def claim(self) -> bool:
        """True for the first caller only."""
        with self.lock:
            first, self._claimed = not self._claimed, True
            return first


_INSTALL = _Once()  # install()'s once-flag: the import hooks are process-wide


def _register_attention() -> None:
    from attnswitch.integrations import transformers as hf

    hf.register_attention()


def _register_mask() -> None:
    from attnswitch.integrations import transformers as hf

    hf.register_mask()


# module that defines the interface -> what to run once it has been executed
_HOOKS: Mapping[str, Callable[[], None]] = MappingProxyType(
    {
        "transformers.modeling_utils": _register_attention,
        "transformers.masking_utils": _register_mask,
    }
)


def _run_hook(name: str) -> None:
    try:
        _HOOKS[name]()
    except Exception as exc:  # never break the user's import of transformers
        warnings.warn(
            f"attnswitch: could not register attn_implementation='attnswitch' with "
            f"{name}: {type(exc).__name__}: {exc}",
            RuntimeWarning,
            stacklevel=2,
        )


def _register_hooks() -> None:
    import wrapt

    for name in _HOOKS:
        # Runs the hook now when the module is imported already, else right after its import.
        wrapt.register_post_import_hook(lambda module: _run_hook(module.__name__), name)


class _WhenImported(importlib.abc.MetaPathFinder):
    """Finds `transformers` as the other finders do, with a loader that registers the
    hooks (`_register_hooks`) before the package's own code runs; finds nothing else. A
    look-up that does not import (`importlib.util.find_spec("transformers")`, as an
    engine's `unavailable()` does) runs no loader, so wrapt is imported only by a process
    that imports transformers. Leaves `sys.meta_path` once transformers is imported."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "transformers":
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _RegisterFirst(spec.loader, self)
                return spec
        return None


class _RegisterFirst(importlib.abc.Loader):
    """A loader that registers the hooks, then runs `loader` (which the module keeps)."""

    def __init__(self, loader: Any, finder: _WhenImported):
        self.loader, self.finder = loader, finder

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        with contextlib.suppress(ValueError):  # gone already: another import got here first
            sys.meta_path.remove(self.finder)
        module.__loader__ = module.__spec__.loader = self.loader
        _register_hooks()
        self.loader.exec_module(module)

    def __getattr__(self, name: str) -> Any:  # is_package, get_resource_reader, ...
        return getattr(self.loader, name)


def install() -> None:
    """Register attnswitch with the libraries it integrates, now for those already imported
    and on import for the others. Idempotent; imports nothing heavy."""
    if not _INSTALL.claim():
        return
    if "transformers" in sys.modules:
        _register_hooks()
    else:
        sys.meta_path.insert(0, _WhenImported())
