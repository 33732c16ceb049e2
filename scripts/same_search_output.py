"""Check that a change leaves what a user sees alone: `attnswitch run examples/corpus` and a
fixed list of `attnswitch search ... --json` calls (the README's, every mode, filters, a
wide k, a beam, a query with no hit), made by two revisions of the code, give the same
hits: every field of every hit (path, score and its parts, ranks, snippet, highlights,
heading path, location, copies) but the chunk's id (numbered in write order, which the
read workers' timing decides) and the timings.

    python scripts/same_search_output.py REV_BEFORE [REV_AFTER] [--work DIR]

Each revision is checked out into a git worktree under `--work` (REV_AFTER defaults to the
working tree itself) and run with this checkout's virtual environment, its `src` first on
`PYTHONPATH`. Prints one line per search and exits 1 when any differs.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEARCHES = (
    '"how do I update rows in a table" -k 3',
    '"how do I update rows in a table" -k 3 --mode keyword',
    '"how do I update rows in a table" -k 10 --mode dense',
    '"vacuum" --path postgresql/ --type html --modified-after 2024-01-01',
    '"quarterly figures" --type spreadsheet --type pdf',
    '"update rows" -k 5',
    '"write-ahead log checkpoint" -k 20',
    '"json functions" -k 7 --mode hybrid --ef 50',
    '"index" -k 100',
    '"zzqqxx nothing" -k 5 --mode keyword',
)
IGNORED = ("chunk_id", "timings")


def source_tree(rev: str | None, work: Path) -> Path:
    """The source tree of `rev` (a worktree made under `work`), or this checkout for None."""
    if rev is None:
        return ROOT
    tree = work / f"tree-{rev.replace('/', '_')}"
    if not tree.exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), rev], cwd=ROOT, check=True)
    return tree


def outputs(tree: Path, out: Path) -> list[dict]:
    """Index the corpus with the code of `tree` into `out`, then run `SEARCHES` there."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "HF_HUB_OFFLINE": "1"}

    def attnswitch(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "attnswitch", *args],
            cwd=out,
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )

    done = attnswitch("run", str(ROOT / "examples" / "corpus"), "--no-progress", "--json")
    if done.returncode != 0:
        raise SystemExit(f"run failed with {tree}:\n{done.stderr[-3000:]}")
    results = []
    for line in SEARCHES:
        done = attnswitch("search", *shlex.split(line), "--json")
        body = json.loads(done.stdout) if done.stdout.strip() else {}
        hits = [{k: v for k, v in h.items() if k not in IGNORED} for h in body.get("data", [])]
        results.append({"search": line, "exit": done.returncode, "hits": hits})
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before")
    parser.add_argument("after", nargs="?", default=None)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="same-search-"))
    before = outputs(source_tree(args.before, work), work / "before")
    after = outputs(source_tree(args.after, work), work / "after")
    differ = 0
    for a, b in zip(before, after, strict=True):
        same = a == b
        differ += not same
        print(f"{'same  ' if same else 'DIFFER'} {len(a['hits']):>3} hits  {a['search']}")
    print(f"{len(before) - differ} of {len(before)} searches give the same hits")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
