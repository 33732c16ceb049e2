"""Search at scale in each store: N synthetic 384-d chunks with real words for full-text.

    python benchmarks/store_scale.py [--n 1000000] [--stores sqlite,postgres]
                                     [--queries 200] [--ef 64,128,256]
                                     [--two-speed [--fill-types-column]]
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

`--two-speed` measures instead the store's life under the two passes (issue 52;
docs/architecture.md, "Two passes"), as a run writes it, with no index dropped or
built by hand:

1. the quick pass: the full vectors' dimension told first, as a run's quick pass tells it
   (`IndexWriter.expect_dim`: PostgreSQL types its column while it is empty; with
   `--fill-types-column` it is not told, and the first fill types the column, as for a
   store a version before it wrote), then every chunk written with a quick vector and no
   full one (`write_document(..., vectors=None, quick=...)`; the quick vectors are the
   chunks' vectors moved off them by noise, so the two lists differ as a static model's
   and the transformer's do), then `sync_index` (SQLite: the quick graph's segments;
   PostgreSQL: the quick list's HNSW index);
2. search then: quick top-10 (p50, p99 warm; recall@10 against exact search over the
   quick vectors) and keyword p50, and cold: a fresh process that imports the store,
   opens it and answers one quick query, after the OS page cache is dropped (where the
   benchmark runs as root; `cold_cache_dropped` says whether it was; PostgreSQL's shared
   buffers are kept);
3. the full pass: the chunks without a full vector read back as the full pass reads them
   (`unencoded`, 10,000 at a time) and filled (`fill_vectors`), then `sync_index` (the
   full vectors' graph; the quick list emptied). Halfway, with the run lock still held, a
   fresh process's first dense search (seconds and peak RSS: what opening the full
   vectors' graph costs a search during the pass) and the writer's own dense p50 and
   recall against the vectors stored so far (`during_full`);
4. search then: dense (p50, p99, recall@10), keyword and hybrid p50, and cold dense.

Each stage reports its seconds and chunks a second, the store's size on disk after it, and
the benchmark process's anonymous resident memory (its heap and the graphs it builds; the
vectors it writes are mapped from .npy files) at its peak during the stage and after it.
PostgreSQL's server processes are not counted.

PostgreSQL runs on a throwaway local cluster (`tests/pg_local.py`) with shared_buffers 4 GB;
the one-shot mode sets maintenance_work_mem 4 GB (its graph of every vector is built in
memory), `--two-speed` leaves the server's default (64 MB), as a user's server has it: the
store asks for what each of its builds needs (`postgres_segments.fit_build_memory`). Results
are written to `--json` after each store, so a store that finished is kept if a later one
does not.
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

# The first search of a fresh process without the model, by kind ("quick" or "dense"):
# imports, opening the store, mapping its graphs, one top-10 query given as a vector.
COLD_SEARCH = """
import sys, time
t0 = time.perf_counter()
import numpy as np
from attnswitch.indexing.location import open_store
with open_store(sys.argv[1]) as store:
    hits = getattr(store, sys.argv[3])(np.load(sys.argv[2])[None, :], 10)[0]
