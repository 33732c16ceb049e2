"""Cold `attnswitch search`: what a user waits for when each search is a new process, beside
what the shell's own tools take on the same folder.

Builds an index of `--folder` once (`attnswitch run FOLDER --engine ENGINE`, default `auto`:
the pick recorded for this machine, or the default of a job too small to measure), or takes
one (`--db`). Then `--n` rounds, each contender in a fresh process of its own, the order
rotated each round, after one warm-up round not counted (every counted process finds the
files in the page cache, as a user's second search does):

- `attnswitch search QUERY` as a user types it (its table printed to a pipe), with
  `$ATTNSWITCH_TIMINGS=1`: the command's own breakdown on stderr (`cli/timings.py`
  `search_timings` and `print_s`);
- `attnswitch search QUERY --mode keyword` (no model);
- `grep -r -i -l -w` with the query's words, over the folder;
- the `sqlite3` command line with the same FTS5 query the store runs, on the index file
  (when `sqlite3` is installed).

Each process's wall time is measured from here (spawn to exit). The search's breakdown:
start and import (interpreter start, the CLI's imports, the engine's runtime), model load
(tokenizer, engine plan, reading or compiling the model), encode the query, store query,
print, exit (wall less the process's own account: spawning, the interpreter's exit), and
other (opening the store and its config). Bytecode is compiled first (`compileall`), as an
installed package has it: a source tree run with PYTHONDONTWRITEBYTECODE set would compile
every module in every process.

Prints a table; writes `cold_search.md`, `cold_search.json` and `cold_search.png` to
`--out`, with the CPU model, its ISA flags, the cores and the load average before and after.

    python benchmarks/cold_search.py [--n 20] [--folder examples/corpus] [--db DIR]
        [--query "how do I update rows in a table"] [--engine auto] [--out docs/results]
        [--work DIR]

Timings on a busy machine say little: run it on a quiet one (the load average is recorded).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "attnswitch search timings: "
# the search's breakdown: key -> (label, how it is computed from one process's record)
PARTS = {
    "import": "start and import",
    "load": "model load (tokenizer, engine)",
    "encode": "encode the query",
    "query": "store query",
    "print": "print the results",
    "other": "other (open the store, its config)",
    "exit": "exit (spawn, interpreter exit)",
}


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "attnswitch.cli", *args]


def child_env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ATTNSWITCH_TIMINGS": "1"}
    env.pop("ATTNSWITCH_QUERY_ENGINE", None)  # the quickest engine with the index's answers
    return env


def compile_package() -> None:
    """Bytecode for attnswitch's modules, as an installed package has it."""
    import attnswitch

    compileall.compile_dir(str(Path(attnswitch.__file__).parent), quiet=1)


def build_index(folder: Path, db: Path, engine: str) -> dict[str, Any]:
    """`attnswitch run` once; its JSON summary."""
    out = subprocess.run(
        cli("run", str(folder), "--db", str(db), "--engine", engine, "--json"),
        capture_output=True,
        text=True,
        env=child_env(),
    )
    if out.returncode != 0:
        raise SystemExit(f"cold_search: attnswitch run failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def words(query: str) -> list[str]:
    """The query's words, as the store's keyword search takes them."""
    return [t for t in re.findall(r"\w+", query) if any(c.isalnum() for c in t)]


def contenders(query: str, db: Path, folder: Path) -> dict[str, list[str]]:
    """name -> command line, each run in a process of its own."""
    index = db / "index.sqlite3" if db.is_dir() else db
    found = {
        "attnswitch search": cli("search", query, "--db", str(db)),
        "attnswitch search --mode keyword": cli(
            "search", query, "--mode", "keyword", "--db", str(db)
        ),
        "grep -r": [
            "grep",
            "-r",
            "-i",
            "-l",
            "-w",
            *[a for w in words(query) for a in ("-e", w)],
            str(folder),
        ],
    }
    if shutil.which("sqlite3"):
        match = " OR ".join(f'"{w}"' for w in words(query)).replace("'", "''")
        found["sqlite3 (FTS5)"] = [
            "sqlite3",
            "-readonly",
            str(index),
            "SELECT c.id, substr(c.text, 1, 80) FROM chunks_fts JOIN chunks c "
            f"ON c.id = chunks_fts.rowid WHERE chunks_fts MATCH '{match}' "
            "ORDER BY bm25(chunks_fts) LIMIT 5",
        ]
    return found


def one(command: list[str]) -> dict[str, Any]:
    """One fresh process: its wall time from here, and the search's own timings if any."""
    start = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True, env=child_env())
    wall = time.perf_counter() - start
    if out.returncode not in (0, 1):  # grep says 1 when nothing matched
        raise SystemExit(f"cold_search: {command[0]} failed: {out.stderr.strip()[-500:]}")
    record: dict[str, Any] = {"wall_s": wall}
    for line in out.stderr.splitlines():
        if line.startswith(PREFIX):
            record["timings"] = json.loads(line[len(PREFIX) :])
    return record


