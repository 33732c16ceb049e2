"""The memory watchdog on real workloads (this process's RSS) and on recorded series."""

from __future__ import annotations

import gc
import mmap
import sys
import warnings

import numpy as np
import pytest

from attnswitch.observe.memwatch import MB, MemoryGrowthWarning, MemoryWatchdog

BLOCK = 4 * MB


def touched(nbytes: int) -> np.ndarray:
    """A buffer whose pages are really resident and newly mapped: an anonymous mmap, so a
    long-lived test process cannot serve it from heap memory other tests freed earlier
    (which would leave RSS flat however much is kept)."""
    buf = np.frombuffer(mmap.mmap(-1, nbytes), dtype=np.uint8)
    buf[:] = 7
    return buf


def test_leaking_workload_is_flagged() -> None:
    watchdog = MemoryWatchdog("rss", min_growth_mb=32)
    kept = []
    with pytest.warns(MemoryGrowthWarning, match=r"rss memory growing: \+\d"):
        for step in range(30):
            kept.append(touched(BLOCK))  # the leak: every batch keeps its buffer
            verdict = watchdog.check(step)
    assert verdict.growing
    # Each batch kept 4 MiB; the estimate is of that order (RSS also moves for other reasons).
    assert 2.0 < verdict.mb_per_step < 8.0
    # RSS also moves with whatever else the process and machine do, so the trend of a real
    # leak is high but not perfect; the detector's own threshold is what flags it.
    assert verdict.trend >= watchdog.min_trend
    del kept


def test_steady_workload_is_not_flagged() -> None:
    gc.collect()
    watchdog = MemoryWatchdog("rss", min_growth_mb=32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryGrowthWarning)
        for step in range(30):
            buf = touched(BLOCK)  # allocated and freed every batch
            buf.sum()
            del buf
            verdict = watchdog.check(step)
    assert not verdict.growing, verdict.reason
    assert abs(verdict.growth) < 32 * MB
    assert len(watchdog.samples) == 30 and all(s.bytes > 0 for s in watchdog.samples)


def feed(watchdog: MemoryWatchdog, series) -> None:
    for value in series:
        watchdog.add(int(value))


def series(
    n: int = 30,
    *,
    slope_mb: float = 0.0,
    noise_mb: float = 0.0,
    step_at: int = -1,
    step_mb: float = 0.0,
    seed: int = 0,
) -> np.ndarray:
    rng = np.random.default_rng(seed)
    steps = np.arange(n)
    y = 500 * MB + slope_mb * MB * steps + rng.normal(scale=noise_mb * MB + 1e-9, size=n)
    if step_at >= 0:
        y[step_at:] += step_mb * MB
    return y


@pytest.mark.parametrize(
    ("name", "kwargs", "growing"),
    [
        ("noisy leak", dict(slope_mb=3.0, noise_mb=2.0), True),
        ("leak with outliers", dict(slope_mb=3.0, noise_mb=0.5), True),
        ("flat noise", dict(noise_mb=8.0), False),
        ("slow growth under the threshold", dict(slope_mb=0.5, noise_mb=0.1), False),
        (
            "one step up (a cache filling once)",
            dict(step_at=15, step_mb=200.0, noise_mb=1.0),
            False,
        ),
        ("shrinking", dict(slope_mb=-3.0, noise_mb=1.0), False),
    ],
)
def test_verdicts_on_series(name: str, kwargs: dict, growing: bool) -> None:
    y = series(**kwargs)
    if name == "leak with outliers":
        y[[8, 17, 25]] -= 300 * MB  # garbage-collection dips
    watchdog = MemoryWatchdog(min_growth_mb=32, source="rss")
    feed(watchdog, y)
    verdict = watchdog.verdict()
    assert verdict.growing is growing, verdict.reason


def test_warm_up_growth_is_ignored() -> None:
    y = np.concatenate([500 * MB + np.arange(5) * 100 * MB, np.full(25, 900 * MB)])
    watchdog = MemoryWatchdog("rss", warmup=5)
    feed(watchdog, y)
    assert not watchdog.verdict().growing
    counted = MemoryWatchdog("rss", warmup=0, window=30)
    feed(counted, y)
    assert counted.verdict().slope >= 0  # the ramp is visible when not skipped


def test_too_few_samples_is_no_verdict() -> None:
    watchdog = MemoryWatchdog("rss", warmup=3, min_samples=8)
    feed(watchdog, series(10, slope_mb=50.0))
    verdict = watchdog.verdict()
    assert not verdict.growing and "7 samples after warm-up, need 8" in verdict.reason


def test_only_the_window_is_judged() -> None:
    old_leak = series(20, slope_mb=10.0)
    now_flat = np.full(24, old_leak[-1])
    watchdog = MemoryWatchdog("rss", window=24)
    feed(watchdog, np.concatenate([old_leak, now_flat]))
    assert not watchdog.verdict().growing


def test_warns_once_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    recorded = iter(series(40, slope_mb=5.0).astype(int))
    watchdog = MemoryWatchdog("replay", meter=lambda: next(recorded), min_growth_mb=32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with caplog.at_level("WARNING", logger="attnswitch.observe.memwatch"):
            verdicts = [watchdog.check() for _ in range(40)]
    assert verdicts[-1].growing and not verdicts[0].growing
    assert len([w for w in caught if issubclass(w.category, MemoryGrowthWarning)]) == 1
    assert len([r for r in caplog.records if "growing" in r.getMessage()]) == 1
    assert watchdog.source == "replay" and len(watchdog.samples) == 40


def test_steps_must_increase() -> None:
    watchdog = MemoryWatchdog("rss")
    watchdog.add(1, step=5)
    with pytest.raises(ValueError, match="step: expected > 5, got 5"):
        watchdog.add(2, step=5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(source="gpu"), "source: expected one of"),
        (dict(min_samples=2), "expected window >= min_samples >= 3"),
        (dict(window=4, min_samples=8), "expected window >= min_samples >= 3"),
    ],
)
def test_bad_settings(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MemoryWatchdog(**kwargs)


def test_auto_is_rss_without_a_gpu() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: auto means cuda here")
    assert MemoryWatchdog().source == "rss"


def test_cuda_source_needs_a_gpu() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        watchdog = MemoryWatchdog("cuda")
        assert watchdog.sample() >= 0
    else:
        with pytest.raises(ValueError, match="expected a visible CUDA device"):
            MemoryWatchdog("cuda")


def test_jax_source_needs_memory_stats() -> None:
    jax = pytest.importorskip("jax")
    device = jax.devices()[0]
    if device.memory_stats():
        assert MemoryWatchdog("jax").sample() >= 0
    else:
        with pytest.raises(ValueError, match="expected a JAX device with memory stats"):
            MemoryWatchdog("jax")


@pytest.mark.gpu
def test_cuda_leak_is_flagged() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    watchdog = MemoryWatchdog("cuda", min_growth_mb=32, warn=False)
    kept = []
    for step in range(30):
        kept.append(torch.ones(BLOCK // 4, device="cuda"))
        verdict = watchdog.check(step)
    assert verdict.growing and 3.5 < verdict.mb_per_step < 4.5
    kept.clear()
    torch.cuda.empty_cache()
    steady = MemoryWatchdog("cuda", min_growth_mb=32, warn=False)
    for step in range(30):
        buf = torch.ones(BLOCK // 4, device="cuda")
        del buf
        verdict = steady.check(step)
    assert not verdict.growing, verdict.reason
