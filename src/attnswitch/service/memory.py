"""The service's memory watchdog: the resident memory of `serve`, sampled every
`interval_s` seconds on the event loop (a cheap read), judged by `observe.memwatch` (a
robust slope and trend over the last `WINDOW` samples, after `WARMUP`), with the verdict in
`/metrics` and, when it turns to "growing", one warning in the log.

Gauges, prefixed `attnswitch_service_memory_`: `growing` (1 when the verdict is a steady
rise), `growth_bytes` (the fitted growth over the judged window), `trend` (Kendall's tau of
memory against time) and `samples` (samples judged). At the default 10 s, the window is 10
minutes after a 1-minute warm-up (the model's first batches settle allocators and caches).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge

from attnswitch.observe.memwatch import MemoryWatchdog, MemVerdict

log = logging.getLogger("attnswitch.service")
WARMUP = 6
WINDOW = 60
MIN_SAMPLES = 12
MIN_GROWTH_MB = 32.0


class MemoryGuard:
    """See the module doc. `meter` replaces the resident-memory reading (bytes)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        interval_s: float = 10.0,
        meter: Callable[[], int] | None = None,
    ):
        self.interval_s = interval_s
        self.watchdog = MemoryWatchdog(
            "rss",
            meter=meter,
            warmup=WARMUP,
            window=WINDOW,
            min_samples=MIN_SAMPLES,
            min_growth_mb=MIN_GROWTH_MB,
            warn=False,
        )
        p = "attnswitch_service_memory"
        self.growing = Gauge(
            f"{p}_growing",
            "1 when resident memory rises steadily (a leak), else 0 (observe.memwatch's verdict).",
            registry=registry,
        )
        self.growth = Gauge(
            f"{p}_growth_bytes",
            "Fitted growth of resident memory over the judged window.",
            registry=registry,
        )
        self.trend = Gauge(
            f"{p}_trend",
            "Kendall's tau of resident memory against time over the judged window.",
            registry=registry,
        )
        self.samples = Gauge(f"{p}_samples", "Memory samples judged.", registry=registry)
        self._said = False

    def check(self) -> MemVerdict:
        """Sample, judge, update the gauges; log once when the verdict turns to growing."""
        verdict = self.watchdog.check()
        self.growing.set(float(verdict.growing))
        self.growth.set(verdict.growth)
        self.trend.set(verdict.trend)
        self.samples.set(verdict.samples)
        if verdict.growing and not self._said:
            self._said = True
            log.warning(
                "attnswitch serve: %s",
                verdict.reason.replace("batches", "samples").replace("batch", "sample"),
            )
        return verdict

    async def run(self) -> None:
        """Check every `interval_s` seconds until cancelled."""
        while True:
            self.check()
            await asyncio.sleep(self.interval_s)
