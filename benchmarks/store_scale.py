"""Search at scale in each store: N synthetic 384-d chunks with real words for full-text.

    python benchmarks/store_scale.py [--n 1000000] [--stores sqlite,postgres]
                                     [--queries 200] [--json PATH] [--plot PATH]

For each store: load N chunks (`write_document`, 1,000 chunks per document; vectors from
`synthetic.clustered`, text 24 words of the shipped corpus' vocabulary), build the ANN
index (SQLite: the HNSW graph beside the file, `SQLiteStore.sync_index`; PostgreSQL:
pgvector's HNSW index, created after the load), then report:

- load and index build seconds, and disk size (database and index);
- dense top-10 latency, warm (p50, p99 over `--queries` queries, one thread), and recall@10
  of the ANN against exact search over the same vectors;
- keyword and hybrid top-10 latency (p50), for queries of three corpus words;
- SQLite only: a cold CLI-style search, a fresh process that opens the store, maps the
  graph and answers one dense query (model load excluded: measured apart, the default
  model's `get_engine()` + one encode, in another fresh process).

PostgreSQL runs on a throwaway local cluster (`pipeline.pg_local`) with
maintenance_work_mem 2 GB for the index build.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import clustered, cpu_description, exact_top_k, words  # noqa: E402

DIM = 384
PER_DOC = 1000
K = 10
WORDS_PER_CHUNK = 24

COLD_SEARCH = """
import sys, time
t0 = time.perf_counter()
import numpy as np
from attnswitch.pipeline.store import SQLiteStore
from attnswitch.pipeline.search import search
q = np.load(sys.argv[2])
with SQLiteStore(sys.argv[1], exact_below=int(sys.argv[3])) as store:
    hits = search(store, q, 10, mode="dense")
