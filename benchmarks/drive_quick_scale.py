"""The quick pass at scale (issue 52): one drive, attnswitch alone, timed uninterrupted and
killed with SIGKILL mid-pass then resumed, the two indexes compared.

    python benchmarks/drive_build.py .bench/drive1g --size-mb 1000
    python benchmarks/drive_quick_scale.py .bench/drive1g [--kill-at 0.5] [--per-kind-under team0]
        [--baseline-rss docs/results/CPU/drive_quick_50mb.json]
        [--md ...] [--json ...] [--plot ...]

Each run is `attnswitch run DRIVE --db FRESH --quick --json` from this checkout in its own
process, with a user's defaults, its process tree's RSS sampled (benchmarks/drive.py's
sampler) and the store's document count with it.

- **Uninterrupted**: seconds, MB/s, the run's own stage times (`time_parts`), peak RSS (and
  over time, plotted), then the drive's known-item queries (`attnswitch.search`, first
  searches with query-time encoding) for MRR@10 and search p50, on a copy of the index
  (a search keeps the vectors it encodes: the copy leaves the index as the pass made it).
- **Killed and resumed** (`--kill-at F`, 0 to skip): the same command into another fresh
  index, its whole process tree killed with SIGKILL once the store holds F of the drive's
  files, then the command again, to its end. The two indexes must hold the same documents
  and the same chunks with the same quick vectors: compared row by row by content (file,
  chunk ordinal, text, heading path, location, vector key, quick vector, no full vector),
  not by id.
- **Per kind** (`--per-kind-under TEAM`): drive.py's per-kind quick passes, over one
  folder of the drive (`TEAM/KIND/**`), so a per-kind rate costs a fraction of the drive's
  time; the folder and its size are on the page.
- **10 GB**: the quick pass extrapolated from this run's rate, the full pass from the
  tokens it would encode at a measured rate (`--encode-rate ENGINE=TOKENS_PER_S`,
  repeatable; from benchmarks/drive.py's full pass on this CPU, or another engine's).
- `--baseline-rss FILE`: another run of this script (a smaller drive's JSON) whose peak
  RSS this one is compared with.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from drive import (  # noqa: E402
    ROOT,
    TEN_GB,
    TreeSampler,
    kind_of,
    mrr_at_10,
    own_cache,
    per_kind_table,
    plot,
    quick_pass_per_kind,
    searched,
    settle,
    timed,
)
from synthetic import cpu_description  # noqa: E402

CHUNK_ROWS = (
    "SELECT d.root, d.source, c.ordinal, c.text, c.heading_path, c.location, c.vector_key, "
    "hex(c.quick), c.vector IS NULL FROM chunks c JOIN documents d ON d.id = c.doc_id "
    "ORDER BY d.root, d.source, c.ordinal"
)
DOCUMENT_ROWS = (
    "SELECT root, source, status, sha256, size, kind, encoding, skip, reason, n_chunks, "
    "n_tokens, access FROM documents ORDER BY root, source"
)


def fresh_db(work: Path) -> tuple[Path, dict]:
    db = Path(tempfile.mkdtemp(dir=work)) / "index.sqlite3"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    env["ATTNSWITCH_CACHE_DIR"] = str(own_cache(db.parent))
    return db, env


def quick_cmd(drive: Path, db: Path) -> list[str]:
    return [sys.executable, "-m", "attnswitch", "run", str(drive), "--db", str(db)] + [
        "--quick",
        "--json",
        "--no-progress",
    ]


def digest(db: Path) -> dict:
    """What the index holds, by content: a SHA-256 of its documents' rows and one of its
    chunks' rows (both in a fixed order, ids and times left out), with their counts, and
    the tokens of its chunks (what the full pass will encode)."""
    out: dict = {}
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        out["tokens"] = conn.execute("SELECT COALESCE(SUM(n_tokens), 0) FROM chunks").fetchone()[0]
        for name, sql in (("documents", DOCUMENT_ROWS), ("chunks", CHUNK_ROWS)):
            h, n = hashlib.sha256(), 0
            for row in conn.execute(sql):
                h.update(repr(row).encode())
                n += 1
            out[name] = {"rows": n, "sha256": h.hexdigest()}
    return out


def uninterrupted(drive: Path, work: Path, queries_file: Path) -> dict:
    db, env = fresh_db(work)
    load = settle()
    seconds, done, sampler = timed(quick_cmd(drive, db), env, db)
    summary = json.loads(done.stdout)
    held = digest(db)
    ranked: list = []
    search_s: list = []
    if json.loads(queries_file.read_text()):
        copy = db.parent / "searched"
        shutil.copytree(db.parent, copy, ignore=shutil.ignore_patterns("cache", "searched"))
        ranked, search_s = searched(copy / db.name, queries_file, env)
    shutil.rmtree(db.parent)
    return {
        "load_before": load,
        "seconds": seconds,
        "summary": summary,
        "peak_rss_mib": sampler.peak_mib(),
        "peak_pss_mib": sampler.peak_pss_mib(),
        "samples": sampler.samples,
        "digest": held,
        "ranked_files": ranked,
        "search_s": search_s,
    }


def killed_and_resumed(drive: Path, work: Path, n_files: int, at: float) -> dict:
    """The quick pass killed (SIGKILL, its whole tree) once the store holds `at` of the
    drive's files, then run again to its end."""
    db, env = fresh_db(work)
    started = time.perf_counter()
    proc = subprocess.Popen(
        quick_cmd(drive, db), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    sampler = TreeSampler(proc.pid, db)
    sampler.start()
    want = max(1, int(at * n_files))
    killed_at: dict = {}
    while proc.poll() is None:
        docs = sampler.samples[-1][2] if sampler.samples else None
        if docs is not None and docs >= want:
            tree = [proc, *psutil.Process(proc.pid).children(recursive=True)]
            for p in tree:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            killed_at = {"documents": docs, "seconds": time.perf_counter() - started}
            break
        time.sleep(0.5)
    proc.wait()
    sampler.done.set()
    sampler.join()
    if not killed_at:
        raise SystemExit(f"--kill-at: the pass ended before {want} files were stored")
    resume_s, done, resumed = timed(quick_cmd(drive, db), env, db)
    summary = json.loads(done.stdout)
    held = digest(db)
    shutil.rmtree(db.parent)
    return {
        "killed_at": killed_at,
        "resume_s": resume_s,
        "summary": summary,
        "peak_rss_mib": max(sampler.peak_mib(), resumed.peak_mib()),
        "peak_pss_mib": max(sampler.peak_pss_mib(), resumed.peak_pss_mib()),
        "digest": held,
    }


def phase_peaks(samples: list, files: int) -> dict:
    """A run's peak RSS and PSS sums (MiB) while it read, until the store held all its
    `files`, and after: the quick list's graph built and saved, the run's end."""
    end = next(
        (i for i, s in enumerate(samples) if s[2] is not None and s[2] >= files), len(samples)
    )
    return {
        phase: {
            "rss": max((s[1] for s in part), default=0.0),
            "pss": max((s[3] for s in part if len(s) > 3), default=0.0),
        }
        for phase, part in (("reading", samples[:end]), ("after", samples[end:]))
    }


def holders_lines(label: str, samples: list, files: int) -> list[str]:
    """Who held the reading phase's memory (samples split by holder, `drive.TreeSampler`):
    each holder's PSS at the tree's reading peak and its own peak while reading."""
    end = next(
        (i for i, s in enumerate(samples) if s[2] is not None and s[2] >= files), len(samples)
    )
    reading = [s for s in samples[:end] if len(s) > 6]
    if not reading:
        return []
    at_peak = max(reading, key=lambda s: s[3])
    names = ("the run's process", "its reading workers", "the programs they run")
    return [
        "",
        f"PSS by holder while reading ({label}), MiB: at the tree's peak "
        f"({at_peak[0]:.0f} s in), and each holder's own peak.",
        "",
        "| holder | at the peak | own peak |",
        "|---|---:|---:|",
        *(
            f"| {name} | {at_peak[4 + i]:.0f} | {max(s[4 + i] for s in reading):.0f} |"
            for i, name in enumerate(names)
        ),
    ]


def baseline_of(path: Path) -> dict:
    """What a smaller drive's run (this script's JSON at `path`) is compared with."""
    other = json.loads(path.read_text())
    u = other["uninterrupted"]
    return {
        "label": f"the {other['mb']:.0f} MB drive's run",
        "peak_rss_mib": u["peak_rss_mib"],
        "peak_pss_mib": u["peak_pss_mib"],
        "phases": phase_peaks(u["samples"], other["files"]),
    }


def memory_lines(result: dict) -> list[str]:
    """The peaks by phase, this run's and the baseline's, and their ratios."""
    u, baseline = result["uninterrupted"], result.get("baseline")
    rows = [("this run", phase_peaks(u["samples"], result["files"]))]
    if baseline:
        rows.append((baseline["label"], baseline["phases"]))
    lines = [
        "",
        "Peak memory of the process tree by phase, MiB (reading: until the store held every "
        "file; after: the quick list's HNSW graph built and saved, the run's end):",
        "",
        "| run | reading: RSS | reading: PSS | after: RSS | after: PSS |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, p in rows:
        lines.append(
            f"| {label} | {p['reading']['rss']:.0f} | {p['reading']['pss']:.0f} | "
            f"{p['after']['rss']:.0f} | {p['after']['pss']:.0f} |"
        )
    lines += holders_lines(rows[0][0], u["samples"], result["files"])
    if baseline:
        mine, theirs = rows[0][1]["reading"], rows[1][1]["reading"]
        lines += [
            "",
            f"While reading, against {baseline['label']}: RSS "
            f"{mine['rss'] / theirs['rss']:.2f}x, PSS {mine['pss'] / theirs['pss']:.2f}x. "
            f"Whole run: RSS {u['peak_rss_mib'] / baseline['peak_rss_mib']:.2f}x, PSS "
            f"{u['peak_pss_mib'] / baseline['peak_pss_mib']:.2f}x.",
            "",
            "(The RSS of a process tree counts a page shared by several processes once in "
            "each: the libraries every reader loads, and a reader's whole memory again in a "
            "child between its fork and its exec. PSS shares such a page among them: what "
            "the tree takes from the machine.)",
        ]
    return lines


def page(result: dict, drive: Path, per_kind: dict, under: str | None) -> list[str]:
    u = result["uninterrupted"]
    s = u["summary"]
    mb = result["mb"]
    parts = s.get("time_parts") or {}
    total = sum(v for v in parts.values() if v) or 1.0
    rate = mb / u["seconds"]
    lines = [
        f"# The quick pass at {mb:.0f} MB",
        "",
        f"Drive `{drive.name}`: {result['files']} files, {mb:.1f} MB "
        f"({', '.join(f'{k} {n}' for k, n in result['kinds'].items())}). "
        f"{cpu_description()}, {os.cpu_count()} CPUs; load average (1 min) as the timed run "
        f"started: {u['load_before']:.2f}. Command: `attnswitch run DRIVE --quick --json` "
        "from a fresh index, alone on the machine.",
        "",
        "| run | seconds | MB/s | peak RSS MiB | peak PSS MiB | files indexed | chunks |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| uninterrupted | {u['seconds']:.0f} | {rate:.3f} | {u['peak_rss_mib']:.0f} | "
        f"{u['peak_pss_mib']:.0f} | {s['indexed']} | {s['chunks_stored']} |",
    ]
    k = result.get("killed")
    if k:
        lines.append(
            f"| killed at {k['killed_at']['documents']} files "
            f"({k['killed_at']['seconds']:.0f} s), then resumed | "
            f"{k['killed_at']['seconds'] + k['resume_s']:.0f} | – | {k['peak_rss_mib']:.0f} | "
            f"{k['peak_pss_mib']:.0f} | {k['summary']['indexed']} (resume) | "
            f"{k['summary']['chunks_stored']} (resume) |"
        )
    lines += [
        "",
        "Where the uninterrupted run's time went (the run's own `time_parts`): "
        + ", ".join(f"{name} {v:.0f} s ({v / total:.0%})" for name, v in parts.items() if v)
        + ".",
    ]
    ranked = u["ranked_files"]
    if ranked:
        mrr = mrr_at_10(ranked, result["queries"])
        lines += [
            "",
            f"Right after it, {len(ranked)} known-item queries (first searches through "
            f"`attnswitch.search`, query-time encoding included, on a copy of the index): "
            f"MRR@10 {mrr['all']:.3f}, search p50 {statistics.median(u['search_s']):.2f} s.",
        ]
    if k:
        same = k["digest"] == u["digest"]  # rows and tokens
        lines += [
            "",
            "Killed and resumed against uninterrupted: "
            + ("**the same index**" if same else "**different indexes**")
            + f" (documents: {k['digest']['documents']['rows']} rows against "
            f"{u['digest']['documents']['rows']}, chunks {k['digest']['chunks']['rows']} "
            f"against {u['digest']['chunks']['rows']}; SHA-256 of their rows by content "
            + ("equal" if same else "not equal")
            + ").",
        ]
    lines += memory_lines(result)
    lines += ["", "Extrapolated to 10 GB of this mix:", ""]
    lines.append(f"- the quick pass: {TEN_GB / 1e6 / rate / 3600:.1f} h at {rate:.3f} MB/s;")
    tokens = result["tokens"] * TEN_GB / (mb * 1e6)
    for engine, per_s in result["encode_rates"].items():
        lines.append(
            f"- the full pass with {engine} ({per_s:,.0f} tokens/s): {tokens / per_s / 3600:.1f} h "
            f"for the {tokens / 1e6:,.0f} M tokens of 10 GB;"
        )
    if per_kind:
        lines += per_kind_table(per_kind, under or "*")
        size = sum(r["mb"] for r in per_kind.values())
        lines += ["", f"(Per kind over `{under}/` of the drive only: {size:.1f} MB.)"]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("drive", type=Path)
    ap.add_argument("--work", type=Path, default=ROOT / ".bench" / "drive")
    ap.add_argument("--kill-at", type=float, default=0.5)
    ap.add_argument("--per-kind-under", default=None)
    ap.add_argument("--baseline-rss", type=Path)
    ap.add_argument("--encode-rate", action="append", default=[])
    ap.add_argument(
        "--no-queries",
        action="store_true",
        help="skip the known-item searches after the uninterrupted run",
    )
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--plot", type=Path)
    ap.add_argument(
        "--page-from",
        type=Path,
        help="write the page and plot again from this script's JSON, running nothing",
    )
    args = ap.parse_args()
    if args.page_from:
        result = json.loads(args.page_from.read_text())
        if args.baseline_rss:
            result["baseline"] = baseline_of(args.baseline_rss)
        publish(result, args.drive, args)
        return
    if not 0 <= args.kill_at < 1:
        raise SystemExit(f"--kill-at: expected a fraction from 0 to below 1, got {args.kill_at}")
    rates = {}
    for item in args.encode_rate:
        engine, _, per_s = item.partition("=")
        try:
            rates[engine] = float(per_s)
        except ValueError:
            raise SystemExit(f"--encode-rate: expected ENGINE=TOKENS_PER_S, got {item!r}") from None
    drive = args.drive.resolve()
    queries_file = drive.parent / f"{drive.name}.meta" / "queries.json"
    files = [p for p in drive.rglob("*") if p.is_file()]
    kinds = Counter(kind_of(str(p.relative_to(drive))) for p in files)
    args.work.mkdir(parents=True, exist_ok=True)
    result: dict = {
        "drive": drive.name,
        "files": len(files),
        "mb": sum(p.stat().st_size for p in files) / 1e6,
        "kinds": dict(kinds.most_common()),
        "queries": json.loads(queries_file.read_text()) if queries_file.is_file() else [],
        "cpu": cpu_description(),
        "encode_rates": rates,
    }
    if args.no_queries:
        result["queries"] = []
    if not result["queries"]:
        queries_file = args.work / "no-queries.json"
        queries_file.write_text("[]")
    result["uninterrupted"] = uninterrupted(drive, args.work, queries_file)
    print(f"uninterrupted: {result['uninterrupted']['seconds']:.0f} s", flush=True)
    result["tokens"] = result["uninterrupted"]["digest"]["tokens"]
    if args.kill_at:
        result["killed"] = killed_and_resumed(drive, args.work, len(files), args.kill_at)
        print(f"killed and resumed: {result['killed']['resume_s']:.0f} s to resume", flush=True)
    if args.baseline_rss:
        result["baseline"] = baseline_of(args.baseline_rss)
    per_kind = {}
    if args.per_kind_under:
        per_kind = quick_pass_per_kind(
            drive, args.work, kinds, dict(os.environ), under=args.per_kind_under
        )
    result["per_kind"] = per_kind
    result["per_kind_under"] = args.per_kind_under
    publish(result, drive, args)


def publish(result: dict, drive: Path, args: argparse.Namespace) -> None:
    """Print the page; write it, the JSON and the plot where asked."""
    under = result.get("per_kind_under", args.per_kind_under)
    lines = page(result, drive, result.get("per_kind") or {}, under)
    print("\n".join(lines))
    if args.md:
        args.md.write_text("\n".join(lines) + "\n")
    if args.json and args.json != args.page_from:
        # paths in the checkout written relative to it (no machine's folders)
        args.json.write_text(json.dumps(result, indent=1).replace(f"{ROOT}/", ""))
    if args.plot:
        baseline = result.get("baseline")
        plot(
            {"quick pass": result["uninterrupted"]},
            args.plot,
            ()
            if baseline is None
            else [
                (f"{baseline['label']}: RSS", baseline["peak_rss_mib"]),
                (f"{baseline['label']}: PSS", baseline["peak_pss_mib"]),
            ],
        )


if __name__ == "__main__":
    main()
