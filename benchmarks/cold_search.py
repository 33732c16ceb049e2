"""Cold `attnswitch search`: what a user waits for when each search is a new process.

Builds an index once (`attnswitch run FOLDER`, the engine `--engine`, default `auto`: the
pick recorded for this machine, measured by that run when none is), then starts `--n`
fresh `attnswitch search QUERY --json` processes one after another (after one warm-up
process, not counted, so that every counted one finds the files in the page cache). Each
process's wall time is measured from here (start to exit); the steps are its own
`timings`: import (interpreter start, the CLI's imports, the engine's runtime), tokenizer,
load (the engine's plan, reading or compiling the model), encode (the query), search, and
total (process start to results; the wall time adds the start of the interpreter binary and
the process's exit).

Prints a table of p50 and p90 per step and writes `cold_search.md` and `cold_search.json`
to `--out` with the CPU model, its ISA flags, the cores, the load average before and after,
the engine the index was built with and why (`auto`'s reason).

    python benchmarks/cold_search.py [--n 20] [--folder examples/corpus/postgresql]
        [--query "how do I update rows in a table"] [--mode hybrid] [--engine auto]
        [--out docs/results] [--work DIR]

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
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("import_s", "tokenizer_s", "load_s", "encode_s", "search_s", "total_s")


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "attnswitch.cli", *args]


def build_index(folder: Path, db: Path, engine: str) -> dict[str, Any]:
    """`attnswitch run` once; its JSON summary."""
    out = subprocess.run(cli("run", str(folder), "--db", str(db), "--engine", engine,
                             "--json"), capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"cold_search: attnswitch run failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def one_search(db: Path, query: str, mode: str) -> dict[str, float]:
    """One fresh search process: its wall time from here and its own step timings."""
    start = time.perf_counter()
    out = subprocess.run(cli("search", query, "--db", str(db), "--mode", mode, "--json"),
                         capture_output=True, text=True)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"cold_search: attnswitch search failed: {out.stderr.strip()}")
    return {"wall_s": wall, **json.loads(out.stdout)["timings"]}


def summarise(runs: list[dict[str, float]]) -> dict[str, dict[str, float | None]]:
    """p50 and p90 (linear interpolation) of each step over the runs."""
    out = {}
    for key in ("wall_s", *STEPS):
        values = [r[key] for r in runs if r.get(key) is not None]
        out[key] = ({"p50": float(np.percentile(values, 50)),
                     "p90": float(np.percentile(values, 90))} if values
                    else {"p50": None, "p90": None})
    return out


def table(stats: dict[str, dict[str, float | None]]) -> list[str]:
    names = {"wall_s": "wall (spawn to exit)", "import_s": "import", "tokenizer_s":
             "tokenizer", "load_s": "model load or compile", "encode_s": "encode the query",
             "search_s": "search", "total_s": "total (process start to results)"}
    rows = ["| step | p50 (s) | p90 (s) |", "|---|---:|---:|"]
    for key, name in names.items():
        p50, p90 = stats[key]["p50"], stats[key]["p90"]
        fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
        rows.append(f"| {name} | {fmt(p50)} | {fmt(p90)} |")
    return rows


def markdown(report: dict[str, Any]) -> str:
    m, idx = report["machine"], report["index"]
    lines = [
        "# Cold search: fresh `attnswitch search` processes",
        "",
        f"{report['n']} fresh processes, one after another (one warm-up before, not counted), "
        f"`attnswitch search \"{report['query']}\" --mode {report['mode']} --json` over an "
        f"index of {idx['chunks']:,} chunks ({idx['documents']} documents of "
        f"`{report['folder']}`).",
        "",
        f"- CPU: {m['cpu']}, {m['cores']} cores usable; ISA flags: {', '.join(m['flags'])}",
        f"- engine: **{idx['engine']}** ({idx['precision']}), asked for `{report['engine']}`;"
        f" why: {idx['engine_reason']}",
        f"- load average before / after: {report['load_before']:.2f} / "
        f"{report['load_after']:.2f}",
        f"- measured {report['when']}, `benchmarks/cold_search.py`",
        "",
        *table(report["stats"]),
        "",
        "Steps are each process's own `timings` (see `attnswitch search --help`); wall is "
        "measured by the benchmark from the process's start to its exit.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20, help="fresh search processes timed")
    parser.add_argument("--folder", type=Path, default=ROOT / "examples/corpus/postgresql")
    parser.add_argument("--query", default="how do I update rows in a table")
    parser.add_argument("--mode", default="hybrid", choices=("hybrid", "dense", "keyword"))
    parser.add_argument("--engine", default="auto")
    parser.add_argument("--out", type=Path, default=ROOT / "docs/results")
    parser.add_argument("--work", type=Path, default=None,
                        help="folder for the index (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n: expected >= 1, got {args.n}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from attnswitch.engines.autopick import machine

    with tempfile.TemporaryDirectory(prefix="cold-search-") as tmp:
        work = args.work or Path(tmp)
        db = work / "db"
        summary = build_index(args.folder, db, args.engine)
        load_before = os.getloadavg()[0]
        one_search(db, args.query, args.mode)  # warm-up: page cache, compiled-model cache
        runs = []
        for i in range(args.n):
            runs.append(one_search(db, args.query, args.mode))
            print(f"  {i + 1}/{args.n}: {runs[-1]['wall_s']:.2f} s", file=sys.stderr)
        load_after = os.getloadavg()[0]
    report = {
        "n": args.n, "query": args.query, "mode": args.mode, "engine": args.engine,
        "folder": str(args.folder.resolve().relative_to(ROOT)) if args.folder.resolve()
        .is_relative_to(ROOT) else str(args.folder),
        "when": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(),
        "load_before": load_before, "load_after": load_after,
        "index": {"engine": summary["engine"], "engine_reason": summary["engine_reason"],
                  "precision": summary["precision"], "documents": summary["indexed"],
                  "chunks": summary["chunks_stored"]},
        "stats": summarise(runs), "runs": runs,
    }
    print("\n".join(table(report["stats"])))
    print(f"engine: {summary['engine']} ({summary['engine_reason']})")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cold_search.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "cold_search.md").write_text(markdown(report))
    print(f"wrote {args.out / 'cold_search.md'} and cold_search.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
