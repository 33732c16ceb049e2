"""Which HTML main-content extractor keeps a page's text and drops its chrome, on the
shipped corpus's HTML pages.

    python benchmarks/html_extraction.py [--corpus examples/corpus] [--json PATH] [--show FILE]

The reference for each page is cut by hand-written rules per site, from the pages' own
markup (the extractors never see the rules):

- PostgreSQL manual (`postgresql/`): the body without `div.navheader` and
  `div.navfooter` (the Prev / Up / Home / Next tables);
- SQLite documentation (`sqlite/`): the body without the site header (the `div.nosearch`
  holding the logo, tagline, menus and search form), scripts, and the closing "This page
  last modified" line.

Everything else in the body is content (in-page tables of contents included). Each
extractor's text is compared with the reference as bags of lower-cased words:
precision (its words that are content), recall (content words it kept), F1, the share
of chrome-only words it kept (words of the removed parts that the content does not
have), and the share of the content's h1-h4 headings it kept. Figures are means over
pages. An extractor that is not installed is listed as such.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORD = re.compile(r"\w+")


def words(text: str) -> Counter:
    return Counter(w.lower() for w in WORD.findall(text))


def phrase(text: str) -> str:
    return " ".join(w.lower() for w in WORD.findall(text))


def reference(site: str, html: str) -> tuple[str, str, list[str]]:
    """(content text, chrome text, content headings) of one page by its site's rules."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    chrome = []
    if site == "postgresql":
        chrome = soup.select("div.navheader, div.navfooter")
    elif site == "sqlite":
        header = [d for d in soup.select("div.nosearch") if d.select_one("img.logo")]
        footer = [p for p in soup.find_all("p") if "This page last modified" in p.get_text()]
        chrome = header[:1] + footer
    for tag in soup.find_all(["script", "style"]):
        tag.decompose()
    chrome_text = " ".join(tag.get_text(" ") for tag in chrome)
    for tag in chrome:
        tag.decompose()
    body = soup.body or soup
    heads = [" ".join(h.get_text(" ").split()) for h in body.find_all(["h1", "h2", "h3", "h4"])]
    return body.get_text(" "), chrome_text, [h for h in heads if phrase(h)]


def extractors() -> dict[str, Callable[[bytes], str] | str]:
    """name -> function(page bytes) -> text, or why it can't run here."""
    out: dict[str, Callable[[bytes], str] | str] = {}

    def whole_page(data: bytes) -> str:
        from bs4 import BeautifulSoup

        soup = BeautifulSoup(data, "html.parser")
        for tag in soup.find_all(["script", "style", "title"]):
            tag.decompose()
        return soup.get_text(" ")

    out["whole page (no extraction)"] = whole_page
    try:
        from attnswitch.documents.readers.html import html_text

        out["attnswitch (trafilatura judges)"] = lambda data: html_text(data)[0]
    except ImportError as exc:
        out["attnswitch (trafilatura judges)"] = str(exc)
    try:
        import trafilatura

        def traf(**kw):
            return lambda data: (
                trafilatura.extract(
                    data,
                    output_format="markdown",
                    include_formatting=True,
                    include_tables=True,
                    include_comments=False,
                    deduplicate=False,
                    **kw,
                )
                or ""
            )

        out["trafilatura"] = traf()
        out["trafilatura favor_recall"] = traf(favor_recall=True)
        out["trafilatura favor_precision"] = traf(favor_precision=True)
    except ImportError as exc:
        out["trafilatura"] = str(exc)
    try:
        import lxml.html
        from readability import Document

        out["readability-lxml"] = lambda data: lxml.html.fromstring(
            Document(data).summary(html_partial=True)
        ).text_content()
    except ImportError as exc:
        out["readability-lxml"] = str(exc)
    try:
        import justext

        out["jusText"] = lambda data: "\n".join(
            p.text
            for p in justext.justext(data, justext.get_stoplist("English"))
            if not p.is_boilerplate
        )
    except ImportError as exc:
        out["jusText"] = str(exc)
    try:
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.encoding import bytes_to_str, detect_encoding

        out["resiliparse main_content"] = lambda data: extract_plain_text(
            bytes_to_str(data, detect_encoding(data)), main_content=True
        )
    except ImportError as exc:
        out["resiliparse main_content"] = str(exc)
    return out


def score(text: str, content: str, chrome: str, heads: list[str]) -> dict[str, float]:
    got, ref = words(text), words(content)
    chrome_only = words(chrome) - ref
    common = sum((got & ref).values())
    precision = common / max(1, sum(got.values()))
    recall = common / max(1, sum(ref.values()))
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    kept_chrome = (
        sum((got & chrome_only).values()) / sum(chrome_only.values()) if chrome_only else 0.0
    )
    flat = f" {phrase(text)} "
    heads_kept = (sum(f" {phrase(h)} " in flat for h in heads) / len(heads)) if heads else 1.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "chrome_kept": kept_chrome,
        "headings_kept": heads_kept,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "examples" / "corpus")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--show", help="print each extractor's text of this page (relative path)")
    args = ap.parse_args()
    pages = sorted(
        p for site in ("postgresql", "sqlite") for p in (args.corpus / site).glob("*.htm*")
    )
    if not pages:
        sys.exit(f"--corpus: expected PostgreSQL or SQLite HTML pages, got none in {args.corpus}")
    refs = {
        p: reference(p.parent.name, p.read_text(encoding="utf-8", errors="replace")) for p in pages
    }
    rows: dict[str, dict[str, float] | str] = {}
    for name, fn in extractors().items():
        if isinstance(fn, str):
            rows[name] = f"not installed ({fn})"
            continue
        per_page = []
        for p in pages:
            text = fn(p.read_bytes())
            if args.show and p.relative_to(args.corpus).as_posix() == args.show:
                print(f"===== {name}\n{text}\n")
            per_page.append(score(text, *refs[p]))
        rows[name] = {m: sum(s[m] for s in per_page) / len(per_page) for m in per_page[0]}
    print(
        f"HTML main-content extraction on {len(pages)} pages "
        f"({sum(p.parent.name == 'postgresql' for p in pages)} PostgreSQL, "
        f"{sum(p.parent.name == 'sqlite' for p in pages)} SQLite); means over pages"
    )
    print(
        f"{'extractor':<30} {'precision':>9} {'recall':>7} {'F1':>6} {'chrome kept':>11} "
        f"{'headings kept':>13}"
    )
    for name, row in rows.items():
        if isinstance(row, str):
            print(f"{name:<30} {row}")
            continue
        print(
            f"{name:<30} {row['precision']:>9.3f} {row['recall']:>7.3f} {row['f1']:>6.3f} "
            f"{row['chrome_kept']:>11.3f} {row['headings_kept']:>13.3f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"pages": len(pages), "extractors": rows}, indent=1))


if __name__ == "__main__":
    main()
