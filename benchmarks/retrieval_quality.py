"""Known-item retrieval quality of dense, keyword and hybrid search on the shipped corpus.

    python benchmarks/retrieval_quality.py [--corpus examples/corpus] [--max-tokens 128]
                                           [--json PATH] [--plot PATH]

The queries are built from the documents' own structure, none by hand: every section
heading (HTML h1-h4, Markdown `#` lines, reStructuredText underlined titles) whose text
is unique in the corpus is a query, and the target is the first chunk (`--max-tokens`
model tokens, the pipeline's chunker) of that section's body with the heading's text
removed from it. Every such chunk of every document is indexed in a SQLite store with the
default model's vectors (all-MiniLM-L6-v2); each heading is searched in each mode, and the
target's rank gives MRR@10 (mean of 1/rank, 0 when not in the top 10) and recall@10.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import cpu_description  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODES = ("dense", "keyword", "hybrid")
K = 10
MIN_BODY_WORDS = 20
RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+])\1{2,}\s*$")


@dataclass(frozen=True)
class Section:
    source: str
    heading: str
    body: str


def headings(path: Path, raw: str) -> list[str]:
    """The section titles of one file, in order."""
    if path.suffix in (".html", ".htm"):
        from bs4 import BeautifulSoup

        soup = BeautifulSoup(raw, "html.parser")
        return [" ".join(h.get_text(" ").split()) for h in soup.find_all(["h1", "h2", "h3", "h4"])]
    lines = raw.splitlines()
    if path.name.endswith(".rst.txt"):
        return [
            lines[i].strip()
            for i in range(len(lines) - 1)
            if lines[i].strip()
            and RST_UNDERLINE.match(lines[i + 1])
            and len(lines[i + 1].strip()) >= len(lines[i].strip())
        ]
    if path.suffix == ".md":
        return [line.lstrip("#").strip() for line in lines if re.match(r"^#{1,4}\s", line)]
    return []


def sections(doc) -> list[Section]:
    """(heading, body) of each titled section of an ingested document: the body is the
    text from after the heading to the next heading, the heading's own text removed."""
    titles = [
        t for t in headings(doc.path, doc.path.read_text(errors="replace")) if len(t.split()) >= 2
    ]
    text, found, at = doc.text, [], 0
    for title in titles:
        pattern = r"\s+".join(map(re.escape, title.split()))
        m = re.compile(pattern).search(text, at)
        if m:
            found.append((title, m.start(), m.end()))
            at = m.end()
    out = []
    for i, (title, _, end) in enumerate(found):
        stop = found[i + 1][1] if i + 1 < len(found) else len(text)
        body = re.sub(r"\s+".join(map(re.escape, title.split())), " ", text[end:stop])
        if len(body.split()) >= MIN_BODY_WORDS:
            out.append(Section(doc.source, title, body.strip()))
    return out


def known_items(
    corpus: Path = ROOT / "examples" / "corpus", max_tokens: int = 128
) -> tuple[list[str], list[str], list[int]]:
    """The benchmark's known-item set without a store: (every section's first chunk, the
    unique headings as queries, each query's target as an index into the chunks)."""
    from attnswitch.documents.chunk import chunk_text
    from attnswitch.documents.ingest import ingest
    from attnswitch.engines.model import ModelSpec
    from attnswitch.indexing.config import chunk_tokenizer

    docs = [d for d in ingest(corpus) if d.ok]
    all_sections = [s for d in docs for s in sections(d)]
    counts: dict[str, int] = {}
    for s in all_sections:
        counts[s.heading.lower()] = counts.get(s.heading.lower(), 0) + 1
    tokenizer = chunk_tokenizer(ModelSpec.load(None))
    chunks, queries, targets = [], [], []
    for s in all_sections:
        first = chunk_text(s.body, tokenizer, max_tokens=max_tokens, overlap=0)
        if not first:
            continue
        if counts[s.heading.lower()] == 1:
            queries.append(s.heading)
            targets.append(len(chunks))
        chunks.append(first[0].text)
    return chunks, queries, targets


