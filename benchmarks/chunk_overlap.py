"""What overlap between neighbouring chunks buys in retrieval, and what it costs in tokens
encoded (issue 39: the overlap is chosen by this measurement).

    python benchmarks/chunk_overlap.py [--corpus examples/corpus] [--passages 400]
        [--precision fp32] [--json docs/results/chunk_overlap.json]
        [--md docs/results/chunk_overlap.md]

The corpus is read by the pipeline's readers. Each variant chunks it with the pipeline's
chunker (`chunk.chunk_document`, the heading path embedded as `run` does), encodes the
chunks with the default model and indexes them in a fresh SQLite store; a text met again
in a later variant reuses its vector (the same text always gets the same vector), so only
what a variant changes is encoded. The variants:

- blocks (the default chunking) with 0 (the default), 16, 32 and 64 tokens of overlap:
  a chunk that continues a section starts with the last whole sentences (or lines, or
  short paragraphs) of the chunk before, as many as fit (`chunk.chunk_blocks`);
- fixed windows with 0, 32 (`run --chunking windows`' default) and 64 tokens of overlap.

Two kinds of query, none written by hand:

- passages: 8 consecutive words of a paragraph of at least 24 words, at a seeded random
  place (so some straddle a sentence, and some a chunk, boundary), unique in the corpus.
  A hit is right when its span holds all 8 words (passage MRR@10): the measure overlap is
  meant to move, since without it words that straddle a chunk boundary are in no one chunk.
  The file of the first hit is scored too (file MRR@10).
- headings: `known_item_structure.queries_of` (a heading's words, the hit right when it
  lies in that section), where the first chunk of a section answers and overlap should
  change little.

Every query is searched dense and hybrid (k = 10). Reported per variant: chunks, tokens
encoded (special tokens included, as the encoder reads them) relative to blocks without
overlap, and MRR@10 per kind and mode.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from known_item_structure import queries_of, right  # noqa: E402
from synthetic import cpu_description  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
K = 10
MODES = ("dense", "hybrid")
VARIANTS = (
    ("blocks", 0),
    ("blocks", 16),
    ("blocks", 32),
    ("blocks", 64),
    ("windows", 0),
    ("windows", 32),
    ("windows", 64),
)
PASSAGE_WORDS = 8
MIN_PARAGRAPH_WORDS = 24
WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Passage:
    text: str
    source: str
    start: int
    end: int


def passages_of(docs: list, n: int, seed: int) -> list[Passage]:
    """At most `n` passage queries (module doc), one per paragraph at most, seeded."""
    from attnswitch.documents.chunk import _offsets
    from attnswitch.documents.readers.blocks import BlockKind

    rng = random.Random(seed)
    found = []
    for doc in docs:
        offsets = _offsets(doc.blocks)
        for block, at in zip(doc.blocks, offsets, strict=True):
            if block.kind is not BlockKind.PARAGRAPH:
                continue
            words = list(WORD.finditer(block.text))
            if len(words) < MIN_PARAGRAPH_WORDS:
                continue
            i = rng.randrange(len(words) - PASSAGE_WORDS + 1)
            s, e = words[i].start(), words[i + PASSAGE_WORDS - 1].end()
            found.append(Passage(block.text[s:e], doc.source, at + s, at + e))
    texts = [d.text for d in docs]
    unique = [p for p in found if sum(t.count(p.text) for t in texts) == 1]
    return sorted(rng.sample(unique, min(n, len(unique))), key=lambda p: (p.source, p.start))


class CachedEncoder:
    """The engine's vectors, each distinct text encoded once across the variants."""

    def __init__(self, encoder):
        self.encoder, self.vectors, self.encoded = encoder, {}, 0

    def encode(self, texts: list[str]) -> np.ndarray:
        new = list(dict.fromkeys(t for t in texts if t not in self.vectors))
        if new:
            for t, v in zip(new, self.encoder.encode(new), strict=True):
                self.vectors[t] = v
            self.encoded += len(new)
        return np.stack([self.vectors[t] for t in texts])


def measure(
    docs, passages, headings, vectors, encoder, tokenizer, chunking, overlap, max_tokens
) -> dict:
    from attnswitch.documents.chunk import chunk_document
    from attnswitch.indexing.search import search
    from attnswitch.indexing.store import SQLiteStore

    n_chunks = n_tokens = 0
    scores: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp, SQLiteStore(Path(tmp) / "o.sqlite3") as store:
        for doc in docs:
            chunks = chunk_document(
                doc.text,
                doc.blocks,
                tokenizer,
                chunking=chunking,
                max_tokens=max_tokens,
                embed_headings=True,
                **(
                    {"overlap": overlap}
                    if chunking == "windows"
                    else {"overlap": 0, "block_overlap": overlap}
                ),
            )
            if not chunks:
                continue
            texts = [c.encoder_text for c in chunks]
            n_chunks += len(chunks)
            n_tokens += sum(len(e.ids) for e in tokenizer.encode_batch(texts))
            store.write_document(doc, chunks, encoder.encode(texts))
        for mode in MODES:
            passage, passage_file, heading = [], [], []
            for p, v in zip(passages, vectors[: len(passages)], strict=True):
                hits = search(store, v, K, text=p.text, mode=mode)
                holds = [h.path == p.source and h.start <= p.start and p.end <= h.end for h in hits]
                same = [h.path == p.source for h in hits]
                passage.append(1 / (holds.index(True) + 1) if True in holds else 0.0)
                passage_file.append(1 / (same.index(True) + 1) if True in same else 0.0)
            for q, v in zip(headings, vectors[len(passages) :], strict=True):
                hits = search(store, v, K, text=q.text, mode=mode)
                ok = [right(h, q) for h in hits]
                heading.append(1 / (ok.index(True) + 1) if True in ok else 0.0)
            scores[f"{mode} passage"] = passage
            scores[f"{mode} passage file"] = passage_file
            scores[f"{mode} heading"] = heading
    return {
        "chunks": n_chunks,
        "tokens": n_tokens,
        "mrr_at_10": {k: round(float(np.mean(v)), 4) for k, v in scores.items()},
        "per_query": scores,
    }


