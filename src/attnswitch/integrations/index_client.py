"""One way for the framework adapters (LangChain, LlamaIndex) to search an attnswitch index:
a local one (`db=`, through `jobs.api.search`, the call `attnswitch.search` makes) or
a running `attnswitch serve` (`url=`, through `POST /v1/search` with its `filter` object).
Either way a search gives the hits as dicts in the one shape `Hit.to_dict()` defines (the
same keys from both), best first.

`SearchSpec` holds what a search asks besides its query (k, mode, the filters, the
grouping), checked when it is made by the checks of `indexing.requests.SearchRequest`
(the one definition of a search: its modes, filter fields, groupings and the bounds of
k), so a bad value is refused where the adapter is built, with the argument named
(`StoreInputError`, a `ValueError`: "mode: expected one of hybrid, dense, keyword, got
'fuzzy'", "k: expected an integer from 1 to 100, got 0", "group: expected one of chunk,
document, got 'page'"). A search that cannot be made raises `IndexSearchError`, one line
saying what was wrong: a refusal by the server (`RemoteSearchError`, a subclass, with the
server's own message), an answer that is not a search's answer (not JSON, or not the
shape `/v1/search` gives: each hit checked against `Hit`, so a missing or wrongly typed
field is named, "data[0].chunk_id"), or a damaged local index (the CLI's line for it,
`store_errors.describe`). A server that cannot be reached raises httpx's error.

`hit_metadata(hit)` is a hit's dict less its text: every field `Hit` has (path, root,
heading_path, location, score, rank, chunk_id, snippet, also_at, more_in_document, ...),
whatever fields it gains later, so that adapters never keep a hand-picked list.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from typing import Any

from attnswitch.errors import AttnswitchError
from attnswitch.indexing.filters import FIELDS
from attnswitch.indexing.requests import DEFAULT_K, Mode, check_k

SEARCH_ROUTE = "/v1/search"
DEFAULT_TIMEOUT_S = 60.0


class IndexSearchError(AttnswitchError, RuntimeError):
    """A search the adapters could not make (see the module doc): one line naming what
    was wrong."""


class RemoteSearchError(IndexSearchError, ValueError):
    """The service refused a search (its status and message), or answered 200 with what is
    not a search's answer."""


@dataclass(frozen=True)
class SearchSpec:
    """What a search asks besides its query: `k` hits, `mode` (a `requests.Mode` name),
    the filters of `attnswitch.search` (`filters.FIELDS`: `path`, a folder prefix or glob;
    `type`, a kind or extension; the modification-time bounds, ISO dates; each a value or
    a list, None for no filter) and `group` ("chunk": the `k` best chunks; "document": the
    best chunk of each of the `k` best documents, with `more_in_document`). Checked on
    creation by the checks of `requests.SearchRequest` (see the module doc)."""

    k: int = DEFAULT_K
    mode: str = Mode.HYBRID.value
    path: str | list[str] | None = None
    type: str | list[str] | None = None
    modified_after: Any = None
    modified_before: Any = None
    group: str = "chunk"  # "document": the best chunk of each of the k best documents

    def __post_init__(self) -> None:
        from attnswitch.indexing.diversity import check_group
        from attnswitch.indexing.filters import SearchFilter

        object.__setattr__(self, "k", check_k(self.k))
        object.__setattr__(self, "group", check_group(self.group))
        object.__setattr__(self, "mode", Mode.parse(self.mode).value)
        SearchFilter.of(**self.filters())

    def filters(self) -> dict[str, Any]:
        """The filters as `attnswitch.search`'s keyword arguments (one per `FIELDS`)."""
        return {name: getattr(self, name) for name in FIELDS}

    def request(self, query: str) -> dict[str, Any]:
        """The body of `POST /v1/search` for `query`: the filters as given (dates as ISO
        text), only those given."""
        given = {
            name: _jsonable(value) for name, value in self.filters().items() if value is not None
        }
        return {
            "query": query,
            "k": self.k,
            "mode": self.mode,
            **({"filter": given} if given else {}),
            **({"group": self.group} if self.group != "chunk" else {}),
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value.isoformat() if hasattr(value, "isoformat") else value


def hit_metadata(hit: dict[str, Any]) -> dict[str, Any]:
    """Every field of a hit but its text (see the module doc)."""
    return {name: value for name, value in hit.items() if name != "text"}


def check_source(db: str | os.PathLike | None, url: str | None) -> None:
    """An adapter reads a local index (`db`, None for the index found as
    `indexing/index.py` says: the nearest `.attnswitch/` here or above, else the per-user
    default) or a
    service (`url`), never both."""
    if db is not None and url is not None:
        raise ValueError(
            f"db, url: expected one of them (a local index or a running "
            f"`attnswitch serve`), got both ({str(db)!r} and {url!r})"
        )
    if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        raise ValueError(
            f"url: expected the http:// or https:// address of a running "
            f"`attnswitch serve`, got {url!r}"
        )
    if db is not None and not isinstance(db, (str, os.PathLike)):
        raise ValueError(f"db: expected a path or a postgresql:// URL, got {db!r}")


def search_local(
    query: str, db: str | os.PathLike | None, spec: SearchSpec
) -> list[dict[str, Any]]:
    """The hits of the index at `db` (see the module doc)."""
    from attnswitch.indexing.store_errors import describe, is_store_error
    from attnswitch.jobs.api import location_of, search

    try:
        hits = search(query, db, spec.k, spec.mode, group=spec.group, **spec.filters())
    except Exception as exc:
        if not is_store_error(exc):
            raise
        raise IndexSearchError(describe(exc, str(location_of(db)))) from None
    return [h.to_dict() for h in hits]


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _hits(response: Any) -> list[dict[str, Any]]:
    """The hits of a `/v1/search` answer, checked against the service's own schema
    (`SearchResponse`, strictly: "7" is not a chunk id); a refusal or an answer of another
    shape is `RemoteSearchError`. The hits are the answer's dicts as they came, so that
    fields a newer server adds still reach the frameworks."""
    from pydantic import ValidationError

    from attnswitch.service.schemas import SearchResponse

    if response.status_code != 200:
        try:
            error = response.json()["error"]
            message = error.get("message") or str(error)
        except (ValueError, KeyError, TypeError, AttributeError):
            message = response.text[:500]
        raise RemoteSearchError(
            f"{SEARCH_ROUTE}: the service answered {response.status_code}: {message}"
        )
    try:
        SearchResponse.model_validate_json(response.content, strict=True)
    except ValidationError as exc:
        raise RemoteSearchError(
            f"{SEARCH_ROUTE}: expected a search answer from the service "
            f"(JSON: an object whose data lists hits), got "
            f"{_problem(exc)}"
        ) from None
    return list(json.loads(response.content)["data"])


def _problem(exc: Any) -> str:
    """What is wrong with an answer, from pydantic's first error: where and what."""
    error = exc.errors(include_url=False)[0]
    if error["type"] == "json_invalid":
        return f"a body that is not JSON ({error['msg']})"
    where = "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]
    ).lstrip(".")
    if not where:
        return f"{_shown(error['input'])}, not an object"
    if error["type"] == "missing":
        return f"one without {where}"
    return f"one whose {where} is {_shown(error['input'])} ({error['msg']})"


