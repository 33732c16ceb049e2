"""Known-item retrieval by section and page: fixed windows vs block chunks, with and
without the heading path embedded with each chunk's text.

    python benchmarks/known_item_structure.py [--corpus examples/corpus] [--max-tokens 254]
        [--overlap 32] [--kinds html markdown pdf] [--precision fp32]
        [--json docs/results/known_item_structure.json]
        [--markdown docs/results/known_item_structure.md]

On a crowded machine each chunking can run in a process of its own (`--variant N
--partial PATH`, N from 0), and `--partials PATH...` then writes the report from them.

Any folder of documents the readers take works (`--corpus`): every heading the readers
find (HTML h1-h6, Markdown headings, PDF outline entries, and those of any format added
later) whose section has a body and whose text, with its leading numbering ("8.14.4.",
"Chapter 2") stripped, is unique in the corpus and has at least two words, becomes one
query; its answer is the file and the heading path of that section (and, in a PDF, the
page the heading is on). Queries are the headings' own words, none written by hand.

Each of the four chunkings indexes the whole corpus in a SQLite store with the default
model's vectors (all-MiniLM-L6-v2), by the pipeline's own chunker
(`chunk.chunk_document`) and store, and every query is searched in dense and hybrid
mode (top 10). A hit is right when it comes from the answer's file and lies in its
section (its heading path starts with the answer's) -- or, for a PDF, when its pages
include the heading's page. Reported per chunking and mode: MRR@10 of the first right
hit, the share of queries whose first hit is right (section or page right @1), and the
file-level MRR@10 (any hit of the right file) for reference. Windows get the heading
path of the block they start in (`chunk._placed`), so a window that runs into the next
section is judged by where it starts, as its hit would show it.
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
K = 10
MODES = ("dense", "hybrid")
VARIANTS = (("windows", False), ("windows", True), ("blocks", False), ("blocks", True))
NUMBERING = re.compile(
    r"^(?:(?:chapter|appendix|section|part)\s+)?(?:\d+|[A-Z])(?:\.\d+)*\.?"
    r"(?:\s+|$)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Query:
    text: str
    source: str
    path: tuple[str, ...]
    page: int | None


def queries_of(docs: list) -> list[Query]:
    """One query per heading with a body, unique (after its numbering) in the corpus."""
    from attnswitch.documents.chunk import _sections
    from attnswitch.documents.readers.blocks import BlockKind

    found: list[Query] = []
    for doc in docs:
        for path, section in _sections(doc.blocks):
            heads = [i for i in section if doc.blocks[i].kind is BlockKind.HEADING]
            if not heads or len(heads) == len(section):
                continue  # no heading, or no body under it
            block = doc.blocks[heads[-1]]
            text = NUMBERING.sub("", " ".join(block.text.split())).strip()
            found.append(Query(text, doc.source, path, block.location.page))
    counts: dict[str, int] = {}
    for q in found:
        counts[q.text.lower()] = counts.get(q.text.lower(), 0) + 1
    return [q for q in found if counts[q.text.lower()] == 1 and len(q.text.split()) >= 2]


def right(hit, q: Query) -> bool:
    """The hit is in the answer's section (or, in a PDF, on its page)."""
    if hit.path != q.source:
        return False
    if tuple(hit.heading_path[: len(q.path)]) == q.path:
        return True
    page = hit.location.get("page")
    if q.page is not None and page is not None:
        return page <= q.page <= (hit.location.get("page_end") or page)
    return False


def measure(
    docs: list,
    queries: list[Query],
    vectors: np.ndarray,
    encoder,
    tokenizer,
    chunking: str,
    embed: bool,
    max_tokens: int,
    overlap: int,
) -> dict:
    from attnswitch.documents.chunk import chunk_document
    from attnswitch.indexing.search import search
    from attnswitch.indexing.store import SQLiteStore

    started = time.perf_counter()
    n_chunks = 0
    with tempfile.TemporaryDirectory() as tmp, SQLiteStore(Path(tmp) / "k.sqlite3") as store:
        for doc in docs:
            chunks = chunk_document(
                doc.text,
                doc.blocks,
                tokenizer,
                chunking=chunking,
                max_tokens=max_tokens,
                overlap=overlap,
                embed_headings=embed,
            )
            if not chunks:
                continue
            n_chunks += len(chunks)
            store.write_document(doc, chunks, encoder.encode([c.encoder_text for c in chunks]))
        index_s = time.perf_counter() - started
        out = {"chunks": n_chunks, "index_s": round(index_s, 1)}
        for mode in MODES:
            first_right, first_file, at1 = [], [], []
            for q, vector in zip(queries, vectors, strict=True):
                hits = search(store, vector, K, text=q.text, mode=mode)
                ok = [right(h, q) for h in hits]
                same = [h.path == q.source for h in hits]
                first_right.append(1 / (ok.index(True) + 1) if True in ok else 0.0)
                first_file.append(1 / (same.index(True) + 1) if True in same else 0.0)
                at1.append(bool(ok and ok[0]))
            out[mode] = {
                "mrr_at_10": round(float(np.mean(first_right)), 4),
                "right_at_1": round(float(np.mean(at1)), 4),
                "file_mrr_at_10": round(float(np.mean(first_file)), 4),
            }
    return out


