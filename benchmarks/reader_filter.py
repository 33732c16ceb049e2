"""What a reader's permission filter costs a search (issue 54): the same searches as an
admin (no filter) and as a reader who may read half of the documents, in each store.

    python benchmarks/reader_filter.py [--n 100000] [--per-doc 100] [--stores sqlite,postgres]
                                       [--queries 100] [--json PATH] [--md PATH] [--plot PATH]

The store holds `--n` synthetic 384-d chunks (`synthetic.clustered`, text of the shipped
corpus' words, `--per-doc` chunks a document), loaded as `store_scale.py` loads them. Every
other document is given a permission chain only root may read (a folder of mode 700), the
others one everyone may read (755 folders, a 644 file), through `Store.refresh_access`, as
a run records them; the reader is the Unix user `daemon`, whom neither chain names, so it
may read exactly half of the documents.

For each store and mode (dense, keyword, hybrid; top 10, the query vector given, so the
model's encoding is not in the time and the ratio is the store search's alone, an upper
bound of the whole search's): p50 and p95 over `--queries` queries, one thread, warm, the
admin's and the reader's interleaved query by query, so load drifts alike on both; the
ratio reader / admin of the p50s, and the hits the reader got (k when k readable chunks
match). The issue's bound: the reader's p50 at most 1.2 times the admin's.

PostgreSQL runs on a throwaway local cluster (tests/pg_local.py), indexes built after the
load. Results go to `--json`, a Markdown table to `--md` and a bar chart of the ratios to
`--plot` (PNG), with the CPU named; `--from-json PATH` redraws the table and the chart of
an earlier run without measuring.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import clustered, cpu_description, synthetic_documents, words  # noqa: E402

DIM = 384
K = 10
WORDS_PER_CHUNK = 24
MODES = ("dense", "keyword", "hybrid")


def chains() -> tuple[object, object]:
    """(open, closed): a document everyone may read, and one only root may."""
    from attnswitch.documents.permissions import Access, Step

    folder, file = Step("root", "root", 0o755), Step("root", "root", 0o644)
    closed = Step("root", "root", 0o700)
    return Access((folder, folder, file)), Access((folder, closed, file))


def load(store, n: int, per_doc: int) -> tuple[float, int]:
    """Write the synthetic chunks, then every other document's chain closed; seconds, and
    the documents written."""
    opened, closed = chains()
    start = time.perf_counter()
    sources = []
    for doc, chunks, vectors in synthetic_documents(
        clustered(n, DIM, seed=0), per_doc, WORDS_PER_CHUNK, 0, 0
    ):
        store.write_document(doc, chunks, vectors)
        sources.append(doc.source)
    store.refresh_access(
        "/synthetic", {s: (closed if i % 2 else opened) for i, s in enumerate(sources)}
    )
    return time.perf_counter() - start, len(sources)


def measure(store, queries: np.ndarray, texts: list[str]) -> list[dict]:
    """Per mode: admin and reader p50/p95 ms, the ratio, the reader's hits."""
    from attnswitch.indexing.access import Reader
    from attnswitch.indexing.filters import SearchFilter
    from attnswitch.indexing.search import search

    reader = SearchFilter.for_reader(None, Reader("daemon", frozenset({"daemon"})))
    rows = []
    for mode in MODES:
        for q, text in zip(queries[:3], texts[:3], strict=True):  # warm both paths
            search(store, q, K, text=text, mode=mode)
            search(store, q, K, text=text, mode=mode, where=reader)
        admin, mine, hits = [], [], []
        for q, text in zip(queries, texts, strict=True):
            start = time.perf_counter()
            search(store, q, K, text=text, mode=mode)
            admin.append(time.perf_counter() - start)
            start = time.perf_counter()
            found = search(store, q, K, text=text, mode=mode, where=reader)
            mine.append(time.perf_counter() - start)
            hits.append(len(found))
        a50, r50 = (1e3 * float(np.percentile(t, 50)) for t in (admin, mine))
        rows.append(
            {
                "mode": mode,
                "admin_p50_ms": a50,
                "admin_p95_ms": 1e3 * float(np.percentile(admin, 95)),
                "reader_p50_ms": r50,
                "reader_p95_ms": 1e3 * float(np.percentile(mine, 95)),
                "ratio_p50": r50 / a50,
                "reader_hits_min": min(hits),
            }
        )
        print(f"  {mode}: {rows[-1]}", flush=True)
    return rows