def breakdown(record: dict[str, Any]) -> dict[str, float] | None:
    """The parts (`PARTS`) of one search process's wall time, None without timings."""
    t = record.get("timings")
    if not t or t.get("total_s") is None:
        return None
    steps = {
        "import": t["import_s"],
        "load": t["tokenizer_s"] + t["load_s"],
        "encode": t["encode_s"],
        "query": t["search_s"],
        "print": t["print_s"],
    }
    steps["other"] = max(0.0, t["total_s"] - sum(v for k, v in steps.items() if k != "print"))
    steps["exit"] = max(0.0, record["wall_s"] - t["total_s"] - t["print_s"])
    return {k: steps[k] for k in PARTS}


def percentiles(values: list[float]) -> dict[str, float]:
    return {"p50": float(np.percentile(values, 50)), "p90": float(np.percentile(values, 90))}


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {"wall": {}, "parts": {}}
    for name, records in runs.items():
        out["wall"][name] = percentiles([r["wall_s"] for r in records])
        parts = [b for r in records if (b := breakdown(r)) is not None]
        if parts:
            out["parts"][name] = {k: percentiles([p[k] for p in parts]) for k in PARTS}
            out["parts"][name]["engine"] = records[-1]["timings"].get("engine")
    return out


def tables(stats: dict[str, Any]) -> list[str]:
    rows = ["| process | p50 (s) | p90 (s) |", "|---|---:|---:|"]
    for name, s in stats["wall"].items():
        rows.append(f"| `{name}` | {s['p50']:.3f} | {s['p90']:.3f} |")
    for name, parts in stats["parts"].items():
        rows += [
            "",
            f"`{name}`, where its time goes (each part's own p50 and p90; query "
            f"encoded by {parts['engine'] or 'no model'}):",
            "",
            "| step | p50 (s) | p90 (s) |",
            "|---|---:|---:|",
        ]
        for key, label in PARTS.items():
            rows.append(f"| {label} | {parts[key]['p50']:.3f} | {parts[key]['p90']:.3f} |")
    return rows