def report(results: dict, meta: dict) -> list[str]:
    base = results["blocks, overlap 0"]["tokens"]
    cols = [f"{m} {k}" for m in MODES for k in ("passage", "passage file", "heading")]
    lines = [
        "# Overlap between chunks: what it buys, what it costs",
        "",
        f"`python benchmarks/chunk_overlap.py {meta['command']}`",
        "",
        f"Corpus `{meta['corpus']}`: {meta['documents']} documents; {meta['passages']} "
        f"passage queries and {meta['headings']} heading queries (benchmarks/"
        f"chunk_overlap.py says how they are made and judged). Chunks of at most "
        f"{meta['max_tokens']} text tokens, heading path embedded. Model "
        f"all-MiniLM-L6-v2 ({meta['engine']}, {meta['precision']}) on {meta['cpu']}. "
        "MRR@10 is not a timing: the machine's load does not change it.",
        "",
        "| chunking | chunks | tokens encoded | " + " | ".join(cols) + " |",
        "|---|---:|---:|" + "---:|" * len(cols),
    ]
    for name, r in results.items():
        cells = [f"{r['mrr_at_10'][c]:.3f}" for c in cols]
        lines.append(
            f"| {name} | {r['chunks']} | {r['tokens']:,} ({r['tokens'] / base:.2f}x) "
            f"| " + " | ".join(cells) + " |"
        )
    return lines


def paired_difference(a: list[float], b: list[float], seed: int = 7) -> tuple[float, float]:
    """Mean of b - a over the same queries and a 95% bootstrap half-width of it."""
    d = np.asarray(b) - np.asarray(a)
    rng = np.random.default_rng(seed)
    means = [d[rng.integers(0, len(d), len(d))].mean() for _ in range(2000)]
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(d.mean()), float((hi - lo) / 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "examples" / "corpus")
    ap.add_argument("--passages", type=int, default=400)
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--precision", default="fp32", help="of the encoder, as `run`'s")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from attnswitch.documents.ingest import ingest
    from attnswitch.engines import get_engine
    from attnswitch.indexing.config import chunk_tokenizer, special_tokens

    docs = [d for d in ingest(args.corpus) if d.ok]
    passages = passages_of(docs, args.passages, args.seed)
    headings = queries_of(docs)
    engine = get_engine(precision=args.precision)
    tokenizer = chunk_tokenizer(engine.spec)
    max_tokens = engine.spec.max_seq_length - special_tokens(tokenizer)
    encoder = CachedEncoder(engine)
    vectors = engine.encode([p.text for p in passages] + [q.text for q in headings])
    results = {}
    for chunking, overlap in VARIANTS:
        name = f"{chunking}, overlap {overlap}"
        results[name] = measure(
            docs, passages, headings, vectors, encoder, tokenizer, chunking, overlap, max_tokens
        )
        print(
            name,
            results[name]["chunks"],
            results[name]["tokens"],
            json.dumps(results[name]["mrr_at_10"]),
            flush=True,
        )
    corpus = args.corpus.resolve()
    meta = {
        "command": " ".join(sys.argv[1:]),
        "corpus": corpus.relative_to(ROOT).as_posix()
        if corpus.is_relative_to(ROOT)
        else corpus.name,
        "documents": len(docs),
        "passages": len(passages),
        "headings": len(headings),
        "max_tokens": max_tokens,
        "engine": engine.engine,
        "precision": args.precision,
        "cpu": cpu_description(),
    }
    lines = report(results, meta)
    base = results["blocks, overlap 0"]["per_query"]
    lines += [
        "",
        "Each variant against blocks without overlap, on the same queries: mean "
        "difference of reciprocal rank and its 95% bootstrap interval (2,000 draws).",
        "",
        "| chunking | "
        + " | ".join(f"{m} passage" for m in MODES)
        + " | "
        + " | ".join(f"{m} heading" for m in MODES)
        + " |",
        "|---|" + "---:|" * 4,
    ]
    for name, r in results.items():
        if name == "blocks, overlap 0":
            continue
        cells = []
        for kind in ("passage", "heading"):
            for m in MODES:
                d, half = paired_difference(base[f"{m} {kind}"], r["per_query"][f"{m} {kind}"])
                cells.append(f"{d:+.3f} ± {half:.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    if args.md:
        args.md.write_text("\n".join(lines) + "\n")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    **meta,
                    "results": {
                        k: {kk: vv for kk, vv in v.items() if kk != "per_query"}
                        for k, v in results.items()
                    },
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
