"""End to end: attnswitch's encode path against sentence-transformers `encode`.

The same model (all-MiniLM-L6-v2 by default), the same real chunks (`--chunks`, default
2,000, evenly spaced over every chunk that `chunk_text` cuts from examples/corpus with the
model's limit and `run`'s default overlap), the same process and machine.

Alternation: the chunks are cut into slices of `--slice` (default 250); a round encodes
every slice with every contender, slice by slice, in an order rotated from one slice to the
next, so that a change of machine load (a shared machine) hits all contenders alike. A
contender's time for a round is the sum over slices. The table gives, over `--rounds`
rounds, the median chunks/s and tokens/s, their ratio to sentence-transformers', the median
of the paired per-slice ratios (the same slice, back to back: the figure least moved by
load), and the minimum cosine similarity of each contender's vectors to
sentence-transformers' float32 vectors of the same round, over all chunks and rounds.

Contenders: sentence-transformers `encode` (float32, its default batch size 32; it sorts
texts by character length); attnswitch `encode` in each `--precision` (`fp32` exact
float32, the default of `attnswitch run`; `bf16` bfloat16 matmuls) with padded batches,
and with `--layouts padded,packed` also packed batches (`cu_seqlens`, no padding token).
Tokens are the model's own (special tokens included, truncated at its limit), the same
count for every contender.

    python benchmarks/e2e_vs_sentence_transformers.py [--chunks 2000] [--rounds 3]
        [--slice 250] [--precision fp32,bf16] [--layouts padded,packed] [--threads N]
        [--out docs/results]
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
    encode: Callable[[list[str]], np.ndarray]
    rounds: list[list[float]] = field(default_factory=list)  # seconds per slice, per round
    min_cos: float = 1.0

    def rates(self, n: int) -> list[float]:
        return [n / sum(r) for r in self.rounds]


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
    from sentence_transformers import SentenceTransformer

    from attnswitch.engines import get_engine
    from attnswitch.engines.torch_hf import TorchEncoder

    base = get_engine(args.model, "torch", "fp32")
    st = SentenceTransformer(str(base.spec.path), device=str(base.device))
    out = [Contender("sentence-transformers", "fp32",
                     lambda t: st.encode(t, convert_to_numpy=True, show_progress_bar=False))]
    for precision in args.precision:
        for layout in args.layouts:
            if layout == "padded":  # what `attnswitch run` uses
                enc = get_engine(args.model, "torch", precision)
            else:  # the same weights, packed batches
                enc = TorchEncoder(base.spec, precision, layout=layout)
            out.append(Contender(f"attnswitch {precision} {layout}", precision,
                                 lambda t, e=enc: e.encode(t, batch_tokens=args.batch_tokens)))
    return out, base


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64) / np.linalg.norm(a, axis=1, keepdims=True)
    b = b.astype(np.float64) / np.linalg.norm(b, axis=1, keepdims=True)
    return np.sum(a * b, axis=1)


def padding(slices: list[list[str]], slices_ids: list[list[list[int]]], budget: int,
            max_batch: int) -> dict[str, float]:
    """Fraction of computed token slots that are padding, per batching, over all slices."""
    from attnswitch.engines.base import plan_batches

    real = slots_st = slots_ours = 0
    for texts, ids in zip(slices, slices_ids, strict=True):
        lengths = np.array([len(r) for r in ids])
        real += int(lengths.sum())
        by_chars = np.argsort([-len(t) for t in texts], kind="stable")  # as ST sorts
        slots_st += sum(len(b) * lengths[b].max() for b in
                        (by_chars[i:i + 32] for i in range(0, len(lengths), 32)))
        slots_ours += sum(len(b) * lengths[b].max() for b in
                          plan_batches(lengths, budget, max_batch))
    return {"sentence-transformers (batch 32)": 1 - real / slots_st,
            "attnswitch padded": 1 - real / slots_ours, "attnswitch packed": 0.0}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chunks", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--slice", type=int, default=250)
    p.add_argument("--precision", default="fp32,bf16")
    p.add_argument("--layouts", default="padded,packed")
    p.add_argument("--model", default=None, help="model folder (default all-MiniLM-L6-v2)")
    p.add_argument("--batch-tokens", type=int, default=None)
    p.add_argument("--overlap", type=int, default=32)
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    args = p.parse_args()
    args.precision = [x for x in args.precision.split(",") if x]
    args.layouts = [x for x in args.layouts.split(",") if x]

    import torch

    from attnswitch.pipeline.config import chunk_tokenizer, special_tokens

    if args.threads:
        torch.set_num_threads(args.threads)
    load_start = os.getloadavg()
    runners, base = contenders(args)
    tok = chunk_tokenizer(base.spec)
    texts = corpus_chunks(args.chunks, tok, base.spec.max_seq_length - special_tokens(tok),
                          args.overlap)
    slices = [texts[i:i + args.slice] for i in range(0, len(texts), args.slice)]
    slices_ids = [base.tokenize(sl) for sl in slices]
    lengths = np.array([len(r) for ids in slices_ids for r in ids])
    tokens = int(lengths.sum())
    waste = padding(slices, slices_ids, args.batch_tokens or base.default_batch_tokens,
                    base.max_batch)
    print(f"{len(texts)} chunks in {len(slices)} slices, {tokens} tokens (mean "
          f"{lengths.mean():.0f}, max {lengths.max()}), torch threads "
          f"{torch.get_num_threads()}, load {load_start[0]:.1f}", flush=True)

    for c in runners:  # first calls (allocations, kernel selection) are not timed
        c.encode(texts[:64])
    paired: dict[str, list[float]] = {c.name: [] for c in runners}
    for r in range(args.rounds):
        vectors: dict[str, list[np.ndarray]] = {c.name: [] for c in runners}
        for c in runners:
            c.rounds.append([])
        for j, sl in enumerate(slices):
            k = (r * len(slices) + j) % len(runners)
            took = {}
            for c in runners[k:] + runners[:k]:
                start = time.perf_counter()
                vectors[c.name].append(c.encode(sl))
                took[c.name] = time.perf_counter() - start
                c.rounds[-1].append(took[c.name])
            for c in runners:
                paired[c.name].append(took[runners[0].name] / took[c.name])
        reference = np.concatenate(vectors[runners[0].name])
        for c in runners:
            c.min_cos = min(c.min_cos, float(cosines(np.concatenate(vectors[c.name]),
                                                     reference).min()))
        print(f"round {r + 1}: " + ", ".join(f"{c.name} {c.rates(len(texts))[-1]:.1f}"
                                            for c in runners) + " chunks/s", flush=True)
    load_end = os.getloadavg()

    n = len(texts)
    st_rate = statistics.median(runners[0].rates(n))
    rows = []
    for c in runners:
        rate = statistics.median(c.rates(n))
        ratio, pair = rate / st_rate, statistics.median(paired[c.name])
        target = None if c is runners[0] else TARGETS.get(c.precision)
        met = "-" if target is None else (
            "yes" if ratio >= target[0] and c.min_cos >= target[1] else "no")
        rows.append(dict(c=c, rate=rate, tok_rate=rate * tokens / n, ratio=ratio, pair=pair,
                         per_round=c.rates(n), target=target, met=met))
    report = render(args, rows, n, len(slices), tokens, lengths, waste, load_start, load_end,
                    torch.get_num_threads())
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "e2e_vs_sentence_transformers.md"
    path.write_text(report)
    print(report)
    print(f"wrote {path}")
    plot(args.out / "e2e_vs_sentence_transformers.png", rows)


def render(args, rows, n, n_slices, tokens, lengths, waste, load_start, load_end,
           threads: int) -> str:
    import sentence_transformers
    import torch
    import transformers

    lines = [
        "# End to end: attnswitch encode vs sentence-transformers encode",
        "",
        f"Generated by `benchmarks/e2e_vs_sentence_transformers.py` on "
        f"{dt.date.today().isoformat()}: {platform.machine()}, {os.cpu_count()} CPU cores, "
        f"torch {torch.__version__} ({threads} intra-op threads), transformers "
        f"{transformers.__version__}, sentence-transformers {sentence_transformers.__version__}."
        f" Load average {load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end (a "
        "shared machine: other jobs ran alongside, so absolute rates are noisy).",
        "",
        f"{n:,} real chunks of examples/corpus (`chunk_text`, at most {lengths.max()} model "
        f"tokens each with special tokens, mean {lengths.mean():.0f}; {tokens:,} tokens), "
        f"in {n_slices} slices of {args.slice} encoded by every contender back to back, in "
        f"rotating order; {args.rounds} rounds. chunks/s and tokens/s: medians over rounds. "
        "vs ST: ratio of the medians; paired: median over slices and rounds of the ratio on "
        "the same slice. Cosine: against sentence-transformers' float32 vectors, the minimum "
        "over all chunks and rounds.",
        "",
        "| contender | chunks/s | tokens/s | vs ST | paired | min cosine | target | met | "
        "chunks/s per round |",
        "|---|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for row in rows:
        t = row["target"]
        tgt = "-" if t is None else f">= {t[0]}x, cos >= {t[1]}"
        lines.append(
            f"| {row['c'].name} | {row['rate']:.1f} | {row['tok_rate']:,.0f} | "
            f"{row['ratio']:.2f}x | {row['pair']:.2f}x | {row['c'].min_cos:.6f} | {tgt} | "
            f"{row['met']} | {', '.join(f'{x:.1f}' for x in row['per_round'])} |")
    lines += ["", "Padding (token slots computed for nothing): "
              + ", ".join(f"{k} {v:.1%}" for k, v in waste.items()) + ".", ""]
    return "\n".join(lines)


def plot(path: Path, rows) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.6 * len(rows) + 1.2))
    names = [r["c"].name for r in rows]
    ax.barh(names, [r["rate"] for r in rows], color=["#999"] + ["#3a7"] * (len(rows) - 1))
    right = max(max(r["per_round"]) for r in rows)
    for i, r in enumerate(rows):
        ax.scatter(r["per_round"], [i] * len(r["per_round"]), color="k", s=8, zorder=3)
        ax.text(right * 1.03, i, f"{r['ratio']:.2f}x", va="center")
    ax.set_xlim(0, right * 1.15)
    ax.invert_yaxis()
    ax.set_xlabel("chunks/s (bar: median over rounds; dots: rounds; right: vs ST)")
    ax.set_title("Same model, chunks and machine", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
