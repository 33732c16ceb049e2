"""Counters and latency histograms per backend, in Prometheus format and readable from Python.

All attnswitch metrics live in one `REGISTRY`, so a service exposes them with
`prometheus_client.generate_latest(REGISTRY)` and tests read them without global state from
other libraries.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

ATTENTION_CALLS = Counter(
    "attnswitch_attention_calls",
    "Attention calls served, by backend.",
    ["backend"],
    registry=REGISTRY,
)
ATTENTION_FALLBACKS = Counter(
    "attnswitch_attention_fallbacks",
    "Attention calls that left a failing backend for the next candidate.",
    ["backend", "to"],
    registry=REGISTRY,
)
ATTENTION_FAILURES = Counter(
    "attnswitch_attention_failures",
    "Runtime failures of a backend, by backend.",
    ["backend"],
    registry=REGISTRY,
)
ATTENTION_VERIFICATIONS = Counter(
    "attnswitch_attention_verifications",
    "First-use self-checks of a backend, by result: pass, fail (quarantined), skipped (the "
    "call was traced where the check cannot run).",
    ["backend", "result"],
    registry=REGISTRY,
)
ATTENTION_SECONDS = Histogram(
    "attnswitch_attention_seconds",
    "Host wall time of one attention call (launch time for asynchronous devices).",
    ["backend"],
    registry=REGISTRY,
    buckets=(1e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0),
)
ENGINE_FALLBACKS = Counter(
    "attnswitch_engine_fallbacks",
    "Encode calls that left a failing engine for the next one of the engine plan.",
    ["engine", "to"],
    registry=REGISTRY,
)

PLAN_CACHE = Counter(
    "attnswitch_plan_cache_lookups",
    "Plan cache lookups of attention calls, by result (hit or miss).",
    ["result"],
    registry=REGISTRY,
)
# bound once: a lookup happens on every attention call
PLAN_CACHE_HITS = PLAN_CACHE.labels("hit")
PLAN_CACHE_MISSES = PLAN_CACHE.labels("miss")


def _by_label(counter: Counter, label: str = "backend", **only: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for metric in counter.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and all(
                sample.labels.get(k) == v for k, v in only.items()
            ):
                key = sample.labels[label]
                out[key] = out.get(key, 0) + int(sample.value)
    return out


def stats() -> dict[str, dict[str, Any]]:
    """Counts since start: per backend `{"calls": {...}, "fallbacks": {...}, "failures": {...},
    "verified": {...}, "verification_failures": {...}, "unverified": {...}}` (a fallback is
    counted against the backend that failed, at run time or its first-use check;
    "unverified" counts calls served without a check because it could not run, traced), and
    the plan cache, `"plans": {"hits": n, "misses": m, "hit_rate": n / (n + m) or None}`."""
    lookups = _by_label(PLAN_CACHE, "result")
    hits, misses = lookups.get("hit", 0), lookups.get("miss", 0)
    return {
        "calls": _by_label(ATTENTION_CALLS),
        "fallbacks": _by_label(ATTENTION_FALLBACKS),
        "failures": _by_label(ATTENTION_FAILURES),
        "verified": _by_label(ATTENTION_VERIFICATIONS, result="pass"),
        "verification_failures": _by_label(ATTENTION_VERIFICATIONS, result="fail"),
        "unverified": _by_label(ATTENTION_VERIFICATIONS, result="skipped"),
        "plans": {
            "hits": hits,
            "misses": misses,
            "hit_rate": hits / (hits + misses) if hits + misses else None,
        },
    }


def exposition() -> bytes:
    """All attnswitch metrics in the Prometheus text format."""
    from prometheus_client import generate_latest

    return generate_latest(REGISTRY)
