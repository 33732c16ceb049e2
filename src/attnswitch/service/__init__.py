"""attnswitch's HTTP service: OpenAI-compatible embeddings, search and indexing jobs over
the CLI's data folder, with limits, backpressure, API keys and graceful shutdown.

One job per module:

- `config`: `ServiceConfig`, every setting checked once;
- `app`: `create_app(config)`, the FastAPI app; `routes`: the endpoints; `schemas`: bodies;
- `errors`: the one JSON error shape; `limits`: body size (bytes read), body deadline,
  UTF-8, items, empty input; `protocol`: uvicorn's h11 with a deadline on headers;
- `auth`: hashed bearer keys, constant-time checks, loopback-only without keys, the Host
  check of a keyless loopback server;
- `batching`: the bounded queue (429) and the token-budget batcher in front of the model;
- `runtime`: the parts wired together (threads, encoder, deadlines); `index`: search;
  `jobs`: indexing jobs; `metrics`: Prometheus; `lifecycle`: warm-up, readiness, drain;
- `page`: the web page at `/` (`ui/`: HTML, CSS, JavaScript); `overview`: the read-only
  views of the index it shows (what is indexed, skipped files, a chunk in context);
- `server`: uvicorn with drain on SIGTERM; `command`: `attnswitch serve`.

Importing this package imports neither FastAPI nor torch; `create_app` and `serve` do.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ServiceConfig", "create_app", "serve"]


def __getattr__(name: str) -> Any:
    if name == "ServiceConfig":
        from attnswitch.service.config import ServiceConfig

        return ServiceConfig
    if name == "create_app":
        from attnswitch.service.app import create_app

        return create_app
    if name == "serve":
        from attnswitch.service.server import serve

        return serve
    raise AttributeError(f"module 'attnswitch.service' has no attribute {name!r}")
