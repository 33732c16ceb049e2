"""What a pgvector HNSW build costs when its graph does not fit `maintenance_work_mem`.

    python benchmarks/pg_build_memory.py [--n 100000,320000] [--dim 384] [--json PATH]

The PostgreSQL store builds each segment of its full vectors, and the quick list's index,
in one CREATE INDEX (`postgres_segments.build`). pgvector builds the graph in memory while it
fits `maintenance_work_mem` and goes on building on disk past it ("hnsw graph no longer fits
into maintenance_work_mem after N tuples"). A server's default is 64 MB. For each N this
loads N clustered unit vectors of `--dim` (`synthetic.clustered`, as halfvec) into a table
shaped as the store's (`chunks.embedding`) on a throwaway local cluster with the server's
defaults (`tests/pg_local.py`: maintenance_work_mem 64 MB, two parallel maintenance
workers), then builds the store's graph (m = 16, ef_construction = 128) two ways:

- `server_default`: CREATE INDEX under the server's own setting;
- `store_build`: the same after `postgres_segments.fit_build_memory` (what the store does:
  the setting raised for the build's transaction to what its graph needs).

It prints each build's seconds, rows a second, the setting it ran under, pgvector's notice
(the tuples after which it went to disk) and the load average before and after (another
process using the CPUs skews the figures: say so). No figure is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from synthetic import clustered, cpu_description  # noqa: E402

WAYS = ("store_build", "server_default")


def load(conn, n: int, dim: int) -> None:
    """`chunks(id, embedding halfvec(dim))` holding `n` clustered unit vectors."""
    from pgvector import HalfVector
    from pgvector.psycopg import register_vector

    register_vector(conn)
    conn.execute("DROP TABLE IF EXISTS chunks")
    conn.execute(f"CREATE TABLE chunks (id bigint PRIMARY KEY, embedding halfvec({dim}))")
    vectors = clustered(n, dim, seed=0)
    with conn.cursor().copy("COPY chunks (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as cp:
        cp.set_types(["int8", "halfvec"])
        for i, row in enumerate(vectors):
            cp.write_row((i, HalfVector(row)))
    conn.execute("VACUUM ANALYZE chunks")


def build(conn, n: int, way: str) -> dict[str, object]:
    """One CREATE INDEX of the store's graph over the loaded rows, `way` (`WAYS`)."""
    from attnswitch.indexing.postgres_segments import (
        HNSW_EF_CONSTRUCTION,
        HNSW_M,
        fit_build_memory,
    )

    notices: list[str] = []
    conn.add_notice_handler(lambda notice: notices.append(notice.message_primary or ""))
    before = os.getloadavg()[0]
    started = time.monotonic()
    with conn.transaction():
        if way == "store_build":
            fit_build_memory(conn, "embedding", n)
        (setting,) = conn.execute("SHOW maintenance_work_mem").fetchone()
        conn.execute(
            "CREATE INDEX chunks_graph ON chunks USING hnsw (embedding halfvec_ip_ops) WITH "
            f"(m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
        )
    seconds = time.monotonic() - started
    conn.execute("DROP INDEX chunks_graph")
    return {
        "n": n,
        "way": way,
        "seconds": seconds,
        "rows_per_s": n / seconds,
        "maintenance_work_mem": setting,
        "notices": notices,
        "load_before": before,
        "load_after": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="100000,320000")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parent / "tests"))
    import psycopg

    from pg_local import LocalCluster, remove  # tests/pg_local.py: test infrastructure

    cpu = f"{cpu_description()}; {os.cpu_count()} cores"
    print(f"CPU: {cpu}")
    results: list[dict[str, object]] = []
    folder = Path(tempfile.mkdtemp(prefix="attnswitch-pg-"))  # the server's user enters it
    try:
        with LocalCluster.start(folder) as cluster:
            with psycopg.connect(cluster.url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                for n in (int(v) for v in args.n.split(",")):
                    load(conn, n, args.dim)
                    for way in WAYS:
                        got = build(conn, n, way)
                        results.append(got)
                        print(
                            f"n={n:>8,} {way:>14}: {got['seconds']:7.1f} s "
                            f"({got['rows_per_s']:6,.0f} rows/s) under "
                            f"{got['maintenance_work_mem']}; {got['notices'] or 'in memory'} "
                            f"(load average {got['load_before']:.2f} -> {got['load_after']:.2f})",
                            flush=True,
                        )
    finally:
        remove(folder)
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu, "dim": args.dim, "builds": results}, indent=1))


if __name__ == "__main__":
    main()
