"""How close encoding runs to what this CPU can compute, and the least time a number of
tokens can take here (issue 39: the drive's encoding bound).

    python benchmarks/encode_bound.py [--corpus examples/corpus] [--chunks 800]
        [--repeats 3] [--json docs/results/<cpu>/encode_bound.json]

Three measurements, side by side in one process, every core in use:

- the CPU's matrix-multiply rate: torch (oneDNN) float32 `[4096, 384] x [384, 1536]` and
  `[4096, 1536] x [1536, 384]`, the shapes of all-MiniLM-L6-v2's feed-forward layers over a
  batch of 16 chunks of 256 tokens (median of `--repeats` runs of 20 products), and the
  same in bfloat16 and int8 where torch runs them (`torch._int_mm`);
- the default model's floating-point work per token: 2 x the multiply-adds of its linear
  layers (query, key, value, output, both feed-forward ones) plus attention's two products
  at each chunk's own length, summed over the chunks the pipeline makes of `--corpus`
  (block chunks, heading path embedded: as `run` makes them);
- the encoder `run` picks here (`engines.get_engine()`: engine and precision from the
  measured plans) encoding those chunks (median of `--repeats` passes), in tokens/s,
  and each precision the engine offers here, side by side.

Reported: the encoder's effective rate (its tokens/s x work per token) as a share of the
matrix-multiply rate, and the least seconds per million tokens any float32 encoder of
this model could take on this CPU (work per token / matrix-multiply rate), the bound the
drive benchmark's extrapolation is held against.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import cpu_description  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def matmul_rate(dtype: str, repeats: int) -> float | None:
    """GFLOP/s of the model's feed-forward shapes in `dtype` (float32, bfloat16, int8),
    None where torch does not run that product here."""
    import torch

    rows, d, ff = 4096, 384, 1536
    if dtype == "int8":
        a, b = (
            torch.randint(-128, 127, (rows, d), dtype=torch.int8),
            torch.randint(-128, 127, (d, ff), dtype=torch.int8),
        )
        c, e = (
            torch.randint(-128, 127, (rows, ff), dtype=torch.int8),
            torch.randint(-128, 127, (ff, d), dtype=torch.int8),
        )
        mm = torch._int_mm
    else:
        t = getattr(torch, dtype)
        a, b, c, e = (torch.randn(s, dtype=t) for s in ((rows, d), (d, ff), (rows, ff), (ff, d)))
        mm = torch.mm
    try:
        mm(a, b)
    except RuntimeError:
        return None
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(10):
            mm(a, b)
            mm(c, e)
        times.append(time.perf_counter() - start)
    flops = 20 * 2 * rows * d * ff
    return flops / statistics.median(times) / 1e9


def work_per_token(config, lengths: list[int]) -> float:
    """Mean floating-point operations per token of a BERT-family encoder over chunks of
    `lengths` tokens: linear layers 2 x (4 d^2 + 2 d ff) per token per layer, attention
    2 x 2 x L x d per token per layer (scores and weighted sum)."""
    d, ff, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    linear = 2 * (4 * d * d + 2 * d * ff)
    total = sum(n * layers * (linear + 4 * n * d) for n in lengths)
    return total / sum(lengths)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "examples" / "corpus")
    ap.add_argument("--chunks", type=int, default=800)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from attnswitch.documents.chunk import chunk_document
    from attnswitch.documents.ingest import ingest
    from attnswitch.engines import get_engine
    from attnswitch.indexing.config import DEFAULT_EMBED_HEADINGS, chunk_tokenizer, special_tokens

    engine = get_engine()
    tokenizer = chunk_tokenizer(engine.spec)
    limit = engine.spec.max_seq_length - special_tokens(tokenizer)
    texts = []
    for doc in ingest(args.corpus):
        if doc.ok:
            texts += [
                c.encoder_text
                for c in chunk_document(
                    doc.text,
                    doc.blocks,
                    tokenizer,
                    max_tokens=limit,
                    embed_headings=DEFAULT_EMBED_HEADINGS,
                )
            ]
    random.Random(39).shuffle(texts)
    texts = texts[: args.chunks]
    lengths = [min(len(e.ids), engine.spec.max_seq_length) for e in tokenizer.encode_batch(texts)]
    tokens = sum(lengths)
    config = json.loads((Path(engine.spec.path) / "config.json").read_text())
    per_token = work_per_token(config, lengths)
    encoders = {engine.precision: engine}
    for precision in ("fp32", "bf16", "int8"):
        if precision not in encoders:
            try:
                encoders[precision] = get_engine(engine=engine.engine, precision=precision)
            except Exception as exc:  # noqa: BLE001 - a precision this CPU lacks: say so
                print(f"{engine.engine} {precision}: not run here ({exc})".splitlines()[0])
    for enc in encoders.values():
        enc.encode(texts[:32])
    seconds: dict[str, list[float]] = {p: [] for p in encoders}
    for _ in range(args.repeats):
        for precision, enc in encoders.items():
            start = time.perf_counter()
            enc.encode(texts)
            seconds[precision].append(time.perf_counter() - start)
    rates = {dtype: matmul_rate(dtype, args.repeats) for dtype in ("float32", "bfloat16", "int8")}
    fp32_gflops = rates["float32"]
    report = {
        "cpu": cpu_description(),
        "cpus": os.cpu_count(),
        "chunks": len(texts),
        "tokens": tokens,
        "gflop_per_token": per_token / 1e9,
        "matmul_gflops": rates,
        "engine": engine.engine,
        "picked": engine.precision,
        "encoders": {},
    }
    for precision, times in seconds.items():
        tps = tokens / statistics.median(times)
        report["encoders"][precision] = {
            "seconds": times,
            "tokens_per_s": tps,
            "effective_gflops": tps * per_token / 1e9,
            "share_of_fp32_matmul": tps * per_token / 1e9 / fp32_gflops,
        }
    least = per_token / (fp32_gflops * 1e9)
    report["least_s_per_million_tokens_fp32"] = least * 1e6
    print(
        f"{report['cpu']}, {report['cpus']} CPUs: {len(texts)} chunks, {tokens} tokens, "
        f"{per_token / 1e6:.1f} MFLOP per token"
    )
    print(
        "matrix multiply GFLOP/s: "
        + ", ".join(f"{k} {'-' if v is None else f'{v:.0f}'}" for k, v in rates.items())
    )
    for precision, r in report["encoders"].items():
        print(
            f"{engine.engine} {precision}: {r['tokens_per_s']:.0f} tokens/s, "
            f"{r['effective_gflops']:.0f} GFLOP/s, {r['share_of_fp32_matmul']:.0%} of the "
            "float32 matrix-multiply rate"
        )
    print(f"least float32 time: {least * 1e6:.0f} s per million tokens ({1 / least:.0f} tokens/s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
