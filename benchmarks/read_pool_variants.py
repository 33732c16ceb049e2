"""The quick pass's reading pool, variant by variant (issue 52): what each bound costs in
time and buys in memory, on one drive.

    python benchmarks/read_pool_variants.py .bench/drive50 [--rounds 2] [--md ...] [--json ...]

Each variant is `attnswitch run DRIVE --quick --json` into a fresh index, in its own
process, with the user's defaults except the two bounds it names, set in that process
before the run starts:

- `depth`: files in flight in the reading pool (submitted, not yet taken by the run);
- `ocr`: scanned pages each reading worker recognises at once (`ocr_workers`; 0: one
  per CPU, as before issue 52's bounds).

The variants run in turn, round after round, each after the machine is quiet
(benchmarks/drive.py's `settle`); the page gives each one's median seconds and MB/s and
its largest peak RSS and PSS (sums over the process tree, benchmarks/drive.py's sampler).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from drive import ROOT, settle, timed  # noqa: E402
from drive_quick_scale import fresh_db  # noqa: E402
from synthetic import cpu_description  # noqa: E402

# name: (files in flight, scanned pages per worker, 0: one per CPU); the first is the
# one the others are compared with
VARIANTS = {
    "8 in flight, OCR 1 page per CPU per worker (before issue 52's bounds)": (8, 0),
    "8 in flight, OCR 1 page per worker": (8, 1),
    "4 in flight, OCR 1 page per worker": (4, 1),
}

CHILD = """
import functools, sys
from attnswitch.jobs import read_pool, run
read_pool.ocr_pages_per_worker = lambda workers, cpus=None: {ocr!r}
pooled = read_pool.read_in_pool
def read_in_pool(entries, read, *, workers, depth=None, **kw):
    return pooled(entries, read, workers=workers, depth={depth!r}, **kw)
run.read_in_pool = read_in_pool
from attnswitch.cli.entry import main
sys.argv = ["attnswitch", *sys.argv[1:]]
main()
"""


def one(drive: Path, work: Path, depth: int, ocr: int) -> dict:
    db, env = fresh_db(work)
    code = CHILD.format(depth=depth, ocr=ocr)
    cmd = [sys.executable, "-c", code, "run", str(drive), "--db", str(db), "--quick", "--json"]
    load = settle()
    seconds, done, sampler = timed(cmd + ["--no-progress"], env, db)
    if done.returncode != 0:
        raise SystemExit(f"{cmd[3:]}: exit {done.returncode}: {done.stderr[-2000:]}")
    summary = json.loads(done.stdout)
    shutil.rmtree(db.parent)
    return {
        "seconds": seconds,
        "load_before": load,
        "indexed": summary["indexed"],
        "peak_rss_mib": sampler.peak_mib(),
        "peak_pss_mib": sampler.peak_pss_mib(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("drive", type=Path)
    ap.add_argument("--work", type=Path, default=ROOT / ".bench" / "drive")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    drive = args.drive.resolve()
    mb = sum(p.stat().st_size for p in drive.rglob("*") if p.is_file()) / 1e6
    args.work.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    for round_ in range(args.rounds):
        for name, (depth, ocr) in VARIANTS.items():
            runs[name].append(one(drive, args.work, depth, ocr))
            print(f"round {round_ + 1}, {name}: {runs[name][-1]['seconds']:.0f} s", flush=True)
    lines = [
        f"# The quick pass's reading pool by variant, {drive.name} ({mb:.1f} MB)",
        "",
        f"{cpu_description()}, {os.cpu_count()} CPUs; {args.rounds} rounds, the variants in "
        "turn, each started once the 1-minute load average was below 1 (or after 5 minutes). "
        "Command: `python benchmarks/read_pool_variants.py DRIVE`.",
        "",
        "| variant | median s | MB/s | time vs the first | peak RSS MiB | peak PSS MiB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    base = statistics.median(r["seconds"] for r in next(iter(runs.values())))
    for name, rs in runs.items():
        s = statistics.median(r["seconds"] for r in rs)
        lines.append(
            f"| {name} | {s:.1f} | {mb / s:.3f} | {s / base:.2f}x | "
            f"{max(r['peak_rss_mib'] for r in rs):.0f} | {max(r['peak_pss_mib'] for r in rs):.0f} |"
        )
    print("\n".join(lines))
    if args.md:
        args.md.write_text("\n".join(lines) + "\n")
    if args.json:
        args.json.write_text(
            json.dumps({"mb": mb, "cpu": cpu_description(), "runs": runs}, indent=1)
        )


if __name__ == "__main__":
    main()