COMMAND = (
    "--kinds html markdown pdf --precision bf16 --json "
    "docs/results/known_item_structure.json --markdown "
    "docs/results/known_item_structure.md"
).split()
CAVEAT = (
    "The queries are the headings' own words, so any chunk that holds its heading is "
    "favoured: a block chunk opens its section with it, and an embedded heading path gives "
    "every chunk of a section its headings (and their parents'). The comparison is between "
    "chunkings on the same queries, not a measure of real users' questions. Windows cut "
    "through sections, so the window that holds a heading often starts in the section "
    "before and is shown (and judged) with that section's path.\n"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "examples" / "corpus")
    ap.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="text tokens per chunk (default: the model's limit, as `run`)",
    )
    ap.add_argument("--overlap", type=int, default=32, help="windows only, as `run`")
    ap.add_argument("--kinds", nargs="*", help="only documents of these kinds (default: all)")
    ap.add_argument("--precision", default="fp32", help="of the encoder, as `run`'s")
    ap.add_argument("--variant", type=int, help="run only VARIANTS[N] (with --partial)")
    ap.add_argument("--partial", type=Path, help="write this variant's results here")
    ap.add_argument("--partials", type=Path, nargs="*", help="report from these partials")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from attnswitch.documents.ingest import ingest
    from attnswitch.engines import get_engine
    from attnswitch.indexing.config import chunk_tokenizer, special_tokens

    docs = [d for d in ingest(args.corpus) if d.ok and (not args.kinds or d.kind in args.kinds)]
    queries = queries_of(docs)
    encoder = get_engine(precision=args.precision)
    tokenizer = chunk_tokenizer(encoder.spec)
    max_tokens = args.max_tokens or encoder.spec.max_seq_length - special_tokens(tokenizer)
    variants = VARIANTS if args.variant is None else VARIANTS[args.variant : args.variant + 1]
    if args.partials:
        variants = ()
    vectors = encoder.encode([q.text for q in queries]) if variants else None
    kinds: dict[str, int] = {}
    for d in docs:
        kinds[d.kind] = kinds.get(d.kind, 0) + 1
    per_kind: dict[str, int] = {}
    kind_of = {d.source: d.kind for d in docs}
    for q in queries:
        per_kind[kind_of[q.source]] = per_kind.get(kind_of[q.source], 0) + 1
    results = {}
    for chunking, embed in variants:
        name = f"{chunking}, heading path {'embedded' if embed else 'not embedded'}"
        results[name] = measure(
            docs, queries, vectors, encoder, tokenizer, chunking, embed, max_tokens, args.overlap
        )
        print(name, json.dumps(results[name]), flush=True)
    if args.partial:
        args.partial.write_text(json.dumps(results))
        return
    for partial in args.partials or ():
        results.update(json.loads(partial.read_text()))
    order = [f"{c}, heading path {'embedded' if e else 'not embedded'}" for c, e in VARIANTS]
    results = {name: results[name] for name in order if name in results}
    cpu = cpu_description()
    report = {
        "corpus": str(args.corpus.resolve().relative_to(ROOT))
        if args.corpus.resolve().is_relative_to(ROOT)
        else args.corpus.name,
        "documents": kinds,
        "queries": len(queries),
        "queries_by_kind": per_kind,
        "max_tokens": max_tokens,
        "overlap": args.overlap,
        "model": "all-MiniLM-L6-v2",
        "engine": encoder.engine,
        "precision": args.precision,
        "cpu": cpu,
        "machine": "busy (shared with other jobs)",
        "results": results,
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    table = [
        "| chunking | chunks | dense MRR@10 | dense right@1 | hybrid MRR@10 | "
        "hybrid right@1 | hybrid file MRR@10 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        table.append(
            f"| {name} | {r['chunks']} | {r['dense']['mrr_at_10']:.3f} | "
            f"{r['dense']['right_at_1']:.3f} | {r['hybrid']['mrr_at_10']:.3f} | "
            f"{r['hybrid']['right_at_1']:.3f} | {r['hybrid']['file_mrr_at_10']:.3f} |"
        )
    print("\n".join(table))
    if args.markdown:
        args.markdown.write_text(
            "# Known-item retrieval by section and page\n\n"
            f"`python benchmarks/known_item_structure.py {' '.join(COMMAND)}`"
            " (each chunking was run as `--variant N --partial PATH` in a process of its "
            "own, then `--partials` wrote this)\n\n"
            f"Corpus: `{report['corpus']}`, {sum(kinds.values())} documents "
            f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}); {len(queries)} "
            f"queries, one per unique heading with a body "
            f"({', '.join(f'{n} from {k}' for k, n in sorted(per_kind.items()))}). Chunks of "
            f"at most {max_tokens} text tokens (the model's limit, as `run`); windows overlap "
            f"{args.overlap} tokens; with the heading path embedded, windows leave a quarter "
            f"of the window for it. Model all-MiniLM-L6-v2 ({encoder.engine} engine, "
            f"{args.precision}) on "
            f"{cpu}, a busy machine (MRR is not a timing: the load does not change it).\n\n"
            "A hit is right when it lies in the answer's section (its heading path starts "
            "with the answer's) or, in a PDF, on the heading's page. MRR@10: mean of 1/rank "
            "of the first right hit (0 when none in the top 10); right@1: the share of "
            "queries whose first hit is right; file MRR@10: the first hit of the right file, "
            "for reference.\n\n" + "\n".join(table) + "\n\n" + CAVEAT
        )


if __name__ == "__main__":
    main()
