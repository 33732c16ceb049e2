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
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Mapping
from types import MappingProxyType

import wrapt

_lock = threading.Lock()
_installed = False


def _register_attention() -> None:
    from attnswitch.integrations import transformers as hf

    hf.register_attention()


def _register_mask() -> None:
    from attnswitch.integrations import transformers as hf

    hf.register_mask()


# module that defines the interface -> what to run once it has been executed
_HOOKS: Mapping[str, Callable[[], None]] = MappingProxyType({
    "transformers.modeling_utils": _register_attention,
    "transformers.masking_utils": _register_mask,
})


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


def install() -> None:
    """Register attnswitch with the libraries it integrates, now for those already imported
    and on import for the others. Idempotent; imports nothing heavy."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    for name in _HOOKS:
        # Runs the hook now when the module is imported already, else right after its import.
        wrapt.register_post_import_hook(lambda module: _run_hook(module.__name__), name)
