"""attnswitch: one attention contract, the native kernel of each chip behind it, verified
against a float64 oracle, and a document engine built on it."""

from attnswitch._version import __version__
from attnswitch.attention.contract import AttentionInputError, Call
from attnswitch.attention.plan import (
    BackendFailedError,
    NoBackendError,
    Plan,
    attention,
    backends,
    configure,
    explain,
    use,
)
from attnswitch.observe.metrics import stats

__all__ = [
    "AttentionInputError",
    "BackendFailedError",
    "Call",
    "NoBackendError",
    "Plan",
    "__version__",
    "attention",
    "backends",
    "configure",
    "explain",
    "stats",
    "use",
]
