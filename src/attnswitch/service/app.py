"""The app factory: `create_app(config)` -> a FastAPI app serving one `runtime.Service`.

Middleware, outermost first: metrics (every request counted and timed, refusals too), on a
keyless loopback server the Host check (`auth.LoopbackHostMiddleware`), the body limits
(bytes actually read, time, UTF-8), then FastAPI's routing with the service's error
handlers (`errors.HANDLERS`: one JSON error shape). The lifespan starts the service (warm-up in the
background) and stops it after the server drained (`lifecycle`). The API's pages, Swagger UI
at /docs and ReDoc at /redoc, are served with their assets (under /static-offline-docs/),
so they work on a machine with no network.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from attnswitch._version import __version__
from attnswitch.service.auth import LoopbackHostMiddleware, is_loopback
from attnswitch.service.config import ServiceConfig
from attnswitch.service.errors import HANDLERS
from attnswitch.service.lifecycle import lifespan
from attnswitch.service.limits import BodyLimitMiddleware
from attnswitch.service.metrics import MetricsMiddleware
from attnswitch.service.routes import health, v1
from attnswitch.service.runtime import Service


def create_app(config: ServiceConfig | None = None, *, service: Service | None = None) -> FastAPI:
    """A new app and its own service (metrics registry, queue, threads) for `config`, or for
    an existing `service`."""
    if service is None:
        service = Service(config or ServiceConfig())
    # FastAPI's self-hosted docs recipe: Swagger UI at /docs and ReDoc at /redoc load
    # their scripts and styles from the fastapi-offline package, not from a CDN
    app = FastAPIOffline(
        title="attnswitch", version=__version__, lifespan=lifespan(service),
        description="Embeddings (OpenAI-compatible), search and indexing jobs over an "
        "attnswitch index.",
        exception_handlers=dict(HANDLERS),
        swagger_ui_parameters={"validatorUrl": None},  # its default is a remote validator
    )
    app.state.service = service
    app.include_router(health)
    app.include_router(v1)
    config = service.config
    app.add_middleware(BodyLimitMiddleware, max_bytes=config.max_body_bytes,
                       timeout_s=config.body_timeout_s)
    if service.keys is None and is_loopback(config.host):
        app.add_middleware(LoopbackHostMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=service.metrics)
    return app
