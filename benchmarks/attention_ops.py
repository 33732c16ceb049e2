"""Time every attention backend that serves each call, side by side in one process.

For a grid of realistic encoder and decoder shapes (float32 and bfloat16; plain, causal,
padded and packed), each backend that serves the call runs in its own framework's arrays,
round-robin so that machine noise hits all alike; the table gives medians, marks the
planner's pick (*) and the fastest (bold), and the pick's ratio to the fastest. A second
table measures the cost of `attnswitch.attention` over calling the chosen library function
directly. Writes markdown and a PNG plot.

    python benchmarks/attention_ops.py [--quick] [--reps N] [--out docs/results]
        [--write-autotune] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import attnswitch as asw
from attnswitch.kernels import arrays, autotune, registry
from attnswitch.kernels.cache import cpu_name
from attnswitch.kernels.contract import validate
from attnswitch.kernels.execute import timed_run, wait_for


@dataclass(frozen=True)
class Row:
    label: str
    batch: int
    seqlen: int
    heads_q: int
    heads_kv: int
    head_dim: int
    dtype: str
    feature: str  # plain | causal | padded | packed
    seqlen_k: int | None = None


CPU_GRID = [
    Row("encoder", 8, 512, 12, 12, 64, "float32", "plain"),
    Row("encoder", 8, 512, 12, 12, 64, "float32", "padded"),
    Row("encoder", 8, 512, 12, 12, 64, "float32", "packed"),
    Row("encoder", 8, 512, 12, 12, 64, "bfloat16", "plain"),
    Row("encoder", 8, 512, 12, 12, 64, "bfloat16", "padded"),
    Row("encoder-short", 32, 128, 12, 12, 64, "float32", "padded"),
    Row("encoder-short", 32, 128, 12, 12, 64, "bfloat16", "packed"),
    Row("decoder", 2, 1024, 16, 4, 64, "float32", "causal"),
    Row("decoder", 2, 1024, 16, 4, 64, "bfloat16", "causal"),
    Row("decoder-long", 1, 2048, 8, 2, 128, "bfloat16", "causal"),
    Row("decode-step", 8, 1, 16, 4, 64, "float32", "causal", seqlen_k=2048),
    Row("decode-step", 8, 1, 32, 8, 128, "bfloat16", "causal", seqlen_k=4096),
]
CUDA_GRID = [
    Row(f"gpu-{s}", b, s, h, h, d, "bfloat16", f)
    for (b, s) in ((16, 1024), (4, 4096), (1, 16384))
    for (h, d) in ((16, 64), (8, 128))
    for f in ("plain", "causal")
]
QUICK = [CPU_GRID[0], CPU_GRID[2], CPU_GRID[7]]


def make_inputs(row: Row, seed: int = 0) -> dict:
    """numpy inputs (bfloat16 through ml_dtypes) for a row; padded rows mask a random tail of
    keys per example; packed rows hold the same sequences as a padded batch would."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(row.dtype) if row.dtype != "bfloat16" else np.dtype("bfloat16")
    sk = row.seqlen_k or row.seqlen
    lengths = rng.integers(row.seqlen // 4, row.seqlen + 1, size=row.batch)
    lengths[0] = row.seqlen
    kw: dict = {}
    if row.feature == "packed":
        t = int(lengths.sum())
        q = rng.standard_normal((t, row.heads_q, row.head_dim)).astype(dt)
        k = rng.standard_normal((t, row.heads_kv, row.head_dim)).astype(dt)
        cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        kw = dict(cu_seqlens_q=cu, cu_seqlens_k=cu)
    else:
        q = rng.standard_normal((row.batch, row.seqlen, row.heads_q, row.head_dim)).astype(dt)
        k = rng.standard_normal((row.batch, sk, row.heads_kv, row.head_dim)).astype(dt)
        if row.feature == "padded":
            kw = dict(key_padding_mask=np.arange(sk)[None, :] < lengths[:, None])
        if row.feature == "causal":
            kw = dict(causal=True)
    v = rng.standard_normal(k.shape).astype(dt)
    return dict(q=q, k=k, v=v, **kw)


def to_framework(inputs: dict, framework: str, device: str) -> dict:
    out = {}
    for name, x in inputs.items():
        if isinstance(x, np.ndarray) and framework != "numpy":
            x = arrays.numpy_to(x, framework)
            if device != "cpu" and framework == "torch":
                x = x.to(device)
            elif device != "cpu" and framework == "jax":
                import jax

                x = jax.device_put(x, jax.devices("gpu" if device == "cuda" else device)[0])
        out[name] = x
    return out


def serving_backends(inputs_np: dict, device: str) -> dict[str, tuple]:
    """backend name -> (call, q, k, v) for every available backend that serves the row in
    its own framework's arrays."""
    found = {}
    for b in registry.backends():
        if b.unavailable() is not None or b.name == "reference":
            continue
        fw = "numpy" if b.framework == "numpy" else b.framework
        args = to_framework(inputs_np, fw, device)
        q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
        try:
            call = validate(q, k, v, **args)
        except asw.AttentionInputError:
            continue
        if not b.declines(call):
            found[b.name] = (call, q, k, v)
    return found


def time_row(row: Row, reps: int, device: str, skip: set[str] = frozenset()) -> dict:
    inputs = make_inputs(row)
    serving = {n: v for n, v in serving_backends(inputs, device).items() if n not in skip}
    torch_args = to_framework(inputs, "torch", device)
    q, k, v = torch_args.pop("q"), torch_args.pop("k"), torch_args.pop("v")
    plan = asw.explain(q, k, v, **torch_args)
    times: dict[str, list[float]] = {name: [] for name in serving}
    for name, (call, bq, bk, bv) in serving.items():  # warm-up: compile, caches
        for _ in range(2):
            timed_run(name, bq, bk, bv, call)
    for _ in range(reps):
        for name, (call, bq, bk, bv) in serving.items():
            times[name].append(timed_run(name, bq, bk, bv, call))
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    return dict(row=row, medians=medians, pick=plan.chosen, plan=plan, call=plan.call)


OVERHEAD_ROWS = [
    Row("encoder", 8, 512, 12, 12, 64, "float32", "plain"),
    Row("decode-step", 8, 1, 16, 4, 64, "float32", "causal", seqlen_k=2048),
]


def _direct_sdpa(q, k, v, row: Row):
    """The SDPA call torch-sdpa makes for `row`, written out by hand: BHSD views, and for a
    GQA decode step the query heads of each group folded into rows of their key/value head
    (see backends/torch_sdpa.py)."""
    import torch.nn.functional as F

    from attnswitch.kernels.backends.torch_sdpa import _fold_groups, _unfold_groups

    kh, vh = k.transpose(1, 2), v.transpose(1, 2)
    if row.heads_q != row.heads_kv:
        out = F.scaled_dot_product_attention(_fold_groups(q, row.heads_kv), kh, vh)
        return _unfold_groups(out, row.seqlen, row.heads_q)
    return F.scaled_dot_product_attention(q.transpose(1, 2), kh, vh).transpose(1, 2)


def overhead(reps: int, device: str) -> list[dict]:
    """attnswitch.attention against the same kernel call made directly, interleaved call by
    call, for an encoder call and a decode step (`OVERHEAD_ROWS`), plus the host cost of
    validation and a cached plan alone."""
    results = []
    for row in OVERHEAD_ROWS:
        args = to_framework(make_inputs(row), "torch", device)
        q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
        chosen = asw.explain(q, k, v, **args).chosen
        n = reps if row.seqlen > 1 else reps * 10  # a decode step is short: more of them

        def direct():
            return _direct_sdpa(q, k, v, row)

        def through():
            return asw.attention(q, k, v, **args)

        for fn in (direct, through, direct, through):
            wait_for(fn())
        t = {"direct": [], "attnswitch": []}
        for _ in range(n):
            for label, fn in (("direct", direct), ("attnswitch", through)):
                start = time.perf_counter()
                wait_for(fn())
                t[label].append(time.perf_counter() - start)
        calls = 2000
        start = time.perf_counter()
        for _ in range(calls):
            asw.explain(q, k, v, **args)
        plan_us = (time.perf_counter() - start) / calls * 1e6
        med = {key: statistics.median(val) for key, val in t.items()}
        results.append(
            dict(
                row=row,
                chosen=chosen,
                direct=med["direct"],
                through=med["attnswitch"],
                ratio=med["attnswitch"] / med["direct"],
                plan_us=plan_us,
                reps=n,
            )
        )
    return results


def flops(row: Row) -> float:
    """Forward FLOPs of one call: two matmuls of 2*Sq*Sk*D per head, halved under causal
    (packed and padded rows are counted as full, an upper bound)."""
    sk = row.seqlen_k or row.seqlen
    total = 4.0 * row.batch * row.heads_q * row.seqlen * sk * row.head_dim
    return total / 2 if row.feature == "causal" and row.seqlen == sk else total


def fmt_ms(s: float) -> str:
    return f"{s * 1e3:.2f}"


def tflops_table(results: list[dict], peak: float) -> list[str]:
    """TFLOP/s per backend and as a fraction of the device's peak dense bf16 rate."""
    names = sorted({n for r in results for n in r["medians"]})
    lines = [
        "",
        f"## Throughput (TFLOP/s; fraction of the {peak:.0f} TFLOP/s peak dense bf16 rate)",
        "",
        "| shape | feature | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for r in results:
        row, med = r["row"], r["medians"]
        cells = []
        for n in names:
            if n not in med:
                cells.append("—")
                continue
            tf = flops(row) / med[n] / 1e12
            cells.append(f"{tf:.1f} ({tf / peak:.0%})")
        lines.append(
            f"| B{row.batch} S{row.seqlen} H{row.heads_q} D{row.head_dim} {row.dtype} "
            f"| {row.feature} | " + " | ".join(cells) + " |"
        )
    return lines


def overhead_lines(ov: list[dict]) -> list[str]:
    """The markdown table of `overhead` results."""
    lines = [
        "",
        "## Cost of the attnswitch call",
        "",
        "`attnswitch.attention` against the same SDPA call written by hand (for the GQA "
        "decode step: query heads folded per key/value head, as torch-sdpa does), "
        "interleaved call by call; `validate + plan` is the host cost of validation and "
        "a cached plan alone (`attnswitch.explain`).",
        "",
        "| call | backend | calls each | direct (ms) | attnswitch.attention (ms) | ratio "
        "| validate + plan (µs) |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in ov:
        row = o["row"]
        shape = (
            f"B{row.batch} S{row.seqlen}"
            + (f"x{row.seqlen_k}" if row.seqlen_k else "")
            + (f" H{row.heads_q}/{row.heads_kv} D{row.head_dim} {row.dtype}")
        )
        lines.append(
            f"| {row.label} {shape} | `{o['chosen']}` | {o['reps']} | {fmt_ms(o['direct'])} "
            f"| {fmt_ms(o['through'])} | {o['ratio']:.3f} | {o['plan_us']:.1f} |"
        )
    return lines


def markdown(
    results: list[dict], ov: list[dict] | None, meta: str, peak: float | None = None
) -> str:
    names = sorted({n for r in results for n in r["medians"]})
    lines = [
        "# Attention backends side by side",
        "",
        meta,
        "",
        "Median milliseconds per call; `*` = the planner's pick for torch input, **bold** = "
        "fastest. `pick/fastest` compares the pick with the fastest backend that serves the "
        "same torch call (jax backends run on jax arrays and are shown for comparison).",
        "",
        "| shape | dtype | feature | " + " | ".join(names) + " | pick/fastest |",
        "|---|---|---|" + "---|" * len(names) + "---|",
    ]
    for r in results:
        row, med = r["row"], r["medians"]
        torch_serving = {n: t for n, t in med.items() if registry.get(n).framework == "torch"}
        fastest = min(med, key=med.get)
        cells = []
        for n in names:
            if n not in med:
                cells.append("—")
                continue
            cell = fmt_ms(med[n]) + ("*" if n == r["pick"] else "")
            cells.append(f"**{cell}**" if n == fastest else cell)
        best_torch = min(torch_serving.values()) if torch_serving else float("nan")
        ratio = med.get(r["pick"], float("nan")) / best_torch
        shape = (
            f"B{row.batch} S{row.seqlen}"
            + (f"x{row.seqlen_k}" if row.seqlen_k else "")
            + (f" H{row.heads_q}/{row.heads_kv} D{row.head_dim}")
        )
        lines.append(
            f"| {row.label} {shape} | {row.dtype} | {row.feature} | "
            + " | ".join(cells)
            + f" | {ratio:.2f} |"
        )
    if peak:
        lines += tflops_table(results, peak)
    if ov:
        lines += overhead_lines(ov)
    return "\n".join(lines) + "\n"


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({n for r in results for n in r["medians"]})
    fig, ax = plt.subplots(figsize=(max(8, len(results) * 1.1), 5))
    width = 0.8 / max(len(names), 1)
    for i, n in enumerate(names):
        xs = [j + i * width for j, r in enumerate(results) if n in r["medians"]]
        ys = [r["medians"][n] * 1e3 for r in results if n in r["medians"]]
        ax.bar(xs, ys, width, label=n)
    labels = [f"{r['row'].label}\n{r['row'].dtype[:4]} {r['row'].feature}" for r in results]
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(results))], labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("median ms per call (log)")
    ax.set_title("attnswitch backends side by side")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def autotune_entries(results: list[dict]) -> dict[str, list[str]]:
    out = {}
    for r in results:
        torch_med = {n: t for n, t in r["medians"].items() if registry.get(n).framework == "torch"}
        if torch_med:
            out[autotune.bucket(r["call"])] = sorted(torch_med, key=torch_med.get)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three rows, for a smoke run")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", default="docs/results")
    parser.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="the device's peak dense bf16 TFLOP/s, for the throughput table",
    )
    parser.add_argument(
        "--skip",
        nargs="*",
        default=[],
        help="backends to leave out (e.g. materialising ones at long lengths)",
    )
    parser.add_argument(
        "--write-autotune",
        action="store_true",
        help="record the measured order for the planner (autotune.json)",
    )
    parser.add_argument(
        "--overhead-only",
        action="store_true",
        help="only the cost of the attnswitch call (attention_overhead_*.md)",
    )
    args = parser.parse_args(argv)
    if args.overhead_only:
        return overhead_main(args)
    grid = QUICK if args.quick else (CUDA_GRID if args.device == "cuda" else CPU_GRID)
    results = []
    for row in grid:
        r = time_row(row, args.reps, args.device, skip=set(args.skip))
        results.append(r)
        print(
            f"{row.label:<14} {row.dtype:<9} {row.feature:<7} pick={r['pick']:<12} "
            + "  ".join(f"{n}={fmt_ms(t)}" for n, t in sorted(r["medians"].items())),
            flush=True,
        )
    ov = overhead(max(args.reps * 3, 20), args.device)
    meta = (
        f"{device_text(args.device)}, {args.reps} reps per backend, median. Command: "
        f"`python benchmarks/attention_ops.py{' --quick' if args.quick else ''}"
        f"{' --device ' + args.device if args.device != 'cpu' else ''}`."
    )
    text = markdown(results, ov, meta, args.peak_tflops)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"attention_ops_{args.device}"
    (out / f"{stem}.md").write_text(text)
    plot(results, out / f"{stem}.png")
    print(f"wrote {out / (stem + '.md')} and {out / (stem + '.png')}")
    if args.write_autotune:
        print(f"autotune table: {autotune.record(autotune_entries(results))}")
    return 0


def device_text(device: str) -> str:
    """The device, its ISA (CPU) and the library versions, for a results file."""
    import torch

    if device == "cpu":
        label = f"{cpu_name()}, ISA {torch.backends.cpu.get_cpu_capability()}"
    else:
        label = torch.cuda.get_device_name()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"Device: {device} ({label}), {torch.get_num_threads()} torch threads, "
        f"load average {load:.1f} at the end, torch {torch.__version__}, "
        f"attnswitch {asw.__version__}"
    )


def overhead_main(args: argparse.Namespace) -> int:
    reps = max(args.reps * 3, 20)
    ov = overhead(reps, args.device)
    meta = (
        f"{device_text(args.device)}. Medians. Command: `python benchmarks/attention_ops.py "
        f"--overhead-only{' --reps ' + str(args.reps) if args.reps != 7 else ''}"
        f"{' --device ' + args.device if args.device != 'cpu' else ''}`."
    )
    text = "\n".join(["# Cost of the attnswitch call", "", meta, *overhead_lines(ov)[3:]]) + "\n"
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"attention_overhead_{args.device}.md"
    path.write_text(text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
