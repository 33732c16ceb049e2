"""Softcap in float32 on JAX: how accurate each tanh is, what the error does to conformance,
and what the accurate tanh costs jax-blockwise.

1. ulp error of float32 tanh against float64 (numpy, torch, XLA's `jnp.tanh` on the
   device, `jax_common.accurate_tanh`) over |x| in [1e-30, 30].
2. Softcap cases judged by the conformance rule: jax-blockwise with XLA's tanh and with the
   accurate one, pallas-splash (Pallas interpret mode off a TPU) against the strict baseline
   (numpy's tanh) and the stated one (the device's tanh, `conformance.kernel_tanh_baseline`).
   Each cell is error / (rtol * naive error + floor): at most 1 passes.
3. jax-blockwise forward time with each tanh, medians of interleaved runs, and the ratio.

    python benchmarks/softcap_tanh.py [--reps N] [--out docs/results] [--no-splash]

Prints markdown tables (with the CPU model and its ISA flags) and writes
`softcap_tanh.md` and `softcap_tanh.png` under --out.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np


def isa_flags() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            wanted = sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "sse4")))
            return " ".join(wanted)
    return "unknown"


def tanh_inputs() -> np.ndarray:
    grid = np.linspace(-30, 30, 3_000_001, dtype=np.float32)
    tiny = np.float32(10) ** np.linspace(-30, 1.5, 200_001, dtype=np.float32)
    return np.concatenate([grid, tiny, -tiny]).astype(np.float32)


def ulp_errors() -> list[tuple[str, float, float]]:
    """(name, max ulp error, 99.9th percentile) of each float32 tanh."""
    import jax
    import jax.numpy as jnp

    from attnswitch.kernels import jax_common

    x = tanh_inputs()
    exact = np.tanh(x.astype(np.float64))
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    candidates = {
        "numpy float32 tanh": lambda: np.tanh(x),
        f"XLA jnp.tanh ({jax.devices()[0].platform})": lambda: np.asarray(jax.jit(jnp.tanh)(x)),
        "jax_common.accurate_tanh": lambda: np.asarray(jax.jit(jax_common.accurate_tanh)(x)),
    }
    try:
        import torch

        candidates["torch float32 tanh (cpu)"] = lambda: torch.tanh(torch.from_numpy(x)).numpy()
    except ImportError:
        pass
    rows = []
    for name, fn in candidates.items():
        err = np.abs(fn().astype(np.float64) - exact) / ulp
        rows.append((name, float(err.max()), float(np.percentile(err, 99.9))))
    return rows


@contextlib.contextmanager
def xla_tanh() -> Iterator[None]:
    """jax-blockwise's softcap with XLA's `jnp.tanh` instead of the accurate one (for
    programs traced inside this block)."""
    import jax.numpy as jnp

    from attnswitch.kernels import jax_common

    accurate = jax_common.accurate_tanh
    jax_common.accurate_tanh = jnp.tanh
    jax_common._compiled.cache_clear()
    try:
        yield
    finally:
        jax_common.accurate_tanh = accurate
        jax_common._compiled.cache_clear()


# Softcap cases: (label, magnitude, softcap, B, Sq, Sk, H, D, window). The magnitudes put the
# logits across tanh's range, as FlashAttention's tests do (q scaled towards the cap).
CASES = [
    ("softcap-30 (grid)", 3.0, 30.0, 2, 113, 203, 4, 64, None),
    ("softcap-30 m12", 12.0, 30.0, 2, 113, 203, 4, 64, None),
    ("softcap-30 m40", 40.0, 30.0, 2, 113, 203, 4, 32, None),
    ("softcap-50 window", 25.0, 50.0, 4, 113, 203, 4, 32, (123, 157)),
    ("softcap-50 causal", 60.0, 50.0, 2, 128, 256, 4, 32, None),
]


def rule_ratios(with_splash: bool) -> list[tuple[str, dict[str, float]]]:
    from attnswitch.kernels import conformance
    from attnswitch.kernels.contract import validate

    rows = []
    for label, magnitude, cap, b, sq, sk, h, d, window in CASES:
        case = conformance.Case(
            label,
            batch=b,
            seqlen_q=sq,
            seqlen_k=sk,
            heads_q=h,
            heads_kv=h,
            head_dim=d,
            softcap=cap,
            magnitude=magnitude,
            window=window,
            causal="causal" in label,
        )
        cells: dict[str, float] = {}
        result = conformance.check("jax-blockwise", case)
        cells["jax-blockwise accurate"] = result.error / result.bound
        with xla_tanh():
            result = conformance.check("jax-blockwise", case)
        cells["jax-blockwise XLA tanh"] = result.error / result.bound
        if with_splash:
            result = conformance.check("pallas-splash", case, force=True)
            cells["pallas-splash, device-tanh baseline"] = result.error / result.bound
            inputs = conformance.make_inputs(case)
            q, k, v = inputs.pop("q"), inputs.pop("k"), inputs.pop("v")
            ref, _, naive, _ = conformance._expected_for(case)  # numpy's tanh
            strict = conformance._error_and_bound(ref, ref, naive, validate(q, k, v, **inputs))[1]
            cells["pallas-splash, strict baseline"] = result.error / strict
        rows.append((label, cells))
    return rows


TIMED = [  # (label, B, S, H, D, dtype)
    ("encoder B8 S512 H12 D64", 8, 512, 12, 64, "float32"),
    ("decoder B2 S1024 H16 D64", 2, 1024, 16, 64, "float32"),
    ("encoder B8 S512 H12 D64", 8, 512, 12, 64, "bfloat16"),
]


def timings(reps: int) -> list[tuple[str, float, float]]:
    """(label, median ms with the accurate tanh, median ms with XLA's) for causal softcap,
    the two compiled programs run interleaved so that machine noise hits both alike."""
    import jax
    import jax.numpy as jnp

    rows = []
    for label, b, s, h, d, dtype in TIMED:
        rng = np.random.default_rng(0)
        q, k, v = (jnp.asarray(rng.standard_normal((b, s, h, d)) * 4, dtype) for _ in range(3))
        accurate_fn = _compiled_blockwise(q, k, v)
        with xla_tanh():
            xla_fn = _compiled_blockwise(q, k, v)
        times: dict[str, list[float]] = {"accurate": [], "xla": []}
        pair = [("accurate", accurate_fn), ("xla", xla_fn)]
        for i in range(reps + 1):  # the first round warms up
            for name, fn in pair if i % 2 == 0 else pair[::-1]:
                t0 = time.perf_counter()
                jax.block_until_ready(fn())
                if i:
                    times[name].append(time.perf_counter() - t0)
        rows.append(
            (
                f"{label} {dtype}",
                1e3 * statistics.median(times["accurate"]),
                1e3 * statistics.median(times["xla"]),
            )
        )
    return rows


def _compiled_blockwise(q, k, v):
    """jax-blockwise's program for a causal softcap call, compiled now (so inside `xla_tanh`
    it keeps XLA's tanh)."""
    import jax

    from attnswitch.kernels.backends import jax_blockwise
    from attnswitch.kernels.contract import validate

    call = validate(q, k, v, causal=True, softcap=30.0)
    fn = jax.jit(
        lambda q, k, v: jax_blockwise.attend(
            q, k, v, call, jax_blockwise.BLOCK_Q, jax_blockwise.BLOCK_K
        )
    )
    compiled = fn.lower(q, k, v).compile()
    return lambda: compiled(q, k, v)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--out", type=Path, default=Path("docs/results"))
    parser.add_argument(
        "--no-splash",
        action="store_true",
        help="skip pallas-splash (slow in interpret mode off a TPU)",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("ATTNSWITCH_PALLAS_INTERPRET", "1")

    import jax

    from attnswitch.kernels.cache import cpu_name

    lines = [
        "# Softcap in float32 on JAX",
        "",
        f"Device: {jax.devices()[0].platform} ({jax.devices()[0].device_kind}); CPU: "
        f"{cpu_name()}; ISA: {isa_flags()}; jax {jax.__version__}.",
        "",
        "## float32 tanh error (ulp against float64, |x| in [1e-30, 30])",
        "",
        "| tanh | max ulp | 99.9th percentile |",
        "|---|---|---|",
    ]
    for name, worst, p999 in ulp_errors():
        lines.append(f"| {name} | {worst:.2f} | {p999:.2f} |")
    ratios = rule_ratios(not args.no_splash)
    columns = list(ratios[0][1])
    lines += [
        "",
        "## error / bound by the conformance rule (<= 1 passes)",
        "",
        "| case | " + " | ".join(columns) + " |",
        "|---" * (len(columns) + 1) + "|",
    ]
    for label, cells in ratios:
        lines.append(f"| {label} | " + " | ".join(f"{cells[c]:.2f}" for c in columns) + " |")
    times = timings(args.reps)
    lines += [
        "",
        f"## jax-blockwise causal softcap forward, median of {args.reps} (ms)",
        "",
        "| call | accurate tanh | XLA tanh | ratio |",
        "|---|---|---|---|",
    ]
    for label, acc, xla in times:
        lines.append(f"| {label} | {acc:.1f} | {xla:.1f} | {acc / xla:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "softcap_tanh.md").write_text(text)
    _plot(times, args.out / "softcap_tanh.png")
    return 0


def _plot(times: list[tuple[str, float, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3))
    y = np.arange(len(times))
    ax.barh(y - 0.2, [t[1] for t in times], 0.4, label="accurate tanh")
    ax.barh(y + 0.2, [t[2] for t in times], 0.4, label="XLA tanh")
    ax.set_yticks(y, [t[0] for t in times])
    ax.set_xlabel("ms (median)")
    ax.set_title("jax-blockwise causal softcap forward")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
