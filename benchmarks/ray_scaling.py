"""Scale-out on one machine: `attnswitch run` in one process against `run --ray`.

The whole of examples/corpus is indexed into a fresh store by each contender, in a fresh
process of its own (imports, model load and, for Ray, starting and stopping a local Ray are
all paid every time), `--rounds` times, in an order rotated from one round to the next so
that a change of load on a shared machine hits every contender alike. Figures are medians
over rounds.

Contenders (all with `--precision`, default fp32 as `attnswitch run`):

- single, 2 threads: `run` as `attnswitch run` runs it (torch's default: one intra-op
  thread per core);
- single, 1 thread: the same with one torch thread, to tell Ray's overhead from threading;
- ray, 1 CPU actor: `run_on_ray` on a local Ray of `--cpus` CPUs, one encoder actor of one
  CPU (one torch thread; half a CPU is left to the read and chunk tasks);
- ray, 2 CPU actors: two actors of 0.75 CPU each (one torch thread each), the pools
  `--ray` plans by default on one node of 2 CPUs.

Ray's workers run at nice 15 by default, which on a shared machine hands their CPU time to
everyone else; `RAY_worker_niceness=0` is set so that all contenders run at the same
priority.

    python benchmarks/ray_scaling.py [--rounds 2] [--precision fp32] [--cpus 2]
        [--contenders single-2,single-1,ray-1,ray-2] [--out docs/results]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "examples" / "corpus"
CONTENDERS = {  # name -> (label, kind, torch threads or Ray CPU actors, CPUs per actor)
    "single-2": ("single process, 2 threads", "single", 2, None),
    "single-1": ("single process, 1 thread", "single", 1, None),
    "ray-1": ("ray, 1 CPU actor (1 CPU)", "ray", 1, 1.0),
    "ray-2": ("ray, 2 CPU actors (0.75 CPU each)", "ray", 2, 0.75),
}


def one(name: str, db: Path, precision: str, cpus: int) -> dict:
    """Index the corpus with one contender, in this process; returns its figures."""
    import logging

    _, kind, n, per_actor = CONTENDERS[name]
    from attnswitch.indexing.store import SQLiteStore
    from attnswitch.jobs.run import RunOptions

    options = RunOptions.of(precision=precision)
    out: dict = {}
    if kind == "single":
        import torch

        torch.set_num_threads(n)
        from attnswitch.jobs.run import run

        with SQLiteStore(db) as store:
            summary = run(CORPUS, store, options)
        out["startup_s"] = summary.load_s  # the model load
    else:
        os.environ["RAY_worker_niceness"] = "0"  # read by the raylet that ray.init starts
        import ray

        from attnswitch.jobs.ray_run import RayOptions, run_on_ray

        start = time.perf_counter()
        ray.init(
            address="local",
            num_cpus=cpus,
            include_dashboard=False,
            logging_level=logging.WARNING,
            log_to_driver=False,
        )
        out["ray_init_s"] = time.perf_counter() - start
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        with SQLiteStore(db) as store:
            summary = run_on_ray(
                CORPUS, store, options, RayOptions(cpu_actors=n, cpus_per_actor=per_actor)
            )
        start = time.perf_counter()
        ray.shutdown()
        out["ray_shutdown_s"] = time.perf_counter() - start
        out["actors_start_s"] = summary.ray["start_s"]
        out["startup_s"] = out["ray_init_s"] + summary.ray["start_s"]
        out["actors"] = summary.ray["actors"]
    out.update(
        run_s=summary.wall_s,
        chunks=summary.chunks_encoded,
        tokens=summary.tokens_encoded,
        status=summary.status,
    )
    return out


def contender(name: str, precision: str, cpus: int) -> dict:
    """Run `one` in a fresh process; adds the process's own wall time (`total_s`)."""
    with tempfile.TemporaryDirectory(prefix="ray-scaling-") as tmp:
        start = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                name,
                "--db",
                str(Path(tmp) / "index.sqlite3"),
                "--precision",
                precision,
                "--cpus",
                str(cpus),
            ],
            capture_output=True,
            text=True,
            timeout=3600,
            env=dict(os.environ, HF_HUB_DISABLE_PROGRESS_BARS="1"),
        )
        total = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{name}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["total_s"] = total
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--precision", default="fp32")
    p.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray")
    p.add_argument("--contenders", default=",".join(CONTENDERS))
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.db, args.precision, args.cpus)))
        return

    names = [n for n in args.contenders.split(",") if n]
    unknown = [n for n in names if n not in CONTENDERS]
    if unknown:
        raise SystemExit(
            f"--contenders: expected some of {', '.join(CONTENDERS)}, got {', '.join(unknown)}"
        )
    load_start = os.getloadavg()
    results: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(args.rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            res = contender(name, args.precision, args.cpus)
            results[name].append(res)
            print(
                f"round {r + 1}: {name}: total {res['total_s']:.1f} s, run "
                f"{res['run_s']:.1f} s, startup {res['startup_s']:.1f} s, {res['chunks']} "
                f"chunks, load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    load_end = os.getloadavg()
    rows = summarise(names, results)
    report = render(args, rows, results, load_start, load_end)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "ray_scaling.md"
    path.write_text(report)
    print(report)
    print(f"wrote {path}")
    plot(args.out / "ray_scaling.png", rows)


def summarise(names: list[str], results: dict[str, list[dict]]) -> list[dict]:
    med = statistics.median
    rows = []
    for name in names:
        runs = results[name]
        chunks, tokens = runs[0]["chunks"], runs[0]["tokens"]
        if any(
            (x["chunks"], x["tokens"], x["status"]) != (chunks, tokens, "completed") for x in runs
        ):
            raise SystemExit(f"{name}: runs differ or did not complete: {runs}")
        row = {
            "name": name,
            "label": CONTENDERS[name][0],
            "chunks": chunks,
            "tokens": tokens,
            "total_s": med(x["total_s"] for x in runs),
            "run_s": med(x["run_s"] for x in runs),
            "startup_s": med(x["startup_s"] for x in runs),
            "rounds_total_s": [x["total_s"] for x in runs],
        }
        row["chunks_per_s"] = chunks / row["run_s"]
        row["tokens_per_s"] = tokens / row["run_s"]
        if CONTENDERS[name][1] == "ray":
            row["ray_init_s"] = med(x["ray_init_s"] for x in runs)
            row["actors_start_s"] = med(x["actors_start_s"] for x in runs)
            row["ray_shutdown_s"] = med(x["ray_shutdown_s"] for x in runs)
            row["actor_tokens_per_s"] = med(
                statistics.mean(
                    a["tokens"] / a["encode_s"] for a in x["actors"] if a["encode_s"] > 0
                )
                for x in runs
            )
        rows.append(row)
    base = rows[0]
    for row in rows:
        row["vs_total"] = base["total_s"] / row["total_s"]
        row["vs_run"] = base["run_s"] / row["run_s"]
    return rows


def render(args, rows, results, load_start, load_end) -> str:
    import ray
    import torch

    base = rows[0]
    lines = [
        "# Scale-out on one machine: single process vs Ray",
        "",
        f"Generated by `benchmarks/ray_scaling.py` on {dt.date.today().isoformat()}: "
        f"{platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__}, "
        f"ray {ray.__version__}, precision {args.precision}, a local Ray of {args.cpus} CPUs. "
        f"Load average {load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end (a "
        "shared machine: other jobs ran alongside, so absolute figures are noisy).",
        "",
        f"Each contender indexes all of examples/corpus ({base['chunks']:,} chunks, "
        f"{base['tokens']:,} tokens) into a fresh store, in a fresh process, "
        f"{args.rounds} rounds in rotating order; medians over rounds. total: the "
        "process's wall time, everything included (Python start, imports, model load, Ray "
        "start and stop). run: the run's own wall time (`wall_s` of the summary: for Ray "
        "from the connected driver to the summary, the actors' start included). startup: "
        "the model load for a single process; `ray.init` (a local Ray started) plus the "
        "actors' start (their model load) for Ray. chunks/s and tokens/s: over run. vs "
        f"{base['label']}: its time over the contender's (above 1: faster).",
        "",
        "| contender | total s | run s | startup s | chunks/s | tokens/s | vs single "
        "(total) | vs single (run) | total s per round |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['label']} | {r['total_s']:.1f} | {r['run_s']:.1f} | {r['startup_s']:.1f} | "
            f"{r['chunks_per_s']:.1f} | {r['tokens_per_s']:,.0f} | {r['vs_total']:.2f}x | "
            f"{r['vs_run']:.2f}x | {', '.join(f'{x:.1f}' for x in r['rounds_total_s'])} |"
        )
    ray_rows = [r for r in rows if "ray_init_s" in r]
    if ray_rows:
        lines += [
            "",
            "Ray's overhead, medians over rounds:",
            "",
            "| contender | ray.init s | actors' start s | ray.shutdown s | tokens/s per "
            "actor while busy |",
            "|---|---:|---:|---:|---:|",
        ]
        for r in ray_rows:
            lines.append(
                f"| {r['label']} | {r['ray_init_s']:.1f} | {r['actors_start_s']:.1f} "
                f"| {r['ray_shutdown_s']:.1f} | {r['actor_tokens_per_s']:,.0f} |"
            )
    lines += reading(rows)
    lines += [
        "",
        "Per round (seconds):",
        "",
        "| contender | round | total | run | startup | ray.init | actors' start |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        for i, x in enumerate(results[r["name"]]):
            ray_cols = (
                f"{x['ray_init_s']:.1f} | {x['actors_start_s']:.1f}"
                if "ray_init_s" in x
                else "- | -"
            )
            lines.append(
                f"| {r['label']} | {i + 1} | {x['total_s']:.1f} | {x['run_s']:.1f} | "
                f"{x['startup_s']:.1f} | {ray_cols} |"
            )
    lines.append("")
    return "\n".join(lines)


def reading(rows) -> list[str]:
    """What the figures say, computed from them (only for the contenders measured)."""
    by = {r["name"]: r for r in rows}
    out = []
    if "single-2" in by and "ray-1" in by:
        s, r = by["single-2"], by["ray-1"]
        out.append(
            f"Ray's fixed cost here: {r['ray_init_s']:.1f} s to start a local Ray, "
            f"{r['actors_start_s']:.1f} s for the actor's start (its model load) against "
            f"{s['startup_s']:.1f} s of model load in one process, and "
            f"{r['ray_shutdown_s']:.1f} s to stop Ray (counted in total)."
        )
    if "single-1" in by and "ray-1" in by:
        s, r = by["single-1"], by["ray-1"]
        out.append(
            f"One CPU actor encodes on one torch thread, the other CPU being left to reading "
            f"and chunking: against one process on one thread, its run takes "
            f"{r['run_s'] / s['run_s']:.2f}x the time ({r['run_s']:.1f} s vs "
            f"{s['run_s']:.1f} s)."
        )
    if "single-2" in by and "ray-2" in by:
        s, r = by["single-2"], by["ray-2"]
        out.append(
            f"Two CPU actors of one thread each against one process on two threads: total "
            f"{r['total_s']:.1f} s vs {s['total_s']:.1f} s ({r['vs_total']:.2f}x), run "
            f"{r['run_s']:.1f} s vs {s['run_s']:.1f} s ({r['vs_run']:.2f}x)."
        )
    return ["", " ".join(out)] if out else []


def plot(path: Path, rows) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.6 * len(rows) + 1.8))
    labels = [r["label"] for r in rows]
    startup = [r["startup_s"] for r in rows]
    rest = [r["total_s"] - r["startup_s"] for r in rows]
    ax.barh(labels, startup, color="#999", label="startup (model load; Ray start)")
    ax.barh(labels, rest, left=startup, color="#3a7", label="the rest (reading, encoding, ...)")
    right = max(r["total_s"] for r in rows)
    for i, r in enumerate(rows):
        ax.text(r["total_s"] + right * 0.02, i, f"{r['vs_total']:.2f}x", va="center")
    ax.set_xlim(0, right * 1.15)
    ax.invert_yaxis()
    ax.set_xlabel("seconds to index examples/corpus, whole process (median; right: vs first)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, fontsize=8, frameon=False)
    ax.set_title("Same corpus, model and machine (2 cores)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
