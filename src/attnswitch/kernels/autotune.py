"""Measured backend order per (device, dtype, shape bucket, features).

`benchmarks/attention_ops.py --write-autotune` times every backend that serves each call and
records the order, fastest first, in `autotune.json`, a `cache.JsonTable` in the cache
directory. The planner
prefers that order over the fixed priority for calls in the same bucket. Buckets round
lengths and head dims up to powers of two, so nearby shapes share a measurement.
`ATTNSWITCH_AUTOTUNE=0` (or `false`) turns the table off: a setting of the attention
runtime (`runtime.Settings.autotune`), read once, and part of every plan's key.
"""

from __future__ import annotations

from pathlib import Path

from attnswitch.kernels.cache import JsonTable, device_name
from attnswitch.kernels.contract import Call, settings


def _pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def bucket(call: Call) -> str:
    """The key under which a call's measured order is stored."""
    feats = "+".join(f for f in call.features if f not in ("lse",)) or "plain"
    return (
        f"{device_name(call.device)}|{call.framework}|{call.dtype}|{call.layout}|"
        f"b{_pow2(call.batch)}|q{_pow2(call.seqlen_q)}|k{_pow2(call.seqlen_k)}|"
        f"h{call.heads_q}/{call.heads_kv}|d{_pow2(call.head_dim)}|{feats}"
    )


TABLE = JsonTable("autotune.json")


def generation() -> tuple:
    return TABLE.generation


def preferred(call: Call) -> list[str] | None:
    """Measured order for this call's bucket, fastest first, or None (also when the
    runtime's `autotune` setting is off)."""
    if not settings().autotune:
        return None
    return TABLE.get(bucket(call))


def record(entries: dict[str, list[str]]) -> Path:
    """Merge measured orders (bucket -> backend names, fastest first) into the table."""
    return TABLE.update(entries)
