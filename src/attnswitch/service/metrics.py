"""The service's Prometheus metrics, and the middleware that counts every request.

Each app has its own registry (`ServiceMetrics.registry`); `/metrics` exposes it together
with attnswitch's attention metrics (`attnswitch.observe.metrics.REGISTRY`: calls per
backend, fallbacks, failures, attention latency). Service metrics, all prefixed
`attnswitch_service_`:

- `requests_total{route, method, status}` and `request_seconds{route}` (every request,
  refusals included; `route` is the route's template, "other" for unknown paths; `method`
  one of HTTP's standard methods, "other" for any other name, so that no client can grow
  the label set);
- `tokens_total{route}` model tokens encoded, `items_total{route}` texts encoded;
- `rejected_total{reason}`: queue_full (429), deadline (504), not_ready (503);
- `queue_depth` texts waiting for the model, `in_flight` requests being served,
  `search_busy` search threads at work (`index.SearchIndex`);
- `batches_total`, `batch_requests`, `batch_tokens`, `batch_seconds` per encoder call;
- `process_*` (resident and virtual memory, CPU seconds, open files) from the standard
  process collector, `memory_rss_bytes` of this process;
- `memory_growing`, `memory_growth_bytes`, `memory_trend`, `memory_samples`: the memory
  watchdog's verdict (`service.memory`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from attnswitch.observe.metrics import REGISTRY as ATTENTION_REGISTRY
from attnswitch.service.batching import BatchStats

METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
)
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class ServiceMetrics:
    """The metrics of one service instance (see the module doc)."""

    def __init__(
        self,
        queue_depth: Callable[[], float] = lambda: 0.0,
        search_busy: Callable[[], float] = lambda: 0.0,
    ):
        r = self.registry = CollectorRegistry(auto_describe=True)
        p = "attnswitch_service"
        self.requests = Counter(
            f"{p}_requests", "HTTP requests answered.", ["route", "method", "status"], registry=r
        )
        self.latency = Histogram(
            f"{p}_request_seconds",
            "Time to answer a request.",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            f"{p}_tokens", "Model tokens encoded, special tokens included.", ["route"], registry=r
        )
        self.items = Counter(f"{p}_items", "Texts encoded.", ["route"], registry=r)
        self.rejected = Counter(
            f"{p}_rejected", "Requests refused for capacity or time.", ["reason"], registry=r
        )
        self.in_flight = Gauge(f"{p}_in_flight", "Requests being served.", registry=r)
        depth = Gauge(f"{p}_queue_depth", "Texts admitted and waiting for the model.", registry=r)
        depth.set_function(queue_depth)
        busy = Gauge(
            f"{p}_search_busy",
            "Search threads at work (a search stops at its "
            "request's deadline, freeing its thread).",
            registry=r,
        )
        busy.set_function(search_busy)
        self.batches = Counter(f"{p}_batches", "Encoder calls.", registry=r)
        self.batch_requests = Histogram(
            f"{p}_batch_requests",
            "Requests per encoder call.",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128),
            registry=r,
        )
        self.batch_tokens = Histogram(
            f"{p}_batch_tokens",
            "Model tokens per encoder call.",
            buckets=(64, 256, 1024, 2048, 4096, 8192, 16384, 65536),
            registry=r,
        )
        self.batch_seconds = Histogram(
            f"{p}_batch_seconds", "Seconds per encoder call.", buckets=_LATENCY_BUCKETS, registry=r
        )
        process = psutil.Process()
        rss = Gauge(f"{p}_memory_rss_bytes", "Resident memory of this process.", registry=r)
        rss.set_function(lambda: float(process.memory_info().rss))
        ProcessCollector(registry=r)

    def record_batch(self, stats: BatchStats) -> None:
        self.batches.inc()
        self.batch_requests.observe(stats.requests)
        self.batch_tokens.observe(stats.tokens)
        self.batch_seconds.observe(stats.seconds)

    def exposition(self) -> tuple[bytes, str]:
        """(body, content type): the service's metrics, then attnswitch's attention ones."""
        return generate_latest(self.registry) + generate_latest(
            ATTENTION_REGISTRY
        ), CONTENT_TYPE_LATEST


class MetricsMiddleware:
    """Count and time every HTTP request by route template, method and status."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_status)
        finally:
            self.metrics.in_flight.dec()
            route = getattr(scope.get("route"), "path", None) or "other"
            method = scope["method"] if scope["method"] in METHODS else "other"
            self.metrics.requests.labels(route, method, str(status)).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - start)
