"""The quick vectors' graph in segments of chunk ids against one graph (issue 52): the
memory a run's end takes to build and save it, and what a search pays for the segments.

Takes a SQLite index whose chunks have quick vectors (the 1 GB drive's quick pass: 572,779
chunks, none with a full vector yet). Variants, the only difference the segment size
(`quick_graph.SEGMENT_IDS`), the same code otherwise:

- `segments`: the default, `SEGMENT_IDS` ids a segment, each walked with the beam
  `segment_graph.SegmentGraph.segment_beam` gives it (the store's beam over the root of the segments);
- `segments, each walked with the whole beam`: the same graphs, each walked with the
  store's beam (what the first version of the segments did);
- `one graph`: one segment spanning every id, which is what the store built before the
  segments (one `ann.HnswIndex` of the whole set, walked with the store's beam).

Each round runs every variant, the order alternating, each step in a fresh process of its
own against the same file:

1. **build**: the graph's files removed, then `Store.sync_index` under the run lock (what a
   run does when it ends): its seconds, the process's resident memory after opening the
   store and its peak (`VmHWM`) over the build;
2. **search**: a new process opens the store and asks the quick list for the 10 nearest
   of each of `--queries` queries, one at a time, twice: the first search's seconds
   (opening the graph included: a cold CLI search), the median of the rest of that pass
   (the mapped pages read as the walks touch them) and of the second pass (in memory),
   and recall@10 against the exact nearest (computed once, in its own process, over every
   quick vector).

The queries are the quick vectors of chunks drawn at random (seeded): real points of the
set, so recall is measured where the data lies. Prints a table; writes the page, the JSON
and a plot where asked, with the CPU model, its flags and the load average.

    python benchmarks/quick_graph_segments.py DB [--rounds 2] [--queries 200]
        [--md ...] [--json ...] [--plot ...]

Timings on a busy machine say little: run it on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import cpu_description  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ONE_GRAPH = 2**40  # ids a segment spans in the `one graph` variant: every id
SEARCHED = ("first_s", "p50_ms", "warm_p50_ms")

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
import numpy as np
from attnswitch.indexing import quick_graph, segment_graph
from attnswitch.indexing.store import SQLiteStore

def vm(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
step, db, variant, queries_file, k = sys.argv[1:6]
segment_ids, beam = variant.split(":")
if segment_ids != "default":
    quick_graph.SEGMENT_IDS = int(segment_ids)
if beam == "whole":
    segment_graph.SegmentGraph.segment_beam = lambda self, ef: ef
out = {}
with SQLiteStore(db) as store:
    if step == "build":
        quick_graph.remove_graph(store.path)
        out["rss_before_mib"] = vm("VmRSS")
        t = time.perf_counter()
        with store.exclusive(0):
            store.sync_index()
        out["seconds"] = time.perf_counter() - t
        out["peak_mib"] = vm("VmHWM")
        out["segments"] = len(list(Path(str(store.path) + quick_graph.GRAPH_DIR).glob("*.hnsw")))
    elif step == "exact":
        ids = np.asarray([int(i) for i in sys.argv[6].split(",")])
        _, queries = store.quick_vectors.vectors_of(ids)
        best = []
        for part_ids, matrix in store.quick_vectors.iter_vectors():
            scores = queries @ matrix.T
            best.append(np.stack([np.broadcast_to(part_ids, scores.shape), scores], -1))
            merged = np.concatenate(best, axis=1)
            order = np.argsort(-merged[:, :, 1], axis=1, kind="stable")[:, : int(k)]
            best = [np.take_along_axis(merged, order[:, :, None], axis=1)]
        np.save(queries_file, queries)
        out["exact"] = best[0][:, :, 0].astype(np.int64).tolist()
    else:
        queries = np.load(queries_file)
        passes = []
        for _ in range(2):  # the graph's pages first read, then in memory
            times, found = [], []
            for q in queries:
                t = time.perf_counter()
                hits = store.quick(q[None, :], int(k))[0]
                times.append(time.perf_counter() - t)
                found.append([cid for cid, _ in hits])
            passes.append(times)
        out.update(first_s=passes[0][0], found=found)
        out["p50_ms"] = 1e3 * float(np.median(passes[0][1:]))
        out["warm_p50_ms"] = 1e3 * float(np.median(passes[1]))
print(json.dumps(out))
"""


