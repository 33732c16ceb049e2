"""What first-use verification costs: the first call on a new fingerprint, and every call after.

- First call: each policy (`first-use`, `off`) in its own fresh process with an empty cache
  directory, the two alternating, `--procs` processes each. A process imports torch and
  attnswitch, builds its inputs and plans the call (`explain`: backend probes, which import
  jax, cost the same under both policies and would only add noise) before the clock starts;
  the time is one `attnswitch.attention` call (self-check and kernel). The self-check alone
  is timed in the same call, with the cases it chose.
- Later calls: one process; after each policy's first call, calls alternate one by one
  between the policies (`ATTNSWITCH_VERIFY`, so both plans stay cached), `--calls` each per
  round for `--rounds` rounds; the per-call median of each round, then the median over
  rounds. Kernel time dominates there and is noisy, so the attnswitch layer alone (validate,
  cached plan, the verification gate `attention` runs before the kernel) is timed the same
  way, in microseconds.

Writes markdown and a PNG plot. The machine is shared and noisy: compare side by side.

    python benchmarks/first_use_verification.py [--procs 5] [--calls 300] [--rounds 7]
        [--out docs/results] [--layer-only]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

KINDS = {
    "encoder-fp32": "encoder B8 S128 H12 D64 float32, key padding",
    "encoder-bf16": "encoder B8 S128 H12 D64 bfloat16, key padding",
    "decode-fp32": "decode step B8 Sq1 Sk2048 H16/4 D64 float32, causal",
    "packed-fp32": "packed 3 sequences T400 H12 D64 float32",
}
POLICIES = ("first-use", "off")
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16")


def inputs(kind: str) -> dict[str, Any]:
    """Torch arguments of one call of `kind`."""
    import torch

    g = torch.Generator().manual_seed(0)
    dtype = torch.bfloat16 if kind.endswith("bf16") else torch.float32
    rand = lambda *s: torch.randn(*s, generator=g).to(dtype)  # noqa: E731
    if kind.startswith("encoder"):
        lengths = torch.tensor([128, 100, 77, 128, 40, 128, 9, 128])
        q, k, v = rand(8, 128, 12, 64), rand(8, 128, 12, 64), rand(8, 128, 12, 64)
        return dict(q=q, k=k, v=v, key_padding_mask=torch.arange(128)[None] < lengths[:, None])
    if kind.startswith("decode"):
        return dict(
            q=rand(8, 1, 16, 64), k=rand(8, 2048, 4, 64), v=rand(8, 2048, 4, 64), causal=True
        )
    cu = torch.tensor([0, 100, 350, 400], dtype=torch.int32)
    return dict(
        q=rand(400, 12, 64),
        k=rand(400, 12, 64),
        v=rand(400, 12, 64),
        cu_seqlens_q=cu,
        cu_seqlens_k=cu,
    )


def child(kind: str) -> None:
    """One fresh process: the first call of `kind` under $ATTNSWITCH_VERIFY, as JSON."""
    import attnswitch as asw
    from attnswitch.kernels import verify

    checks: list[dict] = []
    original = verify.check_before_use

    def timed(name: str, call: Any, policy: str) -> Any:
        start = time.perf_counter()
        verdict = original(name, call, policy)
        checks.append(
            {
                "backend": name,
                "seconds": time.perf_counter() - start,
                "cases": verdict.labels if verdict else [],
                "passed": bool(verdict and verdict.passed),
            }
        )
        return verdict

    verify.check_before_use = timed
    args = inputs(kind)
    asw.explain(**args)
    start = time.perf_counter()
    asw.attention(**args)
    first = time.perf_counter() - start
    plan = asw.explain(**args)
    print(json.dumps({"first_s": first, "checks": checks, "chosen": plan.chosen}))


def first_calls(procs: int) -> dict[str, dict[str, list[dict]]]:
    out: dict[str, dict[str, list[dict]]] = {k: {p: [] for p in POLICIES} for k in KINDS}
    for kind in KINDS:
        for i in range(procs):
            for policy in POLICIES if i % 2 == 0 else POLICIES[::-1]:
                with tempfile.TemporaryDirectory(prefix="attnswitch-bench-cache-") as cache:
                    env = dict(os.environ, ATTNSWITCH_CACHE_DIR=cache, ATTNSWITCH_VERIFY=policy)
                    done = subprocess.run(
                        [sys.executable, __file__, "--child", kind],
                        env=env,
                        check=True,
                        capture_output=True,
                        text=True,
                        timeout=600,
                    )
                out[kind][policy].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(
                f"{kind:<13} process {i + 1}/{procs}: "
                + "  ".join(f"{p}={out[kind][p][-1]['first_s'] * 1e3:.0f} ms" for p in POLICIES),
                flush=True,
            )
    return out


def later_calls(calls: int, rounds: int) -> dict[str, float]:
    """Median seconds per call of encoder-fp32 under each policy, after its first call."""
    import attnswitch as asw

    args = inputs("encoder-fp32")
    medians: dict[str, list[float]] = {p: [] for p in POLICIES}
    with tempfile.TemporaryDirectory(prefix="attnswitch-bench-cache-") as cache:
        os.environ["ATTNSWITCH_CACHE_DIR"] = cache
        for policy in POLICIES:
            os.environ["ATTNSWITCH_VERIFY"] = policy
            asw.attention(**args)
        for _ in range(rounds):
            times: dict[str, list[float]] = {p: [] for p in POLICIES}
            for i in range(calls):
                for policy in POLICIES if i % 2 == 0 else POLICIES[::-1]:
                    os.environ["ATTNSWITCH_VERIFY"] = policy
                    start = time.perf_counter()
                    asw.attention(**args)
                    times[policy].append(time.perf_counter() - start)
            for policy in POLICIES:
                medians[policy].append(statistics.median(times[policy]))
    return {p: statistics.median(m) for p, m in medians.items()}


def layer_overhead(calls: int, rounds: int) -> dict[str, float]:
    """Median seconds per call of validate + cached plan + the verification gate of
    encoder-fp32, per policy, after each policy's first call (no kernel)."""
    import attnswitch as asw
    from attnswitch.kernels.contract import validate
    from attnswitch.kernels.plan import plan_for

    args = inputs("encoder-fp32")
    q, k, v, mask = args["q"], args["k"], args["v"], args["key_padding_mask"]
    medians: dict[str, list[float]] = {p: [] for p in POLICIES}
    for policy in POLICIES:
        os.environ["ATTNSWITCH_VERIFY"] = policy
        asw.attention(**args)
    for _ in range(rounds):
        times: dict[str, list[float]] = {p: [] for p in POLICIES}
        for i in range(calls):
            for policy in POLICIES if i % 2 == 0 else POLICIES[::-1]:
                os.environ["ATTNSWITCH_VERIFY"] = policy
                start = time.perf_counter()
                plan = plan_for(validate(q, k, v, key_padding_mask=mask))
                gate = bool(plan.unverified) and plan.chosen in plan.unverified
                times[policy].append(time.perf_counter() - start)
                assert not gate
        for policy in POLICIES:
            medians[policy].append(statistics.median(times[policy]))
    return {p: statistics.median(m) for p, m in medians.items()}


