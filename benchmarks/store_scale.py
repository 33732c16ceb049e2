"""Search at scale in each store: N synthetic 384-d chunks with real words for full-text.

    python benchmarks/store_scale.py [--n 1000000] [--stores sqlite,postgres]
                                     [--queries 200] [--ef 64,128,256]
                                     [--json PATH] [--plot PATH]

For each store: load N chunks (`write_document`, 1,000 chunks per document; vectors from
`synthetic.clustered`, text 24 words of the shipped corpus' vocabulary), build the indexes
after the load (SQLite: the HNSW graph beside the file, `SQLiteStore.sync_index`, on every
core; PostgreSQL: pgvector's HNSW index and the full-text GIN index, dropped after the
first document and created once the rows are in, with `max_parallel_maintenance_workers`
one per core beyond the leader), then report:

- load and index build seconds, and disk size (database and index);
- dense top-10 latency, warm (p50, p99 over `--queries` queries, one thread), and recall@10
  of the ANN against exact search over the same vectors, at the store's default search beam
  (`ef_search`) and at each beam of `--ef` (the recall/latency curve);
- keyword and hybrid top-10 latency (p50), for queries of three corpus words;
- SQLite only: the CLI cold, `attnswitch search QUERY --mode dense --json` in a fresh
  process (median of 3): its wall time, the model's part (loading the default model and
  encoding the query: `timings.tokenizer_s + load_s + encode_s` of its output; the engine's
  runtime import is in its `import_s`), the search (`timings.search_s`)
  and the rest; and the same search path without the model (`NO_MODEL`: a fresh process
  that imports the CLI, opens the store, maps the graph, answers a query vector).
  The store carries the default model's index config so the real command runs; the page
  cache is warm (the machine's memory is not flushed between runs).
- the machine's load average when each store starts and ends.

PostgreSQL runs on a throwaway local cluster (`tests/pg_local.py`) with maintenance_work_mem
4 GB (the 1M graph is built in memory) and shared_buffers 4 GB. Results are written to
`--json` after each store, so a store that finished is kept if a later one does not.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import (  # noqa: E402
    clustered,
    cpu_description,
    exact_top_k,
    synthetic_documents,
    words,
)

DIM = 384
PER_DOC = 1000
K = 10
WORDS_PER_CHUNK = 24

CLI_QUERY = "how do I configure the attention backend"
# The CLI's search path without the model: a fresh process imports the command's modules,
# opens the store, maps the graph and answers one dense query given as a vector.
NO_MODEL = """
import sys, time
t0 = time.perf_counter()
import numpy as np
import attnswitch.cli
from attnswitch.indexing.search import search
from attnswitch.indexing.location import open_store
with open_store(sys.argv[1]) as store:
    hits = search(store, np.load(sys.argv[2]), 10, mode="dense")
