"""Known-item search quality by kind of query, per corpus and per search mode.

    python benchmarks/search_quality.py [--corpus NAME=FOLDER ...] [--python-docs N]
        [--store sqlite|postgres] [--store-dir DIR] [--per-kind N] [--json PATH] [--md PATH]

Each corpus is indexed by the real pipeline (`jobs.run.run`, default options, the
default model), the store kept in `--store-dir` so a second call only re-reads it. The
queries are built from the documents' own markup, none by hand, one set per kind:

- headings: each `h1`-`h4` heading of at least two words (not a question) whose text is
  unique in the corpus;
- questions: headings that are questions (end in "?"), FAQ style;
- identifiers: names with a definition in the page (`dt[id]` of Sphinx's API entries,
  such as `json.dumps`), the page that defines them the answer;
- partial sentences: 8 consecutive words from the middle of a paragraph of at least 16
  words (a deterministic sample, one paragraph in three at most per page).
- exact terms: single-token identifiers with an underscore (`temp_hi`, `jsonb_set`) that
  only one page holds, sampled apart from the other kinds: a name the model may not know,
  where the keyword list must carry the fusion;
- demo query: the Makefile's `make run` query, "how do I update rows in a table", whose
  answer is `postgresql/tutorial-update.html`, where the corpus has that file (one query).

The answer to each query is its file: a hit list (k = 50 chunks) is collapsed to distinct
files in rank order, and the target file's rank among them (1-10, else a miss) gives
MRR@10, recall@10 and nDCG@10 (one relevant file: 1 / log2(1 + rank)).

Besides the three modes as `indexing.search.search` runs them, fusion variants are scored
offline from the same dense and keyword lists, for tuning: weighted reciprocal-rank fusion
(`rrf w=...`, the keyword list's weight against the dense one's 1); a convex combination
of the two lists' min-max normalised scores (`cc a=...`, a the dense score's weight:
Bruch et al., "An Analysis of Fusion Functions for Hybrid Retrieval", TOIS 2023; the
`minmax` normaliser of Elasticsearch's linear retriever and Weaviate's relative score
fusion), with the phrase rule on top (`cc a=0.8 + phrase` is the shipped hybrid, `rrf w=1 +
phrase` the one before it); and RRF over lists collapsed to their best chunk per file
(`collapse 1 + phrase`, Elasticsearch's field collapsing before the fusion).
Tuning uses the first corpus only; every other corpus is held out.

`--python-docs N` adds the Python documentation that Debian's `python3-doc` package
installs: the first N pages of its library reference (sorted by name) and its FAQ pages.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import cpu_description  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PYTHON_DOCS = Path("/usr/share/doc/python3/html")
KINDS = ("headings", "questions", "identifiers", "partial sentences")
MODES = ("dense", "keyword", "hybrid")
K = 10
HITS = 50  # chunks fetched per query before collapsing to files
MIN_PARAGRAPH_WORDS = 16
PARTIAL_WORDS = 8
RRF_WEIGHTS = (0.5, 1.0, 2.0)
RRF_K = 60  # the constant of the RRF paper (the shipped fusion before the convex one)
CONVEX_ALPHAS = (0.5, 0.7, 0.8)  # the dense score's weight in `search.fuse`
MARKUP = (".html", ".htm", ".md", ".markdown")
EXACT_TERM = re.compile(r"\b[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9]\b")


@dataclass
class Query:
    kind: str
    text: str
    target: str  # the answer's path relative to the corpus root


@dataclass
class Corpus:
    name: str
    root: Path
    queries: list[Query] = field(default_factory=list)


# `make run`'s query (a question in one's own words), when the corpus holds its answer.
DEMO = Query("demo query", "how do I update rows in a table", "postgresql/tutorial-update.html")


def clean(text: str) -> str:
    return " ".join(text.replace("¶", " ").split())


def page_queries(source: str, raw: str, markdown: bool, rng: random.Random) -> list[Query]:
    """Every candidate query of one page (uniqueness is judged over the corpus later)."""
    from bs4 import BeautifulSoup

    if markdown:
        from markdown_it import MarkdownIt

        raw = MarkdownIt("commonmark").enable("table").render(raw)
    soup = BeautifulSoup(raw, "html.parser")
    out = []
    for h in soup.find_all(["h1", "h2", "h3", "h4"]):
        text = clean(h.get_text(" "))
        if len(text.split()) >= 2:
            out.append(Query("questions" if text.endswith("?") else "headings", text, source))
    for dt in soup.select("dt[id]"):
        ident = dt["id"]
        if re.fullmatch(r"[A-Za-z_][\w.]*", ident) and ("." in ident or "_" in ident):
            out.append(Query("identifiers", ident, source))
    paragraphs = [clean(p.get_text(" ")) for p in soup.find_all("p")]
    paragraphs = [p for p in paragraphs if len(p.split()) >= MIN_PARAGRAPH_WORDS]
    for p in rng.sample(paragraphs, k=min(len(paragraphs), max(1, len(paragraphs) // 3))):
        words = p.split()
        start = (len(words) - PARTIAL_WORDS) // 2
        out.append(
            Query("partial sentences", " ".join(words[start : start + PARTIAL_WORDS]), source)
        )
    return out


def build_queries(corpus: Corpus, per_kind: int, seed: int = 33) -> None:
    """The corpus's query sets: unique texts only, at most `per_kind` of each kind."""
    rng = random.Random(seed)
    found: list[Query] = []
    for path in sorted(corpus.root.rglob("*")):
        if path.suffix.lower() in MARKUP and path.is_file():
            found += page_queries(
                path.relative_to(corpus.root).as_posix(),
                path.read_text(errors="replace"),
                path.suffix.lower() in (".md", ".markdown"),
                rng,
            )
    counts: dict[str, int] = {}
    for q in found:
        counts[q.text.lower()] = counts.get(q.text.lower(), 0) + 1
    unique = [q for q in found if counts[q.text.lower()] == 1]
    for kind in KINDS:
        of_kind = [q for q in unique if q.kind == kind]
        corpus.queries += sorted(
            rng.sample(of_kind, min(per_kind, len(of_kind))), key=lambda q: (q.target, q.text)
        )
    corpus.queries += exact_terms(corpus.root, per_kind, random.Random(seed))
    if (corpus.root / DEMO.target).is_file():  # the Makefile's query, on its own row
        corpus.queries.append(DEMO)


