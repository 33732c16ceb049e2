"""Search quality of the two passes (docs/architecture.md, "Two passes"): hybrid MRR@10 on
an index right after the quick pass and at 25, 50 and 100% of chunks with full vectors.

    python benchmarks/two_pass_quality.py [--corpus FOLDER] [--per-kind 40]
        [--coverage 0,25,50,100] [--fill 20] [--work DIR] [--out DIR]

The queries are benchmarks/search_quality.py's known items (headings, questions,
identifiers, partial sentences, exact terms, the demo query), built from the corpus'
markup; the answer to each is its file, ranked among the distinct files of the hits.

Indexes, not timed: the corpus indexed by a plain run (the full index), and by
`run --quick` (quick vectors only). For each coverage c, a copy of the quick index gets the
full vectors of a seeded random c% of its chunks (taken from the full index by vector
key), then the queries are searched in order, each as `attnswitch search` does it
(`Index.searcher()`, hybrid, 50 hits), in three named variants:
- `first search: query-time encoding`: as shipped (each search encodes up to 20 of its
  best candidates that lack a full vector), each query on its own fresh copy of the
  index: what a first search finds;
- `searches in order: query-time encoding`: the same on one copy, each search keeping
  what it encoded for the next (the searches fill the index in as they go);
- `no query-time encoding`: `fill=0` (full vectors only where the coverage put them;
  chunks without one are found by keyword alone);
- the first and the last in dense mode (no keyword list: the candidates a search encodes
  come from the quick list alone), which shows what the quick vectors find.
`--drive DRIVE` measures a drive of benchmarks/drive_build.py instead, with its own known
items (DRIVE.meta/queries.json); `benchmarks/drive.py --keep DIR` leaves its quick and full
indexes where `--work DIR` finds them, so the drive is not indexed twice. `--variant NAME`
(again for more) runs only the variants named (all by default).
`--python-docs N` adds the pages of Debian's python3-doc as benchmarks/search_quality.py
does (the first N library pages and the FAQ, whose questions are the "questions" kind);
`--paraphrases benchmarks/paraphrases_python_docs.json` adds 44 questions asked in other
words than their pages ("get the three smallest numbers out of a big list quickly" ->
heapq), the "paraphrases" kind.
The full index's MRR@10 is the reference (ratio column). Search p50 is per query, in this
process, the model loaded. Prints a table; writes `two_pass_quality.md` and `.json` to
`--out` with the CPU model and its ISA flags.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))
from search_quality import Corpus, build_queries, file_rank, metrics  # noqa: E402
from synthetic import cpu_description  # noqa: E402

HITS = 50
# name -> (chunks a search may encode, whether each query gets its own copy of the
# index, the search mode)
VARIANTS = {
    "first search: query-time encoding": (None, True, "hybrid"),
    "searches in order: query-time encoding": (None, False, "hybrid"),
    "no query-time encoding": (0, False, "hybrid"),
    "dense mode, first search: query-time encoding": (None, True, "dense"),
    "dense mode, no query-time encoding": (0, False, "dense"),
}


def build(corpus: Path, db: Path, quick: bool) -> None:
    from attnswitch.indexing.location import open_store
    from attnswitch.jobs.run import RunOptions, run

    with open_store(db) as store:
        summary = run(corpus, store, RunOptions.of(quick=quick))
    print(f"{'quick' if quick else 'full'} index: {summary.counts()}, {summary.wall_s:.0f} s")


def full_vectors(db: Path) -> dict[str, np.ndarray]:
    from attnswitch.indexing.location import open_store

    with open_store(db) as store:
        rows = store._read("SELECT DISTINCT vector_key FROM chunks WHERE vector IS NOT NULL")
        return store.vectors_by_key([r[0] for r in rows])


def cover(db: Path, vectors: dict[str, np.ndarray], percent: int, seed: int = 7) -> int:
    """Give a seeded random `percent` of the chunks of `db` their full vectors."""
    from attnswitch.indexing.location import open_store

    with open_store(db) as store:
        # every chunk without a full vector (`unencoded` gives the newest documents' only)
        pending = store._read("SELECT id, vector_key FROM chunks WHERE vector IS NULL ORDER BY id")
        picked = random.Random(seed).sample(pending, round(len(pending) * percent / 100))
        picked = [(cid, key) for cid, key in picked if key in vectors]
        if picked:
            store.fill_vectors(
                [cid for cid, _ in picked],
                [key for _, key in picked],
                np.stack([vectors[key] for _, key in picked]),
            )
        return len(picked)


def evaluate(
    db: Path, queries: list, fill: int | None, fresh: bool = False, mode: str = "hybrid"
) -> dict:
    from attnswitch.indexing.ann import HnswIndex
    from attnswitch.indexing.index import Index
    from attnswitch.indexing.quick_graph import GRAPH_DIR as QUICK_GRAPH
    from attnswitch.indexing.requests import SearchRequest

    ranks, seconds, encoded = [], [], 0
    if fresh:  # the graph built once, for every copy (a search with fill 0 keeps the index)
        with Index.open(db) as index:
            searcher = index.searcher()
            searcher.fill = 0
            searcher.search(SearchRequest.of(queries[0].text, HITS, "dense"))
    for batch in [[q] for q in queries] if fresh else [queries]:
        where = db
        if fresh:  # this query alone on the index as it was given, its saved graph with it
            where = db.with_name("fresh.sqlite3")
            for made, copy in zip(
                (db, *HnswIndex.paths(db)), (where, *HnswIndex.paths(where)), strict=True
            ):
                copy.unlink(missing_ok=True)
                if made.exists():
                    shutil.copy2(made, copy)
            segments = where.with_name(where.name + QUICK_GRAPH)
            shutil.rmtree(segments, ignore_errors=True)
            if db.with_name(db.name + QUICK_GRAPH).is_dir():
                shutil.copytree(db.with_name(db.name + QUICK_GRAPH), segments)
        with Index.open(where) as index:
            searcher = index.searcher()
            if fill is not None:
                searcher.fill = fill
            for q in batch:
                index.refresh()
                started = time.perf_counter()
                result = searcher.search(SearchRequest.of(q.text, HITS, mode))
                seconds.append(time.perf_counter() - started)
                encoded += 0 if result.filled is None else result.filled.encoded
                ranked = [(h.chunk_id, h.score) for h in result.hits]
                files = {h.chunk_id: h.source for h in result.hits}
                ranks.append((q.kind, file_rank(ranked, files, q.target)))
    with Index.open(db) as index:
        coverage = index.coverage()
    kinds = sorted({kind for kind, _ in ranks})
    return {
        **metrics([r for _, r in ranks]),
        "by_kind": {k: metrics([r for kind, r in ranks if kind == k])["mrr_at_10"] for k in kinds},
        "search_p50_s": statistics.median(seconds),
        "encoded_by_searches": encoded,
        "full_after": coverage.full_fraction,
    }


def paraphrases(path: Path, corpus: Path) -> list:
    """The questions of `path` whose target file is in `corpus`, of the kind "paraphrases"
    (written for this benchmark in other words than their pages: no heading or sentence of
    the page, so keyword search gets no free match)."""
    from search_quality import Query

    wanted = json.loads(path.read_text())
    return [
        Query("paraphrases", q["text"], q["target"])
        for q in wanted
        if (corpus / q["target"]).is_file()
    ]


def drive_queries(drive: Path) -> list:
    """The known items of a drive of benchmarks/drive_build.py, each of its kind of file."""
    from search_quality import Query

    listed = drive.parent / f"{drive.name}.meta" / "queries.json"
    if not listed.is_file():
        raise SystemExit(f"--drive: expected {listed} (drive_build.py), got no file")
    return [Query(q["kind"], q["text"], q["target"]) for q in json.loads(listed.read_text())]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "examples" / "corpus")
    ap.add_argument("--per-kind", type=int, default=40)
    ap.add_argument("--coverage", default="0,25,50,100")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--python-docs", type=int, default=0, metavar="N")
    ap.add_argument("--drive", type=Path, default=None, help="a drive of drive_build.py")
    ap.add_argument(
        "--variant",
        action="append",
        dest="variants",
        help="a variant to run, by name (again for more; default: all)",
    )
    ap.add_argument(
        "--paraphrases",
        type=Path,
        default=None,
        help="a JSON list of {text, target} questions in other words than the documents "
        "(benchmarks/paraphrases_python_docs.json for --python-docs), their own kind",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = args.work or Path(tempfile.mkdtemp(prefix="two-pass-"))
    if args.python_docs:
        from search_quality import python_docs

        args.corpus = python_docs(work / "python-docs-pages", args.python_docs)
    variants = args.variants or list(VARIANTS)
    if set(variants) - set(VARIANTS):
        raise SystemExit(f"--variant: expected names among {list(VARIANTS)}, got {variants}")
    if args.drive:
        args.corpus = args.drive.resolve()
        corpus = Corpus("drive", args.corpus, drive_queries(args.corpus))
    else:
        corpus = Corpus("corpus", args.corpus)
        build_queries(corpus, args.per_kind)
    if args.paraphrases:
        corpus.queries += paraphrases(args.paraphrases, args.corpus)
    full_db, quick_db = work / "full" / "index.sqlite3", work / "quick" / "index.sqlite3"
    if not full_db.exists():
        build(args.corpus, full_db, quick=False)
    if not quick_db.exists():
        build(args.corpus, quick_db, quick=True)
    vectors = full_vectors(full_db)
    reference = evaluate(full_db, corpus.queries, 0)
    dense_reference = evaluate(full_db, corpus.queries, 0, mode="dense")
    rows = [
        {"coverage": 100, "variant": "full index (a plain run)", **reference},
        {"coverage": 100, "variant": "full index, dense mode", **dense_reference},
    ]
    print(f"full index: MRR@10 {reference['mrr_at_10']:.3f}", flush=True)
    for percent in (int(p) for p in args.coverage.split(",")):
        for n, (name, (fill, fresh, mode)) in enumerate(VARIANTS.items()):
            if name not in variants:
                continue
            db = work / f"c{percent}-{n}" / "index.sqlite3"
            shutil.rmtree(db.parent, ignore_errors=True)
            db.parent.mkdir(parents=True)
            shutil.copy2(quick_db, db)
            cover(db, vectors, percent)
            row = {
                "coverage": percent,
                "variant": name,
                **evaluate(db, corpus.queries, fill, fresh, mode),
            }
            rows.append(row)
            print(
                f"{percent:3d}% {name:40} MRR@10 {row['mrr_at_10']:.3f} "
                f"({row['mrr_at_10'] / reference['mrr_at_10']:.3f}x) p50 "
                f"{row['search_p50_s'] * 1e3:.0f} ms, {row['encoded_by_searches']} chunks "
                f"encoded by searches",
                flush=True,
            )
    meta = {
        "command": "python benchmarks/two_pass_quality.py " + " ".join(sys.argv[1:]),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": cpu_description(),
        "cores": os.cpu_count(),
        "queries": len(corpus.queries),
        "corpus": str(
            args.corpus.relative_to(ROOT) if args.corpus.is_relative_to(ROOT) else args.corpus
        ),
    }
    lines = [
        "# Search quality of the two passes",
        "",
        f"Measured {meta['when']} on **{meta['cpu']}**, {meta['cores']} cores; "
        f"`{meta['command']}`: {meta['queries']} known-item queries on {meta['corpus']} "
        + (
            "(the drive's own, drive_build.py)"
            if args.drive
            else "(benchmarks/search_quality.py's sets)"
        )
        + ", file-level MRR@10, each variant as the "
        "script's docstring names it; search p50 per query in this process (a figure of a "
        "quiet machine only when nothing else ran).",
        "",
        "| full vectors before the searches | variant | MRR@10 | x full index | recall@10 | "
        "search p50 ms | chunks encoded by searches | full vectors after |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    kinds = sorted(reference["by_kind"])
    by_kind = [
        "",
        "MRR@10 by kind of query:",
        "",
        "| full vectors before | variant | " + " | ".join(kinds) + " |",
        "|---:|---|" + "---:|" * len(kinds),
    ]
    for r in rows:
        by_kind.append(
            f"| {r['coverage']}% | {r['variant']} | "
            + " | ".join(f"{r['by_kind'].get(k, 0):.3f}" for k in kinds)
            + " |"
        )
    for r in rows:
        lines.append(
            f"| {r['coverage']}% | {r['variant']} | {r['mrr_at_10']:.3f} | "
            f"{r['mrr_at_10'] / reference['mrr_at_10']:.3f} | {r['recall_at_10']:.3f} | "
            f"{r['search_p50_s'] * 1e3:.0f} | {r['encoded_by_searches']:,} | "
            f"{r['full_after']:.0%} |"
        )
    lines += by_kind
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "two_pass_quality.md").write_text("\n".join(lines) + "\n")
    (args.out / "two_pass_quality.json").write_text(
        json.dumps({"meta": meta, "rows": rows}, indent=1)
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
