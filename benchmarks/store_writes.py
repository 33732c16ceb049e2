"""The SQLite store's write cost: load, rewrite and remove N synthetic chunks, for one or
more source trees of attnswitch side by side (before and after a change to the store).

    python benchmarks/store_writes.py [--n 5000] [--per-doc 20] [--words 100]
                                      [--rounds 3] [--src PATH ...] [--json PATH]

Each round runs every `--src` (a folder put first on PYTHONPATH; none: the attnswitch this
Python imports) in a fresh process, in turn, on a new file in a temporary folder:

- load: N chunks written with `SQLiteStore.write_document`, `--per-doc` chunks a document
  (one transaction each, as a run writes), text `--words` words of the shipped corpus'
  vocabulary (about the examples corpus' 700 characters a chunk), random 384-d vectors;
- rewrite: every document written again with other text (its chunks deleted and inserted,
  as a run re-indexes a changed file);
- remove: every document removed, 50 a call (`SQLiteStore.remove`);
- the file's size after the load (WAL checkpointed).

Prints, and writes to `--json`, each tree's median seconds per phase over the rounds and
chunks per second. The machine's load matters: interleaving the trees round by round
spreads it over both, and the medians and the spread are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import cpu_description, synthetic_documents  # noqa: E402

DIM = 384
PHASES = ("load", "rewrite", "remove")


def documents(n: int, per_doc: int, n_words: int, seed: int) -> list[tuple]:
    """(Document, chunks, vectors) for n chunks, `per_doc` a document (random vectors)."""
    vectors = np.random.default_rng(seed + 1_000).normal(size=(n, DIM)).astype(np.float32)
    return list(synthetic_documents(vectors, per_doc, n_words, seed))


def child(n: int, per_doc: int, n_words: int) -> dict:
    """One tree's measurement, in this process."""
    from attnswitch.indexing import analyzer
    from attnswitch.indexing.store_sqlite import SQLiteStore

    first, second = (documents(n, per_doc, n_words, seed) for seed in (1, 2))
    analyzer.detect_language("warm the language detector up")  # its model loads once
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "index.sqlite3"
        out: dict = {}
        with SQLiteStore(path) as store:
            t = time.perf_counter()
            for doc, chunks, vectors in first:
                store.write_document(doc, chunks, vectors)
            out["load"] = time.perf_counter() - t
            store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            out["file_mb"] = path.stat().st_size / 1e6
            t = time.perf_counter()
            for (doc, _, _), (_, chunks, vectors) in zip(first, second):
                store.write_document(doc, chunks, vectors)
            out["rewrite"] = time.perf_counter() - t
            sources = [doc.source for doc, _, _ in first]
            t = time.perf_counter()
            for start in range(0, len(sources), 50):
                store.remove("/synthetic", sources[start : start + 50])
            out["remove"] = time.perf_counter() - t
            assert store.count() == 0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--per-doc", type=int, default=20)
    parser.add_argument("--words", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--src", action="append", default=[])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.n, args.per_doc, args.words)))
        return
    trees = args.src or [""]
    runs: dict[str, list[dict]] = {tree: [] for tree in trees}
    for _ in range(args.rounds):
        for tree in trees:
            env = dict(os.environ)
            if tree:
                env["PYTHONPATH"] = os.pathsep.join(
                    [str(Path(tree).resolve()), *filter(None, [env.get("PYTHONPATH")])]
                )
            done = subprocess.run(
                [sys.executable, __file__, "--child", "--n", str(args.n), "--per-doc",
                 str(args.per_doc), "--words", str(args.words)],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            runs[tree].append(json.loads(done.stdout.splitlines()[-1]))
    report = {
        "n": args.n,
        "per_doc": args.per_doc,
        "words": args.words,
        "rounds": args.rounds,
        "cpu": cpu_description(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "trees": {},
    }
    for tree, rows in runs.items():
        summary = {"file_mb": rows[0]["file_mb"]}
        for phase in PHASES:
            seconds = [r[phase] for r in rows]
            summary[phase] = {
                "median_s": statistics.median(seconds),
                "min_s": min(seconds),
                "max_s": max(seconds),
                "chunks_per_s": args.n / statistics.median(seconds),
            }
        report["trees"][tree or "installed"] = summary
        print(
            f"{tree or 'installed'}: file {summary['file_mb']:.1f} MB; "
            + "; ".join(
                f"{p} {summary[p]['median_s']:.2f} s ({summary[p]['min_s']:.2f}-"
                f"{summary[p]['max_s']:.2f}, {summary[p]['chunks_per_s']:.0f} chunks/s)"
                for p in PHASES
            )
        )
    print(f"load average at the end: {report['load_average']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