def cpu_description() -> str:
    from attnswitch.kernels.cache import cpu_name

    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    have = [f for f in ISA_FLAGS if f in flags]
    return f"{cpu_name()}, {os.cpu_count()} logical CPUs, ISA: {' '.join(have) or 'unknown'}"


def report(
    first: dict, later: dict[str, float], layer: dict[str, float], args: argparse.Namespace
) -> str:
    import torch

    import attnswitch as asw

    command = (
        f"python benchmarks/first_use_verification.py --procs {args.procs} "
        f"--calls {args.calls} --rounds {args.rounds}"
    )
    lines = [
        "# First-use verification: cost of the first call and of later calls",
        "",
        f"CPU: {cpu_description()}. torch {torch.__version__}, attnswitch {asw.__version__}, "
        f"load average {os.getloadavg()[0]:.1f} at the end. Command: `{command}`.",
        "",
        "## First call on a fresh cache directory",
        "",
        f"Median of {args.procs} fresh processes per policy, alternating. `first call` is the "
        "first `attnswitch.attention` call after `explain` planned it (self-check and kernel); "
        "`self-check` is the check alone, within it; `extra` is first-use minus off.",
        "",
        "| call | chosen | first call, off (ms) | first call, first-use (ms) | extra (ms) "
        "| self-check (ms) | cases run |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, label in KINDS.items():
        off = statistics.median(r["first_s"] for r in first[kind]["off"]) * 1e3
        on_runs = first[kind]["first-use"]
        on = statistics.median(r["first_s"] for r in on_runs) * 1e3
        check = statistics.median(sum(c["seconds"] for c in r["checks"]) for r in on_runs) * 1e3
        cases = ", ".join(f"{c['backend']}: {' '.join(c['cases'])}" for c in on_runs[0]["checks"])
        lines.append(
            f"| {label} | {on_runs[0]['chosen']} | {off:.0f} | {on:.0f} | "
            f"{on - off:+.0f} | {check:.0f} | {cases} |"
        )
    ratio = later["first-use"] / later["off"]
    lines += [
        "",
        "## Later calls",
        "",
        f"{KINDS['encoder-fp32']}: calls alternating one by one between the policies after "
        f"each policy's first call; median of {args.rounds} rounds of per-call medians "
        f"({args.calls} calls per policy per round).",
        "",
        "| off (ms) | first-use (ms) | ratio |",
        "|---|---|---|",
        f"| {later['off'] * 1e3:.3f} | {later['first-use'] * 1e3:.3f} | {ratio:.3f} |",
        "",
        "The attnswitch layer alone (validate, cached plan, verification gate), same "
        f"alternation, {args.rounds} rounds of {args.calls * 10} calls per policy:",
        "",
        "| off (µs) | first-use (µs) | ratio |",
        "|---|---|---|",
        f"| {layer['off'] * 1e6:.1f} | {layer['first-use'] * 1e6:.1f} | "
        f"{layer['first-use'] / layer['off']:.3f} |",
    ]
    return "\n".join(lines) + "\n"


def plot(first: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs = np.arange(len(KINDS))
    for i, policy in enumerate(POLICIES):
        ys = [statistics.median(r["first_s"] for r in first[k][policy]) * 1e3 for k in KINDS]
        ax.bar(xs + i * 0.4, ys, 0.4, label=f"verify={policy}")
    ax.set_xticks(xs + 0.2, list(KINDS), fontsize=8)
    ax.set_ylabel("first call, median ms (fresh process, empty cache)")
    ax.set_title("attnswitch: first call with and without first-use verification")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", choices=list(KINDS), help=argparse.SUPPRESS)
    parser.add_argument("--procs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", default="docs/results")
    parser.add_argument(
        "--layer-only",
        action="store_true",
        help="only time the attnswitch layer per policy; print, write nothing",
    )
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    if args.layer_only:
        with tempfile.TemporaryDirectory(prefix="attnswitch-bench-cache-") as cache:
            os.environ["ATTNSWITCH_CACHE_DIR"] = cache
            layer = layer_overhead(args.calls * 10, args.rounds)
        print(f"CPU: {cpu_description()}; load average {os.getloadavg()[0]:.1f}")
        print(
            "attnswitch layer per call (validate, cached plan, verification gate), median µs: "
            + "  ".join(f"{p}={t * 1e6:.1f}" for p, t in layer.items())
            + f"  ratio first-use/off={layer['first-use'] / layer['off']:.3f}"
        )
        return 0
    first = first_calls(args.procs)
    later = later_calls(args.calls, args.rounds)
    layer = layer_overhead(args.calls * 10, args.rounds)
    text = report(first, later, layer, args)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "first_use_verification.md").write_text(text)
    plot(first, out / "first_use_verification.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
