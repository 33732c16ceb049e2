"""Soak: `attnswitch serve` under a steady mixed load for a long time, and `attnswitch run`
over many small files; does anything grow that should not?

The service part: a server on loopback with a data folder and a jobs root; `--clients`
asyncio clients send, one request after the other, embeddings of 1 to 16 passages of 8 to
400 words, and searches in all three modes (hybrid, dense, keyword); an indexing job of one
of the corpus folders starts every `--job-every` seconds (the first indexes it, the next
ones find it unchanged or index the next folder). Every `--sample` seconds the server
process's resident memory, open descriptors and threads, and the store's size on disk, are
sampled (psutil), with the server's own memory verdict (`/metrics`,
`attnswitch_service_memory_growing`).

Holds when, after `--warmup` seconds, RSS grows by less than 2% from the first samples to
the last (medians of 3), open descriptors and threads end within 2 of where they started,
and no request got a 5xx.

The run part: `attnswitch run` over `--files` generated small text files, and over a tenth
of them, in fresh processes; peak RSS (sampled every 0.1 s) must not grow with the number
of files (the larger run's peak within 10% of the smaller's).

    python benchmarks/soak.py [--duration 1800] [--clients 4] [--files 10000]
        [--out-dir docs/results]

Writes soak.md, soak.json and soak.png (RSS, descriptors, threads and store size over
time) with the CPU model and the load average; label a run on a busy machine as such.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_vs_sentence_transformers import cpu_description  # noqa: E402
from service_load import texts_from_corpus  # noqa: E402

from attnswitch.service import launch

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "examples" / "corpus"
JOB_FOLDERS = ("python-tutorial", "postgresql", "sqlite", "rust")
RSS_GROWTH_LIMIT = 0.02
FLAT_WITHIN = 2


# -- the service under load -----------------------------------------------------------------

async def client(c: httpx.AsyncClient, rng: random.Random, pool: list[str], until: float,
                 statuses: dict[int, int]) -> None:
    """Requests one after the other until `until` (monotonic): embeddings or searches."""
    while time.monotonic() < until:
        if rng.random() < 0.5:
            body = {"input": rng.sample(pool, rng.randint(1, 16)), "truncate": True}
            path = "/v1/embeddings"
        else:
            body = {"query": rng.choice(pool)[:200], "k": rng.choice((1, 5, 20)),
                    "mode": rng.choice(("hybrid", "dense", "keyword"))}
            path = "/v1/search"
        try:
            status = (await c.post(path, json=body)).status_code
        except httpx.TransportError:
            status = 0
        statuses[status] = statuses.get(status, 0) + 1
        if status in (429, 503):
            await asyncio.sleep(0.5)


async def jobs(c: httpx.AsyncClient, every: float, until: float, started: list) -> None:
    """An indexing job every `every` seconds, over the corpus folders in turn."""
    i = 0
    while time.monotonic() < until:
        r = await c.post("/v1/jobs", json={"path": JOB_FOLDERS[i % len(JOB_FOLDERS)]})
        started.append(r.status_code)
        i += 1
        await asyncio.sleep(every)


async def sampler(proc: psutil.Process, data: Path, c: httpx.AsyncClient, every: float,
                  until: float, t0: float, samples: list) -> None:
    while time.monotonic() < until:
        with proc.oneshot():
            row = {"t": time.monotonic() - t0, "rss": proc.memory_info().rss,
                   "fds": proc.num_fds(), "threads": proc.num_threads()}
        row["store_bytes"] = sum(p.stat().st_size for p in data.glob("*") if p.is_file())
        try:
            metrics = (await c.get("/metrics")).text
            row["growing"] = next((float(line.split()[1]) for line in metrics.splitlines()
                                   if line.startswith("attnswitch_service_memory_growing ")),
                                  None)
        except httpx.TransportError:
            row["growing"] = None
        samples.append(row)
        await asyncio.sleep(every)


async def soak_service(args: argparse.Namespace, workdir: Path) -> dict:
    jobs_root = workdir / "jobs"
    for name in JOB_FOLDERS:
        shutil.copytree(CORPUS / name, jobs_root / name)
    data = workdir / "data"
    data.mkdir()
    server = launch.start(workdir / "server", "--db", str(data), "--jobs-root",
                          str(jobs_root), "--request-timeout", "60", timeout=300)
    proc = psutil.Process(server.proc.pid)
    pool = texts_from_corpus(2000, seed=1)
    statuses: dict[int, int] = {}
    samples: list[dict] = []
    started_jobs: list[int] = []
    t0 = time.monotonic()
    until = t0 + args.duration
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as c:
            rngs = [random.Random(i) for i in range(args.clients)]
            await asyncio.gather(
                sampler(proc, data, c, args.sample, until, t0, samples),
                jobs(c, args.job_every, until, started_jobs),
                *(client(c, rng, pool, until, statuses) for rng in rngs))
    finally:
        server.stop()
    return {"samples": samples, "statuses": {str(k): v for k, v in sorted(statuses.items())},
            "jobs_started": started_jobs}


def judge_service(result: dict, warmup: float) -> dict:
    after = [s for s in result["samples"] if s["t"] >= warmup]
    if len(after) < 6:
        return {"holds": False, "why": f"{len(after)} samples after the warm-up, need 6"}

    def median3(rows: list[dict], key: str) -> float:
        return sorted(r[key] for r in rows)[1]

    first, last = after[:3], after[-3:]
    growth = median3(last, "rss") / median3(first, "rss") - 1
    fds = last[-1]["fds"] - first[0]["fds"]
    threads = last[-1]["threads"] - first[0]["threads"]
    errors = sum(v for k, v in result["statuses"].items() if k == "0" or k.startswith("5"))
    holds = (growth < RSS_GROWTH_LIMIT and abs(fds) <= FLAT_WITHIN
             and abs(threads) <= FLAT_WITHIN and errors == 0)
    return {"holds": holds, "rss_growth": growth, "fds_change": fds,
            "threads_change": threads, "server_errors": errors,
            "memory_growing_flagged": any(s.get("growing") == 1.0 for s in after)}


# -- `attnswitch run` over many small files ----------------------------------------------------

def make_files(folder: Path, n: int, pool: list[str]) -> None:
    for i in range(n):
        sub = folder / f"d{i // 1000:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i:05d}.txt").write_text(pool[i % len(pool)] + f"\n\nfile {i}\n")


def peak_rss_of_run(folder: Path, db: Path) -> tuple[float, int]:
    """(seconds, peak RSS in bytes) of `attnswitch run folder --db db` in a fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "attnswitch.cli", "run", str(folder),
                             "--db", str(db), "--no-progress", "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    watched = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    if proc.returncode != 0:
        raise RuntimeError(f"attnswitch run {folder}: exit status {proc.returncode}")
    return time.perf_counter() - start, peak