def plot(stats: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(stats["wall"])
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [1.2, 1]}
    )
    p50 = [stats["wall"][n]["p50"] for n in names]
    p90 = [stats["wall"][n]["p90"] for n in names]
    y = np.arange(len(names))
    left.barh(y, p50, color="#4c72b0", label="p50")
    left.errorbar(p90, y, fmt="|", color="black", markersize=12, label="p90")
    left.set_yticks(y, names)
    left.invert_yaxis()
    left.axvline(1.0, color="#c44e52", linestyle="--", linewidth=1, label="1.0 s goal")
    left.set_xlabel("seconds, fresh process (spawn to exit)")
    left.legend(loc="lower right", fontsize=8)
    search = stats["parts"].get("attnswitch search")
    if search:
        start = 0.0
        colours = plt.cm.tab10.colors
        for i, (key, label) in enumerate(PARTS.items()):
            width = search[key]["p50"]
            right.barh([0], [width], left=[start], color=colours[i], label=label)
            start += width
        right.set_yticks([0], ["attnswitch search"])
        right.set_xlabel("seconds (p50 of each part)")
        right.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(report: dict[str, Any]) -> str:
    m, idx = report["machine"], report["index"]
    return "\n".join(
        [
            "# Cold search: fresh `attnswitch search` processes, beside grep and sqlite3",
            "",
            f"{report['n']} rounds after one warm-up round; in each, every process below runs "
            f'once, fresh, the order rotated. The query: "{report["query"]}". The index: '
            f"{idx['chunks']:,} chunks of {idx['documents']} documents of `{report['folder']}`, "
            f"built by {idx['engine']} ({idx['precision']}); why: {idx['engine_reason']}.",
            "",
            f"- CPU: {m['cpu']}, {m['cores']} cores usable; ISA flags: {', '.join(m['flags'])}",
            f"- load average before / after: {report['load_before']:.2f} / "
            f"{report['load_after']:.2f}",
            f"- measured {report['when']}, `benchmarks/cold_search.py`",
            "",
            *tables(report["stats"]),
            "",
            "Wall: from the benchmark's spawn of the process to its exit. The search's parts are "
            "its own account (`$ATTNSWITCH_TIMINGS=1`; import from the process's start, exit the "
            "wall time less the process's own), so they add up to its wall time in each run; "
            "their p50s need not add up to the wall's p50. grep reads every file of the folder; "
            "sqlite3 runs the store's own FTS5 query on the index file.",
            "",
            "![cold search](cold_search.png)",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20, help="rounds timed")
    parser.add_argument("--folder", type=Path, default=ROOT / "examples/corpus")
    parser.add_argument(
        "--db", type=Path, default=None, help="an index of --folder to take (default: build one)"
    )
    parser.add_argument("--query", default="how do I update rows in a table")
    parser.add_argument("--engine", default="auto")
    parser.add_argument("--out", type=Path, default=ROOT / "docs/results")
    parser.add_argument(
        "--work", type=Path, default=None, help="folder for the index (default: a temporary one)"
    )
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n: expected >= 1, got {args.n}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from attnswitch.engines.autopick import machine

    compile_package()
    with tempfile.TemporaryDirectory(prefix="cold-search-") as tmp:
        db = args.db or (args.work or Path(tmp)) / "db"
        if args.db is None:
            summary = build_index(args.folder, db, args.engine)
            index = {
                "engine": summary["engine"],
                "engine_reason": summary["engine_reason"],
                "precision": summary["precision"],
                "documents": summary["indexed"],
                "chunks": summary["chunks_stored"],
            }
        else:
            status = json.loads(
                subprocess.run(
                    cli("status", "--db", str(db), "--json"),
                    capture_output=True,
                    text=True,
                    env=child_env(),
                    check=True,
                ).stdout
            )
            model = status["model"] or {}
            index = {
                "engine": model.get("engine"),
                "engine_reason": "an index taken as is",
                "precision": model.get("precision"),
                "documents": status["documents"],
                "chunks": status["chunks"],
            }
        commands = contenders(args.query, db, args.folder)
        names = list(commands)
        for name in names:  # warm-up: page cache, compiled models
            one(commands[name])
        load_before = os.getloadavg()[0]
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        for i in range(args.n):
            shift = i % len(names)
            for name in names[shift:] + names[:shift]:
                runs[name].append(one(commands[name]))
            print(
                f"  round {i + 1}/{args.n}: "
                + ", ".join(f"{n} {runs[n][-1]['wall_s']:.2f} s" for n in names),
                file=sys.stderr,
            )
        load_after = os.getloadavg()[0]
    folder = args.folder.resolve()
    report = {
        "n": args.n,
        "query": args.query,
        "engine": args.engine,
        "folder": str(folder.relative_to(ROOT)) if folder.is_relative_to(ROOT) else str(folder),
        "when": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "load_before": load_before,
        "load_after": load_after,
        "index": index,
        # the interpreter by name only: a path would name this machine's checkout
        "commands": {n: [Path(c[0]).name, "..."] for n, c in commands.items()},
        "stats": summarise(runs),
        "runs": runs,
    }
    print("\n".join(tables(report["stats"])))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cold_search.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "cold_search.md").write_text(markdown(report))
    plot(report["stats"], args.out / "cold_search.png")
    print(
        f"wrote {args.out / 'cold_search.md'}, cold_search.json and cold_search.png",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
