"""Memory watchdog: sample memory once per batch and flag steady growth (a leak).

A long run that leaks a little per batch dies hours later; the watchdog says so early.
Call `check()` after each batch: it samples the meter, and warns once
(`MemoryGrowthWarning` and a log record) when the verdict turns to "growing".

Meters (`source`): "rss" (the process's resident set, psutil), "cuda" (bytes allocated by
torch's caching allocator on a CUDA device), "jax" (bytes in use on a JAX device, from
`device.memory_stats()`), or "auto": "cuda" when torch is already imported and sees a
GPU, else "rss".

The test for growth, over the last `window` samples after the first `warmup` (allocators,
caches and compiled kernels settle in the first batches):

- the Theil-Sen slope (median of the pairwise slopes, robust to outliers such as a
  garbage-collection dip) is positive, and times the window's span of steps gives a
  growth of at least `min_growth_mb`;
- Kendall's tau-a of memory against step is at least `min_trend`: memory rises
  consistently, not by one step up (a cache filling once) or by noise.

Both hold only for a sustained rise; a steady workload that allocates and frees gives a
slope near zero and a tau near zero.
"""

from __future__ import annotations

import logging
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)
MB = 2**20
SOURCES = ("auto", "rss", "cuda", "jax")


class MemoryGrowthWarning(RuntimeWarning):
    """Memory grew steadily across batches."""


@dataclass(frozen=True)
class MemSample:
    step: int
    bytes: int
    time: float


@dataclass(frozen=True)
class MemVerdict:
    """`slope` is in bytes per step (Theil-Sen), `growth` in bytes over the window,
    `trend` is Kendall's tau-a in [-1, 1]; `samples` counts those judged."""

    growing: bool
    slope: float
    growth: float
    trend: float
    samples: int
    source: str
    reason: str

    @property
    def mb_per_step(self) -> float:
        return self.slope / MB


class MemoryWatchdog:
    """`check()` once per batch; `verdict()` judges the samples so far.

    `meter`, when given, replaces the built-in meters: any callable returning bytes (a
    counter of another device, a recorded series); `source` then only names it.
    """

    def __init__(
        self,
        source: str = "auto",
        *,
        device: object = None,
        meter: Callable[[], int] | None = None,
        warmup: int = 3,
        window: int = 24,
        min_samples: int = 8,
        min_growth_mb: float = 32.0,
        min_trend: float = 0.6,
        warn: bool = True,
    ):
        if source not in SOURCES and meter is None:
            raise ValueError(f"source: expected one of {SOURCES}, got {source!r}")
        if min_samples < 3 or window < min_samples or warmup < 0:
            raise ValueError(
                f"window, min_samples, warmup: expected window >= min_samples"
                f" >= 3 and warmup >= 0, got {window}, {min_samples}, {warmup}"
            )
        if meter is not None:
            self.source, self._meter = ("custom" if source == "auto" else source), meter
        else:
            self.source, self._meter = _meter(source, device)
        self.warmup = warmup
        self.window = window
        self.min_samples = min_samples
        self.min_growth = min_growth_mb * MB
        self.min_trend = min_trend
        self.warn = warn
        self._samples: list[MemSample] = []
        self._warned = False

    @property
    def samples(self) -> tuple[MemSample, ...]:
        return tuple(self._samples)

    def add(self, nbytes: int, step: int | None = None) -> None:
        """Record a measurement taken elsewhere. Steps default to 0, 1, 2, ..."""
        if step is None:
            step = self._samples[-1].step + 1 if self._samples else 0
        if self._samples and step <= self._samples[-1].step:
            raise ValueError(f"step: expected > {self._samples[-1].step}, got {step}")
        self._samples.append(MemSample(int(step), int(nbytes), time.monotonic()))

    def sample(self, step: int | None = None) -> int:
        """Read the meter now and record it; returns the bytes read."""
        nbytes = self._meter()
        self.add(nbytes, step)
        return nbytes

    def check(self, step: int | None = None) -> MemVerdict:
        """`sample`, then judge; warns the first time the verdict is "growing"."""
        self.sample(step)
        verdict = self.verdict()
        if verdict.growing and not self._warned:
            self._warned = True
            log.warning("%s", verdict.reason)  # the warning's words: shown once (liblog)
            if self.warn:
                warnings.warn(verdict.reason, MemoryGrowthWarning, stacklevel=2)
        return verdict

    def verdict(self) -> MemVerdict:
        judged = self._samples[self.warmup :][-self.window :]
        n = len(judged)
        if n < self.min_samples:
            return MemVerdict(
                False,
                0.0,
                0.0,
                0.0,
                n,
                self.source,
                f"{n} samples after warm-up, need {self.min_samples}",
            )
        x = np.array([s.step for s in judged], dtype=np.float64)
        y = np.array([s.bytes for s in judged], dtype=np.float64)
        slope, trend = _theil_sen(x, y), _kendall_tau_a(x, y)
        growth = float(slope * (x[-1] - x[0]))
        growing = bool(slope > 0 and growth >= self.min_growth and trend >= self.min_trend)
        what = "growing" if growing else "steady"
        reason = (
            f"{self.source} memory {what}: {slope / MB:+.2f} MiB per batch, "
            f"{growth / MB:+.1f} MiB over the last {n} batches (trend {trend:.2f}; "
            f"flagged at >= {self.min_growth / MB:.0f} MiB and trend >= "
            f"{self.min_trend})"
        )
        return MemVerdict(growing, slope, growth, trend, n, self.source, reason)


def _theil_sen(x: np.ndarray, y: np.ndarray) -> float:
    i, j = np.triu_indices(len(x), k=1)
    dx = x[j] - x[i]
    keep = dx != 0
    return float(np.median((y[j] - y[i])[keep] / dx[keep])) if keep.any() else 0.0


def _kendall_tau_a(x: np.ndarray, y: np.ndarray) -> float:
    i, j = np.triu_indices(len(x), k=1)
    return float(np.mean(np.sign(x[j] - x[i]) * np.sign(y[j] - y[i])))


def _meter(source: str, device: object) -> tuple[str, Callable[[], int]]:
    if source == "auto":
        torch = sys.modules.get("torch")
        source = "cuda" if torch is not None and torch.cuda.is_available() else "rss"
    if source == "rss":
        import psutil

        proc = psutil.Process()
        return source, lambda: proc.memory_info().rss
    if source == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ValueError("source: expected a visible CUDA device for 'cuda', got none")
        return source, lambda: torch.cuda.memory_allocated(device)
    import jax

    dev = device if device is not None else jax.devices()[0]
    if not dev.memory_stats():
        raise ValueError(
            f"source: expected a JAX device with memory stats for 'jax', got "
            f"{dev.platform} device {dev}"
        )
    return source, lambda: int(dev.memory_stats()["bytes_in_use"])