def child(step: str, db: Path, segment_ids: str, queries: Path, k: int, *extra: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, step, str(db), segment_ids, str(queries), str(k), *extra],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{step} ({segment_ids}): exit {done.returncode}\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def recall(found: list[list[int]], exact: list[list[int]]) -> float:
    hit = sum(len(set(f) & set(e)) for f, e in zip(found, exact, strict=True))
    return hit / sum(len(e) for e in exact)


def page(result: dict) -> list[str]:
    lines = [
        f"# The quick graph in segments against one graph ({result['chunks']:,} quick vectors)",
        "",
        f"{result['cpu']}; load average (1 min) before: {result['load_before']:.2f}, after: "
        f"{result['load_after']:.2f}. Index: `{result['db']}`. {result['rounds']} rounds, "
        "each step of each variant in a fresh process, the order alternating. Command: "
        f"`{result['command']}`.",
        "",
        "| variant | segments | build s | RSS before build MiB | peak RSS while building MiB "
        "| first search s | search p50 ms | warm search p50 ms | recall@10 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, runs in result["variants"].items():
        med = {key: statistics.median(r[key] for r in runs) for key in runs[0] if key != "found"}
        lines.append(
            f"| {name} | {runs[0]['segments']} | {med['seconds']:.1f} | "
            f"{med['rss_before_mib']:.0f} | {med['peak_mib']:.0f} | {med['first_s']:.3f} | "
            f"{med['p50_ms']:.2f} | {med['warm_p50_ms']:.2f} | {med['recall']:.4f} |"
        )
    lines += [
        "",
        "Medians over the rounds. Peak RSS is the building process's high-water mark "
        "(`VmHWM`). The search process answers the queries one at a time, twice: the "
        "first pass reads the mapped graphs' pages as its walks touch them (the first "
        "search opens the graphs too: what a cold CLI search pays), the second finds them "
        "in memory (a service after its first searches). Recall is against the exact 10 "
        f"nearest of each query ({result['queries']} queries, quick vectors of chunks "
        "drawn at random).",
    ]
    return lines


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["variants"])
    runs = result["variants"]
    peak = [statistics.median(r["peak_mib"] for r in runs[n]) for n in names]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    left.bar(names, peak)
    left.set(ylabel="MiB", title="Peak RSS while building the graph")
    at = range(len(names))
    for shift, key, label in (
        (-0.2, "p50_ms", "pages first read"),
        (0.2, "warm_p50_ms", "in memory"),
    ):
        right.bar(
            [i + shift for i in at],
            [statistics.median(r[key] for r in runs[n]) for n in names],
            width=0.4,
            label=label,
        )
    right.set_xticks(list(at), names)
    right.set(ylabel="ms", title="Quick-list search, p50 (n=10)")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    import sqlite3

    import numpy as np

    with sqlite3.connect(args.db) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM chunks WHERE quick IS NOT NULL")]
    draw = np.random.default_rng(7).choice(ids, args.queries, replace=False)
    k = 10
    load_before = os.getloadavg()[0]
    variants = {
        "segments": "default:split",
        "segments, each walked with the whole beam": "default:whole",
        "one graph": f"{ONE_GRAPH}:split",
    }
    with tempfile.TemporaryDirectory() as tmp:
        queries = Path(tmp) / "queries.npy"
        exact = child("exact", args.db, "default:split", queries, k, ",".join(map(str, draw)))[
            "exact"
        ]
        runs: dict[str, list[dict]] = {name: [] for name in variants}
        for r in range(args.rounds):
            order = list(variants) if r % 2 == 0 else list(variants)[::-1]
            for name in order:
                built = child("build", args.db, variants[name], queries, k)
                searched = child("search", args.db, variants[name], queries, k)
                row = dict(built, **{key: searched[key] for key in SEARCHED})
                row["recall"] = recall(searched["found"], exact)
                runs[name].append(row)
                print(name, r, {key: v for key, v in row.items()}, flush=True)
    result = {
        "cpu": cpu_description(),
        "db": str(args.db),
        "chunks": len(ids),
        "queries": args.queries,
        "rounds": args.rounds,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "command": "python benchmarks/quick_graph_segments.py " + " ".join(sys.argv[1:]),
        "variants": runs,
    }
    lines = page(result)
    print("\n".join(lines))
    if args.md:
        args.md.write_text("\n".join(lines) + "\n")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    if args.plot:
        plot(result, args.plot)


if __name__ == "__main__":
    main()
