"""The drive benchmark: a whole job over a mixed drive, attnswitch beside the peers (issue 39).

    make drive-sources bench-peers-env
    python benchmarks/drive_build.py .bench/drive100 --size-mb 100
    python benchmarks/drive.py .bench/drive100 [--systems attnswitch,before,llamaindex,langchain]
        [--before REV] [--md docs/results/drive_100mb.md] [--json ...] [--plot ...]

Each system runs as its own process on the same files, from nothing (a fresh index), with
the defaults a user would have, timed from start to exit:

- `attnswitch`: `attnswitch run DRIVE --db FRESH --quick --json` from this checkout (the
  quick pass: every file searchable), the queries, then `attnswitch run DRIVE --db FRESH
  --json` (the full pass) and the queries again; its seconds are both runs';
- `before`: the same command from the revision `--before` (a git worktree of it, run with
  this venv), so the two versions are compared side by side on one machine;
- `llamaindex`, `langchain`: `benchmarks/peers/*_recipe.py` in the peers' own venv
  (`make bench-peers-env`): SimpleDirectoryReader + VectorStoreIndex, and one documented
  loader per type + RecursiveCharacterTextSplitter + HuggingFaceEmbeddings + FAISS.

Measured: wall seconds, throughput (MB of the drive's files per second), peak RSS of the
system's whole process tree (its reader workers included; sampled every 0.5 s with
psutil, also plotted over the run), files read and not read per kind, and known-item
MRR@10 at file level over `DRIVE.meta/queries.json` (drive_build.py: a section used by one
file, asked by its heading or, in a table, by its row's sentence). attnswitch answers them
with `attnswitch search QUERY --json -k 10` (hybrid, its default); the peers with their
retrievers (50 hits, ranked by file). The page names the CPU and the load average as each
system started (each waits, up to `QUIET_WAIT_S`, for the one before to leave the machine
quiet), and extrapolates attnswitch's time to 10 GB of the same mix from its measured rate.
`--results DIR` keeps each system's result as it ends, so a page can be written again, or a
stopped benchmark resumed, without running a system twice; `--peer-timeout` stops a peer
that runs too long and records it as stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import cpu_description  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / "peers"
DEFAULT_VENV = ROOT / ".bench" / "peers-venv"
SAMPLE_S = 0.5
TEN_GB = 10e9
# A system starts once the 1-minute load average is below this, or after this many seconds.
QUIET_LOAD = 1.0
QUIET_WAIT_S = 300


class TreeSampler(threading.Thread):
    """Samples the memory of a process and all its descendants, and (for attnswitch) the
    documents its store holds, until the process ends. Two sums over the tree: RSS,
    which counts a page shared by several processes once in each (the libraries all
    the readers load; a reader's child between its fork and its exec counts the
    reader's whole memory again), and PSS, which shares each such page among them:
    what the tree takes from the machine. The PSS is also split by who holds it: the
    process itself, its Python descendants (attnswitch's reading workers) and the rest
    (the programs readers run: LibreOffice, Tesseract, pandoc)."""

    def __init__(self, pid: int, db: Path | None):
        super().__init__(daemon=True)
        self.proc, self.db = psutil.Process(pid), db
        # (s, RSS MiB, docs, PSS MiB, PSS of the process, of its Python descendants, of
        # the other descendants)
        self.samples: list[tuple[float, float, int | None, float, float, float, float]] = []
        self.started = time.perf_counter()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(SAMPLE_S):
            try:
                procs = [self.proc, *self.proc.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            rss = 0
            pss = [0, 0, 0]  # the process, Python descendants, others
            for p in procs:
                try:
                    memory = p.memory_full_info()
                    group = 0 if p is self.proc else 1 if "python" in p.name() else 2
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                rss += memory.rss
                pss[group] += memory.pss
            self.samples.append(
                (
                    time.perf_counter() - self.started,
                    rss / 2**20,
                    self._documents(),
                    sum(pss) / 2**20,
                    *(part / 2**20 for part in pss),
                )
            )

    def _documents(self) -> int | None:
        if self.db is None or not self.db.is_file():
            return None
        try:
            with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=0.2) as conn:
                return conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        except sqlite3.Error:
            return None

    def peak_mib(self) -> float:
        """The largest RSS sum sampled."""
        return max((s[1] for s in self.samples), default=0.0)

    def peak_pss_mib(self) -> float:
        """The largest PSS sum sampled."""
        return max((s[3] for s in self.samples), default=0.0)


class Stopped(Exception):
    """A system ran past `--peer-timeout` and was stopped (its process tree killed)."""

    def __init__(self, seconds: float, sampler: TreeSampler):
        super().__init__(f"stopped after {seconds:.0f} s")
        self.seconds, self.sampler = seconds, sampler


def settle() -> float:
    """The 1-minute load average once it is below `QUIET_LOAD` (the system before has left
    the machine), or after `QUIET_WAIT_S` seconds, whichever comes first."""
    deadline = time.monotonic() + QUIET_WAIT_S
    while os.getloadavg()[0] >= QUIET_LOAD and time.monotonic() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]


def timed(
    cmd: list[str], env: dict, db: Path | None = None, timeout: float | None = None
) -> tuple[float, subprocess.CompletedProcess, TreeSampler]:
    """Run `cmd` to its end, its process tree's RSS sampled; `Stopped` past `timeout`."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = TreeSampler(proc.pid, db)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        proc.communicate()
        sampler.done.set()
        sampler.join()
        raise Stopped(time.perf_counter() - started, sampler) from None
    seconds = time.perf_counter() - started
    sampler.done.set()
    sampler.join()
    done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if proc.returncode != 0:
        raise SystemExit(
            f"{cmd[1]}: expected exit 0, got {proc.returncode}: {err.strip().splitlines()[-3:]}"
        )
    return seconds, done, sampler


def own_cache(where: Path) -> Path:
    """A cache folder of its own for one attnswitch run, holding the user's measured engine
    and precision plans and built engines (so no run pays for measuring them) but no OCR
    results: a run that found the scans already read would not be timed on the same work."""
    from attnswitch.kernels.cache import cache_file

    cache = where / "cache"
    shutil.copytree(
        cache_file("x").parent,
        cache,
        ignore=shutil.ignore_patterns("ocr.sqlite3*", "*.lock", "*.tmp"),
    )
    return cache


def kind_of(path: str) -> str:
    """The drive's kind of a file, from its folder (drive_build.py's layout)."""
    parts = Path(path).parts
    return parts[1] if len(parts) > 2 else Path(path).suffix.lstrip(".")


# Answers the queries in one process through the Python call, as a user's script would: the
# first searches of a fresh process on this index (query-time encoding included), each timed.
SEARCHES = """
import json, sys, time
import attnswitch
db, queries = sys.argv[1], json.load(open(sys.argv[2]))
ranked, seconds = [], []
for q in queries:
    started = time.perf_counter()
    try:
        hits = attnswitch.search(q["text"], db=db, k=10)
    except Exception as exc:
        print(f"search: {exc}", file=sys.stderr)
        hits = []
    seconds.append(time.perf_counter() - started)
    ranked.append([h.path for h in hits])
print(json.dumps({"ranked": ranked, "seconds": seconds}))
"""


def searched(db: Path, queries_file: Path, env: dict) -> tuple[list[list[str]], list[float]]:
    """The files each query ranks (10 hits, hybrid) and each search's seconds."""
    done = subprocess.run(
        [sys.executable, "-c", SEARCHES, str(db), str(queries_file)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    answer = json.loads(done.stdout)
    return answer["ranked"], answer["seconds"]


def keep_index(db: Path, where: Path | None) -> None:
    """Copy the index folder of `db` (its store files, not the run's own cache) to
    `where`, replacing what was there; nothing when `where` is None."""
    if where is None:
        return
    shutil.rmtree(where, ignore_errors=True)
    shutil.copytree(db.parent, where, ignore=shutil.ignore_patterns("cache"))


def run_attnswitch(
    drive: Path,
    work: Path,
    src: Path,
    queries_file: Path,
    env: dict,
    *,
    two_passes: bool,
    keep: Path | None = None,
) -> dict:
    """One system's job over `drive` from a fresh index. `two_passes`: `run --quick` (the
    folder searchable), the queries, then `run` (the full pass), the queries again; else
    one `run` (a version before the two passes). `keep`: the index is copied to
    `keep/quick` right after the quick pass (before its searches keep any vector) and to
    `keep/full` at the end."""
    db = Path(tempfile.mkdtemp(dir=work)) / "index.sqlite3"
    env = dict(env, PYTHONPATH=str(src), ATTNSWITCH_CACHE_DIR=str(own_cache(db.parent)))
    cli = [sys.executable, "-m", "attnswitch", "run", str(drive), "--db", str(db), "--json"]
    quick = None
    if two_passes:
        quick_s, done, sampler = timed([*cli, "--quick", "--no-progress"], env, db)
        keep_index(db, keep / "quick" if keep else None)
        ranked, search_s = searched(db, queries_file, env)
        quick = {
            "seconds": quick_s,
            "summary": json.loads(done.stdout),
            "peak_rss_mib": sampler.peak_mib(),
            "samples": sampler.samples,
            "ranked_files": ranked,
            "search_s": search_s,
        }
    seconds, done, sampler = timed([*cli, "--no-progress"], env, db)
    summary = json.loads(done.stdout)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT source, status FROM documents").fetchall()
    read = {source for source, status in rows if status == "indexed"}
    ranked, search_s = searched(db, queries_file, env)
    index_bytes = sum(p.stat().st_size for p in db.parent.iterdir() if p.is_file())
    keep_index(db, keep / "full" if keep else None)
    shutil.rmtree(db.parent)
    samples = sampler.samples
    if quick is not None:  # one time line: the full pass's samples after the quick pass's
        samples = quick.pop("samples") + [(t + quick["seconds"], *rest) for t, *rest in samples]
    return {
        "seconds": seconds + (quick["seconds"] if quick else 0.0),
        "quick": quick,
        "full_pass_s": seconds if quick else None,
        "read": sorted(read),
        "ranked_files": ranked,
        "search_s": search_s,
        "chunks": summary.get("chunks_stored"),
        "tokens": summary.get("tokens_encoded"),
        "stages": {
            k: summary.get(k)
            for k in (
                "wall_s",
                "load_s",
                "encode_s",
                "measure_s",
                "searchable_s",
                "full_pass_s",
                "chunks_reused",
                "engine",
                "precision",
                "tokens_per_s",
                "time_parts",
            )
        },
        "peak_rss_mib": max(sampler.peak_mib(), quick["peak_rss_mib"] if quick else 0.0),
        "samples": samples,
        "index_mb": index_bytes / 1e6,
    }


def quick_pass_per_kind(
    drive: Path, work: Path, kinds: Counter, env: dict, under: str = "*"
) -> dict:
    """The quick pass's rate per kind of file: one `run --quick --include 'UNDER/KIND/**'`
    per kind into a fresh index (every kind is a folder of its own in each team's folder,
    drive_build.py's layout; `under`: every team's, or one's),
    each rate the kind's bytes over the run's own wall time less its model load and
    measuring (`wall_s - load_s - measure_s`: what reading, chunking, OCR and storing took).
    """
    rates = {}
    for kind in sorted(kinds):
        files = [p for p in drive.glob(f"{under}/{kind}/**/*") if p.is_file()]
        if not files:
            continue
        db = Path(tempfile.mkdtemp(dir=work)) / "index.sqlite3"
        run_env = dict(env, PYTHONPATH=str(ROOT / "src"))
        run_env["ATTNSWITCH_CACHE_DIR"] = str(own_cache(db.parent))
        cmd = [sys.executable, "-m", "attnswitch", "run", str(drive), "--db", str(db)]
        _, done, sampler = timed(
            [*cmd, "--quick", "--json", "--no-progress", "--include", f"{under}/{kind}/**"],
            run_env,
        )
        shutil.rmtree(db.parent)
        s = json.loads(done.stdout)
        seconds = s["wall_s"] - s["load_s"] - s["measure_s"]
        size = sum(p.stat().st_size for p in files)
        rates[kind] = {
            "files": len(files),
            "mb": size / 1e6,
            "seconds": seconds,
            "mb_per_s": size / 1e6 / seconds if seconds > 0 else None,
            "peak_rss_mib": sampler.peak_mib(),
        }
        print(f"quick pass, {kind}: {rates[kind]}", flush=True)
    return rates


def per_kind_table(rates: dict, under: str = "*") -> list[str]:
    if not rates:
        return []
    lines = [
        "",
        f"The quick pass per kind (`run --quick --include '{under}/KIND/**'`, a fresh index each; "
        "seconds are the run's own, less its model load and measuring):",
        "",
        "| kind | files | MB | seconds | MB/s | peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind, r in rates.items():
        rate = "–" if r["mb_per_s"] is None else f"{r['mb_per_s']:.3f}"
        lines.append(
            f"| {kind} | {r['files']} | {r['mb']:.2f} | {r['seconds']:.1f} | {rate} | "
            f"{r['peak_rss_mib']:.0f} |"
        )
    return lines


def run_peer(
    system: str,
    drive: Path,
    work: Path,
    venv: Path,
    model: Path,
    queries_file: Path,
    env: dict,
    timeout: float | None = None,
) -> dict:
    python = venv / "bin" / "python"
    if not python.exists():
        raise SystemExit(
            f"--peers-venv: expected a venv at {venv} (make bench-peers-env), got none"
        )
    out = work / f"{system}.json"
    peer_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    try:
        seconds, _, sampler = timed(
            [
                str(python),
                str(PEERS / f"{system}_recipe.py"),
                str(drive),
                "--model",
                str(model),
                "--out",
                str(out),
                "--formats",
                "all",
                "--queries",
                str(queries_file),
            ],
            peer_env,
            timeout=timeout,
        )
    except Stopped as stop:
        return {
            "seconds": stop.seconds,
            "stopped": True,
            "read": [],
            "ranked_files": [],
            "chunks": None,
            "stages": {},
            "peak_rss_mib": stop.sampler.peak_mib(),
            "samples": stop.sampler.samples,
        }
    found = json.loads(out.read_text())
    every = {p.relative_to(drive).as_posix() for p in drive.rglob("*") if p.is_file()}
    read = sorted(every - set(found["not_read"]))
    # The recipe answers the queries before it exits; the job is what came before them.
    job_s = seconds - found["seconds"].get("queries", 0.0)
    return {
        "seconds": job_s,
        "read": read,
        "ranked_files": found["ranked_files"],
        "chunks": found["chunks"],
        "stages": found["seconds"],
        "peak_rss_mib": sampler.peak_mib(),
        "samples": sampler.samples,
    }


def mrr_at_10(ranked: list[list[str]], queries: list[dict]) -> dict[str, float]:
    """MRR@10 at file level (each ranked list deduplicated by file), overall and by kind."""
    by_kind: dict[str, list[float]] = defaultdict(list)
    for files, q in zip(ranked, queries):
        seen: list[str] = []
        for f in files:
            if f not in seen:
                seen.append(f)
        rank = seen.index(q["target"]) + 1 if q["target"] in seen[:10] else None
        by_kind[q["kind"]].append(1.0 / rank if rank else 0.0)
    every = [v for vs in by_kind.values() for v in vs]
    out = {kind: sum(vs) / len(vs) for kind, vs in sorted(by_kind.items())}
    out["all"] = sum(every) / len(every) if every else 0.0
    return out


def before_tree(rev: str, work: Path) -> Path:
    tree = work / f"before-{rev}"
    if not tree.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev],
            check=True,
            capture_output=True,
        )
    return tree / "src"


def plot(rows: dict, path: Path, baselines: Sequence[tuple[str, float]] = ()) -> None:
    """Each system's RSS (and PSS, where sampled) and documents stored over its run;
    `baselines`: (label, MiB) lines drawn across the memory plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rss, docs) = plt.subplots(1, 2, figsize=(12, 4.5))
    for system, r in rows.items():
        t = [s[0] for s in r["samples"]]
        line = rss.plot(t, [s[1] for s in r["samples"]], label=f"{system}: RSS")[0]
        if all(len(s) > 3 for s in r["samples"]):
            pss = [s[3] for s in r["samples"]]
            rss.plot(t, pss, ls=":", c=line.get_color(), label=f"{system}: PSS")
        counted = [(s[0], s[2]) for s in r["samples"] if s[2] is not None]
        if counted:
            docs.plot([c[0] for c in counted], [c[1] for c in counted], label=system)
    for (label, mib), style in zip(baselines, ("--", "-."), strict=False):
        rss.axhline(mib, ls=style, c="grey", label=label)
    rss.set(xlabel="seconds", ylabel="memory of the process tree (MiB)", title="Memory")
    docs.set(xlabel="seconds", ylabel="documents in the index", title="Progress")
    for ax in (rss, docs):
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def p50(values: list[float] | None) -> str:
    return "–" if not values else f"{statistics.median(values):.2f}"


def two_passes_table(rows: dict, n_bytes: int) -> list[str]:
    """The two passes of each system that ran them: the quick pass (the drive searchable)
    and what its first searches found, then the full pass; the quick pass's time beside
    the faster peer's whole job, and both extrapolated to 10 GB of this mix."""
    peers = [
        r["seconds"]
        for s, r in rows.items()
        if s in ("llamaindex", "langchain") and not r.get("stopped")
    ]
    lines = []
    for system, r in rows.items():
        q = r.get("quick")
        if not q:
            continue
        full_mrr = r["mrr"]["all"]
        quick_rate = n_bytes / 1e6 / q["seconds"]
        lines += [
            "",
            f"{system}, the two passes (`run --quick`, the queries through `attnswitch.search` "
            "in one fresh process: first searches, query-time encoding included; then `run`, "
            "the full pass, and the queries again):",
            "",
            "| pass | seconds | MB/s | peak RSS MiB | MRR@10 after it | x full | search p50 s "
            "| 10 GB of this mix |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            f"| quick | {q['seconds']:.0f} | {quick_rate:.3f} | {q['peak_rss_mib']:.0f} | "
            f"{q['mrr']['all']:.3f} | {q['mrr']['all'] / full_mrr if full_mrr else 0:.3f} | "
            f"{p50(q.get('search_s'))} | {TEN_GB / 1e6 / quick_rate / 3600:.1f} h |",
            f"| full | {r['full_pass_s']:.0f} | {n_bytes / 1e6 / r['full_pass_s']:.3f} | "
            f"{r['peak_rss_mib']:.0f} | {full_mrr:.3f} | 1.000 | {p50(r.get('search_s'))} | "
            f"{TEN_GB / n_bytes * r['full_pass_s'] / 3600:.1f} h |",
        ]
        if peers:
            lines.append(
                f"\nThe quick pass took {q['seconds'] / min(peers):.2f}x the faster peer's "
                f"whole job ({min(peers):.0f} s)."
            )
    return lines


def page(
    rows: dict, drive: Path, n_files: int, n_bytes: int, kinds: Counter, queries: list[dict]
) -> list[str]:
    before = {s: r.get("load_before") for s, r in rows.items()}
    quiet = all(v is not None and v < QUIET_LOAD for v in before.values())
    lines = [
        "# The drive benchmark",
        "",
        f"Drive `{drive.name}`: {n_files} files, {n_bytes / 1e6:.1f} MB "
        f"({', '.join(f'{k} {n}' for k, n in kinds.most_common())}); "
        f"{len(queries)} known-item queries. {cpu_description()}, {os.cpu_count()} CPUs; "
        "load average (1 min) as each system started: "
        + ", ".join(f"{s} {'not recorded' if v is None else f'{v:.1f}'}" for s, v in before.items())
        + ": "
        + (
            "quiet."
            if quiet
            else f"not all below {QUIET_LOAD} (a system waits at most "
            f"{QUIET_WAIT_S} s for the one before it to leave the machine quiet; nothing "
            "else may run beside the benchmark)."
        ),
        "",
        "| system | seconds | MB/s | peak RSS MiB | files read | MRR@10 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for system, r in rows.items():
        if r.get("stopped"):
            lines.append(
                f"| {system} | stopped after {r['seconds']:.0f} | below "
                f"{n_bytes / 1e6 / r['seconds']:.3f} | {r['peak_rss_mib']:.0f} | – | – |"
            )
            continue
        lines.append(
            f"| {system} | {r['seconds']:.0f} | {n_bytes / 1e6 / r['seconds']:.3f} | "
            f"{r['peak_rss_mib']:.0f} | {len(r['read'])} / {n_files} | "
            f"{r['mrr']['all']:.3f} |"
        )
    names = list(rows)
    lines += [
        "",
        "Files read per kind (read / files), and MRR@10 per kind:",
        "",
        "| kind | files | " + " | ".join(f"{s} read | {s} MRR" for s in names) + " |",
        "|---|---:|" + "---:|---:|" * len(names),
    ]
    for kind, n in sorted(kinds.items()):
        cells = []
        for s in names:
            if rows[s].get("stopped"):
                cells += ["–", "–"]
                continue
            got = sum(kind_of(f) == kind for f in rows[s]["read"])
            m = rows[s]["mrr"].get(kind)
            cells += [str(got), "–" if m is None else f"{m:.2f}"]
        lines.append(f"| {kind} | {n} | " + " | ".join(cells) + " |")
    lines += two_passes_table(rows, n_bytes)
    for system, r in rows.items():
        if "stages" in r and system in ("attnswitch", "before"):
            rate = n_bytes / r["seconds"]
            lines += [
                "",
                f"{system}: chunks {r['chunks']}, tokens {r.get('tokens')}, stages "
                f"{json.dumps(r['stages'])}, index {r.get('index_mb', 0):.1f} MB on disk; "
                f"10 GB of this mix at this rate: {TEN_GB / rate / 3600:.1f} h.",
            ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("drive", type=Path)
    ap.add_argument("--systems", default="attnswitch,llamaindex,langchain")
    ap.add_argument("--before", default=None, help="the revision the 'before' system runs")
    ap.add_argument("--work", type=Path, default=ROOT / ".bench" / "drive")
    ap.add_argument("--peers-venv", type=Path, default=DEFAULT_VENV)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--plot", type=Path)
    ap.add_argument(
        "--results",
        type=Path,
        help="keep each system's result here as it ends (SYSTEM.json); a system "
        "whose result is there already is read, not run again",
    )
    ap.add_argument(
        "--keep",
        type=Path,
        help="keep attnswitch's index as the quick pass left it (KEEP/quick) and as the "
        "full pass left it (KEEP/full), for benchmarks/two_pass_quality.py --drive",
    )
    ap.add_argument(
        "--per-kind",
        action="store_true",
        help="also time attnswitch's quick pass per kind of file (one run per kind)",
    )
    ap.add_argument(
        "--peer-timeout",
        type=float,
        default=None,
        help="seconds after which a peer's recipe is stopped and recorded as such",
    )
    args = ap.parse_args()
    drive = args.drive.resolve()
    queries_file = drive.parent / f"{drive.name}.meta" / "queries.json"
    if not queries_file.is_file():
        raise SystemExit(
            f"{queries_file}: expected the drive's queries (drive_build.py), got no file"
        )
    systems = [s.strip() for s in args.systems.split(",")]
    unknown = set(systems) - {"attnswitch", "before", "llamaindex", "langchain"}
    if unknown or ("before" in systems and not args.before):
        raise SystemExit(
            f"--systems: expected attnswitch, before (with --before REV), "
            f"llamaindex, langchain, got {args.systems!r}"
        )
    queries = json.loads(queries_file.read_text())
    files = [p for p in drive.rglob("*") if p.is_file()]
    n_bytes = sum(p.stat().st_size for p in files)
    kinds = Counter(kind_of(p.relative_to(drive).as_posix()) for p in files)
    from attnswitch.engines.model import default_model_path

    model = default_model_path()
    args.work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    rows = {}
    for system in systems:
        kept = args.results / f"{system}.json" if args.results else None
        if kept is not None and kept.is_file():
            rows[system] = json.loads(kept.read_text())
            print(f"{system}: read from {kept}", flush=True)
            continue
        load_before = settle()
        if system == "attnswitch":
            r = run_attnswitch(
                drive, args.work, ROOT / "src", queries_file, env, two_passes=True, keep=args.keep
            )
        elif system == "before":
            tree = before_tree(args.before, args.work)
            r = run_attnswitch(drive, args.work, tree, queries_file, env, two_passes=False)
        else:
            r = run_peer(
                system,
                drive,
                args.work,
                args.peers_venv,
                model,
                queries_file,
                env,
                args.peer_timeout,
            )
        r["mrr"] = mrr_at_10(r.pop("ranked_files"), queries)
        if r.get("quick"):
            r["quick"]["mrr"] = mrr_at_10(r["quick"].pop("ranked_files"), queries)
        r["load_before"], r["load_average"] = load_before, os.getloadavg()[0]
        rows[system] = r
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(json.dumps(r, default=str))
        print(
            f"{system}: {r['seconds']:.0f} s, peak RSS {r['peak_rss_mib']:.0f} MiB, "
            f"{len(r['read'])} files read, MRR@10 {r['mrr']['all']:.3f}",
            flush=True,
        )
    per_kind = {}
    if args.per_kind:
        settle()
        per_kind = quick_pass_per_kind(drive, args.work, kinds, env)
    lines = page(rows, drive, len(files), n_bytes, kinds, queries) + per_kind_table(per_kind)
    print("\n".join(lines))
    if args.md:
        args.md.write_text("\n".join(lines) + "\n")
    if args.plot:
        plot(rows, args.plot)
    if args.json:  # paths in the checkout written relative to it (no machine's folders)
        args.json.write_text(
            json.dumps(
                {
                    "cpu": cpu_description(),
                    "files": len(files),
                    "bytes": n_bytes,
                    "kinds": kinds,
                    "systems": rows,
                    "quick_pass_per_kind": per_kind,
                },
                indent=1,
                default=str,
            ).replace(f"{ROOT}/", "")
        )


if __name__ == "__main__":
    main()
