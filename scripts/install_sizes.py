"""What each extra of attnswitch installs, measured in the environment it runs in.

For the core and each extra, the closure of installed distributions its requirements pull
in (markers evaluated here, extras of extras followed), and the size on disk of their
files as their RECORD lists them. The table says the whole size of `pip install
'attnswitch[EXTRA]'` (core included) and what it adds to the core. Every distribution of a
closure must be installed here (`make setup` installs `[all,test]`); a missing one is
named, never guessed.

    python scripts/install_sizes.py [--out docs/results/install_sizes.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PROJECT = "attnswitch"
EXTRAS = (
    "torch",
    "engines",
    "pipeline",
    "serve",
    "postgres",
    "openvino",
    "onnx",
    "int8",
    "jax",
    "ray",
    "langchain",
    "llamaindex",
    "mcp",
    "all",
)


def requirements(dist: metadata.Distribution, extras: frozenset[str]) -> list[Requirement]:
    """The requirements of `dist` that apply here with `extras` asked for."""
    out = []
    for text in dist.requires or ():
        req = Requirement(text)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
            out.append(req)
    return out


def closure(extras: frozenset[str]) -> set[str]:
    """The canonical names of the distributions `attnswitch[extras]` installs."""
    seen: set[str] = set()
    todo = [(PROJECT, extras)]
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, asked = todo.pop()
        if (name, asked) in done:
            continue
        done.add((name, asked))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise SystemExit(
                f"{name}: expected installed (required by {PROJECT}"
                f"[{','.join(sorted(extras))}]), got not installed"
            ) from None
        seen.add(canonicalize_name(name))
        for req in requirements(dist, asked):
            todo.append((req.name, frozenset(req.extras)))
    seen.discard(PROJECT)
    return seen


def size_mb(name: str) -> float:
    """The files of the installed distribution `name`, in MB (RECORD sizes; stat where a
    RECORD line has none)."""
    dist = metadata.distribution(name)
    total = 0
    for file in dist.files or ():
        if file.size is not None:
            total += file.size
        else:
            path = Path(dist.locate_file(file))
            total += path.stat().st_size if path.is_file() else 0
    return total / 1e6


def table() -> list[tuple[str, int, float, float]]:
    """(what is installed, distributions, MB in all, MB over the core) per row."""
    sizes: dict[str, float] = {}

    def total(names: set[str]) -> float:
        return sum(sizes.setdefault(n, size_mb(n)) for n in names)

    core = closure(frozenset())
    rows = [(PROJECT, len(core), total(core), 0.0)]
    for extra in EXTRAS:
        names = closure(frozenset({extra}))
        rows.append((f"{PROJECT}[{extra}]", len(names), total(names), total(names - core)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the table as markdown here too")
    args = parser.parse_args()
    rows = table()
    lines = ["| install | distributions | size on disk | over the core |", "|---|---:|---:|---:|"]
    lines += [
        f"| `pip install '{name}'` | {n} | {mb:,.0f} MB | "
        f"{'' if name == PROJECT else f'+{extra:,.0f} MB'} |"
        for name, n, mb, extra in rows
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(
            "# What each extra installs\n\n"
            f"Measured by `python scripts/install_sizes.py --out {args.out}` in the environment "
            f"`make setup` builds (Python {platform.python_version()}, {sys.platform}, "
            f"torch the CPU wheel): the files of every distribution the extra pulls in, core "
            "included, as their RECORD lists them. Not measured here: the CUDA builds of torch "
            "and jax (extras `torch`, `jax`, `cuda` on a GPU machine), which bring NVIDIA's "
            "libraries, several GB.\n\n" + text + "\n"
        )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
