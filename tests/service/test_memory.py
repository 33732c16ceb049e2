"""The memory watchdog on the service (issue 29): resident memory sampled on a schedule and
judged by `observe.memwatch`, the verdict in `/metrics` and, once it turns to growing, in
the log. A real leak (memory this test holds on to, sample after sample) turns it to
growing; steady memory does not; a real server exposes the verdict."""

from __future__ import annotations

import logging
import mmap

import httpx
from prometheus_client import CollectorRegistry, generate_latest

from attnswitch.service.memory import MIN_SAMPLES, WARMUP, MemoryGuard


def gauge(registry: CollectorRegistry, name: str) -> float:
    return registry.get_sample_value(f"attnswitch_service_memory_{name}")


def test_a_steady_leak_turns_the_verdict_to_growing_once(caplog) -> None:
    registry = CollectorRegistry()
    guard = MemoryGuard(registry)
    held = []
    with caplog.at_level(logging.WARNING, logger="attnswitch.service"):
        for _ in range(WARMUP + MIN_SAMPLES + 2):
            # 8 MiB more each sample, in new pages: an anonymous mapping, written (heap memory
            # that earlier tests in this process freed could be reused without raising RSS)
            page = mmap.mmap(-1, 8 * 2**20)
            page.write(b"x" * (8 * 2**20))
            held.append(page)
            guard.check()
    assert gauge(registry, "growing") == 1.0
    assert gauge(registry, "growth_bytes") >= 32 * 2**20 and gauge(registry, "trend") >= 0.6
    said = [r for r in caplog.records if r.name == "attnswitch.service"]
    assert len(said) == 1 and "rss memory growing" in said[0].getMessage()
    assert "MiB per sample" in said[0].getMessage() and "12 samples" in said[0].getMessage()
    assert b"attnswitch_service_memory_growing 1.0" in generate_latest(registry)


def test_steady_memory_stays_steady(caplog) -> None:
    registry = CollectorRegistry()
    guard = MemoryGuard(registry)
    with caplog.at_level(logging.WARNING, logger="attnswitch.service"):
        for _ in range(WARMUP + MIN_SAMPLES + 2):
            transient = b"x" * (8 * 2**20)  # allocated and freed each sample
            del transient
            guard.check()
    assert gauge(registry, "growing") == 0.0
    assert gauge(registry, "samples") == MIN_SAMPLES + 2
    assert not [r for r in caplog.records if "memory growing" in r.getMessage()]


def test_the_server_exposes_its_memory_verdict(server) -> None:
    body = httpx.get(f"{server.url}/metrics", timeout=30).text
    for name in ("growing", "growth_bytes", "trend", "samples"):
        assert f"attnswitch_service_memory_{name} " in body, name
    assert "attnswitch_service_memory_growing 0.0" in body
