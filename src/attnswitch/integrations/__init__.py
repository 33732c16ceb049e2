"""Integrations with other libraries, registered lazily so that `import attnswitch` stays light.

`install()` (called by `import attnswitch`) makes `attn_implementation="attnswitch"` available
to Hugging Face transformers without importing transformers or torch itself: `import
transformers` costs about 1 s and its modeling code (which imports torch) about 5 s, against
a fraction of a second for attnswitch. If transformers' modeling code is already imported,
the attention and mask functions are registered at once; otherwise a post-import hook on
`sys.meta_path` registers each of them right after the transformers module that defines its
interface (`transformers.modeling_utils`, `transformers.masking_utils`) has run, which is
always before a model can be built. A failure there warns and never breaks the import of
transformers. `import attnswitch.integrations.transformers` registers explicitly.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

_lock = threading.Lock()
_installed = False


def _register_attention() -> None:
    from attnswitch.integrations import transformers as hf

    hf.register_attention()


def _register_mask() -> None:
    from attnswitch.integrations import transformers as hf

    hf.register_mask()


# module that defines the interface -> what to run once it has been executed
_HOOKS: dict[str, Callable[[], None]] = {
    "transformers.modeling_utils": _register_attention,
    "transformers.masking_utils": _register_mask,
}


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


class _HookedLoader(importlib.abc.Loader):
    """Wraps a module's real loader and runs the attnswitch hook after the module executed."""

    def __init__(self, loader: Any, name: str):
        self._loader = loader
        self._name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _run_hook(self._name)

    def __getattr__(self, attr: str) -> Any:  # get_source, get_filename, is_package, ...
        return getattr(self._loader, attr)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for the watched transformers modules it asks the other finders
    and wraps the loader they return."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in _HOOKS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _HookedLoader(spec.loader, fullname)
        return spec


def install() -> None:
    """Register attnswitch with the libraries it integrates, now for those already imported
    and on import for the others. Idempotent; imports nothing heavy."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        waiting = [name for name in _HOOKS if name not in sys.modules]
        if waiting and not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, _PostImportFinder())
    for name in _HOOKS:
        if name in sys.modules:
            _run_hook(name)
