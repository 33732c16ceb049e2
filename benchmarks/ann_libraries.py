"""Which embedded HNSW library for the SQLite store: usearch, hnswlib and faiss, measured
on the same synthetic vectors with the same graph parameters.

    python benchmarks/ann_libraries.py [--n 100000] [--dim 384] [--queries 200]

Vectors are clustered (see `synthetic.clustered`), L2-normalised, searched by inner
product. For each library: build time (all threads), median and p99 single-query latency
(one thread), recall@10 against exact search, index file size, and whether it can delete
and memory-map its saved file (what the store needs: deletes follow documents, and a cold
CLI search should not read the whole index). Prints a table; `--json PATH` writes it too.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import clustered, cpu_description, exact_top_k  # noqa: E402

M, EF_CONSTRUCTION, EF_SEARCH, K = 16, 128, 96, 10


def _usearch(x: np.ndarray, folder: Path):
    from usearch.index import Index

    index = Index(
        ndim=x.shape[1],
        metric="ip",
        dtype="f32",
        connectivity=M,
        expansion_add=EF_CONSTRUCTION,
        expansion_search=EF_SEARCH,
    )
    start = time.perf_counter()
    index.add(np.arange(len(x), dtype=np.uint64), x)
    build = time.perf_counter() - start
    path = folder / "usearch.idx"
    index.save(str(path))
    view = Index.restore(str(path), view=True)
    return build, path, lambda q: view.search(q, K, threads=1).keys, "yes", "yes (view)"


def _hnswlib(x: np.ndarray, folder: Path):
    import hnswlib

    index = hnswlib.Index(space="ip", dim=x.shape[1])
    index.init_index(max_elements=len(x), M=M, ef_construction=EF_CONSTRUCTION)
    start = time.perf_counter()
    index.add_items(x, np.arange(len(x)))
    build = time.perf_counter() - start
    index.set_ef(EF_SEARCH)
    index.set_num_threads(1)
    path = folder / "hnswlib.bin"
    index.save_index(str(path))
    return build, path, lambda q: index.knn_query(q, k=K)[0][0], "mark only", "no"


def _faiss(x: np.ndarray, folder: Path):
    import faiss

    index = faiss.IndexHNSWFlat(x.shape[1], M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = EF_CONSTRUCTION
    start = time.perf_counter()
    index.add(x)
    build = time.perf_counter() - start
    index.hnsw.efSearch = EF_SEARCH
    path = folder / "faiss.index"
    faiss.write_index(index, str(path))

    def query(q: np.ndarray) -> np.ndarray:
        faiss.omp_set_num_threads(1)
        return index.search(q[None, :], K)[1][0]

    return build, path, query, "no (HNSW)", "yes (IO_FLAG_MMAP)"


LIBRARIES = {"usearch": _usearch, "hnswlib": _hnswlib, "faiss": _faiss}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    x = clustered(args.n, args.dim, seed=0)
    queries = clustered(args.queries, args.dim, seed=1, centres_seed=0)
    truth = exact_top_k(x, queries, K)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in LIBRARIES.items():
            build, path, query, deletes, mmap = make(x, Path(tmp))
            times, found = [], []
            for q in queries:
                start = time.perf_counter()
                keys = query(q)
                times.append(time.perf_counter() - start)
                found.append(np.asarray(keys, dtype=np.int64))
            recall = np.mean(
                [
                    len(set(f.tolist()) & set(t.tolist())) / K
                    for f, t in zip(found, truth, strict=True)
                ]
            )
            rows.append(
                {
                    "library": name,
                    "build_s": build,
                    "p50_ms": 1e3 * float(np.median(times)),
                    "p99_ms": 1e3 * float(np.percentile(times, 99)),
                    "recall_at_10": float(recall),
                    "file_mb": path.stat().st_size / 2**20,
                    "deletes": deletes,
                    "mmap": mmap,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    print(
        f"{args.n:,} vectors x {args.dim}, M={M}, ef_construction={EF_CONSTRUCTION}, "
        f"ef={EF_SEARCH}; {cpu_description()}; {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}"
    )
    print(
        f"{'library':<9} {'build s':>8} {'p50 ms':>7} {'p99 ms':>7} {'recall@10':>9} "
        f"{'file MB':>8}  deletes     memory-map"
    )
    for r in rows:
        print(
            f"{r['library']:<9} {r['build_s']:>8.1f} {r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} "
            f"{r['recall_at_10']:>9.3f} {r['file_mb']:>8.1f}  {r['deletes']:<11} {r['mmap']}"
        )
    if args.json:
        args.json.write_text(json.dumps({"n": args.n, "dim": args.dim, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