def _shown(value: Any) -> str:
    """`value` for a message: its repr, cut to 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def search_remote(
    query: str,
    url: str,
    spec: SearchSpec,
    api_key: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> list[dict[str, Any]]:
    """The hits of the service at `url` (see the module doc)."""
    import httpx

    response = httpx.post(
        url.rstrip("/") + SEARCH_ROUTE,
        json=spec.request(query),
        headers=_headers(api_key),
        timeout=timeout,
    )
    return _hits(response)


async def asearch_remote(
    query: str,
    url: str,
    spec: SearchSpec,
    api_key: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> list[dict[str, Any]]:
    """`search_remote` on the event loop (httpx's async client)."""
    import httpx

    async with httpx.AsyncClient(timeout=timeout) as client:
        response = await client.post(
            url.rstrip("/") + SEARCH_ROUTE, json=spec.request(query), headers=_headers(api_key)
        )
    return _hits(response)


def search(
    query: str,
    spec: SearchSpec,
    db: str | os.PathLike | None = None,
    url: str | None = None,
    api_key: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> list[dict[str, Any]]:
    """The hits for `query`: from the service at `url` when given, else from the index at
    `db`."""
    if url is not None:
        return search_remote(query, url, spec, api_key, timeout)
    return search_local(query, db, spec)


async def asearch(
    query: str,
    spec: SearchSpec,
    db: str | os.PathLike | None = None,
    url: str | None = None,
    api_key: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> list[dict[str, Any]]:
    """`search` without blocking the event loop: the service through httpx's async client,
    a local index in a worker thread (the store and the model are synchronous)."""
    if url is not None:
        return await asearch_remote(query, url, spec, api_key, timeout)
    return await asyncio.to_thread(search_local, query, db, spec)


__all__ = [
    "IndexSearchError",
    "RemoteSearchError",
    "SearchSpec",
    "asearch",
    "check_source",
    "hit_metadata",
    "search",
]


def check_encoder(engine: str, precision: str) -> None:
    """Refuse an engine or precision attnswitch does not have (`ValueError` naming it): the
    check of both frameworks' embedding classes."""
    from attnswitch.engines import PRECISION_CHOICES, engine_names

    if engine not in engine_names():
        raise ValueError(f"engine: expected one of {', '.join(engine_names())}, got {engine!r}")
    if precision not in PRECISION_CHOICES:
        raise ValueError(
            f"precision: expected one of {', '.join(PRECISION_CHOICES)}, got {precision!r}"
        )


def embed(texts: list[str], model: str | None, engine: str, precision: str) -> list[list[float]]:
    """`attnswitch.encode` of `texts` as lists of floats ([] for none)."""
    from attnswitch.engines import encode

    if not texts:
        return []
    return encode(list(texts), model=model, engine=engine, precision=precision).tolist()
