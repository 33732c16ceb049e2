"""The command line every peer recipe takes (`langchain_recipe.py`, `llamaindex_recipe.py`),
so `benchmarks/search_quality_peers.py` and `benchmarks/e2e_peers.py` call them alike:
ROOT --model DIR --out OUT.json [--queries QUERIES.json] [--hits 50] [--formats markup|all].
"""

from __future__ import annotations

import argparse
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
    return ap.parse_args()
