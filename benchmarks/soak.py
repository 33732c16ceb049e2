"""Soak: `attnswitch serve` under a steady mixed load for a long time, and `attnswitch run`
over many small files; does anything grow that should not?

The service part: a server on loopback with a data folder and a jobs root. First, not
judged, it indexes the corpus folders one job after the other, so the store has its
steady size. Then, for `--duration` seconds, `--clients` asyncio clients send, one
request after the other, embeddings of 1 to 16 passages of 8 to 400 words, and searches
in all three modes (hybrid, dense, keyword); every `--job-every` seconds `--edits` files
of one corpus folder are revised (a sentence added, or taken out again) and a job
re-indexes that folder, so the jobs replace documents and the store keeps its size. Every
`--sample` seconds the server process's resident memory, open descriptors and threads,
and the store's size on disk, are sampled (psutil), with the server's own memory verdict
(`/metrics`, `attnswitch_service_memory_growing`).

Holds when, after the warm-up, RSS grows by less than 2% from the first samples to the
last (medians of 3), open descriptors and threads end within 2 of where they started, and
no request got a 5xx. The warm-up (`--warmup`, default one cycle of the jobs: `--job-every`
times the number of corpus folders) lasts until every kind of work has run once under the
load, each folder's job included: memory that fills on first use and then stays (the
runtime's compiled shapes, the allocator's arenas for threads that first run side by side)
is not a leak, and a leak keeps growing after it. The index is built before the load for
the same reason: memory that follows the data (the index's vectors and pages that a search
holds) is not read as a leak. Two earlier soaks could not tell these apart: one grew the
index during the load (+10 MiB while the store grew from 2.9 to 9.8 MiB, +0.94% in the 22
minutes after), and one judged from 120 s grew in steps at the first job of each folder
under load (+3.99%) and not after (+0.2 MiB over the last 20 minutes);
docs/results/soak.md.

The run part: `attnswitch run` over `--files` generated small text files, and over a tenth
of them, in fresh processes; peak RSS (sampled every 0.1 s) must not grow with the number
of files (the larger run's peak within 10% of the smaller's).

    python benchmarks/soak.py [--duration 1800] [--clients 4] [--job-every 90] [--files 10000]
        [--edits 5] [--out-dir docs/results]

Writes soak.md, soak.json and soak.png (RSS, descriptors, threads and store size over
time) with the CPU model and the load average; label a run on a busy machine as such.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from attnswitch.service import launch
from e2e_vs_sentence_transformers import cpu_description  # noqa: E402
from service_load import texts_from_corpus  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "examples" / "corpus"
JOB_FOLDERS = ("python-tutorial", "postgresql", "sqlite", "rust")
RSS_GROWTH_LIMIT = 0.02
FLAT_WITHIN = 2


# -- the service under load -----------------------------------------------------------------


async def client(
    c: httpx.AsyncClient,
    rng: random.Random,
    pool: list[str],
    until: float,
    statuses: dict[int, int],
) -> None:
    """Requests one after the other until `until` (monotonic): embeddings or searches."""
    while time.monotonic() < until:
        if rng.random() < 0.5:
            body = {"input": rng.sample(pool, rng.randint(1, 16)), "truncate": True}
            path = "/v1/embeddings"
        else:
            body = {
                "query": rng.choice(pool)[:200],
                "k": rng.choice((1, 5, 20)),
                "mode": rng.choice(("hybrid", "dense", "keyword")),
            }
            path = "/v1/search"
        try:
            status = (await c.post(path, json=body)).status_code
        except httpx.TransportError:
            status = 0
        statuses[status] = statuses.get(status, 0) + 1
        if status in (429, 503):
            await asyncio.sleep(0.5)


async def finish_job(c: httpx.AsyncClient, folder: str, timeout: float = 900.0) -> dict:
    """Start a job indexing `folder` of the jobs root and wait for its end; the job."""
    r = await c.post("/v1/jobs", json={"path": folder})
    if r.status_code != 202:
        raise RuntimeError(f"POST /v1/jobs {folder}: expected 202, got {r.status_code} {r.text}")
    deadline = time.monotonic() + timeout
    while (job := (await c.get(f"/v1/jobs/{r.json()['id']}")).json())["status"] in (
        "queued",
        "running",
    ):
        if time.monotonic() > deadline:
            raise RuntimeError(f"job {folder}: still {job['status']} after {timeout:g} s")
        await asyncio.sleep(0.5)
    if job["status"] != "completed":
        raise RuntimeError(
            f"job {folder}: expected completed, got {job['status']}: {job.get('error')}"
        )
    return job


def revise(folder: Path, edits: int, round_: int) -> None:
    """Revise `edits` files of `folder` (its text files, in turn from round to round): add a
    sentence to each, or take the one added last time out, so the files change and keep
    their size over two rounds."""
    files = sorted(p for p in folder.rglob("*") if p.suffix in (".html", ".txt", ".md"))
    marker = "\n<p>Revised by the soak.</p>\n"
    for i in range(edits):
        path = files[(round_ // 2 * edits + i) % len(files)]
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        text = text.replace(marker, "") if marker in text else text + marker
        path.write_text(text, encoding="utf-8", errors="surrogateescape")


async def jobs(
    c: httpx.AsyncClient, jobs_root: Path, every: float, edits: int, until: float, started: list
) -> None:
    """Every `every` seconds: revise `edits` files of a corpus folder (in turn) and start a
    job re-indexing it."""
    i = 0
    while time.monotonic() < until:
        name = JOB_FOLDERS[i % len(JOB_FOLDERS)]
        revise(jobs_root / name, edits, i // len(JOB_FOLDERS))
        r = await c.post("/v1/jobs", json={"path": name})
        started.append(r.status_code)
        i += 1
        await asyncio.sleep(max(0.0, min(every, until - time.monotonic())))


async def sampler(
    proc: psutil.Process,
    data: Path,
    c: httpx.AsyncClient,
    every: float,
    stop: asyncio.Event,
    samples: list,
) -> None:
    """A sample every `every` seconds until `stop` is set; `at` is its monotonic time."""
    while not stop.is_set():
        with proc.oneshot():
            row = {
                "at": time.monotonic(),
                "rss": proc.memory_info().rss,
                "fds": proc.num_fds(),
                "threads": proc.num_threads(),
            }
        row["store_bytes"] = sum(p.stat().st_size for p in data.glob("*") if p.is_file())
        try:
            metrics = (await c.get("/metrics")).text
            row["growing"] = next(
                (
                    float(line.split()[1])
                    for line in metrics.splitlines()
                    if line.startswith("attnswitch_service_memory_growing ")
                ),
                None,
            )
        except httpx.TransportError:
            row["growing"] = None
        samples.append(row)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)


async def soak_service(args: argparse.Namespace, workdir: Path) -> dict:
    jobs_root = workdir / "jobs"
    for name in JOB_FOLDERS:
        shutil.copytree(CORPUS / name, jobs_root / name)
    data = workdir / "data"
    data.mkdir()
    server = launch.start(
        workdir / "server",
        "--db",
        str(data),
        "--jobs-root",
        str(jobs_root),
        "--request-timeout",
        "60",
        timeout=300,
    )
    proc = psutil.Process(server.proc.pid)
    pool = texts_from_corpus(2000, seed=1)
    statuses: dict[int, int] = {}
    samples: list[dict] = []
    started_jobs: list[int] = []
    stop = asyncio.Event()
    t0 = time.monotonic()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as c:
            sampling = asyncio.create_task(sampler(proc, data, c, args.sample, stop, samples))
            for name in JOB_FOLDERS:  # the index at its steady size before the load
                await finish_job(c, name)
            t0 = time.monotonic()
            until = t0 + args.duration
            await asyncio.gather(
                jobs(c, jobs_root, args.job_every, args.edits, until, started_jobs),
                *(
                    client(c, rng, pool, until, statuses)
                    for rng in (random.Random(i) for i in range(args.clients))
                ),
            )
            stop.set()
            await sampling
    finally:
        server.stop()
    for row in samples:  # seconds from the start of the load (negative: building the index)
        row["t"] = row.pop("at") - t0
    return {
        "samples": samples,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "jobs_started": started_jobs,
    }


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
    holds = (
        growth < RSS_GROWTH_LIMIT
        and abs(fds) <= FLAT_WITHIN
        and abs(threads) <= FLAT_WITHIN
        and errors == 0
    )
    return {
        "holds": holds,
        "rss_growth": growth,
        "fds_change": fds,
        "threads_change": threads,
        "server_errors": errors,
        "memory_growing_flagged": any(s.get("growing") == 1.0 for s in after),
    }


# -- `attnswitch run` over many small files ----------------------------------------------------


def make_files(folder: Path, n: int, pool: list[str]) -> None:
    for i in range(n):
        sub = folder / f"d{i // 1000:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i:05d}.txt").write_text(pool[i % len(pool)] + f"\n\nfile {i}\n")


def peak_rss_of_run(folder: Path, db: Path) -> tuple[float, int]:
    """(seconds, peak RSS in bytes) of `attnswitch run folder --db db` in a fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attnswitch.cli",
            "run",
            str(folder),
            "--db",
            str(db),
            "--no-progress",
            "--json",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
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


