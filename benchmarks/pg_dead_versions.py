"""What the full pass's dead row versions cost PostgreSQL's keyword search, and the VACUUM
that removes them.

    python benchmarks/pg_dead_versions.py [--n 100000] [--json PATH] [--plot PATH]

A fill updates its chunk, and PostgreSQL leaves the old version dead, with its entries in
every index of the chunks (the terms' GIN included), until a VACUUM; each seal's lock
cancels autovacuum through a pass (`indexing/postgres_vacuum.py`). This builds `--n`
synthetic chunks (`store_scale.py`'s two-speed data: 1,000 chunks a document, 24 words of
a vocabulary each, quick and full vectors) on a throwaway local cluster (shared_buffers 4
GB, as `store_scale.py`'s), through the quick pass (writes, `sync_index`) and the full pass
(fills of `store_scale.FILL_BATCH`, the run lock held, `sync_index` at its end), two ways,
each in its own process:

- `vacuuming`: the store as it is (the writer vacuums on autovacuum's rule once the quick
  list's graph is gone: `postgres_vacuum.keep`);
- `not_vacuuming`: the same with `postgres_vacuum.keep` doing nothing (the store before it).

After the quick pass, right after the full pass, for the same queries again, and after a
VACUUM by hand, it measures the keyword search (`search(..., mode="keyword")`, p50 of 30
queries of three vocabulary words) and, for the first query, the store's keyword statement
under EXPLAIN (ANALYZE, BUFFERS): the row versions its GIN gave, the live rows, the heap
pages read; and the chunks' dead versions, VACUUMs and heap MiB. It prints a table, writes
the JSON and a plot of keyword p50 and heap pages per step. Autovacuum is left on, as a
server has it. No figure is asserted.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import store_scale  # noqa: E402
from synthetic import cpu_description, synthetic_documents, words  # noqa: E402

WAYS = ("vacuuming", "not_vacuuming")
STEPS = ("after the quick pass", "after the full pass", "again", "after a VACUUM by hand")
QUERIES = 30


def keyword_statement(store, text: str) -> dict:
    """The store's keyword statement (`PostgresStore.keyword`) for `text` under EXPLAIN
    (ANALYZE, BUFFERS): row versions from the GIN, live rows, heap pages, ms."""
    from attnswitch.indexing import analyzer
    from attnswitch.indexing.search import keyword_text
    from attnswitch.indexing.store_postgres import MAX_QUERY_TERMS

    terms, stems = analyzer.query_terms(keyword_text(text), store.languages())
    weights = f"'{{{analyzer.STEM_WEIGHT}, 0, 0, 1}}'::float4[]"
    (plan,) = store._conn.execute(
        f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT id, ts_rank({weights}, terms, q) AS r "
        "FROM chunks, CAST(%s AS tsquery) q WHERE terms @@ q ORDER BY r DESC, id LIMIT %s",
        (analyzer.tsquery_literal(terms[:MAX_QUERY_TERMS], stems[:MAX_QUERY_TERMS]), 20),
    ).fetchone()
    doc = (plan if isinstance(plan, list) else json.loads(plan))[0]
    node, heap = doc["Plan"], None
    while heap is None:
        if node["Node Type"] == "Bitmap Heap Scan":
            heap = node
        elif not node.get("Plans"):
            raise RuntimeError(f"keyword plan: expected a Bitmap Heap Scan, got {doc['Plan']}")
        else:
            node = node["Plans"][0]
    return {
        "gin_versions": int(heap["Plans"][0]["Actual Rows"]),
        "live_rows": int(heap["Actual Rows"]),
        "heap_pages": int(heap.get("Exact Heap Blocks", 0)) + int(heap.get("Lossy Heap Blocks", 0)),
        "statement_ms": float(doc["Execution Time"]),
    }


def measure(store, texts: list[str]) -> dict:
    """Keyword p50 over `texts`, the first one's statement, and the chunks' state."""
    from attnswitch.indexing.search import search

    times = []
    for text in texts:
        start = time.perf_counter()
        search(store, None, store_scale.K, text=text, mode="keyword")
        times.append(time.perf_counter() - start)
    conn = store._conn
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT pg_stat_clear_snapshot()")
    dead, vacuums, heap_mib = conn.execute(
        "SELECT n_dead_tup, vacuum_count, pg_relation_size(relid) / 2.0 ^ 20 "
        "FROM pg_stat_user_tables WHERE relname = 'chunks'"
    ).fetchone()
    return {
        "keyword_p50_ms": float(np.median(times)) * 1000,
        **keyword_statement(store, texts[0]),
        "dead_versions": int(dead),
        "vacuums_by_hand": int(vacuums),
        "heap_mib": float(heap_mib),
    }


def run_way(way: str, n: int) -> dict:
    """Both passes over `n` chunks, the store `way` (`WAYS`), measured at each of `STEPS`."""
    from attnswitch.indexing import postgres_vacuum
    from attnswitch.indexing.store_postgres import PostgresStore
    from attnswitch.indexing.writer import IndexWriter
    from pg_local import LocalCluster  # tests/pg_local.py: test infrastructure

    if way == "not_vacuuming":
        postgres_vacuum.keep = lambda conn, quick_graph: False
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    vocab = words(3)
    rng = np.random.default_rng(3)
    texts = [" ".join(vocab[j] for j in rng.integers(0, len(vocab), 3)) for _ in range(QUERIES)]
    with tempfile.TemporaryDirectory(prefix="attnswitch-dead-versions-") as tmp:
        folder = Path(tmp)
        folder.chmod(0o755)
        full, quick = store_scale.saved_vectors(n, folder)
        settings = {
            "shared_buffers": "4GB",
            "max_parallel_maintenance_workers": str(max(0, (os.cpu_count() or 1) - 1)),
        }
        with (
            LocalCluster.start(folder / "pg", settings=settings) as cluster,
            PostgresStore(cluster.url) as store,
        ):
            store_scale.set_default_model_config(store)
            writer = IndexWriter(store)
            writer.lock()
            writer.set_quick_model(store_scale.QUICK_FINGERPRINT, store_scale.DIM)
            writer.expect_dim(store_scale.DIM)
            seconds, steps = {}, {}
            start = time.perf_counter()
            documents = synthetic_documents(
                full, store_scale.PER_DOC, store_scale.WORDS_PER_CHUNK, 0, 0
            )
            for d, (doc, chunks, _) in enumerate(documents):
                at = d * store_scale.PER_DOC
                writer.write_document(doc, chunks, None, quick=quick[at : at + len(chunks)])
            store.sync_index()
            seconds["quick pass"] = time.perf_counter() - start
            steps[STEPS[0]] = measure(store, texts)
            start = time.perf_counter()
            while batch := store.unencoded(store_scale.FILL_BATCH):
                ids = np.array([u.id for u in batch])
                writer.fill_vectors(ids, [u.vector_key for u in batch], full[ids - 1])
            store.sync_index()
            seconds["full pass"] = time.perf_counter() - start
            writer.unlock(sync=False)
            steps[STEPS[1]] = measure(store, texts)
            steps[STEPS[2]] = measure(store, texts)
            start = time.perf_counter()
            store._conn.execute("VACUUM chunks")
            seconds["VACUUM by hand"] = time.perf_counter() - start
            steps[STEPS[3]] = measure(store, texts)
    return {"way": way, "seconds": seconds, "steps": steps}


def plot(rows: list[dict], n: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    x = np.arange(len(STEPS))
    for i, row in enumerate(rows):
        for ax, key in zip(axes, ("keyword_p50_ms", "heap_pages"), strict=True):
            ax.bar(
                x + (i - 0.5) * 0.38, [row["steps"][s][key] for s in STEPS], 0.38, label=row["way"]
            )
    for ax, title in zip(
        axes, ("keyword search p50, ms", "heap pages a keyword statement read"), strict=True
    ):
        ax.set_xticks(x, [s.replace("after ", "after\n") for s in STEPS], fontsize=8)
        ax.set_title(title)
        ax.legend()
    fig.suptitle(f"PostgreSQL, {n:,} chunks through both passes; {cpu_description()}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--way", choices=WAYS, help=argparse.SUPPRESS)  # one way, in this process
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    if args.way:
        print("RESULT " + json.dumps(run_way(args.way, args.n)), flush=True)
        return
    rows = []
    for way in WAYS:
        load = os.getloadavg()
        out = subprocess.run(
            [sys.executable, __file__, "--n", str(args.n), "--way", way],
            stdout=subprocess.PIPE,
            text=True,
            check=True,
        ).stdout
        (line,) = [x for x in out.splitlines() if x.startswith("RESULT ")]
        rows.append({**json.loads(line[len("RESULT ") :]), "loadavg_start": load})
    print(f"\n{args.n:,} chunks; {cpu_description()}")
    print(
        f"{'way':>14} {'step':>24} {'keyword p50 ms':>15} {'GIN versions':>13} {'live':>7} "
        f"{'heap pages':>11} {'dead':>9} {'vacuums':>8} {'heap MiB':>9}"
    )
    for row in rows:
        for step in STEPS:
            s = row["steps"][step]
            print(
                f"{row['way']:>14} {step:>24} {s['keyword_p50_ms']:>15.1f} {s['gin_versions']:>13,} "
                f"{s['live_rows']:>7,} {s['heap_pages']:>11,} {s['dead_versions']:>9,} "
                f"{s['vacuums_by_hand']:>8} {s['heap_mib']:>9.0f}"
            )
        print(
            f"{row['way']:>14} seconds: "
            + ", ".join(f"{k} {v:.1f}" for k, v in row["seconds"].items())
        )
    if args.json:
        args.json.write_text(
            json.dumps({"n": args.n, "cpu": cpu_description(), "rows": rows}, indent=1)
        )
    if args.plot:
        plot(rows, args.n, args.plot)


if __name__ == "__main__":
    main()
