"""One JSON error shape for every refusal, OpenAI's (so OpenAI clients raise with the message):

    {"error": {"message": "...", "type": "invalid_request_error", "param": "input", "code": "..."}}

Messages are capped at `MAX_MESSAGE_CHARS` and never carry the request's input: validation
errors name where the problem is and what was expected, not the value that came.
"""

from __future__ import annotations

import itertools
import json
import logging
from types import MappingProxyType
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

log = logging.getLogger("attnswitch.service")

MAX_MESSAGE_CHARS = 512
MAX_VALIDATION_ERRORS = 4

TYPES = MappingProxyType(
    {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        405: "invalid_request_error",
        408: "timeout_error",
        409: "conflict_error",
        413: "invalid_request_error",
        415: "invalid_request_error",
        422: "invalid_request_error",
        429: "rate_limit_error",
        500: "server_error",
        503: "service_unavailable",
        504: "timeout_error",
    }
)


class ServiceError(Exception):
    """A refusal with its HTTP status. `code` is a short stable name, `param` the request
    field at fault (None when none), `headers` extra response headers (Retry-After...)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.headers = headers or {}


def cap(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    return message if len(message) <= limit else message[: limit - 3] + "..."


def error_body(status: int, message: str, code: str, param: str | None = None) -> bytes:
    return json.dumps(
        {
            "error": {
                "message": cap(message),
                "type": TYPES.get(status, "error"),
                "param": param,
                "code": code,
            }
        }
    ).encode()


def error_response(
    status: int,
    message: str,
    code: str,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    return Response(
        error_body(status, message, code, param),
        status_code=status,
        headers=headers,
        media_type="application/json",
    )


def _where(loc: tuple[Any, ...]) -> str:
    """A field path from a pydantic location: ("body", "input", "list[str]", 3) -> input[3]
    (the union branch tried is dropped)."""
    out = ""
    for part in loc[1:] if loc and loc[0] == "body" else loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "[" in str(part) or str(part) in ("str", "int", "float", "bool"):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out or "body"


def validation_message(errors: list[dict[str, Any]]) -> tuple[str, str | None, bool]:
    """(message, first field, whether the body was not JSON at all) for pydantic errors;
    their `input` (the value sent) is left out. The message shows the first
    `MAX_VALIDATION_ERRORS` distinct problems and counts the rest, in time linear in the
    number of errors (a body of 60,000 wrong items is one pass, not 60,000 squared)."""
    distinct: dict[str, None] = {}  # insertion-ordered set
    for e in errors:
        if e.get("type") == "json_invalid":
            detail = (e.get("ctx") or {}).get("error", "")
            return cap(f"body: expected a JSON object, got invalid JSON ({detail})"), "body", True
        where = _where(tuple(e.get("loc", ())))
        if e.get("type") == "extra_forbidden":  # pydantic: "Extra inputs are not permitted"
            distinct.setdefault(
                f"{where}: expected a field this request takes, got an unknown field"
            )
            continue
        distinct.setdefault(f"{where}: {e.get('msg', 'invalid')}")
    shown = list(itertools.islice(distinct, MAX_VALIDATION_ERRORS))
    more = len(distinct) - len(shown)
    message = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
    first = _where(tuple(errors[0].get("loc", ()))) if errors else None
    return cap(message), first, False


async def service_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServiceError)
    return error_response(exc.status, exc.message, exc.code, exc.param, exc.headers)


async def validation_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    message, param, not_json = validation_message(errors)
    if not_json:
        return error_response(400, message, "invalid_json", param)
    kinds = {e.get("type") for e in errors}
    code = (
        "too_many_items"
        if "too_long" in kinds
        else "unknown_field"
        if "extra_forbidden" in kinds
        else "invalid_type"
    )
    return error_response(422, message, code, param)


async def http_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else "request refused"
    if exc.status_code == 404:
        detail = f"path: expected a route of this service, got {request.url.path!r}"
    elif exc.status_code == 405:
        detail = f"method: expected one this route allows, got {request.method}"
    return error_response(exc.status_code, detail, "http_error", None, dict(exc.headers or {}))


async def unexpected_error_handler(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, f"internal error: {type(exc).__name__}", "internal_error")


HANDLERS = MappingProxyType(
    {
        ServiceError: service_error_handler,
        RequestValidationError: validation_error_handler,
        StarletteHTTPException: http_error_handler,
        Exception: unexpected_error_handler,
    }
)
