"""Cost: measured throughput and a device's hourly price give dollars per million tokens.

    usd_per_million_tokens = hourly_usd / (tokens_per_s * 3600) * 1e6

The price of a device comes, first found wins, from: an explicit `hourly_usd`; the
`ATTNSWITCH_HOURLY_USD` environment variable; a `prices` mapping the caller passes;
`DEFAULT_HOURLY_USD`. The defaults are round, illustrative on-demand cloud prices per
device-hour (one GPU or TPU chip; a small 2-4 vCPU VM for "cpu"), in US dollars: real
prices differ by provider, region, commitment and date, so set your own.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

ENV_PRICE = "ATTNSWITCH_HOURLY_USD"

# Configurable defaults, not quotes: pass `prices=` or set ATTNSWITCH_HOURLY_USD.
DEFAULT_HOURLY_USD: Mapping[str, float] = MappingProxyType(
    {
        "cpu": 0.10,
        "nvidia-t4": 0.35,
        "nvidia-l4": 0.70,
        "nvidia-a10g": 1.00,
        "nvidia-a100": 3.00,
        "nvidia-h100": 4.00,
        "nvidia-h200": 5.00,
        "nvidia-b200": 7.00,
        "tpu-v4": 3.20,
        "tpu-v5e": 1.20,
        "tpu-v5p": 4.20,
        "tpu-v6e": 2.70,
    }
)

# How device names reported by torch (`get_device_name`) and JAX (`device_kind`) map to
# the keys above: the first key whose pattern matches the lower-cased name.
DEVICE_PATTERNS: tuple[tuple[str, str], ...] = (
    ("nvidia-a10g", r"\ba10g\b"),
    ("nvidia-a100", r"\ba100\b"),
    ("nvidia-h100", r"\bh100\b"),
    ("nvidia-h200", r"\bh200\b"),
    ("nvidia-b200", r"\bb200\b"),
    ("nvidia-t4", r"\bt4\b"),
    ("nvidia-l4", r"\bl4\b"),
    ("tpu-v5e", r"\bv5 ?(e|lite)"),
    ("tpu-v5p", r"\bv5p?\b"),
    ("tpu-v6e", r"\bv6 ?(e|lite)"),
    ("tpu-v4", r"\bv4\b"),
    ("cpu", r"\bcpu\b"),
)


@dataclass(frozen=True)
class Cost:
    tokens_per_s: float
    hourly_usd: float
    usd_per_million_tokens: float
    device: str | None
    price_source: str  # "argument", "environment", "prices", "default"


def usd_per_million_tokens(tokens_per_s: float, hourly_usd: float) -> float:
    """Dollars to process one million tokens at this rate on a device at this price."""
    if not tokens_per_s > 0:
        raise ValueError(f"tokens_per_s: expected > 0, got {tokens_per_s}")
    if not hourly_usd >= 0:
        raise ValueError(f"hourly_usd: expected >= 0, got {hourly_usd}")
    return hourly_usd / (tokens_per_s * 3600.0) * 1e6


def device_key(device: str) -> str | None:
    """The price key for a device name ("NVIDIA H200" -> "nvidia-h200"), or None."""
    name = device.lower().replace("_", "-")
    if name in DEFAULT_HOURLY_USD:
        return name
    for key, pattern in DEVICE_PATTERNS:
        if re.search(pattern, name):
            return key
    return None


def hourly_price(
    device: str | None,
    *,
    hourly_usd: float | None = None,
    prices: Mapping[str, float] | None = None,
) -> tuple[float, str]:
    """(price per device-hour, where it came from) for `device`; see the module doc."""
    if hourly_usd is not None:
        return float(hourly_usd), "argument"
    env = os.environ.get(ENV_PRICE)
    if env:
        try:
            return float(env), "environment"
        except ValueError:
            raise ValueError(
                f"{ENV_PRICE}: expected a number of dollars per hour, got {env!r}"
            ) from None
    if device is None:
        raise ValueError("device: expected a device name or an explicit hourly_usd, got None")
    key = device_key(device)
    for table, origin in ((prices or {}, "prices"), (DEFAULT_HOURLY_USD, "default")):
        for k in (device, device.lower(), key):
            if k is not None and k in table:
                return float(table[k]), origin
    raise ValueError(
        f"device: expected one with a price ({', '.join(DEFAULT_HOURLY_USD)}),"
        f" got {device!r}; pass hourly_usd or set {ENV_PRICE}"
    )


def cost(
    tokens: int,
    seconds: float,
    device: str | None = None,
    *,
    hourly_usd: float | None = None,
    prices: Mapping[str, float] | None = None,
) -> Cost:
    """The cost of a measured run: `tokens` processed in `seconds` on `device`."""
    if not seconds > 0:
        raise ValueError(f"seconds: expected > 0, got {seconds}")
    rate = tokens / seconds
    price, origin = hourly_price(device, hourly_usd=hourly_usd, prices=prices)
    return Cost(rate, price, usd_per_million_tokens(rate, price), device, origin)
