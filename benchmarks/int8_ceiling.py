"""How much faster int8 can make the default model on this CPU: OpenVINO's int8 model against
its bf16 one, op type by op type, and the most int8 could give if its matmuls were faster.

    python benchmarks/int8_ceiling.py [--out docs/results] [--reps 15]

Int8 speeds up only the matmuls with weights (OpenVINO's FullyConnected nodes); attention
(the fused `Subgraph` nodes), LayerNorm, the residual adds, transposes and reorders run in
float either way. So if those matmuls take a share `f` of the bf16 model's time, int8 can
give at most `1 / (1 - f + f / r)` for matmuls `r` times faster: `r = 2` is AMX-INT8's peak
over AMX-BF16 (and VNNI's over AVX-512 BF16), `r = inf` the bound of free matmuls.

Each model runs as one stream of the engine's THROUGHPUT mode does: one request on one
thread (`INFERENCE_NUM_THREADS=1`, LATENCY hint), on batches of the engine's token budget
(1024 tokens) at three widths; per-op times come from OpenVINO's own counters
(`PERF_COUNT`), wall times from a second compile without them. The models are the engine's
cached ones (`openvino_runtime.artifacts`): the float32 IR under the bf16 hint, and the
NNCF int8 IR under `openvino_runtime.int8_hint()`. Token ids are fixed pseudo-random ids
with no padding: the time of a matmul does not depend on the values.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import cpu_description  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHAPES = ((4, 256), (8, 128), (16, 64))  # batch x width: 1024 tokens, the engine's budget
GROUPS = ("matmuls with weights", "attention (fused subgraph)", "everything else")


def group(node_type: str) -> str:
    if node_type.startswith("FullyConnected"):
        return GROUPS[0]
    return GROUPS[1] if node_type == "Subgraph" else GROUPS[2]


def measure(ov, xml: Path, hint: str, shape: tuple[int, int], reps: int) -> dict:
    """Median wall ms of one request, and ms per op group (OpenVINO's counters)."""
    rng = np.random.default_rng(0)
    inputs = {
        "input_ids": rng.integers(1000, 20000, size=shape).astype(np.int64),
        "attention_mask": np.ones(shape, np.int64),
    }
    config = {
        "INFERENCE_PRECISION_HINT": hint,
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_NUM_THREADS": 1,
    }
    out = {}
    for counted in (False, True):
        request = (
            ov.Core()
            .compile_model(str(xml), "CPU", {**config, "PERF_COUNT": counted})
            .create_infer_request()
        )
        for _ in range(3):
            request.infer(inputs)
        walls, groups = [], collections.Counter()
        for _ in range(reps):
            start = time.perf_counter()
            request.infer(inputs)
            walls.append(time.perf_counter() - start)
            if counted:
                for p in request.profiling_info:
                    groups[group(p.node_type)] += p.real_time.total_seconds() * 1e3 / reps
        if counted:
            out["groups_ms"] = {g: groups[g] for g in GROUPS}
        else:
            out["wall_ms"] = float(np.median(walls)) * 1e3
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    p.add_argument("--reps", type=int, default=15)
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from attnswitch.engines import openvino_runtime as ovr
    from attnswitch.engines.model import ModelSpec, default_model_path

    spec = ModelSpec.load(default_model_path())
    ov = ovr.import_openvino()
    models = {
        "bf16": (ovr.artifacts(spec, "fp32")[0] / "model.xml", "bf16"),
        "int8": (ovr.artifacts(spec, "int8")[0] / "model.xml", ovr.int8_hint()),
    }
    rows = []
    for shape in SHAPES:
        got = {
            name: measure(ov, xml, hint, shape, args.reps) for name, (xml, hint) in models.items()
        }
        bf16, int8 = got["bf16"], got["int8"]
        share = bf16["groups_ms"][GROUPS[0]] / sum(bf16["groups_ms"].values())
        rows.append(
            {
                "batch": shape[0],
                "width": shape[1],
                "bf16": bf16,
                "int8": int8,
                "int8_speedup": bf16["wall_ms"] / int8["wall_ms"],
                "matmul_speedup": bf16["groups_ms"][GROUPS[0]] / int8["groups_ms"][GROUPS[0]],
                "matmul_share": share,
                "ceiling_2x": 1 / (1 - share + share / 2),
                "ceiling_free": 1 / (1 - share),
            }
        )
        r = rows[-1]
        print(
            f"{shape[0]}x{shape[1]}: int8 {r['int8_speedup']:.2f}x bf16, matmuls "
            f"{r['matmul_speedup']:.2f}x, their share {share:.0%}, ceiling "
            f"{r['ceiling_2x']:.2f}x (2x matmuls) / {r['ceiling_free']:.2f}x (free)",
            flush=True,
        )
    cpu = cpu_description()
    lines = [
        "# Int8's ceiling on this CPU",
        "",
        f"Generated by `benchmarks/int8_ceiling.py` on {dt.date.today().isoformat()}; "
        f"CPU {cpu}; OpenVINO {ov.get_version()}; the default model, one "
        f"single-threaded request (one stream of the THROUGHPUT mode), batches of "
        f"1024 tokens, median of {args.reps}. bf16: the float32 IR under the bf16 "
        f"hint; int8: the engine's NNCF int8 IR under the {models['int8'][1]} hint. "
        "Ceiling: the int8 model's speed-up over bf16 if only its matmuls with "
        "weights were faster, 2x (AMX-INT8's peak over AMX-BF16) or free.",
        "",
        "| batch x width | bf16 ms | int8 ms | int8 vs bf16 | matmuls: bf16 ms | "
        "int8 ms | speed-up | share of bf16 | attention bf16 / int8 ms | "
        "everything else bf16 / int8 ms | ceiling, 2x matmuls | ceiling, free "
        "matmuls |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        b, i = r["bf16"]["groups_ms"], r["int8"]["groups_ms"]
        lines.append(
            f"| {r['batch']} x {r['width']} | {r['bf16']['wall_ms']:.1f} | "
            f"{r['int8']['wall_ms']:.1f} | {r['int8_speedup']:.2f}x | {b[GROUPS[0]]:.1f} | "
            f"{i[GROUPS[0]]:.1f} | {r['matmul_speedup']:.2f}x | {r['matmul_share']:.0%} | "
            f"{b[GROUPS[1]]:.1f} / {i[GROUPS[1]]:.1f} | {b[GROUPS[2]]:.1f} / "
            f"{i[GROUPS[2]]:.1f} | {r['ceiling_2x']:.2f}x | {r['ceiling_free']:.2f}x |"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "int8_ceiling.md").write_text("\n".join(lines) + "\n")
    (args.out / "int8_ceiling.json").write_text(
        json.dumps(
            {"cpu": cpu, "openvino": ov.get_version(), "reps": args.reps, "rows": rows}, indent=1
        )
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
