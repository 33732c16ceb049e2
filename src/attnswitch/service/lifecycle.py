"""The service's life: warming up -> ready -> draining (or failed), and the ASGI lifespan.

- Startup returns at once, so the port answers while the model loads: `/livez` says 200
  from the first moment, `/readyz` 503 ("warming up") until the model is loaded and has
  encoded once, then 200. `/v1/` routes answer 503 with Retry-After until then.
- Draining begins when the server is told to stop (SIGTERM or SIGINT; `server.serve` marks
  it before uvicorn closes the listening socket): `/readyz` says 503 ("draining"), new
  `/v1/` requests get 503, requests already accepted are answered. uvicorn waits for them
  up to `drain_timeout_s`, then the lifespan's shutdown stops a running job (its run is
  recorded as interrupted; every document is committed whole or not at all), the batcher
  and the worker threads, and logs what was admitted and answered.
- A warm-up failure (no model, bad model folder) leaves `/readyz` at 503 with the reason.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from attnswitch.service.errors import ServiceError

WARMING, READY, DRAINING, FAILED = "warming up", "ready", "draining", "failed"


class Readiness:
    """Where the service stands; `reason` says why it is not ready (None when ready)."""

    def __init__(self) -> None:
        self.state = WARMING
        self.reason: str | None = "loading the model"

    @property
    def ready(self) -> bool:
        return self.state == READY

    def set_ready(self) -> None:
        if self.state == WARMING:
            self.state, self.reason = READY, None

    def set_failed(self, reason: str) -> None:
        if self.state != DRAINING:
            self.state, self.reason = FAILED, reason

    def drain(self) -> None:
        self.state, self.reason = DRAINING, "shutting down: finishing requests in flight"

    def check(self, retry_after: int = 1) -> None:
        """Raise 503 unless ready."""
        if self.state != READY:
            raise ServiceError(
                503,
                f"server: expected ready, got {self.state} ({self.reason})",
                code=self.state.replace(" ", "_"),
                headers={"Retry-After": str(retry_after)},
            )

    def report(self) -> dict[str, Any]:
        return {"status": self.state, "reason": self.reason}


def lifespan(service: Any) -> Any:
    """The app's lifespan for a `runtime.Service`: start it (warm-up in the background),
    stop it after uvicorn has drained the connections."""

    @contextlib.asynccontextmanager
    async def run(app: Any) -> AsyncIterator[None]:
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    return run