def exact_terms(root: Path, per_kind: int, rng: random.Random) -> list[Query]:
    """At most `per_kind` single-token identifiers (`EXACT_TERM`: a word with an underscore,
    such as `temp_hi` or `SQLITE_BUSY`, 6 characters or more) that one page only holds
    outside links and tables of contents, case ignored; that page is the answer. Sampled
    apart from the other kinds, so adding this kind left their queries as they were."""
    from bs4 import BeautifulSoup

    pages: dict[str, set[str]] = {}
    spelled: dict[str, str] = {}  # the first spelling in sorted order (the same each run)
    for path in sorted(root.rglob("*")):
        if path.suffix.lower() in MARKUP and path.is_file():
            raw = path.read_text(errors="replace")
            if path.suffix.lower() in (".md", ".markdown"):
                from markdown_it import MarkdownIt

                raw = MarkdownIt("commonmark").enable("table").render(raw)
            soup = BeautifulSoup(raw, "html.parser")
            for link in soup.select("a, nav, [role=navigation], .sphinxsidebar, .toctree-wrapper"):
                link.decompose()  # a name in a link or a table of contents is defined elsewhere
            text = soup.get_text(" ")
            for term in sorted({t for t in EXACT_TERM.findall(text) if len(t) >= 6}):
                spelled.setdefault(term.lower(), term)
                pages.setdefault(term.lower(), set()).add(path.relative_to(root).as_posix())
    once = sorted(
        (spelled[term], next(iter(where))) for term, where in pages.items() if len(where) == 1
    )
    picked = rng.sample(once, min(per_kind, len(once)))
    return sorted(
        (Query("exact terms", term, page) for term, page in picked),
        key=lambda q: (q.target, q.text),
    )


def python_docs(into: Path, n_library: int) -> Path:
    """A copy of the first `n_library` library pages and the FAQ of the Python docs."""
    if not PYTHON_DOCS.is_dir():
        raise SystemExit(
            f"--python-docs: expected Debian's python3-doc at {PYTHON_DOCS} "
            f"(apt-get install python3-doc), got nothing there"
        )
    library = sorted((PYTHON_DOCS / "library").glob("*.html"))[:n_library]
    faq = sorted((PYTHON_DOCS / "faq").glob("*.html"))
    for page in library + faq:
        dest = into / page.relative_to(PYTHON_DOCS)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists():
            shutil.copyfile(page.resolve(), dest)
    return into