def plot(samples: list[dict], warmup: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [s["t"] / 60 for s in samples]
    fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True)
    for ax, key, label, scale in (
        (axes[0][0], "rss", "RSS (MiB)", 2**20),
        (axes[0][1], "store_bytes", "store (MiB)", 2**20),
        (axes[1][0], "fds", "open descriptors", 1),
        (axes[1][1], "threads", "threads", 1),
    ):
        ax.plot(t, [s[key] / scale for s in samples])
        ax.axvline(0, color="grey", linestyle=":")  # the load starts; before: the index built
        ax.axvspan(0, warmup / 60, color="grey", alpha=0.15)  # the warm-up, not judged
        ax.set_ylabel(label)
    for ax in axes[1]:
        ax.set_xlabel("minutes from the start of the load")
    fig.suptitle("attnswitch serve under a steady mixed load")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def markdown(report: dict) -> str:
    s, r = report["service"], report.get("run")
    lines = [
        "# Soak: `attnswitch serve` and `attnswitch run` over time",
        "",
        f"Measured with `python benchmarks/soak.py --duration {report['duration']:g} "
        f"--clients {report['clients']} --job-every {report['job_every']:g} --files "
        f"{report['files']}` on {report['cpu']}, "
        f"load average at the end {report['load_average']}. The corpus folders were indexed "
        f"first (not judged, before 0 on the curves); during the load, a job every "
        f"{report['job_every']:g} s re-indexed a folder after revising {report['edits']} of "
        f"its files.",
        "",
        f"**Service: {'holds' if s['holds'] else 'does not hold'}.** After a "
        f"{report['warmup']:g} s warm-up: RSS grew by {100 * s.get('rss_growth', 0):.2f}% "
        f"(limit {100 * RSS_GROWTH_LIMIT:.0f}%), descriptors changed by "
        f"{s.get('fds_change')}, threads by {s.get('threads_change')}, "
        f"{s.get('server_errors')} server errors; the server's own memory verdict "
        f"{'flagged' if s.get('memory_growing_flagged') else 'never flagged'} growth. "
        f"Answers by status: {report['statuses']}.",
        "",
        "![RSS, store size, descriptors and threads over time](soak.png)",
        "",
    ]
    if r:
        runs = ", ".join(
            f"{n} files: peak RSS {v['peak_rss'] / 2**20:,.0f} MiB in {v['seconds']:.0f} s"
            for n, v in r["runs"].items()
        )
        lines += [
            f"**Run: {'holds' if r['holds'] else 'does not hold'}.** {runs} "
            f"(ratio {r['peak_ratio']:.2f}, limit 1.10).",
            "",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=1800.0, help="seconds of load")
    ap.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="seconds of the load not "
        "judged (default: one cycle of the jobs, --job-every x the folders)",
    )
    ap.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--job-every", type=float, default=90.0)
    ap.add_argument("--edits", type=int, default=5, help="files revised before each job")
    ap.add_argument(
        "--files", type=int, default=10_000, help="files of the run part (0: no run part)"
    )
    ap.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "results")
    args = ap.parse_args(argv)
    if args.warmup is None:
        args.warmup = args.job_every * len(JOB_FOLDERS)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="attnswitch-soak-") as tmp:
        workdir = Path(tmp)
        service = asyncio.run(soak_service(args, workdir))
        run = soak_run(args, workdir) if args.files else None
    cpu, flags = cpu_description()
    report = {
        "duration": args.duration,
        "warmup": args.warmup,
        "clients": args.clients,
        "job_every": args.job_every,
        "edits": args.edits,
        "files": args.files,
        "cpu": cpu + (f" ({', '.join(flags)})" if flags else ""),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "service": judge_service(service, args.warmup),
        "run": run,
        "statuses": service["statuses"],
        "jobs_started": service["jobs_started"],
        "samples": service["samples"],
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "soak.json").write_text(json.dumps(report, indent=1))
    (args.out_dir / "soak.md").write_text(markdown(report))
    plot(service["samples"], args.warmup, args.out_dir / "soak.png")
    print(markdown(report))
    return 0 if report["service"]["holds"] and (run is None or run["holds"]) else 1


if __name__ == "__main__":
    sys.exit(main())