print(time.perf_counter() - t0, len(hits))
"""

MODEL_LOAD = """
import time
t0 = time.perf_counter()
from attnswitch.engines import get_engine
get_engine().encode(["a query"])
print(time.perf_counter() - t0)
"""


def documents(n: int, seed: int):
    """(Document, chunks, vectors) of n synthetic chunks, PER_DOC per document."""
    from attnswitch.pipeline.ingest import Document
    from attnswitch.pipeline.store import ChunkRecord

    vocab = words(seed)
    rng = np.random.default_rng(seed)
    x = clustered(n, DIM, seed=seed)
    for d, start in enumerate(range(0, n, PER_DOC)):
        m = min(PER_DOC, n - start)
        picks = rng.integers(0, len(vocab), size=(m, WORDS_PER_CHUNK))
        texts = [" ".join(vocab[j] for j in row) for row in picks]
        doc = Document(root="/synthetic", source=f"doc{d:06d}.txt",
                       path=Path(f"/synthetic/doc{d:06d}.txt"), size=0, mtime_ns=0,
                       sha256=f"{d:064d}", kind="text", text="synthetic")
        yield doc, [ChunkRecord(t, WORDS_PER_CHUNK, 0, len(t)) for t in texts], x[start:start + m]


def measure(store, x_queries: np.ndarray, truth: np.ndarray, texts: list[str]) -> dict:
    from attnswitch.pipeline.search import search

    store.dense(x_queries[:1], K)  # load the index (the warm state)
    times, found = [], []
    for q in x_queries:
        start = time.perf_counter()
        hits = store.dense(q[None, :], K)[0]
        times.append(time.perf_counter() - start)
        found.append([cid - 1 for cid, _ in hits])  # chunk ids are 1..N in load order
    recall = float(np.mean([len(set(f) & set(t.tolist())) / K
                            for f, t in zip(found, truth, strict=True)]))
    kw, hy = [], []
    for q, text in zip(x_queries[:50], texts[:50], strict=False):
        start = time.perf_counter()
        search(store, None, K, text=text, mode="keyword")
        kw.append(time.perf_counter() - start)
        start = time.perf_counter()
        search(store, q, K, text=text, mode="hybrid")
        hy.append(time.perf_counter() - start)
    ms = lambda v, p: 1e3 * float(np.percentile(v, p))  # noqa: E731
    return {"dense_p50_ms": ms(times, 50), "dense_p99_ms": ms(times, 99),
            "recall_at_10": recall, "keyword_p50_ms": ms(kw, 50), "hybrid_p50_ms": ms(hy, 50)}


def run_sqlite(n: int, folder: Path, queries: np.ndarray, truth: np.ndarray,
               texts: list[str], exact_below: int) -> dict:
    from attnswitch.pipeline.ann import HnswIndex
    from attnswitch.pipeline.store import SQLiteStore

    db = folder / "scale.sqlite3"
    with SQLiteStore(db, exact_below=exact_below) as store:
        start = time.perf_counter()
        for doc, chunks, vectors in documents(n, seed=0):
            store.write_document(doc, chunks, vectors)
        load_s = time.perf_counter() - start
        start = time.perf_counter()
        store.sync_index()
        build_s = time.perf_counter() - start
    graph, header = HnswIndex.paths(db)
    sizes = {"db_mb": sum(p.stat().st_size for p in folder.glob("scale.sqlite3*")
                          if ".hnsw" not in p.name) / 2**20,
             "index_mb": (graph.stat().st_size + header.stat().st_size) / 2**20}
    with SQLiteStore(db, exact_below=exact_below) as store:
        result = measure(store, queries, truth, texts)
    qfile = folder / "q.npy"
    np.save(qfile, queries[0])
    colds = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", COLD_SEARCH, str(db), str(qfile),
                              str(exact_below)],
                             capture_output=True, text=True, check=True).stdout.split()
        colds.append(float(out[0]))
    model = subprocess.run([sys.executable, "-c", MODEL_LOAD], capture_output=True,
                           text=True, check=True).stdout.split()
    return {"store": "sqlite", "load_s": load_s, "build_s": build_s, **sizes, **result,
            "cold_search_s": float(np.median(colds)), "model_load_s": float(model[-1])}


def run_postgres(n: int, folder: Path, queries: np.ndarray, truth: np.ndarray,
                 texts: list[str], exact_below: int) -> dict:
    from attnswitch.pipeline.pg_local import LocalCluster
    from attnswitch.pipeline.store_postgres import (HNSW_EF_CONSTRUCTION, HNSW_M,
                                                    PostgresStore)

    with LocalCluster.start(folder / "pg", settings={"maintenance_work_mem": "2GB",
                                                     "shared_buffers": "1GB"}) as cluster:
        with PostgresStore(cluster.url) as store:
            gen = documents(n, seed=0)
            start = time.perf_counter()
            doc, chunks, vectors = next(gen)
            store.write_document(doc, chunks, vectors)  # types the column, makes the index
            store._conn.execute("DROP INDEX chunks_embedding_hnsw")  # built once, after
            for doc, chunks, vectors in gen:
                store.write_document(doc, chunks, vectors)
            load_s = time.perf_counter() - start
            start = time.perf_counter()
            store._conn.execute(
                f"CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding "
                f"vector_ip_ops) WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})")
            build_s = time.perf_counter() - start
            store._conn.execute("ANALYZE chunks")
            size = lambda rel: store._conn.execute(  # noqa: E731
                "SELECT pg_total_relation_size(%s)", (rel,)).fetchone()[0] / 2**20
            sizes = {"db_mb": size("chunks") + size("documents") - size(
                "chunks_embedding_hnsw"), "index_mb": size("chunks_embedding_hnsw")}
            result = measure(store, queries, truth, texts)
    return {"store": "postgres", "load_s": load_s, "build_s": build_s, **sizes, **result}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--stores", default="sqlite,postgres")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--exact-below", type=int, default=None,
                    help="SQLite: chunks below which search is exact (default the store's)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    x = clustered(args.n, DIM, seed=0)
    queries = clustered(args.queries, DIM, seed=1, centres_seed=0)
    truth = exact_top_k(x, queries, K)
    del x
    vocab = words(3)
    rng = np.random.default_rng(3)
    texts = [" ".join(vocab[j] for j in rng.integers(0, len(vocab), 3))
             for _ in range(args.queries)]
    from attnswitch.pipeline.store import EXACT_BELOW

    exact_below = EXACT_BELOW if args.exact_below is None else args.exact_below
    rows = []
    for name in args.stores.split(","):
        with tempfile.TemporaryDirectory(prefix="attnswitch-scale-") as tmp:
            folder = Path(tmp)
            folder.chmod(0o755)
            runner = run_sqlite if name == "sqlite" else run_postgres
            rows.append(runner(args.n, folder, queries, truth, texts, exact_below))
            print(json.dumps(rows[-1]), flush=True)
    print(f"\n{args.n:,} chunks x {DIM} dims, {args.queries} queries; {cpu_description()}")
    cols = ("store", "load_s", "build_s", "db_mb", "index_mb", "dense_p50_ms",
            "dense_p99_ms", "recall_at_10", "keyword_p50_ms", "hybrid_p50_ms")
    print(" ".join(f"{c:>14}" for c in cols))
    for r in rows:
        print(" ".join(f"{r[c]:>14}" if isinstance(r[c], str) else f"{r[c]:>14.3f}"
                       for c in cols))
    for r in rows:
        if "cold_search_s" in r:
            print(f"{r['store']}: cold search in a fresh process {r['cold_search_s']:.3f} s "
                  f"(model load, apart: {r['model_load_s']:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps({"n": args.n, "dim": DIM, "rows": rows}, indent=1))
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3))
        names = [r["store"] for r in rows]
        for i, (key, label) in enumerate((("dense_p50_ms", "dense p50"),
                                          ("dense_p99_ms", "dense p99"),
                                          ("hybrid_p50_ms", "hybrid p50"))):
            ax.bar(np.arange(len(rows)) + 0.25 * (i - 1), [r[key] for r in rows], 0.25,
                   label=label)
        ax.set_xticks(np.arange(len(rows)), names)
        ax.set_ylabel("ms per query")
        ax.set_title(f"{args.n:,} chunks, recall@10 " + ", ".join(
            f"{r['store']} {r['recall_at_10']:.3f}" for r in rows))
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)


if __name__ == "__main__":
    main()
