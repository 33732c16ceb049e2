"""Warm search: what a search costs in a process that stays up (a script, the service), on
the index `make run` builds and on a 100,000-chunk index, in both stores.

Indexes (built first, not timed):
- "corpus": `attnswitch run examples/corpus` (the index `make run` builds; `--db-small`
  takes one already built for SQLite), in SQLite and in PostgreSQL;
- "100k": `--n` synthetic chunks (`store_scale.documents`: clustered 384-d vectors, 24
  corpus words each) with the default model's index config, the HNSW graph built (SQLite:
  beside the file; PostgreSQL: pgvector's HNSW and the full-text GIN index), so a hybrid
  search encodes the query with the real model.

Contenders, each in a process of its own, one after the other (nothing else runs beside
them), on the same `--queries` questions, hybrid mode, k=10, after 5 untimed searches:
- `attnswitch.search`: the Python call, `attnswitch.search(q, db=LOCATION, k=10)`, as a
  script calls it;
- `Index reused`: `Index.open(LOCATION)` once, then `searcher.search(SearchRequest)` per
  query (what the service and a long-running script do);
- `service`: `attnswitch serve --db LOCATION` (`python -m attnswitch.service`), a client
  process posting `/v1/search` one request at a time (httpx, one keep-alive connection).

Each query's wall time is taken in the contender's process (spawn and load excluded).
Prints a table; writes `warm_search.md`, `warm_search.json` and `warm_search.png` to
`--out`, with the CPU model, its ISA flags and the load average before and after.

    python benchmarks/warm_search.py [--n 100000] [--stores sqlite,postgres] [--rounds 3]
        [--db-small DIR] [--out docs/results] [--work DIR]

Timings on a busy machine say little: run it on a quiet one.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))
from synthetic import cpu_description  # noqa: E402

K = 10
WARMUP = 5
# The 100k graph is built in memory, as store_scale.py builds it.
PG_SETTINGS = {"maintenance_work_mem": "2GB", "shared_buffers": "1GB"}
# Questions about the corpus' pages (PostgreSQL, SQLite, Python and Debian manuals), as a
# user types them; the synthetic index holds the same vocabulary.
QUERIES = (
    "how do I update rows in a table",
    "write-ahead log checkpoint",
    "json functions extract a value",
    "vacuum and analyze a database",
    "create an index on an expression",
    "foreign key constraint on delete cascade",
    "window functions over partitions",
    "transaction isolation levels",
    "full text search ranking",
    "backup and restore a database",
    "regular expressions in queries",
    "date and time functions",
    "python list comprehension",
    "subprocess run a command and capture output",
    "configure the network interface",
    "install a package from the archive",
    "join two tables on a column",
    "type affinity of columns",
    "upsert insert or update on conflict",
    "trigger that runs after insert",
)

# One contender's process: prints the seconds of each timed query as JSON.
PYTHON_CALL = """
import json, sys, time
import attnswitch
location, queries, rounds, warmup, k = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
for q in queries[:warmup]:
    attnswitch.search(q, db=location, k=k)
out = []
for _ in range(rounds):
    for q in queries:
        t = time.perf_counter()
        attnswitch.search(q, db=location, k=k)
        out.append(time.perf_counter() - t)
print(json.dumps(out))
"""

INDEX_REUSED = """
import json, sys, time
from attnswitch.indexing.index import Index
from attnswitch.indexing.requests import SearchRequest
location, queries, rounds, warmup, k = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
with Index.open(location) as index:
    searcher = index.searcher()
    for q in queries[:warmup]:
        searcher.search(SearchRequest.of(q, k))
    out = []
    for _ in range(rounds):
        for q in queries:
            t = time.perf_counter()
            searcher.search(SearchRequest.of(q, k))
            out.append(time.perf_counter() - t)
print(json.dumps(out))
"""

SERVICE_CLIENT = """
import json, sys, time
import httpx
url, queries, rounds, warmup, k = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
with httpx.Client(base_url=url, timeout=60) as client:
    for q in queries[:warmup]:
        client.post("/v1/search", json={"query": q, "k": k}).raise_for_status()
    out = []
    for _ in range(rounds):
        for q in queries:
            t = time.perf_counter()
            client.post("/v1/search", json={"query": q, "k": k}).raise_for_status()
            out.append(time.perf_counter() - t)
print(json.dumps(out))
"""


def contender(code: str, target: str, rounds: int) -> list[float]:
    """The per-query seconds `code` prints, run in a fresh process against `target`."""
    done = subprocess.run(
        [sys.executable, "-c", code, target, json.dumps(QUERIES), str(rounds), str(WARMUP), str(K)],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=3600,
    )
    if done.returncode != 0:
        raise SystemExit(f"contender failed on {target}:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def service(location: str, work: Path, rounds: int) -> list[float]:
    """The service's per-request seconds, seen by a client process."""
    from attnswitch.service import launch

    server = launch.start(work / "serve", "--db", location, timeout=600, poll_s=0.05)
    try:
        return contender(SERVICE_CLIENT, server.url, rounds)
    finally:
        server.stop()