@contextlib.contextmanager
def stores(kind: str, store_dir: Path):
    """A function corpus name -> its store's location: a SQLite file in `store_dir` (kept,
    so a second call only re-reads it), or a fresh database of a throwaway PostgreSQL
    cluster (`tests/pg_local.py`; indexed anew each call)."""
    if kind == "sqlite":
        yield lambda name: store_dir / f"{name}.sqlite3"
        return
    import psycopg

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from pg_local import LocalCluster, remove  # tests/pg_local.py: test infrastructure

    folder = Path(tempfile.mkdtemp(prefix="attnswitch-pg-"))
    try:
        with LocalCluster.start(folder) as cluster:

            def database(name: str) -> str:
                with psycopg.connect(cluster.url, autocommit=True) as conn:
                    conn.execute(f'CREATE DATABASE "sq_{name}"')
                return cluster.url.rsplit("/", 1)[0] + f"/sq_{name}"

            yield database
    finally:
        remove(folder)


def index(corpus: Corpus, location):
    from attnswitch.indexing.location import open_store
    from attnswitch.jobs.run import run

    store = open_store(location)
    started = time.perf_counter()
    summary = run(corpus.root, store)
    print(
        f"{corpus.name}: indexed in {time.perf_counter() - started:.0f} s, {summary.counts()}",
        flush=True,
    )
    return store


def file_rank(ranked: list[tuple[int, float]], files: dict[int, str], target: str) -> int | None:
    """The rank (from 1) of `target` among the distinct files of `ranked`, within K."""
    seen: list[str] = []
    for cid, _ in ranked:
        f = files[cid]
        if f not in seen:
            seen.append(f)
            if f == target:
                return len(seen) if len(seen) <= K else None
            if len(seen) >= K:
                return None
    return None