print(time.perf_counter() - t0, len(hits))
"""
# Appended to `COLD_SEARCH`: the process's peak RSS in MiB (VmHWM, its own since exec:
# getrusage's ru_maxrss keeps the peak of the benchmark process it was forked from),
# printed after its answer.
RSS_AFTER = """
from pathlib import Path
status = Path("/proc/self/status").read_text().splitlines()
print(next(int(l.split()[1]) for l in status if l.startswith("VmHWM:")) / 1024)
"""
QUICK_NOISE = 0.35  # how far a chunk's quick vector lies from its full one (unit vectors)
QUICK_FINGERPRINT = "store-scale-synthetic-static-model"
FILL_BATCH = 10_000


def documents(n: int, seed: int):
    """(Document, chunks, vectors) of n synthetic chunks, PER_DOC per document."""
    return synthetic_documents(clustered(n, DIM, seed=seed), PER_DOC, WORDS_PER_CHUNK, seed, seed)


def dense_stats(store, x_queries: np.ndarray, truth: np.ndarray, ef: int | None = None) -> dict:
    """Dense top-10 one query at a time with search beam `ef` (default the store's
    `ef_search`): p50 and p99 ms, and recall@10 against exact search."""
    stats = latency(store, "dense", x_queries, truth, ef)
    return {
        "ef_search": store.ef_search if ef is None else ef,
        "dense_p50_ms": stats["dense_p50_ms"],
        "dense_p99_ms": stats["dense_p99_ms"],
        "recall_at_10": stats["dense_recall_at_10"],
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
        no_model.append(fresh_search(NO_MODEL, str(db), str(query)))
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

    from attnswitch.indexing.postgres_schema import TERMS_INDEX
    from attnswitch.indexing.postgres_segments import layout, parts, seal
    from attnswitch.indexing.store_postgres import PostgresStore
    from pg_local import LocalCluster  # tests/pg_local.py: test infrastructure

    workers = max(0, (os.cpu_count() or 1) - 1)  # plus the leader: every core
    settings = {
        "maintenance_work_mem": "4GB",
        "shared_buffers": "4GB",
        "max_parallel_maintenance_workers": str(workers),
    }
    drop = lambda store: store._conn.execute("DROP INDEX chunks_terms")  # noqa: E731
    with LocalCluster.start(folder / "pg", settings=settings) as cluster:
        with PostgresStore(cluster.url) as store:
            # written without the run lock, the vectors stay in the tail: one segment of
            # them all is built once they are in (`postgres_segments.seal`)
            load_s = load(store, n, after_first=drop)
            conn = store._conn
            build_s = timed(lambda: seal(conn, at=1))
            gin_s = timed(lambda: conn.execute(TERMS_INDEX))
            conn.execute("VACUUM ANALYZE chunks")
            size = lambda rel: (  # noqa: E731
                conn.execute("SELECT pg_total_relation_size(%s)", (rel,)).fetchone()[0] / 2**20
            )
            generation, segments = layout(conn)
            index_mb = sum(size(segment.name) for segment in segments)
            sizes = {
                "db_mb": size("chunks") + size("documents") - index_mb,
                "index_mb": index_mb,
            }
            (among, _), *_ = parts(generation, segments)
            plan = "\n".join(
                r[0]
                for r in conn.execute(
                    f"EXPLAIN SELECT id, embedding <#> %s AS d FROM chunks WHERE {among} "
                    "ORDER BY embedding <#> %s LIMIT 10",
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
        "uses_hnsw_index": "Index Scan using chunks_full_" in plan,
        "parallel_workers": workers,
    }


def quick_of(x: np.ndarray, seed: int) -> np.ndarray:
    """Quick vectors for chunks whose full vectors are `x` (`[n, DIM]`, unit rows): each
    row moved by Gaussian noise of norm about `QUICK_NOISE` and normalised again."""
    rng = np.random.default_rng(seed)
    moved = x + rng.normal(scale=QUICK_NOISE / np.sqrt(x.shape[1]), size=x.shape).astype(np.float32)
    return moved / np.linalg.norm(moved, axis=1, keepdims=True)


def saved_vectors(n: int, folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """The n chunks' full vectors (`clustered`, seed 0, as the plain benchmark's) and
    their quick vectors (`quick_of`, per block of `PER_DOC`), each `[n, DIM]` float32,
    written to .npy files in `folder` and mapped read-only from them, so the benchmark's
    data lies in the page cache and not in its own heap."""
    x = clustered(n, DIM, seed=0)
    np.save(folder / "full.npy", x)
    quick = np.lib.format.open_memmap(folder / "quick.npy", "w+", np.float32, x.shape)
    for d, start in enumerate(range(0, n, PER_DOC)):
        quick[start : start + PER_DOC] = quick_of(x[start : start + PER_DOC], 10_000 + d)
    quick.flush()
    del x, quick
    return tuple(np.load(folder / f"{kind}.npy", mmap_mode="r") for kind in ("full", "quick"))


def anon_mib() -> float:
    """This process's anonymous resident memory (`RssAnon`), MiB: its heap and the graphs
    it builds, not the files it maps."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("/proc/self/status: expected an RssAnon line, got none")


