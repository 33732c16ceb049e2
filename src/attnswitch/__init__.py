"""attnswitch: one attention contract, the native kernel of each chip behind it, verified
against a float64 oracle, and a document engine built on it."""

from attnswitch._version import __version__
from attnswitch.attention.contract import AttentionInputError, Call
from attnswitch.attention.entry import attention
from attnswitch.attention.plan import (
    BackendFailedError,
    NoBackendError,
    Plan,
    backends,
    configure,
    explain,
    use,
)
from attnswitch.engines import EncodeInputError, encode
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
    "stats",
    "use",
]
