"""The command line every peer recipe takes (`langchain_recipe.py`, `llamaindex_recipe.py`),
so `benchmarks/search_quality_peers.py` and `benchmarks/e2e_peers.py` call them alike:
ROOT --model DIR --out OUT.json [--queries QUERIES.json] [--hits 50] [--formats markup|all]
[--modes dense,keyword,hybrid] (a recipe answers the modes it has; dense by default).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path


def recipe_arguments(description: str) -> argparse.Namespace:
    """The parsed arguments of a recipe whose module doc starts with `description`."""
    ap = argparse.ArgumentParser(description=description.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--model", required=True, help="the model folder")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--queries", type=Path)
    ap.add_argument("--hits", type=int, default=50)
    ap.add_argument("--formats", choices=("markup", "all"), default="all")
    ap.add_argument(
        "--modes",
        default="dense",
        help="comma-separated: dense, keyword, hybrid (those the recipe has)",
    )
    return ap.parse_args()


def finish(
    args: argparse.Namespace,
    out: dict,
    name: str,
    started: float,
    indexed: float,
    ranked_files: Callable[[str], list[str]],
    other_modes: dict[str, Callable[[str], list[str]]] | None = None,
) -> None:
    """Answer `--queries` (each query's hits as file paths, best first, timed from
    `indexed`): `ranked_files` (dense) as "ranked_files", and with `other_modes` (mode ->
    its ranked files) every mode of `--modes` under "ranked_files_by_mode"; write OUT and
    say what was read on stderr."""
    if args.queries:
        queries = json.loads(args.queries.read_text())
        out["ranked_files"] = [ranked_files(q["text"]) for q in queries]
        out["seconds"]["queries"] = time.perf_counter() - indexed
        if other_modes is not None:
            by_mode = {"dense": ranked_files, **other_modes}
            out["ranked_files_by_mode"] = {
                m: out["ranked_files"] if m == "dense" else [by_mode[m](q["text"]) for q in queries]
                for m in args.modes.split(",")
            }
    args.out.write_text(json.dumps(out))
    print(
        f"{name}: {out['files_read']} files, {out['chunks']} chunks, "
        f"{time.perf_counter() - started:.0f} s",
        file=sys.stderr,
    )
