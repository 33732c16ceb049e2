"""Request and response bodies, as the OpenAPI schema shows them.

Requests are validated strictly (a number is not a string, "false" is not a boolean) and
a field a request does not take is refused with 422 naming it (`additionalProperties:
false` in the schema): a misspelt `filtre` is an error, not a search without its filter.
OpenAI's embeddings request's own fields (`user`, `dimensions`, ...) are all declared.
The search request is derived from `indexing.requests` and `indexing.filters` (the modes,
the filter's fields and their help, the bounds of `k` and `ef`). Embedding responses are built
as bytes off the event loop (`render_embeddings`) rather than through these models; the
models document their shape.
"""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, create_model

from attnswitch.indexing.filters import FIELD_HELP, FIELD_VALUES, FIELDS
from attnswitch.indexing.records import MAX_EF_SEARCH, MAX_K
from attnswitch.indexing.requests import DEFAULT_K, MODES, MODES_HELP, Mode
from attnswitch.indexing.search import Hit

# The most texts a request may hold whatever `--max-items` says (OpenAI's own limit). The
# schema carries it so that validation stops at the limit: the errors of a huge list of
# wrong items are never all produced.
MAX_INPUT_ITEMS = 2048


class _Request(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class EmbeddingRequest(_Request):
    """OpenAI's embeddings request. `truncate` (an extension, as in TEI): texts longer than
    the model's token limit are cut to it (true, the default) or refused with 422 (false)."""

    input: str | Annotated[list[str], Field(max_length=MAX_INPUT_ITEMS)] = Field(
        description="A text, or a list of texts, to embed."
    )
    model: str | None = Field(
        None,
        description="Accepted and ignored: the served model answers (its name is in the response).",
    )
    encoding_format: Literal["float", "base64"] = Field(
        "float", description="float: lists of numbers; base64: little-endian float32 bytes."
    )
    dimensions: int | None = Field(
        None,
        ge=1,
        description="Must be the model's dimension "
        "when given (the served models are not shortened).",
    )
    user: str | None = None
    truncate: bool = True


class Usage(BaseModel):
    prompt_tokens: int = Field(description="Model tokens encoded, special tokens included.")
    total_tokens: int


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class EmbeddingResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: Usage


def _sentence(line: str) -> str:
    """A help line (`FIELD_HELP`, `Mode.help`) as a description: capitalised, with a stop."""
    return line[:1].upper() + line[1:].rstrip(".") + "."


def _filter_field(name: str) -> tuple[Any, Any]:
    """The field of the filter `name` (`FIELDS`): one text for a time, else a text or a
    list of them (`FIELD_VALUES`), described by `FIELD_HELP`."""
    value = str | None if FIELD_VALUES[name] == "time" else str | list[str] | None
    return value, Field(None, description=_sentence(FIELD_HELP[name]))


# One field per filter field of `indexing.filters` (its names, help and value kinds), so
# that the schema never lists them again.
SearchFilterRequest = create_model(
    "SearchFilterRequest",
    __base__=_Request,
    __doc__="Which documents a search may return (`indexing.filters`; the CLI's filter "
    "options); a list means any of its values.",
    __module__=__name__,
    **{name: _filter_field(name) for name in FIELDS},
)
ModeName = Literal[MODES]  # type: ignore[valid-type]  # the names of `requests.Mode`


# A search as HTTP takes it: the modes, the filter's fields and the bounds of `k` and `ef`
# are those of `indexing.requests` (the one definition every front end derives from).
# `SearchRequest` adds the filter's fields flat, as the CLI, Python and MCP take them.
class _SearchRequest(_Request):
    query: str = Field(description="What to look for (truncated to the model's limit).")
    k: int = Field(DEFAULT_K, ge=1, le=MAX_K, description="How many chunks to return.")
    mode: ModeName = Field(Mode.HYBRID.value, description=f"How chunks are ranked: {MODES_HELP}.")
    ef: int | None = Field(
        None,
        ge=1,
        le=MAX_EF_SEARCH,
        description="The ANN search beam "
        "of a large index: wider finds more of the exact nearest chunks, "
        "slower (default: the store's). Small indexes are searched "
        "exactly.",
    )
    filter: SearchFilterRequest | None = Field(  # type: ignore[valid-type]
        None,
        description="Only documents that pass it; applied inside the index's query, "
        "so k hits come back when k chunks pass.",
    )
    group: Literal["chunk", "document"] = Field(
        "chunk",
        description='"chunk": the k best chunks; "document": the best chunk of each of the '
        "k best documents, with how many other chunks of it matched (more_in_document).",
    )


SearchRequest = create_model(
    "SearchRequest",
    __base__=_SearchRequest,
    __doc__="A search: the query, how many hits and how they are ranked, and which "
    "documents may answer, as the fields of `filter` or the same fields flat (`path`, "
    "`type`, `modified_after`, `modified_before`, as the CLI, Python and MCP take them), "
    "not both.",
    __module__=__name__,
    **{name: _filter_field(name) for name in FIELDS},
)


def search_filter_values(body: Any) -> tuple[dict[str, Any] | None, str]:
    """The filter fields of a `SearchRequest` and the prefix of their names in errors:
    (`filter`'s fields, "filter.") when it has a `filter` object, (the flat fields that
    are set, "") otherwise, (None, "") when it has neither. Both at once is a 422
    `invalid_filter` naming `filter`: one search, one way to say its filter."""
    from attnswitch.service.errors import ServiceError

    flat = {name: getattr(body, name) for name in FIELDS if getattr(body, name) is not None}
    if body.filter is not None:
        if flat:
            raise ServiceError(
                422,
                "filter: expected the filter's fields either flat or inside `filter`, "
                f"got both ({', '.join(flat)} and filter)",
                code="invalid_filter",
                param="filter",
            )
        return body.filter.model_dump(), "filter."
    return (flat or None), ""


class SearchResponse(BaseModel):
    """The hits, best first, in the shape `indexing.search.Hit` defines (the CLI's `search
    --json` and the Python API give the same)."""

    object: Literal["list"] = "list"
    data: list[Hit]
    model: str
    usage: Usage
    note: str | None = Field(
        None, description="Why there is no hit, when a filter was given and nothing passed it."
    )
    coverage_note: str | None = Field(
        None,
        description="Set while the index's full pass is not done (chunks without the "
        "transformer's vector): how many, and how many of this search's candidates it "
        "encoded now (docs/architecture.md, 'Two passes').",
    )


class JobRequest(_Request):
    path: str = Field(
        description="A folder on the server, inside its jobs root (relative "
        "paths are taken from the jobs root); no hidden components."
    )


class JobResponse(BaseModel):
    id: str
    object: Literal["job"] = "job"
    path: str
    status: Literal["queued", "running", "completed", "failed", "interrupted", "cancelled"]
    created_at: float
    started_at: float | None
    finished_at: float | None
    progress: dict[str, Any]
    summary: dict[str, Any] | None
    error: str | None
    attempts: int = Field(
        1,
        description="How many times the job started: more than one "
        "when a server stopped in the middle of it and the next one "
        "resumed it.",
    )


class JobList(BaseModel):
    object: Literal["list"] = "list"
    data: list[JobResponse]


class Model(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Model]


class Health(BaseModel):
    status: str
    reason: str | None = None


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str


class ErrorResponse(BaseModel):
    error: ErrorDetail


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for these error statuses."""
    return {s: {"model": ErrorResponse} for s in statuses}


def render_embeddings(vectors: np.ndarray, encoding_format: str, model: str, tokens: int) -> bytes:
    """The JSON body of an embeddings response (CPU work: call it off the event loop).
    Floats are the float32 values written exactly (as shortest float64 text)."""
    vectors = np.ascontiguousarray(vectors, dtype="<f4")
    if encoding_format == "base64":
        rows: list[Any] = [base64.b64encode(v.tobytes()).decode("ascii") for v in vectors]
    else:
        rows = vectors.tolist()
    return json.dumps(
        {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(rows)
            ],
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        },
        separators=(",", ":"),
    ).encode()
