"""The app factory: `create_app(config)` -> a FastAPI app serving one `runtime.Service`.

Middleware, outermost first: metrics (every request counted and timed, refusals too), on a
keyless loopback server the Host check (`auth.LoopbackHostMiddleware`), the body limits
(bytes actually read, time, UTF-8), then FastAPI's routing with the service's error
handlers (`errors.HANDLERS`: one JSON error shape). A body FastAPI refuses before the
routes' dependencies run (not JSON, or of no JSON content type) is answered only after the
`/v1/` gate (`routes.gate`: the key, 401, then readiness, 503), so that it says nothing to
a client without a key; a body sent with no JSON content type gets 415. The lifespan starts
the service (warm-up in the background) and stops it after the server drained
(`lifecycle`). The API's pages, Swagger UI at /docs and ReDoc at /redoc, are served with
their assets (under /static-offline-docs/), so they work on a machine with no network; the
page at `/` (`page`) unless the config turns it off.
"""

from __future__ import annotations

import email.message

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi_offline import FastAPIOffline
from starlette.responses import Response

from attnswitch._version import __version__
from attnswitch.service.auth import LoopbackHostMiddleware, is_loopback
from attnswitch.service.config import ServiceConfig
from attnswitch.service.errors import (
    HANDLERS,
    ServiceError,
    error_response,
    service_error_handler,
    validation_error_handler,
)
from attnswitch.service.lifecycle import lifespan
from attnswitch.service.limits import BodyLimitMiddleware
from attnswitch.service.metrics import MetricsMiddleware
from attnswitch.service.page import page
from attnswitch.service.routes import gate, health, v1
from attnswitch.service.runtime import Service


def create_app(config: ServiceConfig | None = None, *, service: Service | None = None) -> FastAPI:
    """A new app and its own service (metrics registry, queue, threads) for `config`, or for
    an existing `service`."""
    if service is None:
        service = Service(config or ServiceConfig())
    # FastAPI's self-hosted docs recipe: Swagger UI at /docs and ReDoc at /redoc load
    # their scripts and styles from the fastapi-offline package, not from a CDN
    app = FastAPIOffline(
        title="attnswitch",
        version=__version__,
        lifespan=lifespan(service),
        description="Embeddings (OpenAI-compatible), search and indexing jobs over an "
        "attnswitch index.",
        exception_handlers={**HANDLERS, RequestValidationError: validation_after_gate},
        swagger_ui_parameters={"validatorUrl": None},  # its default is a remote validator
    )
    app.state.service = service
    app.include_router(health)
    app.include_router(v1)
    if service.config.ui:
        app.include_router(page)
    config = service.config
    app.add_middleware(
        BodyLimitMiddleware, max_bytes=config.max_body_bytes, timeout_s=config.body_timeout_s
    )
    if service.access.keyless and is_loopback(config.host):
        app.add_middleware(LoopbackHostMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=service.metrics)
    return app


def _json_content_type(request: Request) -> bool | None:
    """Whether the request declares a JSON body (None: it declares no content type)."""
    value = request.headers.get("content-type")
    if not value:
        return None
    message = email.message.Message()
    message["content-type"] = value
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


async def validation_after_gate(request: Request, exc: Exception) -> Response:
    """A refused body (`errors.validation_error_handler`), answered after the `/v1/` gate;
    a body of no JSON content type is 415."""
    if request.url.path.startswith("/v1/"):
        try:
            await gate(request)
        except ServiceError as refused:
            return await service_error_handler(request, refused)
    declared = _json_content_type(request)
    if declared is not True and getattr(exc, "body", None):  # the body FastAPI read
        got = "none" if declared is None else repr(request.headers["content-type"][:80])
        return error_response(
            415,
            f"content-type: expected application/json, got {got}",
            "unsupported_media_type",
            "content-type",
        )
    return await validation_error_handler(request, exc)