def dense_mrr_at_10(
    chunk_vectors: np.ndarray, query_vectors: np.ndarray, targets: list[int]
) -> float:
    """MRR@10 of exact cosine search (the dense mode's ranking) over the chunks."""
    c = chunk_vectors / np.linalg.norm(chunk_vectors, axis=1, keepdims=True)
    q = query_vectors / np.linalg.norm(query_vectors, axis=1, keepdims=True)
    scores = q.astype(np.float64) @ c.astype(np.float64).T
    total = 0.0
    for row, target in zip(scores, targets, strict=True):
        top = np.argsort(-row, kind="stable")[:K].tolist()
        total += 1.0 / (top.index(target) + 1) if target in top else 0.0
    return total / len(targets)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "examples" / "corpus")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from attnswitch.documents.chunk import chunk_text
    from attnswitch.documents.ingest import ingest
    from attnswitch.engines import get_engine
    from attnswitch.indexing.config import chunk_tokenizer
    from attnswitch.indexing.search import search
    from attnswitch.indexing.store import ChunkRecord, SQLiteStore

    docs = [d for d in ingest(args.corpus) if d.ok]
    all_sections = [s for d in docs for s in sections(d)]
    counts: dict[str, int] = {}
    for s in all_sections:
        counts[s.heading.lower()] = counts.get(s.heading.lower(), 0) + 1
    encoder = get_engine()
    tokenizer = chunk_tokenizer(encoder.spec)
    by_doc: dict[str, list[tuple[Section, str]]] = {}
    for s in all_sections:
        first = chunk_text(s.body, tokenizer, max_tokens=args.max_tokens, overlap=0)
        if first:
            by_doc.setdefault(s.source, []).append((s, first[0].text))
    started = time.perf_counter()
    queries: list[tuple[str, int]] = []  # (heading, target chunk id)
    with tempfile.TemporaryDirectory() as tmp, SQLiteStore(Path(tmp) / "q.sqlite3") as store:
        for doc in docs:
            items = by_doc.get(doc.source)
            if not items:
                continue
            texts = [t for _, t in items]
            store.write_document(
                doc,
                [ChunkRecord(t, len(t.split()), 0, len(t)) for t in texts],
                encoder.encode(texts),
            )
            for (s, _), row in zip(items, store.document_chunks(doc.root, doc.source), strict=True):
                if counts[s.heading.lower()] == 1:
                    queries.append((s.heading, row.id))
        encode_s = time.perf_counter() - started
        vectors = encoder.encode([q for q, _ in queries])
        ranks: dict[str, list[int | None]] = {m: [] for m in MODES}
        for (query, target), vector in zip(queries, vectors, strict=True):
            for mode in MODES:
                hits = search(store, vector, K, text=query, mode=mode)
                ids = [h.chunk_id for h in hits]
                ranks[mode].append(ids.index(target) + 1 if target in ids else None)
        n_chunks = store.count()
    rows = {
        m: {
            "mrr_at_10": float(np.mean([1 / r if r else 0.0 for r in ranks[m]])),
            "recall_at_10": float(np.mean([r is not None for r in ranks[m]])),
        }
        for m in MODES
    }
    print(
        f"known-item retrieval: {len(queries)} heading queries over {n_chunks} section "
        f"chunks ({args.max_tokens} tokens) of {len(by_doc)} documents; "
        f"all-MiniLM-L6-v2, {cpu_description()}; indexing {encode_s:.0f} s"
    )
    print(f"{'mode':<8} {'MRR@10':>7} {'recall@10':>9}")
    for m in MODES:
        print(f"{m:<8} {rows[m]['mrr_at_10']:>7.3f} {rows[m]['recall_at_10']:>9.3f}")
    best = max(rows["dense"]["mrr_at_10"], rows["keyword"]["mrr_at_10"])
    print(
        f"hybrid MRR@10 {'>=' if rows['hybrid']['mrr_at_10'] >= best else '<'} the better "
        f"of dense and keyword ({best:.3f})"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "queries": len(queries),
                    "chunks": n_chunks,
                    "max_tokens": args.max_tokens,
                    "modes": rows,
                },
                indent=1,
            )
        )
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3))
        x = np.arange(len(MODES))
        ax.bar(x - 0.2, [rows[m]["mrr_at_10"] for m in MODES], 0.4, label="MRR@10")
        ax.bar(x + 0.2, [rows[m]["recall_at_10"] for m in MODES], 0.4, label="recall@10")
        ax.set_xticks(x, MODES)
        ax.set_ylim(0, 1)
        ax.set_title(f"{len(queries)} known-item heading queries")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)


if __name__ == "__main__":
    main()