print(time.perf_counter() - t0, len(hits))
"""


def documents(n: int, seed: int):
    """(Document, chunks, vectors) of n synthetic chunks, PER_DOC per document."""
    return synthetic_documents(clustered(n, DIM, seed=seed), PER_DOC, WORDS_PER_CHUNK, seed, seed)


def dense_stats(store, x_queries: np.ndarray, truth: np.ndarray, ef: int | None = None) -> dict:
    """Dense top-10 one query at a time with search beam `ef` (default the store's
    `ef_search`): p50 and p99 ms, and recall@10 against exact search."""
    times, found = [], []
    for q in x_queries:
        start = time.perf_counter()
        hits = store.dense(q[None, :], K, ef)[0]
        times.append(time.perf_counter() - start)
        found.append([cid - 1 for cid, _ in hits])  # chunk ids are 1..N in load order
    recall = float(
        np.mean([len(set(f) & set(t.tolist())) / K for f, t in zip(found, truth, strict=True)])
    )
    return {
        "ef_search": store.ef_search if ef is None else ef,
        "dense_p50_ms": ms(times, 50),
        "dense_p99_ms": ms(times, 99),
        "recall_at_10": recall,
    }


def ms(seconds: list[float], percentile: float) -> float:
    return 1e3 * float(np.percentile(seconds, percentile))


def measure(
    store, x_queries: np.ndarray, truth: np.ndarray, texts: list[str], efs: list[int]
) -> dict:
    """Dense stats at the store's default beam, then at each of `efs` (`sweep`), and
    keyword and hybrid p50 (at the default beam)."""
    from attnswitch.indexing.search import search

    store.dense(x_queries[:1], K)  # load the index (the warm state)
    sweep = []
    for ef in efs:
        sweep.append(dense_stats(store, x_queries, truth, ef))
        print(f"  {store.location}: {sweep[-1]}", flush=True)
    result = dense_stats(store, x_queries, truth)
    kw, hy = [], []
    for q, text in zip(x_queries[:50], texts[:50], strict=False):
        start = time.perf_counter()
        search(store, None, K, text=text, mode="keyword")
        kw.append(time.perf_counter() - start)
        start = time.perf_counter()
        search(store, q, K, text=text, mode="hybrid")
        hy.append(time.perf_counter() - start)
    return {**result, "keyword_p50_ms": ms(kw, 50), "hybrid_p50_ms": ms(hy, 50), "sweep": sweep}


def timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def load(store, n: int, after_first=None) -> float:
    """Seconds to write the n synthetic chunks; `after_first(store)` runs after the first
    document (PostgreSQL: drop the indexes, built after the load)."""
    start = time.perf_counter()
    for d, (doc, chunks, vectors) in enumerate(documents(n, seed=0)):
        store.write_document(doc, chunks, vectors)
        if d == 0 and after_first is not None:
            after_first(store)
    return time.perf_counter() - start


def set_default_model_config(store) -> None:
    """Give the synthetic store the default model's index config, so that the real
    `attnswitch search` runs against it (its 384-d vectors fit MiniLM's)."""
    from attnswitch.engines import ModelSpec
    from attnswitch.indexing.config import META_KEY, IndexConfig

    config = IndexConfig.build(ModelSpec.load(None), None, "torch", "fp32")
    assert config.dim == DIM, config.dim
    store.set_meta(META_KEY, config.to_json())


def cli_cold(db: Path, runs: int = 3) -> dict:
    """`attnswitch search --mode dense --json` in fresh processes: the median wall time,
    and the median of wall time less the command's own encode time (model load + encode)."""
    walls, encodes, searches, no_model = [], [], [], []
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    query = db.with_name("query.npy")
    np.save(query, clustered(1, DIM, seed=2, centres_seed=0)[0])
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", NO_MODEL, str(db), str(query)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert out[1] == str(K), out
        no_model.append(float(out[0]))
        start = time.perf_counter()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "attnswitch.cli",
                "search",
                CLI_QUERY,
                "--mode",
                "dense",
                "-k",
                str(K),
                "--db",
                str(db),
                "--json",
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        walls.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise RuntimeError(f"attnswitch search: exit {done.returncode}: {done.stderr}")
        result = json.loads(done.stdout)
        assert len(result["data"]) == K, result
        steps = result["timings"]  # the engine's runtime import is in import_s, not here
        encodes.append(steps["tokenizer_s"] + steps["load_s"] + steps["encode_s"])
        searches.append(result["timings"]["search_s"])
    return {
        "cli_cold_s": float(np.median(walls)),
        "cli_cold_less_encode_s": float(np.median(np.subtract(walls, encodes))),
        "model_load_and_encode_s": float(np.median(encodes)),
        "cli_search_s": float(np.median(searches)),
        "cold_without_model_s": float(np.median(no_model)),
    }


def run_sqlite(
    n: int,
    folder: Path,
    queries: np.ndarray,
    truth: np.ndarray,
    texts: list[str],
    exact_below: int,
    efs: list[int],
) -> dict:
    from attnswitch.indexing.ann import HnswIndex
    from attnswitch.indexing.store import SQLiteStore

    db = folder / "scale.sqlite3"
    with SQLiteStore(db, exact_below=exact_below) as store:
        load_s = load(store, n)
        set_default_model_config(store)
        build_s = timed(store.sync_index)
    graph, header = HnswIndex.paths(db)
    sizes = {
        "db_mb": sum(
            p.stat().st_size for p in folder.glob("scale.sqlite3*") if ".hnsw" not in p.name
        )
        / 2**20,
        "index_mb": (graph.stat().st_size + header.stat().st_size) / 2**20,
    }
    with SQLiteStore(db, exact_below=exact_below) as store:
        result = measure(store, queries, truth, texts, efs)
    return {
        "store": "sqlite",
        "load_s": load_s,
        "build_s": build_s,
        **sizes,
        **result,
        **cli_cold(db),
    }


def run_postgres(
    n: int,
    folder: Path,
    queries: np.ndarray,
    truth: np.ndarray,
    texts: list[str],
    exact_below: int,
    efs: list[int],
) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from pgvector import HalfVector

    from attnswitch.indexing.postgres_schema import HNSW_INDEX, TERMS_INDEX
    from attnswitch.indexing.store_postgres import PostgresStore
    from pg_local import LocalCluster  # tests/pg_local.py: test infrastructure

    workers = max(0, (os.cpu_count() or 1) - 1)  # plus the leader: every core
    settings = {
        "maintenance_work_mem": "4GB",
        "shared_buffers": "4GB",
        "max_parallel_maintenance_workers": str(workers),
    }
    drop = lambda store: store._conn.execute(  # noqa: E731
        "DROP INDEX chunks_embedding_hnsw; DROP INDEX chunks_terms"
    )
    with LocalCluster.start(folder / "pg", settings=settings) as cluster:
        with PostgresStore(cluster.url) as store:
            load_s = load(store, n, after_first=drop)
            conn = store._conn
            build_s = timed(lambda: conn.execute(HNSW_INDEX))
            gin_s = timed(lambda: conn.execute(TERMS_INDEX))
            conn.execute("VACUUM ANALYZE chunks")
            size = lambda rel: (  # noqa: E731
                conn.execute("SELECT pg_total_relation_size(%s)", (rel,)).fetchone()[0] / 2**20
            )
            sizes = {
                "db_mb": size("chunks") + size("documents") - size("chunks_embedding_hnsw"),
                "index_mb": size("chunks_embedding_hnsw"),
            }
            plan = "\n".join(
                r[0]
                for r in conn.execute(
                    "EXPLAIN SELECT id, embedding <#> %s AS d FROM chunks ORDER BY embedding <#> "
                    "%s LIMIT 10",
                    (HalfVector(queries[0]),) * 2,
                )
            )
            result = measure(store, queries, truth, texts, efs)
    return {
        "store": "postgres",
        "load_s": load_s,
        "build_s": build_s,
        "gin_build_s": gin_s,
        **sizes,
        **result,
        "uses_hnsw_index": "chunks_embedding_hnsw" in plan,
        "parallel_workers": workers,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--stores", default="sqlite,postgres")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument(
        "--exact-below",
        type=int,
        default=None,
        help="SQLite: chunks below which search is exact (default the store's)",
    )
    ap.add_argument(
        "--ef",
        default="",
        help="comma-separated search beams to sweep (dense p50/p99 and recall "
        "at each), besides the store's default",
    )
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    x = clustered(args.n, DIM, seed=0)
    queries = clustered(args.queries, DIM, seed=1, centres_seed=0)
    truth = exact_top_k(x, queries, K)
    del x
    vocab = words(3)
    rng = np.random.default_rng(3)
    texts = [
        " ".join(vocab[j] for j in rng.integers(0, len(vocab), 3)) for _ in range(args.queries)
    ]
    from attnswitch.indexing.store import EXACT_BELOW

    exact_below = EXACT_BELOW if args.exact_below is None else args.exact_below
    efs = [int(v) for v in args.ef.split(",") if v.strip()]
    rows = []
    for name in args.stores.split(","):
        with tempfile.TemporaryDirectory(prefix="attnswitch-scale-") as tmp:
            folder = Path(tmp)
            folder.chmod(0o755)
            runner = run_sqlite if name == "sqlite" else run_postgres
            load_before = os.getloadavg()
            start = time.perf_counter()
            row = runner(args.n, folder, queries, truth, texts, exact_below, efs)
            rows.append(
                {
                    **row,
                    "total_s": time.perf_counter() - start,
                    "loadavg_start": load_before,
                    "loadavg_end": os.getloadavg(),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
        if args.json:
            args.json.write_text(
                json.dumps(
                    {"n": args.n, "dim": DIM, "cpu": cpu_description(), "rows": rows}, indent=1
                )
            )
    print(f"\n{args.n:,} chunks x {DIM} dims, {args.queries} queries; {cpu_description()}")
    cols = (
        "store",
        "ef_search",
        "load_s",
        "build_s",
        "db_mb",
        "index_mb",
        "dense_p50_ms",
        "dense_p99_ms",
        "recall_at_10",
        "keyword_p50_ms",
        "hybrid_p50_ms",
    )
    print(" ".join(f"{c:>14}" for c in cols))
    for r in rows:
        print(
            " ".join(
                f"{r[c]:>14}" if isinstance(r[c], str | int) else f"{r[c]:>14.3f}" for c in cols
            )
        )
    for r in rows:
        for point in r["sweep"]:
            print(
                f"{r['store']}: ef_search {point['ef_search']:>5}: dense p50 "
                f"{point['dense_p50_ms']:.2f} ms, p99 {point['dense_p99_ms']:.2f} ms, "
                f"recall@10 {point['recall_at_10']:.4f}"
            )
    for r in rows:
        if "cli_cold_s" in r:
            print(
                f"{r['store']}: cold `attnswitch search` {r['cli_cold_s']:.3f} s, of which "
                f"model load and encode {r['model_load_and_encode_s']:.3f} s and the search "
                f"{r['cli_search_s']:.3f} s; the rest {r['cli_cold_less_encode_s']:.3f} s "
                f"(imports, and torch's teardown at exit); the same search path in a fresh "
                f"process without the model {r['cold_without_model_s']:.3f} s"
            )
    if args.plot:
        plot(rows, args.n, args.plot)


def plot(rows: list[dict], n: int, path: Path) -> None:
    """Left: recall@10 against dense p50 per search beam (the sweep), per store; right:
    bars of dense p50, dense p99 and hybrid p50 at each store's default beam. Also for a
    saved `--json`: `plot(data["rows"], data["n"], path)`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (curve, bars) = plt.subplots(1, 2, figsize=(11, 3.6))
    for r in rows:
        points = sorted(r.get("sweep", []), key=lambda p: p["ef_search"])
        if points:
            (line,) = curve.plot(
                [p["dense_p50_ms"] for p in points],
                [p["recall_at_10"] for p in points],
                "o-",
                label=r["store"],
            )
            for p in points:
                curve.annotate(
                    f"ef {p['ef_search']}",
                    (p["dense_p50_ms"], p["recall_at_10"]),
                    textcoords="offset points",
                    xytext=(4, -10),
                    fontsize=7,
                    color=line.get_color(),
                )
    curve.axhline(0.98, color="grey", linestyle=":", linewidth=1, label="target 0.98")
    curve.set_xscale("log")
    curve.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    curve.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    curve.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    curve.set_xlabel("dense p50 ms (one query, one thread)")
    curve.set_ylabel("recall@10 vs exact")
    curve.set_title(f"{n:,} chunks: the search beam")
    curve.legend(fontsize=8)
    names = [f"{r['store']}\nef {r.get('ef_search', '?')}" for r in rows]
    for i, (key, label) in enumerate(
        (
            ("dense_p50_ms", "dense p50"),
            ("dense_p99_ms", "dense p99"),
            ("hybrid_p50_ms", "hybrid p50"),
        )
    ):
        bars.bar(np.arange(len(rows)) + 0.25 * (i - 1), [r[key] for r in rows], 0.25, label=label)
    bars.set_xticks(np.arange(len(rows)), names)
    bars.set_ylabel("ms per query")
    bars.set_title(
        "at the default beam, recall@10 "
        + ", ".join(f"{r['store']} {r['recall_at_10']:.3f}" for r in rows),
        fontsize=9,
    )
    bars.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