class AnonPeak:
    """The highest `anon_mib` seen while in the `with` block, sampled every 0.1 s in a
    thread (`peak`)."""

    def __enter__(self) -> AnonPeak:
        import threading

        self.peak = anon_mib()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._done.wait(0.1):
            self.peak = max(self.peak, anon_mib())

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, anon_mib())


def stage(name: str, chunks: int, call, disk) -> dict:
    """Run `call()` as the stage `name` over `chunks` chunks: its seconds, chunks a second,
    the store's MiB on disk after it (`disk()`) and the process's anonymous memory at its
    peak during the stage and after it."""
    with AnonPeak() as memory:
        seconds = timed(call)
    row = {
        "stage": name,
        "seconds": seconds,
        "chunks_per_s": chunks / seconds if seconds else None,
        "disk_mb": disk(),
        "anon_peak_mb": memory.peak,
        "anon_after_mb": anon_mib(),
    }
    print(f"  {name}: {json.dumps(row)}", flush=True)
    return row


def fresh_search(script: str, *args: str) -> float:
    """Run `script` (`NO_MODEL`, `COLD_SEARCH`) with `args` in a fresh interpreter: the
    seconds it prints, once its top-10 came back whole."""
    out = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[1] == str(K), out
    return float(out[0])


def drop_page_cache() -> bool:
    """Write dirty pages back and drop the OS page cache (Linux, as root): whether it was
    dropped."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    except OSError:
        return False
    return True


def cold_search(location: str, query: np.ndarray, kind: str, folder: Path, runs: int = 3) -> dict:
    """`COLD_SEARCH` (a fresh process's first `kind` top-10), each run after the page
    cache is dropped where this process may drop it: the median seconds
    (`cold_<kind>_s`) and whether the cache was dropped (`cold_cache_dropped`)."""
    path = folder / f"cold_{kind}.npy"
    np.save(path, query)
    times, dropped = [], []
    for _ in range(runs):
        dropped.append(drop_page_cache())
        times.append(fresh_search(COLD_SEARCH, location, str(path), kind))
    return {f"cold_{kind}_s": float(np.median(times)), "cold_cache_dropped": all(dropped)}


def latency(
    store, kind: str, queries: np.ndarray, truth: np.ndarray, ef: int | None = None
) -> dict:
    """`kind` ("quick" or "dense") top-10 with search beam `ef` (default the store's), one
    query at a time: p50 and p99 ms, and recall@10 against `truth` (row indices; chunk ids
    are 1..N in load order)."""
    call = getattr(store, kind)
    call(queries[:1], K, ef=ef)  # map the graphs (the warm state)
    times, found = [], []
    for q in queries:
        start = time.perf_counter()
        hits = call(q[None, :], K, ef=ef)[0]
        times.append(time.perf_counter() - start)
        found.append({cid - 1 for cid, _ in hits})
    recall = float(
        np.mean([len(f & set(t.tolist())) / K for f, t in zip(found, truth, strict=True)])
    )
    return {
        f"{kind}_p50_ms": ms(times, 50),
        f"{kind}_p99_ms": ms(times, 99),
        f"{kind}_recall_at_10": recall,
    }


def text_latency(store, queries: np.ndarray, texts: list[str], hybrid: bool) -> dict:
    """Keyword (and, with `hybrid`, hybrid) top-10 p50 ms over the first 50 queries."""
    from attnswitch.indexing.search import search

    kw, hy = [], []
    for q, text in zip(queries[:50], texts[:50], strict=False):
        kw.append(timed(lambda text=text: search(store, None, K, text=text, mode="keyword")))
        if hybrid:
            hy.append(timed(lambda q=q, text=text: search(store, q, K, text=text, mode="hybrid")))
    return {"keyword_p50_ms": ms(kw, 50), **({"hybrid_p50_ms": ms(hy, 50)} if hybrid else {})}


def two_speed(
    store, location: str, folder: Path, data: dict, disk, expect_dim: bool = True
) -> dict:
    """The store's life under the two passes (the module doc's `--two-speed`): the stages'
    rows, and the searches after the quick pass (`after_quick`) and after the full pass
    (`after_full`). `data`: "full" and "quick" vectors `[n, DIM]`, "queries" and
    "quick_queries", their exact top-10 "truth" and "quick_truth", and "texts".
    `expect_dim`: the full vectors' dimension told before the quick pass writes."""
    from attnswitch.indexing.writer import IndexWriter

    full, quick = data["full"], data["quick"]
    n = len(full)
    writer = IndexWriter(store)  # the run lock held through both passes, as a run holds it
    writer.lock()
    writer.set_quick_model(QUICK_FINGERPRINT, DIM)
    if expect_dim:  # as a run's quick pass does (jobs/passes.py, `QuickPass`)
        writer.expect_dim(DIM)

    def quick_pass() -> None:
        documents = synthetic_documents(full, PER_DOC, WORDS_PER_CHUNK, 0, 0)
        for d, (doc, chunks, _) in enumerate(documents):
            start = d * PER_DOC
            writer.write_document(doc, chunks, None, quick=quick[start : start + len(chunks)])

    filled = [0]  # full vectors written so far (the store starts with none)

    def full_pass(upto: int) -> None:
        while filled[0] < upto and (batch := store.unencoded(FILL_BATCH)):
            ids = np.array([u.id for u in batch])
            writer.fill_vectors(ids, [u.vector_key for u in batch], full[ids - 1])
            filled[0] += len(batch)

    stages = [
        stage("quick pass: write", n, quick_pass, disk),
        stage("quick pass: sync_index", n, store.sync_index, disk),
    ]
    after_quick = {
        **latency(store, "quick", data["quick_queries"], data["quick_truth"]),
        **text_latency(store, data["queries"], data["texts"], hybrid=False),
        **cold_search(location, data["quick_queries"][0], "quick", folder),
    }
    print(f"  after the quick pass: {json.dumps(after_quick)}", flush=True)
    half = n // 2
    stages.append(stage("full pass: first half", half, lambda: full_pass(half), disk))
    during_full = fresh_during(store, location, data, folder)
    print(f"  at half the full pass: {json.dumps(during_full)}", flush=True)
    stages += [
        stage("full pass: second half", n - half, lambda: full_pass(n), disk),
        stage("full pass: sync_index", n, store.sync_index, disk),
    ]
    writer.unlock(sync=False)
    after_full = {
        **latency(store, "dense", data["queries"], data["truth"]),
        **text_latency(store, data["queries"], data["texts"], hybrid=True),
        **cold_search(location, data["queries"][0], "dense", folder),
        "quick_hits_left": len(store.quick(data["quick_queries"][:1], K)[0]),
    }
    print(f"  after the full pass: {json.dumps(after_full)}", flush=True)
    return {
        "stages": stages,
        "after_quick": after_quick,
        "during_full": during_full,
        "after_full": after_full,
    }


def fresh_during(store, location: str, data: dict, folder: Path) -> dict:
    """While the full pass holds the run lock, half its vectors written: a fresh process's
    first dense top-10 (`COLD_SEARCH`, the page cache kept: what a search opening the store
    then pays for the graphs, in seconds and its peak RSS), and this process's dense p50
    and recall (the writer's own searches)."""
    path = folder / "during_dense.npy"
    np.save(path, data["queries"][0])
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", COLD_SEARCH + RSS_AFTER, location, str(path), "dense"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    wall = time.perf_counter() - start
    encoded = store.coverage().full  # both stores' (SQLite's `encoded` is its own)
    truth = exact_truth(store, data["queries"][:50])
    return {
        "encoded": encoded,
        "fresh_dense_s": float(out[0]),
        "fresh_wall_s": wall,
        "fresh_rss_mib": float(out[2]),
        **latency(store, "dense", data["queries"][:50], truth),
    }


def exact_truth(store, queries: np.ndarray) -> np.ndarray:
    """The exact top-10 row indices (chunk id - 1) of `queries` among the full vectors
    stored now."""
    ids, matrix = store.vectors()
    scores = queries @ matrix.T
    top = np.argsort(-scores, axis=1)[:, :K]
    return ids[top] - 1


def tree_mb(paths) -> float:
    """MiB on disk of these files and folders (those that exist)."""
    total = 0
    for path in paths:
        if path.is_dir():
            total += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        elif path.exists():
            total += path.stat().st_size
    return total / 2**20


def two_speed_sqlite(folder: Path, data: dict, exact_below: int, expect_dim: bool) -> dict:
    from attnswitch.indexing.store import SQLiteStore

    db = folder / "scale.sqlite3"
    with SQLiteStore(db, exact_below=exact_below) as store:
        set_default_model_config(store)
        own = store.own_files()
        result = two_speed(store, str(db), folder, data, lambda: tree_mb(own), expect_dim)
        return {"store": "sqlite", **result}


def two_speed_postgres(folder: Path, data: dict, exact_below: int, expect_dim: bool) -> dict:
    del exact_below  # SQLite's setting: PostgreSQL's quick list has its own (quick_exact_below)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from attnswitch.indexing.postgres_segments import layout, tail_size
    from attnswitch.indexing.store_postgres import PostgresStore
    from pg_local import LocalCluster  # tests/pg_local.py: test infrastructure

    settings = {
        "shared_buffers": "4GB",
        "max_parallel_maintenance_workers": str(max(0, (os.cpu_count() or 1) - 1)),
    }
    with LocalCluster.start(folder / "pg", settings=settings) as cluster:
        with PostgresStore(cluster.url) as store:
            set_default_model_config(store)
            conn = store._conn
            disk = lambda: (  # noqa: E731
                conn.execute("SELECT pg_database_size(current_database())").fetchone()[0] / 2**20
            )
            result = two_speed(store, cluster.url, folder, data, disk, expect_dim)
            generation, segments = layout(conn)
            result["after_full"]["segments"] = [[s.lo, s.hi, s.rows] for s in segments]
            result["after_full"]["tail"] = tail_size(conn, generation, len(data["full"]))
            print(f"  full vectors' segments [lo, hi, rows]: {result['after_full']['segments']}")
            (memory,) = conn.execute("SHOW maintenance_work_mem").fetchone()
            return {
                "store": "postgres",
                "server": {**settings, "maintenance_work_mem": memory},
                **result,
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
    ap.add_argument(
        "--two-speed",
        action="store_true",
        help="measure the store through the quick pass and then the full pass instead",
    )
    ap.add_argument(
        "--fill-types-column",
        action="store_true",
        help="--two-speed: do not tell the store the full vectors' dimension before the "
        "quick pass (its first fill types the column)",
    )
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    if args.two_speed:
        main_two_speed(args)
        return
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


def main_two_speed(args: argparse.Namespace) -> None:
    """`--two-speed`: each store through the two passes (`two_speed`), a table of the
    stages and searches, the JSON after each store and the plot."""
    from attnswitch.indexing.store import EXACT_BELOW

    exact_below = EXACT_BELOW if args.exact_below is None else args.exact_below
    runners = {"sqlite": two_speed_sqlite, "postgres": two_speed_postgres}
    rows = []
    with tempfile.TemporaryDirectory(prefix="attnswitch-scale-data-") as data_dir:
        full, quick = saved_vectors(args.n, Path(data_dir))
        queries = clustered(args.queries, DIM, seed=1, centres_seed=0)
        quick_queries = quick_of(queries, 1)
        vocab = words(3)
        rng = np.random.default_rng(3)
        data = {
            "full": full,
            "quick": quick,
            "queries": queries,
            "quick_queries": quick_queries,
            "truth": exact_top_k(full, queries, K),
            "quick_truth": exact_top_k(quick, quick_queries, K),
            "texts": [
                " ".join(vocab[j] for j in rng.integers(0, len(vocab), 3))
                for _ in range(args.queries)
            ],
        }
        for name in args.stores.split(","):
            with tempfile.TemporaryDirectory(prefix="attnswitch-scale-") as tmp:
                folder = Path(tmp)
                folder.chmod(0o755)
                load_before = os.getloadavg()
                row = runners[name](folder, data, exact_below, not args.fill_types_column)
                rows.append({**row, "loadavg_start": load_before, "loadavg_end": os.getloadavg()})
            if args.json:
                args.json.write_text(
                    json.dumps(
                        {
                            "n": args.n,
                            "dim": DIM,
                            "cpu": cpu_description(),
                            "two_speed": True,
                            "expect_dim": not args.fill_types_column,
                            "rows": rows,
                        },
                        indent=1,
                    )
                )
    print(f"\n{args.n:,} chunks x {DIM} dims, both kinds of vector; {cpu_description()}")
    print(
        f"{'store':>9} {'stage':>26} {'seconds':>9} {'chunks/s':>10} {'disk MiB':>9} "
        f"{'anon peak MiB':>14} {'anon after MiB':>15}"
    )
    for r in rows:
        for st in r["stages"]:
            print(
                f"{r['store']:>9} {st['stage']:>26} {st['seconds']:>9.1f} "
                f"{st['chunks_per_s']:>10.0f} {st['disk_mb']:>9.0f} {st['anon_peak_mb']:>14.0f} "
                f"{st['anon_after_mb']:>15.0f}"
            )
    for r in rows:
        for when in ("after_quick", "during_full", "after_full"):
            print(
                f"{r['store']}, {when.replace('_', ' the ')} pass: "
                + ", ".join(
                    f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                    for k, v in r[when].items()
                )
            )
    if args.plot:
        plot_two_speed(rows, args.n, args.plot)


def plot_two_speed(rows: list[dict], n: int, path: Path) -> None:
    """Left: each stage's seconds per store; right: search p50 and p99 after the quick
    pass (quick list) and after the full pass (dense), per store."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (times, searches) = plt.subplots(1, 2, figsize=(11, 3.6))
    names = [st["stage"] for st in rows[0]["stages"]] if rows else []
    width = 0.8 / max(1, len(rows))
    for i, r in enumerate(rows):
        times.bar(
            np.arange(len(names)) + width * (i - (len(rows) - 1) / 2),
            [st["seconds"] for st in r["stages"]],
            width,
            label=r["store"],
        )
    times.set_xticks(
        np.arange(len(names)), [name.replace(": ", ":\n") for name in names], fontsize=7
    )
    times.set_ylabel("seconds")
    times.set_title(f"{n:,} chunks: the two passes' stages")
    times.legend(fontsize=8)
    labels = ["quick p50", "quick p99", "dense p50", "dense p99"]
    keys = [
        ("after_quick", "quick_p50_ms"),
        ("after_quick", "quick_p99_ms"),
        ("after_full", "dense_p50_ms"),
        ("after_full", "dense_p99_ms"),
    ]
    for i, r in enumerate(rows):
        searches.bar(
            np.arange(len(keys)) + width * (i - (len(rows) - 1) / 2),
            [r[when][key] for when, key in keys],
            width,
            label=r["store"],
        )
    searches.set_xticks(np.arange(len(keys)), labels)
    searches.set_ylabel("ms per top-10 query (warm, one thread)")
    searches.set_title("after the quick pass and after the full pass", fontsize=9)
    searches.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


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
