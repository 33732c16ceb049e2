"""attnswitch: one attention contract, the native kernel of each chip behind it, verified
against a float64 oracle, and a document engine built on it.

The public names below are imported on first use (PEP 562's module `__getattr__`): every
`attnswitch` command imports this package first, and a cold `attnswitch search` has no use
for the attention planner, its metrics or the package's version (docs/architecture.md,
"Search at scale: what a cold search costs"). `from attnswitch import attention` and
`attnswitch.attention(...)` work as before."""

from __future__ import annotations

import importlib
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

# public name -> the module that defines it
_PUBLIC = MappingProxyType(
    {
        "AttentionInputError": "attnswitch.kernels.contract",
        "BackendFailedError": "attnswitch.kernels.plan",
        "Call": "attnswitch.kernels.contract",
        "EncodeInputError": "attnswitch.engines",
        "NoBackendError": "attnswitch.kernels.plan",
        "Plan": "attnswitch.kernels.plan",
        "__version__": "attnswitch._version",
        "attention": "attnswitch.kernels.entry",
        "backends": "attnswitch.kernels.plan",
        "configure": "attnswitch.kernels.plan",
        "encode": "attnswitch.engines",
        "index": "attnswitch.jobs.api",  # the document engine's calls, imported when first used
        "search": "attnswitch.jobs.api",
        "explain": "attnswitch.kernels.plan",
        "stats": "attnswitch.observe.metrics",
        "use": "attnswitch.kernels.plan",
    }
)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'attnswitch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups find it without this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})


if TYPE_CHECKING:  # for type checkers and editors: the names as they resolve
    from attnswitch._version import __version__
    from attnswitch.engines import EncodeInputError, encode
    from attnswitch.jobs.api import index, search
    from attnswitch.kernels.contract import AttentionInputError, Call
    from attnswitch.kernels.entry import attention
    from attnswitch.kernels.plan import (
        BackendFailedError,
        NoBackendError,
        Plan,
        backends,
        configure,
        explain,
        use,
    )
    from attnswitch.observe.metrics import stats


# attn_implementation="attnswitch" for Hugging Face transformers, registered lazily (nothing
# heavy is imported here; see attnswitch.integrations).
from attnswitch import integrations as _integrations  # noqa: E402

_integrations.install()

__all__ = [
    "AttentionInputError",
    "BackendFailedError",
    "Call",
    "EncodeInputError",
    "NoBackendError",
    "Plan",
    "__version__",
    "attention",
    "backends",
    "configure",
    "encode",
    "explain",
    "index",
    "search",
    "stats",
    "use",
]
