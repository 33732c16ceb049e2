"""Measured backend order per (device, dtype, shape bucket, features).

`benchmarks/attention_ops.py --write-autotune` times every backend that serves each call and
records the order, fastest first, in `autotune.json` in the cache directory. The planner
prefers that order over the fixed priority for calls in the same bucket. Buckets round
lengths and head dims up to powers of two, so nearby shapes share a measurement.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from attnswitch.attention.contract import Call
from attnswitch.attention.verdicts import cache_file, device_name


def table_path() -> Path:
    return cache_file("autotune.json")


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


class _Table:
    def __init__(self) -> None:
        self._data: dict[str, list[str]] = {}
        self._key: tuple | None = None
        self._checked = 0.0

    def refresh(self) -> tuple:
        now = time.monotonic()
        path = table_path()
        if self._key is not None and self._key[0] == str(path) and now - self._checked < 1.0:
            return self._key
        self._checked = now
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:  # absent, or the cache path is unusable: no table
            mtime = None
        key = (str(path), mtime)
        if key != self._key:
            try:
                self._data = json.loads(path.read_text()) if mtime is not None else {}
            except (OSError, ValueError):
                self._data = {}
            self._key = key
        return key

    def get(self, call: Call) -> list[str] | None:
        self.refresh()
        return self._data.get(bucket(call))


TABLE = _Table()


def generation() -> tuple:
    return TABLE.refresh()


def preferred(call: Call) -> list[str] | None:
    """Measured order for this call's bucket, fastest first, or None."""
    if os.environ.get("ATTNSWITCH_AUTOTUNE", "1") in ("0", "false"):
        return None
    return TABLE.get(call)


def record(entries: dict[str, list[str]]) -> Path:
    """Merge measured orders (bucket -> backend names, fastest first) into the table."""
    path = table_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data.update(entries)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)
    TABLE._checked = 0.0
    return path
