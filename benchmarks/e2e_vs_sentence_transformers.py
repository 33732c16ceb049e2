"""End to end: attnswitch's encode path against sentence-transformers `encode`.

The same model (all-MiniLM-L6-v2 by default), the same real chunks (`--chunks`, default
2,000, evenly spaced over every chunk that `chunk_text` cuts from examples/corpus with the
model's limit and `run`'s default overlap), the same process and machine. Each round runs
every contender once, in an order rotated from round to round, so that machine noise hits
all alike; the table gives medians over rounds of chunks/s and tokens/s, the ratio to
sentence-transformers, and the minimum cosine similarity of each contender's vectors to
sentence-transformers' float32 vectors over all chunks and rounds.

Contenders: sentence-transformers `encode` (float32, its default batch size 32, which sorts
texts by character length); attnswitch `encode` in each `--precision` (`fp32` exact
float32, the default of `attnswitch run`; `bf16` bfloat16 matmuls), padded batches; and
with `--layouts padded,packed` also packed batches (`cu_seqlens`, no padding token).
Tokens are the model's own (special tokens included, truncated at its limit), the same
count for every contender.

    python benchmarks/e2e_vs_sentence_transformers.py [--chunks 2000] [--rounds 3]
        [--precision fp32,bf16] [--layouts padded] [--threads N] [--out docs/results]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "examples" / "corpus"
TARGETS = {"fp32": (1.25, 0.9999), "bf16": (1.8, 0.999)}  # (speed-up, min cosine)


@dataclass
class Contender:
    name: str
    precision: str
    layout: str
    encode: Callable[[list[str]], np.ndarray]
    seconds: list[float] = field(default_factory=list)
    min_cos: float = 1.0
    vectors: np.ndarray | None = None


def corpus_chunks(n: int, tokenizer, max_tokens: int, overlap: int) -> list[str]:
    """`n` chunk texts evenly spaced over all chunks of the corpus, in corpus order."""
    from attnswitch.pipeline.chunk import chunk_text
    from attnswitch.pipeline.ingest import ingest

    texts = [c.text for doc in ingest(CORPUS) if doc.ok
             for c in chunk_text(doc.text, tokenizer, max_tokens=max_tokens, overlap=overlap)]
    if n > len(texts):
        raise SystemExit(f"--chunks: expected at most {len(texts)} (the corpus), got {n}")
    pick = np.linspace(0, len(texts) - 1, n).round().astype(int)
    return [texts[i] for i in pick]


def contenders(args: argparse.Namespace) -> tuple[list[Contender], object]:
    import torch
    from sentence_transformers import SentenceTransformer

    from attnswitch.engines import get_engine
    from attnswitch.engines.torch_hf import TorchEncoder

    base = get_engine(args.model, "torch", "fp32")
    st = SentenceTransformer(str(base.spec.path), device=str(base.device))
    out = [Contender("sentence-transformers", "fp32", "padded (ST)",
                     lambda t: st.encode(t, convert_to_numpy=True, show_progress_bar=False))]
    for precision in args.precision:
        for layout in args.layouts:
            if layout == "padded":
                enc = get_engine(args.model, "torch", precision)
            else:  # same weights, packed batches
                enc = TorchEncoder(base.spec, precision, layout=layout)
            out.append(Contender(f"attnswitch {precision} {layout}", precision, layout,
                                 lambda t, e=enc: e.encode(t, batch_tokens=args.batch_tokens)))
    torch.set_grad_enabled(False)
    return out, base


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return np.sum(a.astype(np.float64) * b, axis=1)


def padding_stats(lengths: np.ndarray, st_batch: int, plan_batches, budget: int,
                  max_batch: int, st_order: np.ndarray) -> dict[str, float]:
    """Fraction of computed token slots that are padding, for each batching."""
    def waste(batches: list[np.ndarray]) -> float:
        slots = sum(len(b) * lengths[b].max() for b in batches)
        return 1 - lengths.sum() / slots
    st = [st_order[i:i + st_batch] for i in range(0, len(lengths), st_batch)]
    ours = plan_batches(lengths, budget, max_batch)
    return {"sentence-transformers": waste(st), "attnswitch padded": waste(ours),
            "attnswitch packed": 0.0}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chunks", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--precision", default="fp32,bf16")
    p.add_argument("--layouts", default="padded")
    p.add_argument("--model", default=None, help="model folder (default all-MiniLM-L6-v2)")
    p.add_argument("--batch-tokens", type=int, default=None)
    p.add_argument("--overlap", type=int, default=32)
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    args = p.parse_args()
    args.precision = [x for x in args.precision.split(",") if x]
    args.layouts = [x for x in args.layouts.split(",") if x]

    import torch

    from attnswitch.engines.base import plan_batches
    from attnswitch.pipeline.config import chunk_tokenizer, special_tokens

    if args.threads:
        torch.set_num_threads(args.threads)
    load_start = os.getloadavg()
    runners, base = contenders(args)
    tok = chunk_tokenizer(base.spec)
    max_tokens = base.spec.max_seq_length - special_tokens(tok)
    texts = corpus_chunks(args.chunks, tok, max_tokens, args.overlap)
    lengths = np.array([len(ids) for ids in base.tokenize(texts)])
    tokens = int(lengths.sum())
    st_order = np.argsort([-len(t) for t in texts], kind="stable")
    padding = padding_stats(lengths, 32, plan_batches, args.batch_tokens or
                            base.default_batch_tokens, base.max_batch, st_order)
    print(f"{len(texts)} chunks, {tokens} tokens (mean {lengths.mean():.0f}, max "
          f"{lengths.max()}), torch threads {torch.get_num_threads()}, load {load_start}")

    warm = texts[:64]
    for c in runners:  # first calls (allocations, kernel selection) are not timed
        c.encode(warm)
    for r in range(args.rounds):
        order = runners[r % len(runners):] + runners[:r % len(runners)]
        for c in order:
            start = time.perf_counter()
            vectors = c.encode(texts)
            c.seconds.append(time.perf_counter() - start)
            print(f"round {r + 1}: {c.name:<34} {len(texts) / c.seconds[-1]:7.1f} chunks/s",
                  flush=True)
            c.vectors = vectors
        reference = runners[0].vectors
        for c in runners:
            c.min_cos = min(c.min_cos, float(cosines(c.vectors, reference).min()))
    load_end = os.getloadavg()

    st_rate = len(texts) / statistics.median(runners[0].seconds)
    rows = []
    for c in runners:
        rate = len(texts) / statistics.median(c.seconds)
        per_round = [len(texts) / s for s in c.seconds]
        ratio = rate / st_rate
        target = TARGETS.get(c.precision) if c is not runners[0] else None
        met = "-" if target is None else ("yes" if ratio >= target[0] and c.min_cos >= target[1]
                                          else "no")
        rows.append((c, rate, tokens / statistics.median(c.seconds), ratio, per_round, target,
                     met))
    write_report(args, rows, len(texts), tokens, lengths, padding, load_start, load_end,
                 torch.get_num_threads())
    plot(args.out / "e2e_vs_sentence_transformers.png", rows)


def write_report(args, rows, n, tokens, lengths, padding, load_start, load_end,
                 threads: int) -> None:
    import sentence_transformers
    import torch
    import transformers

    args.out.mkdir(parents=True, exist_ok=True)
    lines = [
        "# End to end: attnswitch encode vs sentence-transformers encode",
        "",
        f"Generated by `benchmarks/e2e_vs_sentence_transformers.py` on "
        f"{dt.date.today().isoformat()}: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPU cores, torch {torch.__version__} ({threads} threads), "
        f"transformers {transformers.__version__}, sentence-transformers "
        f"{sentence_transformers.__version__}. Load average at start "
        f"{load_start[0]:.1f}, at end {load_end[0]:.1f} (a shared machine: other jobs ran "
        "alongside, so absolute rates are noisy; contenders alternate within each round).",
        "",
        f"{n} real chunks of examples/corpus (`chunk_text`, at most {lengths.max()} model "
        f"tokens with special tokens, mean {lengths.mean():.0f}; {tokens:,} tokens in all); "
        f"{args.rounds} rounds; medians over rounds. Cosine: each contender's vectors against "
        "sentence-transformers' float32 vectors, minimum over all chunks and rounds.",
        "",
        "| contender | precision | chunks/s | tokens/s | vs ST | min cosine | target | met | "
        "chunks/s per round |",
        "|---|---|---:|---:|---:|---:|---|---|---|",
    ]
    for c, rate, tok_rate, ratio, per_round, target, met in rows:
        tgt = "-" if target is None else f">= {target[0]}x, cos >= {target[1]}"
        lines.append(f"| {c.name} | {c.precision} | {rate:.1f} | {tok_rate:,.0f} | "
                     f"{ratio:.2f}x | {c.min_cos:.6f} | {tgt} | {met} | "
                     f"{', '.join(f'{x:.1f}' for x in per_round)} |")
    lines += [
        "",
        "Padding (token slots computed for nothing): "
        + ", ".join(f"{k} {v:.1%}" for k, v in padding.items()) + ".",
        "",
    ]
    path = args.out / "e2e_vs_sentence_transformers.md"
    path.write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {path}")


def plot(path: Path, rows) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    names = [r[0].name for r in rows]
    ax.barh(names, [r[1] for r in rows], color=["#999"] + ["#3a7"] * (len(rows) - 1))
    for i, r in enumerate(rows):
        ax.scatter(r[4], [i] * len(r[4]), color="k", s=8, zorder=3)
        ax.text(r[1], i, f" {r[3]:.2f}x", va="center")
    ax.invert_yaxis()
    ax.set_xlabel("chunks/s (bar: median; dots: rounds)")
    ax.set_title("attnswitch encode vs sentence-transformers, same model and chunks")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