def build_corpus(location: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnswitch",
            "run",
            str(ROOT / "examples" / "corpus"),
            "--db",
            location,
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=7200,
    )
    if done.returncode != 0:
        raise SystemExit(f"attnswitch run failed:\n{done.stderr[-4000:]}")


def build_synthetic(location: str | Path, n: int) -> None:
    """`n` synthetic chunks with the default model's config, its ANN index built."""
    from attnswitch.indexing.index import Index
    from store_scale import load, set_default_model_config

    with Index.open_store(location) as store:
        if isinstance(location, Path):
            load(store, n)
            set_default_model_config(store)
            store.sync_index()
        else:  # pgvector's indexes, built once the rows are in (as store_scale does)
            from attnswitch.indexing.postgres_schema import TERMS_INDEX
            from attnswitch.indexing.postgres_segments import seal

            drop = lambda s: s._conn.execute("DROP INDEX chunks_terms")  # noqa: E731
            load(store, n, after_first=drop)
            set_default_model_config(store)
            seal(store._conn, at=1)  # the vectors, all in the tail, made one segment
            store._conn.execute(TERMS_INDEX)
            store._conn.execute("VACUUM ANALYZE chunks")


def chunks_of(location: str | Path) -> int:
    from attnswitch.indexing.index import Index

    with Index.open(location) as index:
        return index.count()


def ms(seconds: list[float], q: float) -> float:
    return 1e3 * float(np.percentile(seconds, q))


def measure(store: str, size: str, location: str, work: Path, rounds: int) -> list[dict]:
    rows = []
    for name, run in (
        ("attnswitch.search", lambda: contender(PYTHON_CALL, location, rounds)),
        ("Index reused", lambda: contender(INDEX_REUSED, location, rounds)),
        ("service", lambda: service(location, work / f"{store}-{size}", rounds)),
    ):
        seconds = run()
        row = {
            "store": store,
            "index": size,
            "chunks": chunks_of(location),
            "contender": name,
            "queries": len(seconds),
            "p50_ms": ms(seconds, 50),
            "p90_ms": ms(seconds, 90),
        }
        print(
            f"{store:9} {size:7} {row['chunks']:>8,} {name:18} p50 {row['p50_ms']:7.1f} ms"
            f"  p90 {row['p90_ms']:7.1f} ms",
            flush=True,
        )
        rows.append(row)
    return rows


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [
        "# Warm search: one process that stays up",
        "",
        f"`{meta['command']}`",
        "",
        f"Measured {meta['when']} on **{meta['cpu']}**, {meta['cores']} cores; load average "
        f"{meta['load_before']} before, {meta['load_after']} after. Hybrid mode, k={K}, "
        f"{len(QUERIES)} questions x {meta['rounds']} rounds after {WARMUP} untimed; each "
        "contender in its own process, nothing else running beside it.",
        "",
        "| store | index | chunks | contender | p50 ms | p90 ms |",
        "|---|---|---:|---|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['store']} | {r['index']} | {r['chunks']:,} | {r['contender']} | "
            f"{r['p50_ms']:.1f} | {r['p90_ms']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(r["store"], r["index"]) for r in rows})
    names = list(dict.fromkeys(r["contender"] for r in rows))
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [
            next(
                (
                    r["p50_ms"]
                    for r in rows
                    if (r["store"], r["index"]) == g and r["contender"] == name
                ),
                0.0,
            )
            for g in groups
        ]
        ax.bar(np.arange(len(groups)) + i * width, values, width, label=name)
    ax.set_xticks(np.arange(len(groups)) + 0.4 - width / 2)
    ax.set_xticklabels([f"{s}\n{i}" for s, i in groups])
    ax.set_ylabel("p50 ms per hybrid search (k=10)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db-small", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="warm-search-"))
    stores = args.stores.split(",")
    load_before = os.getloadavg()
    rows: list[dict] = []
    if "sqlite" in stores:
        small = str(args.db_small or work / "sqlite-corpus")
        if args.db_small is None:
            build_corpus(small)
        large = work / "sqlite-100k" / "index.sqlite3"
        large.parent.mkdir(parents=True, exist_ok=True)
        build_synthetic(large, args.n)
        rows += measure("sqlite", "corpus", small, work, args.rounds)
        rows += measure("sqlite", f"{args.n // 1000}k", str(large), work, args.rounds)
    if "postgres" in stores:
        from pg_local import LocalCluster  # tests/pg_local.py: test infrastructure

        # Two clusters, one per index (each store keeps one index per database).
        with LocalCluster.start(work / "pg-corpus") as cluster:
            build_corpus(cluster.url)
            rows += measure("postgres", "corpus", cluster.url, work, args.rounds)
        with LocalCluster.start(work / "pg-large", settings=PG_SETTINGS) as cluster:
            build_synthetic(cluster.url, args.n)
            rows += measure("postgres", f"{args.n // 1000}k", cluster.url, work, args.rounds)
    meta = {
        "command": "python benchmarks/warm_search.py " + " ".join(sys.argv[1:]),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": cpu_description(),
        "cores": os.cpu_count(),
        "rounds": args.rounds,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "warm_search.md").write_text(markdown(rows, meta))
    (args.out / "warm_search.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    plot(rows, args.out / "warm_search.png")
    print(markdown(rows, meta))


if __name__ == "__main__":
    main()
