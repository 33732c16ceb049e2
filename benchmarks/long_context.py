"""Long context: one 32,768-token sequence through memory-efficient backends, beside what the
dense score matrix would need.

Each backend runs in its own subprocess, so the peak resident memory (`ru_maxrss`) belongs to
that backend alone. Per backend: resident memory before the call (interpreter, framework and
inputs), the peak during the calls, the first call's time (with compilation) and the median
of the later ones, and the largest error of a sample of output rows against a float64
recomputation of those rows (so a fast wrong answer shows). The dense `[H, S, S]` float32
score matrix that plain attention materialises is computed, not run.

    python benchmarks/long_context.py [--seqlen 32768] [--heads 8] [--head-dim 64]
        [--causal] [--repeats 2] [--backends jax-blockwise,torch-sdpa] [--out docs/results]

Writes `long_context.md` and `long_context.png` into `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

GIB = 2**30
SAMPLE_ROWS = 32


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux


def _inputs(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    shape = (1, args.seqlen, args.heads, args.head_dim)
    return tuple(rng.standard_normal(shape, dtype=np.float32) for _ in range(3))


def _sample_error(
    out: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool
) -> float:
    """Max |out - exact| over SAMPLE_ROWS query rows, recomputed in float64 (Sq = Sk, so
    bottom-right causal is j <= i)."""
    rows = np.linspace(0, q.shape[1] - 1, SAMPLE_ROWS).astype(int)
    qs = q[0, rows].astype(np.float64)  # [R, H, D]
    scores = np.einsum("rhd,khd->hrk", qs, k[0].astype(np.float64)) / np.sqrt(q.shape[-1])
    if causal:
        scores = np.where(
            np.arange(k.shape[1])[None, None, :] <= rows[None, :, None], scores, -np.inf
        )
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    exact = np.einsum("hrk,khd->rhd", p, v[0].astype(np.float64))
    return float(np.abs(out[0, rows].astype(np.float64) - exact).max())


def child(args: argparse.Namespace) -> dict:
    """Run one backend in this process and report its figures."""
    import attnswitch as asw
    from attnswitch.kernels import arrays, registry

    name = args.child
    result: dict = {"backend": name}
    backend = registry.get(name)
    if backend is None:
        return {**result, "status": "not registered"}
    if (why := backend.unavailable()) is not None:
        return {**result, "status": f"unavailable: {why}"}
    q, k, v = _inputs(args)
    framework = backend.framework
    tq, tk, tv = (arrays.numpy_to(x, framework) for x in (q, k, v))
    result["rss_before"] = _rss()
    result["peak_before"] = _peak_rss()

    def call():
        out = asw.attention(tq, tk, tv, causal=args.causal, backend=name)
        if framework == "jax":
            out.block_until_ready()
        return out

    times = []
    try:
        for _ in range(args.repeats):
            start = time.perf_counter()
            out = call()
            times.append(time.perf_counter() - start)
    except asw.NoBackendError as exc:
        return {**result, "status": "declined: " + "; ".join(exc.plan.reasons(name))}
    result["peak"] = _peak_rss()
    result.update(
        status="ran",
        first_s=times[0],
        later_s=statistics.median(times[1:]) if len(times) > 1 else None,
        max_error=_sample_error(arrays.to_numpy(out), q, k, v, args.causal),
    )
    return result


def run_child(args: argparse.Namespace, name: str) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        name,
        "--seqlen",
        str(args.seqlen),
        "--heads",
        str(args.heads),
        "--head-dim",
        str(args.head_dim),
        "--repeats",
        str(args.repeats),
    ] + (["--causal"] if args.causal else [])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"backend": name, "status": f"failed (exit {proc.returncode}): {tail}"}
    return json.loads(lines[-1])


def _gib(x: float | None) -> str:
    return "" if x is None else f"{x / GIB:.2f}"


def _secs(x: float | None) -> str:
    return "" if x is None else f"{x:.1f}"


def table(args: argparse.Namespace, results: list[dict]) -> str:
    dense = args.heads * args.seqlen**2 * 4
    lines = [
        f"# Long context: one sequence of {args.seqlen:,} tokens",
        "",
        f"B=1, H={args.heads}, D={args.head_dim}, float32, "
        f"{'causal' if args.causal else 'non-causal'}; {os.cpu_count()} CPU cores "
        f"({platform.machine()}), Python {platform.python_version()}. Each backend in its own "
        'process; memory is resident set size (RSS). "Before" holds the interpreter, the '
        'framework and the inputs; "peak" is the process maximum over all calls. The error is '
        f"the largest over {SAMPLE_ROWS} output rows against float64. Load average "
        f"(1 min) at the start and end of the run: {args.load[0]:.1f} and {args.load[1]:.1f}: "
        "other work on the machine slows both backends alike.",
        "",
        "| backend | status | RSS before (GiB) | peak RSS (GiB) | peak - before (GiB) "
        "| first call (s) | later calls (s) | max error (sampled rows) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        grew = r["peak"] - r["rss_before"] if "peak" in r else None
        err = f"{r['max_error']:.2e}" if "max_error" in r else ""
        lines.append(
            f"| {r['backend']} | {r['status']} | {_gib(r.get('rss_before'))} | "
            f"{_gib(r.get('peak'))} | {_gib(grew)} | {_secs(r.get('first_s'))} | "
            f"{_secs(r.get('later_s'))} | {err} |"
        )
    lines.append(
        f"| dense [H, S, S] float32 scores (computed, not run) | - | | {_gib(dense)} | | | | |"
    )
    return "\n".join(lines) + "\n"


def plot(args: argparse.Namespace, results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ran = [r for r in results if r.get("status") == "ran"]
    dense = args.heads * args.seqlen**2 * 4 / GIB
    fig, (ax_mem, ax_time) = plt.subplots(1, 2, figsize=(10, 4))
    names = [r["backend"] for r in ran]
    ax_mem.bar(names, [r["peak"] / GIB for r in ran], color="tab:blue", label="peak RSS")
    ax_mem.bar(
        names, [r["rss_before"] / GIB for r in ran], color="tab:gray", label="before the call"
    )
    ax_mem.axhline(dense, color="tab:red", linestyle="--", label=f"dense scores {dense:.0f} GiB")
    ax_mem.set_yscale("log")
    ax_mem.set_ylabel("GiB (log scale)")
    ax_mem.set_title(f"Memory, S = {args.seqlen:,}")
    ax_mem.legend(fontsize=8)
    later = [r["later_s"] or r["first_s"] for r in ran]
    ax_time.bar(names, later, color="tab:green")
    ax_time.set_ylabel("seconds per call")
    ax_time.set_title("Time (after the first call)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqlen", type=int, default=32768)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--backends", default="jax-blockwise,torch-sdpa")
    parser.add_argument("--out", default="docs/results")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args)), flush=True)
        return
    results = []
    start_load = os.getloadavg()[0]
    for name in args.backends.split(","):
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results.append(run_child(args, name))
    args.load = (start_load, os.getloadavg()[0])
    text = table(args, results)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "long_context.md").write_text(text)
    plot(args, results, out / "long_context.png")


if __name__ == "__main__":
    main()