def soak_run(args: argparse.Namespace, workdir: Path) -> dict:
    pool = texts_from_corpus(500, seed=2)
    out = {}
    for n in (max(1, args.files // 10), args.files):
        folder = workdir / f"files-{n}"
        make_files(folder, n, pool)
        seconds, peak = peak_rss_of_run(folder, workdir / f"db-{n}")
        out[str(n)] = {"seconds": seconds, "peak_rss": peak}
    small, large = (out[k]["peak_rss"] for k in out)
    return {"runs": out, "holds": large <= 1.10 * small, "peak_ratio": large / small}


# -- report -----------------------------------------------------------------------------------

def plot(samples: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [s["t"] / 60 for s in samples]
    fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True)
    for ax, key, label, scale in ((axes[0][0], "rss", "RSS (MiB)", 2**20),
                                  (axes[0][1], "store_bytes", "store (MiB)", 2**20),
                                  (axes[1][0], "fds", "open descriptors", 1),
                                  (axes[1][1], "threads", "threads", 1)):
        ax.plot(t, [s[key] / scale for s in samples])
        ax.set_ylabel(label)
    for ax in axes[1]:
        ax.set_xlabel("minutes")
    fig.suptitle("attnswitch serve under a steady mixed load")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def markdown(report: dict) -> str:
    s, r = report["service"], report.get("run")
    lines = [
        "# Soak: `attnswitch serve` and `attnswitch run` over time", "",
        f"Measured with `python benchmarks/soak.py --duration {report['duration']:g} "
        f"--clients {report['clients']} --files {report['files']}` on {report['cpu']}, "
        f"load average at the end {report['load_average']}.", "",
        f"**Service: {'holds' if s['holds'] else 'does not hold'}.** After a "
        f"{report['warmup']:g} s warm-up: RSS grew by {100 * s.get('rss_growth', 0):.2f}% "
        f"(limit {100 * RSS_GROWTH_LIMIT:.0f}%), descriptors changed by "
        f"{s.get('fds_change')}, threads by {s.get('threads_change')}, "
        f"{s.get('server_errors')} server errors; the server's own memory verdict "
        f"{'flagged' if s.get('memory_growing_flagged') else 'never flagged'} growth. "
        f"Answers by status: {report['statuses']}.", "",
        "![RSS, store size, descriptors and threads over time](soak.png)", ""]
    if r:
        runs = ", ".join(f"{n} files: peak RSS {v['peak_rss'] / 2**20:,.0f} MiB in "
                         f"{v['seconds']:.0f} s" for n, v in r["runs"].items())
        lines += [f"**Run: {'holds' if r['holds'] else 'does not hold'}.** {runs} "
                  f"(ratio {r['peak_ratio']:.2f}, limit 1.10).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=1800.0, help="seconds of load")
    ap.add_argument("--warmup", type=float, default=120.0, help="seconds not judged")
    ap.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--job-every", type=float, default=180.0)
    ap.add_argument("--files", type=int, default=10_000, help="files of the run part "
                    "(0: no run part)")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "results")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="attnswitch-soak-") as tmp:
        workdir = Path(tmp)
        service = asyncio.run(soak_service(args, workdir))
        run = soak_run(args, workdir) if args.files else None
    cpu, flags = cpu_description()
    report = {"duration": args.duration, "warmup": args.warmup, "clients": args.clients,
              "files": args.files, "cpu": cpu + (f" ({', '.join(flags)})" if flags else ""),
              "load_average": [round(x, 2) for x in os.getloadavg()],
              "service": judge_service(service, args.warmup), "run": run,
              "statuses": service["statuses"], "jobs_started": service["jobs_started"],
              "samples": service["samples"]}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "soak.json").write_text(json.dumps(report, indent=1))
    (args.out_dir / "soak.md").write_text(markdown(report))
    plot(service["samples"], args.out_dir / "soak.png")
    print(markdown(report))
    return 0 if report["service"]["holds"] and (run is None or run["holds"]) else 1


if __name__ == "__main__":
    sys.exit(main())
