"""attnswitch: one attention contract, the native kernel of each chip behind it, verified
against a float64 oracle, and a document engine built on it."""

from typing import Any

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


def search(query: str, db: Any = None, k: int = 5, mode: str = "hybrid", *,
           path: Any = None, type: Any = None, modified_after: Any = None,
           modified_before: Any = None, model: str | None = None,
           ef: int | None = None) -> list[Any]:
    """The `k` chunks of the index at `db` (default `./.attnswitch/`; a SQLite file or data
    folder, or a `postgresql://` URL) that best match `query`, best first, as `Hit`s (the
    shape of `attnswitch search --json` and `/v1/search`; `Hit.to_dict()`). `mode`:
    "hybrid", "dense" or "keyword"; filters: `path` (folder prefix or glob), `type` (kind
    or extension), `modified_after`/`modified_before` (ISO dates), each a value or a list.
    See `attnswitch.pipeline.api.search`."""
    from attnswitch.pipeline.api import search as search_index

    return search_index(query, db, k, mode, path=path, type=type,
                        modified_after=modified_after, modified_before=modified_before,
                        model=model, ef=ef)


def index(folder: Any, db: Any = None, **options: Any) -> Any:
    """Index `folder` into the store at `db`, as `attnswitch run` does (resumable;
    unchanged files left alone); the run's summary (`.to_dict()` is `run --json`'s). See
    `attnswitch.pipeline.api.index` for the options."""
    from attnswitch.pipeline.api import index as index_folder

    return index_folder(folder, db, **options)


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