def weighted_rrf(
    dense: list[tuple[int, float]], keyword: list[tuple[int, float]], w_keyword: float, rrf_k: int
) -> list[tuple[int, float]]:
    scores: dict[int, float] = {}
    for weight, ranked in ((1.0, dense), (w_keyword, keyword)):
        for rank, (cid, _) in enumerate(ranked, start=1):
            scores[cid] = scores.get(cid, 0.0) + weight / (rrf_k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def best_per_file(
    ranked: list[tuple[int, float]], files: dict[int, str]
) -> list[tuple[int, float]]:
    """`ranked` less every chunk of a file that has a better chunk above it."""
    seen: set[str] = set()
    out = []
    for cid, score in ranked:
        if files[cid] not in seen:
            seen.add(files[cid])
            out.append((cid, score))
    return out


def metrics(ranks: list[int | None]) -> dict[str, float]:
    return {
        "mrr_at_10": float(np.mean([1 / r if r else 0.0 for r in ranks])),
        "recall_at_10": float(np.mean([r is not None for r in ranks])),
        "ndcg_at_10": float(np.mean([1 / math.log2(1 + r) if r else 0.0 for r in ranks])),
        "queries": len(ranks),
    }


def evaluate(corpus: Corpus, store, encoder) -> dict[str, dict[str, dict[str, float]]]:
    """kind -> variant -> metrics."""
    from attnswitch.indexing.search import fuse, keyword_text, normalised, phrase_first, search

    vectors = encoder.encode([q.text for q in corpus.queries])
    ranks: dict[str, dict[str, list[int | None]]] = {}
    for q, v in zip(corpus.queries, vectors, strict=True):
        dense = store.dense(normalised(v[None, :], store.dim), HITS, None)[0]
        keyword = store.keyword(keyword_text(q.text), HITS)
        variants = {
            m: [(h.chunk_id, h.score) for h in search(store, v, HITS, text=q.text, mode=m)]
            for m in MODES
        }
        for w in RRF_WEIGHTS:
            variants[f"rrf w={w:g}"] = weighted_rrf(dense, keyword, w, RRF_K)
        ids = {cid for ranked in variants.values() for cid, _ in ranked}
        rows = store.chunks(ids)
        files = {cid: row.source for cid, row in rows.items()}
        texts = {cid: row.text for cid, row in rows.items()}
        for w in RRF_WEIGHTS:
            variants[f"rrf w={w:g} + phrase"] = phrase_first(
                variants[f"rrf w={w:g}"], texts, q.text
            )
        for a in CONVEX_ALPHAS:
            variants[f"cc a={a:g} + phrase"] = phrase_first(fuse(dense, keyword, a), texts, q.text)
        collapsed = [
            best_per_file([(c, s) for c, s in ranked if c in files], files)
            for ranked in (dense, keyword)
        ]
        variants["collapse 1 + phrase"] = phrase_first(
            weighted_rrf(*collapsed, 1.0, RRF_K), texts, q.text
        )
        for name, ranked in variants.items():
            ranked = [(cid, s) for cid, s in ranked if cid in files]
            ranks.setdefault(q.kind, {}).setdefault(name, []).append(
                file_rank(ranked, files, q.target)
            )
    return {kind: {name: metrics(r) for name, r in by.items()} for kind, by in ranks.items()}


def modes_table(results: dict, corpora: list[str]) -> list[str]:
    """Per corpus and kind: each mode's MRR@10, recall@10 and nDCG@10, and hybrid's margin
    to the better of dense and keyword."""
    lines = [
        "| corpus | kind | queries | MRR dense | MRR keyword | MRR hybrid | hybrid − better "
        "| R@10 dense | R@10 keyword | R@10 hybrid | nDCG dense | nDCG keyword "
        "| nDCG hybrid |",
        "|---|---|---:|" + "---:|" * 10,
    ]
    for name in corpora:
        for kind, by in results[name].items():
            best = max(by["dense"]["mrr_at_10"], by["keyword"]["mrr_at_10"])
            cells = [f"{by[m]['mrr_at_10']:.3f}" for m in MODES]
            cells.append(f"{by['hybrid']['mrr_at_10'] - best:+.3f}")
            cells += [
                f"{by[m][metric]:.3f}" for metric in ("recall_at_10", "ndcg_at_10") for m in MODES
            ]
            lines.append(
                f"| {name} | {kind} | {by['dense']['queries']} | " + " | ".join(cells) + " |"
            )
    return lines


def variants_table(results: dict, corpora: list[str]) -> list[str]:
    """MRR@10 of every fusion variant; ✗ marks one more than 0.01 below the better of
    dense and keyword."""
    variants = [
        v
        for v in next(iter(next(iter(results.values())).values()))
        if v not in ("dense", "keyword")
    ]
    lines = [
        "| corpus | kind | " + " | ".join(variants) + " |",
        "|---|---|" + "---:|" * len(variants),
    ]
    for name in corpora:
        for kind, by in results[name].items():
            best = max(by["dense"]["mrr_at_10"], by["keyword"]["mrr_at_10"])
            cells = [
                f"{by[v]['mrr_at_10']:.3f}{' ✗' if by[v]['mrr_at_10'] < best - 0.01 else ''}"
                for v in variants
            ]
            lines.append(f"| {name} | {kind} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--corpus",
        action="append",
        default=[],
        help="NAME=FOLDER (repeatable; default: example=examples/corpus)",
    )
    ap.add_argument(
        "--python-docs",
        type=int,
        default=0,
        metavar="N",
        help="add N library pages and the FAQ of Debian's python3-doc",
    )
    ap.add_argument("--store-dir", type=Path, default=ROOT / ".bench" / "search_quality")
    ap.add_argument("--per-kind", type=int, default=150)
    ap.add_argument(
        "--store",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="postgres: a throwaway local PostgreSQL cluster (pgvector, ts_rank keyword ranking)",
    )
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from attnswitch.engines import get_engine

    args.store_dir.mkdir(parents=True, exist_ok=True)
    corpora = [Corpus(*spec.split("=", 1)) for spec in args.corpus] or [
        Corpus("example", ROOT / "examples" / "corpus")
    ]
    for c in corpora:
        c.root = Path(c.root)
    if args.python_docs:
        corpora.append(
            Corpus(
                "python-docs", python_docs(args.store_dir / "python-docs-pages", args.python_docs)
            )
        )
    encoder = get_engine()
    results = {}
    with stores(args.store, args.store_dir) as location:
        for c in corpora:
            build_queries(c, args.per_kind)
            with index(c, location(c.name)) as store:
                results[c.name] = evaluate(c, store, encoder)
    names = [c.name for c in corpora]
    head = (
        f"Known-item search quality at file level, all-MiniLM-L6-v2, {args.store} "
        f"store, {cpu_description()}; tuning corpus: {corpora[0].name}, held out: "
        f"{', '.join(names[1:]) or 'none'}."
    )
    lines = [
        head,
        "",
        *modes_table(results, names),
        "",
        "Fusion variants (MRR@10; hybrid is the default mode as shipped; ✗: more than "
        "0.01 below the better of dense and keyword):",
        "",
        *variants_table(results, names),
    ]
    print("\n".join(lines))
    if args.md:
        args.md.write_text("\n".join(lines) + "\n")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"cpu": cpu_description(), "store": args.store, "results": results}, indent=1
            )
        )


if __name__ == "__main__":
    main()