def run_sqlite(folder: Path, n: int, per_doc: int, queries, texts) -> dict:
    from attnswitch.indexing.store import SQLiteStore

    with SQLiteStore(folder / "reader.sqlite3") as store:
        load_s, documents = load(store, n, per_doc)
        store.sync_index()
    with SQLiteStore(folder / "reader.sqlite3") as store:
        return {"store": "sqlite", "load_s": load_s, "documents": documents,
                "modes": measure(store, queries, texts)}  # fmt: skip


def run_postgres(folder: Path, n: int, per_doc: int, queries, texts) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from attnswitch.indexing.store_postgres import PostgresStore
    from pg_local import LocalCluster  # tests/pg_local.py: test infrastructure

    with LocalCluster.start(folder / "pg") as cluster, PostgresStore(cluster.url) as store:
        load_s, documents = load(store, n, per_doc)
        store._conn.execute("VACUUM ANALYZE")
        return {"store": "postgres", "load_s": load_s, "documents": documents,
                "modes": measure(store, queries, texts)}  # fmt: skip


def table(results: list[dict], n: int, cpu: str) -> str:
    lines = [
        f"Reader filter cost, {n:,} chunks, half of the documents forbidden; CPU: {cpu}",
        "",
        "| store | mode | admin p50 ms | reader p50 ms | ratio | admin p95 | reader p95 |"
        " reader hits (min) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for m in r["modes"]:
            lines.append(
                f"| {r['store']} | {m['mode']} | {m['admin_p50_ms']:.1f} | "
                f"{m['reader_p50_ms']:.1f} | {m['ratio_p50']:.2f} | {m['admin_p95_ms']:.1f} | "
                f"{m['reader_p95_ms']:.1f} | {m['reader_hits_min']} |"
            )
    return "\n".join(lines) + "\n"


def plot(results: list[dict], n: int, cpu: str, path: Path) -> None:
    """Reader p50 / admin p50 per store and mode, the issue's bound drawn at 1.2."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.8 / len(MODES)
    for i, mode in enumerate(MODES):
        ratios = [next(m["ratio_p50"] for m in r["modes"] if m["mode"] == mode) for r in results]
        xs = np.arange(len(results)) + (i - (len(MODES) - 1) / 2) * width
        ax.bar(xs, ratios, width, label=mode)
        for x, ratio in zip(xs, ratios, strict=True):
            ax.text(x, ratio, f"{ratio:.2f}", ha="center", va="bottom", fontsize=8)
    ax.axhline(1.2, color="#c44e52", linestyle="--", linewidth=1, label="bound 1.2")
    ax.set_xticks(np.arange(len(results)), [r["store"] for r in results])
    ax.set_ylabel("reader p50 / admin p50")
    ax.set_title(f"{n:,} chunks, half forbidden; {cpu}", fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--per-doc", type=int, default=100)
    ap.add_argument("--stores", default="sqlite,postgres")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--plot", type=Path)
    ap.add_argument("--from-json", type=Path, help="redraw an earlier run's --json")
    args = ap.parse_args()
    if args.from_json:
        earlier = json.loads(args.from_json.read_text())
        cpu = earlier.get("cpu", cpu_description())
        report(earlier["results"], earlier["n"], cpu, args.md, args.plot)
        return
    rng = np.random.default_rng(1)
    vocab = words(0)
    queries = clustered(args.queries, DIM, seed=7)
    texts = [" ".join(rng.choice(vocab, 3)) for _ in range(args.queries)]
    results = []
    with tempfile.TemporaryDirectory(prefix="reader-filter-") as tmp:
        os.chmod(tmp, 0o755)  # the local PostgreSQL cluster runs as an unprivileged user
        for name in args.stores.split(","):
            runner = run_sqlite if name == "sqlite" else run_postgres
            print(f"{name}: loading {args.n:,} chunks", flush=True)
            results.append(runner(Path(tmp), args.n, args.per_doc, queries, texts))
            if args.json:
                args.json.write_text(
                    json.dumps(
                        {"n": args.n, "cpu": cpu_description(), "results": results}, indent=1
                    )
                )
    report(results, args.n, cpu_description(), args.md, args.plot)


def report(results: list[dict], n: int, cpu: str, md: Path | None, chart: Path | None) -> None:
    text = table(results, n, cpu)
    print(text)
    if md:
        md.write_text(text)
    if chart:
        plot(results, n, cpu, chart)


if __name__ == "__main__":
    main()
