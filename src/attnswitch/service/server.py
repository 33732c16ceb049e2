"""Run the app on uvicorn: bind the socket, serve, drain on SIGTERM/SIGINT.

`serve(config)` refuses a non-loopback host without keys (`auth.check_bind`), binds the
socket itself (port 0 picks a free one) and prints the address on stderr as

    attnswitch serve: listening on http://127.0.0.1:PORT

before the model loads, so a caller can wait for `/readyz`. SIGHUP re-reads the access file
(or key file) without stopping (`access.AccessControl.reload`). On SIGTERM (or Ctrl-C) the
service starts draining at once (`/readyz` 503, new requests 503), then uvicorn stops
accepting connections, waits up to `drain_timeout_s` for the requests in flight, and runs
the lifespan shutdown (see `lifecycle`). uvicorn then re-raises the signal, as it always does.

Connections run uvicorn's h11 protocol with a deadline on request headers (`protocol`);
the body's deadline is the body limit middleware's (`limits`).
"""

from __future__ import annotations

import signal
import socket
import sys
from types import FrameType

import uvicorn

from attnswitch.service.app import create_app
from attnswitch.service.auth import check_bind
from attnswitch.service.config import ServiceConfig
from attnswitch.service.protocol import header_timeout_protocol
from attnswitch.service.runtime import Service


class _DrainingServer(uvicorn.Server):
    """uvicorn's server, telling the service to drain as soon as a stop signal arrives."""

    def __init__(self, config: uvicorn.Config, service: Service):
        super().__init__(config)
        self._service = service

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._service.begin_drain()
        super().handle_exit(sig, frame)


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to (host, port), IPv4 or IPv6 as the host resolves, and listening:
    from the "listening on" line, a connection waits in the backlog until uvicorn has
    started and accepts it (a socket only bound refused it: a client that connected while
    the app's start-up ran got ECONNREFUSED)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)  # uvicorn's default backlog; asyncio listens again with it
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def serve(config: ServiceConfig, *, log_level: str = "info", access_log: bool = False) -> None:
    """Serve until stopped (see the module doc)."""
    has_keys = config.api_key_file is not None or config.access_file is not None
    check_bind(config.host, has_keys, config.allow_no_auth)
    service = Service(config)
    app = create_app(service=service)
    if hasattr(signal, "SIGHUP"):  # re-read the access (or key) file, keeping it if bad
        signal.signal(signal.SIGHUP, lambda signum, frame: service.access.reload())
    sock = bind(config.host, config.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"attnswitch serve: listening on http://{shown}:{port}", file=sys.stderr, flush=True)
    uv_config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=access_log,
        timeout_graceful_shutdown=config.drain_timeout_s,
        lifespan="on",
        timeout_keep_alive=config.keep_alive_s,
        http=header_timeout_protocol(config.header_timeout_s),
        loop="asyncio",
        ws="none",
    )
    server = _DrainingServer(uv_config, service)
    server.run(sockets=[sock])
