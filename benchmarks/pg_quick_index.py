"""What a partial HNSW index over the quick vectors costs the PostgreSQL store's quick pass.

    python benchmarks/pg_quick_index.py [--n 20000,100000] [--per-doc 100] [--dim 384]
                                        [--repeats 2] [--ways none,index,after]
                                        [--json PATH]

The quick pass writes each document's chunks with quick vectors and no full vector
(`PostgresStore.write_document(..., None, quick=...)`: one transaction, the chunks by
`COPY`). For each N this loads N chunks of random unit float16 vectors (dimension `--dim`,
the default static model's 384), `--per-doc` chunks a document, into a fresh database on a
throwaway local cluster (`tests/pg_local.py`, fsync off), three ways:

- `none`: no index on the quick vectors (the exact scan);
- `index`: the partial index `chunks_quick_hnsw` (m=16, ef_construction=128, `WHERE
  embedding IS NULL`) made before the load, so every insert maintains it;
- `after`: no index during the load, the index made once the rows are in (CREATE INDEX,
  the run's end) and that build's seconds reported on their own; then the quick list's
  top-10 (`PostgresStore.quick`, 50 queries, one at a time) timed with the index and with
  it dropped (the exact scan).

It prints the seconds of each, the ratio to `none`, and the machine's load average at the
start and end of each (another process using the CPUs skews the figures: say so). Each
way is run `--repeats` times, interleaved, and the best time kept. No figure is asserted.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from synthetic import cpu_description  # noqa: E402

QUERIES = 50
INDEX = (
    "CREATE INDEX chunks_quick_hnsw ON chunks USING hnsw (quick halfvec_ip_ops) "
    "WITH (m = 16, ef_construction = 128) WHERE embedding IS NULL"
)


def load(url: str, n: int, per_doc: int, dim: int, way: str, root: Path) -> dict[str, float]:
    import psycopg

    from attnswitch.documents.ingest import Document
    from attnswitch.indexing.store import ChunkRecord
    from attnswitch.indexing.store_postgres import PostgresStore

    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS bench")
        admin.execute("CREATE DATABASE bench")
    db = url.rsplit("/", 1)[0] + "/bench"
    rng = np.random.default_rng(0)
    with PostgresStore(db) as store:
        store.set_quick_model("bench-static", dim)
        conn = store._conn
        conn.execute("DROP INDEX IF EXISTS chunks_quick_hnsw")
        conn.execute(f"ALTER TABLE chunks ALTER COLUMN quick TYPE halfvec({dim})")
        if way == "index":
            conn.execute(INDEX)
        started = time.perf_counter()
        for d in range(n // per_doc):
            doc = Document(
                root=str(root),
                source=f"d{d:06}.txt",
                path=root / f"d{d:06}.txt",
                sha256=f"{d:064x}",
                size=1,
                mtime_ns=1,
                kind="text",
                text="x",
            )
            quick = rng.normal(size=(per_doc, dim)).astype(np.float32)
            chunks = [ChunkRecord(f"chunk {d} {i}", 3, i, i + 1) for i in range(per_doc)]
            store.write_document(doc, chunks, None, quick=quick)
        out = {"load_s": time.perf_counter() - started}
        if way == "after":
            started = time.perf_counter()
            conn.execute(INDEX)
            out["build_s"] = time.perf_counter() - started
            conn.execute("ANALYZE chunks")
            queries = rng.normal(size=(QUERIES, dim)).astype(np.float32)
            queries /= np.linalg.norm(queries, axis=1, keepdims=True)
            store.quick(queries[:5], 10)  # warm
            started = time.perf_counter()
            store.quick(queries, 10)
            out["index_query_ms"] = (time.perf_counter() - started) / QUERIES * 1000
            conn.execute(f"DROP INDEX {INDEX.split()[2]}")
            store.quick(queries[:5], 10)  # warm
            started = time.perf_counter()
            store.quick(queries, 10)
            out["exact_query_ms"] = (time.perf_counter() - started) / QUERIES * 1000
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="20000,100000")
    parser.add_argument("--per-doc", type=int, default=100)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--ways", default="none,index,after")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parent / "tests"))
    from pg_local import LocalCluster, remove  # tests/pg_local.py: test infrastructure

    results: list[dict[str, object]] = []
    print(f"CPU: {cpu_description()}; {os.cpu_count()} cores")
    folder = Path(tempfile.mkdtemp(prefix="attnswitch-pg-"))  # the server's user enters it
    try:
        (folder / "root").mkdir()
        with LocalCluster.start(folder, settings={"maintenance_work_mem": "1GB"}) as c:
            for n in (int(v) for v in args.n.split(",")):
                best: dict[str, dict[str, float]] = {}
                for _ in range(args.repeats):
                    for way in args.ways.split(","):
                        before = os.getloadavg()[0]
                        got = load(c.url, n, args.per_doc, args.dim, way, folder / "root")
                        got["load_before"], got["load_after"] = before, os.getloadavg()[0]
                        print(f"  n={n} {way}: {got}", flush=True)
                        if way not in best or got["load_s"] < best[way]["load_s"]:
                            best[way] = got
                base = best["none"]["load_s"] if "none" in best else float("nan")
                for way, got in best.items():
                    total = got["load_s"] + got.get("build_s", 0.0)
                    results.append({"n": n, "way": way, **got, "ratio": total / base})
                    print(
                        f"n={n:>7} {way:>5}: load {got['load_s']:7.2f} s"
                        + (f" + build {got['build_s']:6.2f} s" if "build_s" in got else "")
                        + (
                            f"  = {total / base:4.2f}x the load without an index"
                            if base == base
                            else ""
                        )
                        + f"  (load average {got['load_before']:.2f} -> {got['load_after']:.2f})"
                    )
                    if "index_query_ms" in got:
                        print(
                            f"           quick top-10: {got['index_query_ms']:.2f} ms a query "
                            f"by the index, {got['exact_query_ms']:.2f} ms by the exact scan"
                        )
    finally:
        remove(folder)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
