"""Known-item search per language on Debian's translated reference manual.

    apt-get install debian-reference-en debian-reference-de debian-reference-fr \
        debian-reference-ja debian-reference-zh-cn
    python benchmarks/multilingual_search.py [--languages en,de,...] [--per-language N]
        [--store-dir DIR] [--md PATH] [--json PATH]

Each language's chapters (`/usr/share/debian-reference/ch*.<lang>.html`, a dozen files
of a manual no one here wrote) are indexed by the real pipeline (`attnswitch.index`,
default options and model, SQLite), the store kept in `--store-dir` so a second call only
re-reads it. The queries are the manual's own section titles (h2-h4, their numbers
removed, unique in the language's corpus; a deterministic sample of `--per-language`),
the answer to each the chapter holding it. A hit list of 50 chunks is collapsed to
distinct files and the answer's rank gives MRR@10.

Modes: keyword, dense, hybrid as shipped, and hybrid with other dense weights for chunks
and queries in a language the model's card does not declare (`search.FOREIGN_DENSE_WEIGHT`;
the model, all-MiniLM-L6-v2, declares English only).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import shutil
import statistics
import subprocess
import time
from pathlib import Path

SOURCE = Path("/usr/share/debian-reference")
FOREIGN_WEIGHTS = (0.0, 0.2, 0.4, 0.8)


def cpu() -> str:
    """The CPU model and its vector ISA flags, for the results page."""
    text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = re.search(r"Model name:\s*(.+)", text)
    flags = re.search(r"Flags:\s*(.+)", text)
    wanted = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")
    have = [f for f in wanted if flags and f in flags.group(1).split()]
    return f"{model.group(1).strip() if model else platform.processor()} ({', '.join(have)})"


def corpus(language: str, root: Path) -> Path:
    folder = root / f"corpus-{language}"
    if not folder.is_dir():
        folder.mkdir(parents=True)
        for page in sorted(SOURCE.glob(f"ch*.{language}.html")):
            shutil.copy2(page, folder / page.name)
    return folder


def queries(folder: Path, n: int) -> list[tuple[str, str]]:
    """(section title, its chapter's file name): titles unique in the corpus, numbers off."""
    from lxml import html

    found: dict[str, set[str]] = {}
    for page in sorted(folder.glob("*.html")):
        tree = html.parse(str(page))
        for node in tree.iter("h2", "h3", "h4"):
            title = re.sub(r"^\s*[\d.]+\s*", "", node.text_content()).strip()
            title = re.sub(r"\s+", " ", title)
            if len(title) >= 4:
                found.setdefault(title, set()).add(page.name)
    unique = sorted((t, next(iter(p))) for t, p in found.items() if len(p) == 1)
    random.Random(7).shuffle(unique)
    return unique[:n]


def rank(paths: list[str], answer: str) -> int | None:
    distinct = list(dict.fromkeys(paths))
    return distinct.index(answer) + 1 if answer in distinct[:10] else None


def mrr(ranks: list[int | None]) -> float:
    return statistics.fmean(1 / r if r else 0.0 for r in ranks) if ranks else 0.0


def score(language: str, db: Path, asked: list[tuple[str, str]]) -> dict[str, float]:
    import attnswitch
    from attnswitch.index import search as search_module

    out: dict[str, float] = {}
    for mode in ("keyword", "dense"):
        out[mode] = mrr([rank([h.path for h in attnswitch.search(q, db=db, k=50, mode=mode)],
                              a) for q, a in asked])
    shipped = search_module.FOREIGN_DENSE_WEIGHT
    for weight in FOREIGN_WEIGHTS:
        search_module.FOREIGN_DENSE_WEIGHT = weight
        out[f"hybrid {weight}"] = mrr([rank([h.path for h in attnswitch.search(
            q, db=db, k=50, mode="hybrid")], a) for q, a in asked])
    search_module.FOREIGN_DENSE_WEIGHT = shipped
    out["queries"] = len(asked)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--languages", default="en,de,fr,ja,zh-cn")
    parser.add_argument("--per-language", type=int, default=80)
    parser.add_argument("--store-dir", type=Path, default=Path(".bench/multilingual"))
    parser.add_argument("--md", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import attnswitch
    from attnswitch.index.search import FOREIGN_DENSE_WEIGHT

    results = {}
    for language in args.languages.split(","):
        folder = corpus(language, args.store_dir)
        db = args.store_dir / f"index-{language}"
        started = time.monotonic()
        attnswitch.index(folder, db=db)
        asked = queries(folder, args.per_language)
        results[language] = {**score(language, db, asked),
                             "index_s": round(time.monotonic() - started, 1)}
        print(language, json.dumps(results[language]), flush=True)
    columns = ["keyword", "dense", *(f"hybrid {w}" for w in FOREIGN_WEIGHTS)]
    english = results.get("en", {}).get("keyword")
    lines = [f"Known-item search per language, Debian reference manual chapters, "
             f"all-MiniLM-L6-v2 (declares en), SQLite store, {cpu()}. MRR@10 at file level; "
             f"'hybrid w' gives the dense half weight w for a query or chunk outside the "
             f"model's languages (shipped: {FOREIGN_DENSE_WEIGHT}).", "",
             "| language | queries | " + " | ".join(columns)
             + " | keyword / English keyword | shipped hybrid − better half |",
             "|---|---:|" + "---:|" * (len(columns) + 2)]
    for language, r in results.items():
        shipped = r[f"hybrid {FOREIGN_DENSE_WEIGHT}"]
        ratio = f"{r['keyword'] / english:.2f}" if english else "-"
        lines.append(f"| {language} | {r['queries']} | "
                     + " | ".join(f"{r[c]:.3f}" for c in columns)
                     + f" | {ratio} | {shipped - max(r['keyword'], r['dense']):+.3f} |")
    table = "\n".join(lines)
    print(table)
    if args.md:
        args.md.write_text(table + "\n")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
