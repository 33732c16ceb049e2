"""OCR character accuracy per script, and pages a minute on one core.

    make system-packages      # Tesseract, the packs of the Makefile's OCR_PACKS, Noto fonts
    python benchmarks/ocr_languages.py [--pages N] [--snippets N] [--work DIR]
        [--md docs/results/ocr_languages.md] [--json docs/results/ocr_languages.json]

The text is that of Debian's translated documentation, which no one here wrote
(tests/documents/readers/script_pages.py `DEBIAN_SOURCES`: the Debian Reference in
English, German, French, Spanish, Japanese and simplified and traditional Chinese, the
installation guide in Russian and Korean, LibreOffice's help in Hindi), downloaded with
`apt-get download` into `--work` and unpacked there (nothing is installed). For each
language, `--pages` A4 pages are printed (`script_pages.render_pages`: 11 pt Noto, 200
dpi, the resolution scanned pages are read at) from paragraphs spread over its documents,
past the ones the tests read, and each page is recognised three ways:

- shipped: the image reader as `attnswitch run` uses it with English chosen
  (`ReadOptions(ocr_languages="eng")`): Tesseract's OSD finds the page's script and the
  page is read with that script's packs and English (`readers.ocr_languages`); its CPU
  time (this process and its Tesseract processes, OSD included) gives pages a minute on
  one core (Tesseract runs one thread a page), its wall time is shown beside it, and OSD's
  CPU time alone (timed on a second run of it);
- own pack: Tesseract with the language's pack alone, what `--ocr-languages <pack>` gives
  a page of that language;
- English alone, no OSD: what the reader did before it knew the page's script.

Character accuracy is 1 - CER: 1 - Levenshtein distance / length (rapidfuzz) between the
printed text and what OCR read, both NFKC and without whitespace (Tesseract breaks lines
and spaces CJK its own way), over each language's pages together. Han pages are also
read with each Chinese pack alone and both together, timed (OSD does not tell simplified
from traditional). `--snippets` two-line pages of each language measure OSD where a page
holds little text.

Runs one page at a time; other work on the machine slows the wall times (the load average
at the start is printed with them) more than the CPU times, and not the accuracies.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests" / "pipeline" / "readers"))
from script_pages import (  # noqa: E402
    DEBIAN_SOURCES,
    char_accuracy,
    debian_paragraphs,
    fetch_debian_sources,
    missing_font,
    normalised,
    render_pages,
    tesseract_missing,
)

from synthetic import cpu_description  # noqa: E402

# Language -> the script it is written in (the column the results are grouped by).
LANGUAGES = {
    "eng": "Latin",
    "deu": "Latin",
    "fra": "Latin",
    "spa": "Latin",
    "rus": "Cyrillic",
    "chi_sim": "Han",
    "chi_tra": "Han",
    "jpn": "Japanese",
    "kor": "Hangul",
    "hin": "Devanagari",
}
HAN_PACKS = ("chi_sim", "chi_tra", "chi_sim+chi_tra", "chi_sim+chi_tra+eng")
TIMEOUT_S = 300


def png_of(image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def pages_of(pack: str, paragraphs: list[str], pages: int) -> list[tuple[bytes, str]]:
    """`pages` full pages of `pack`'s paragraphs, each printed from a start spread over
    them (the first 10% left out: the tests' paragraphs come from there)."""
    out = []
    for i in range(pages):
        start = len(paragraphs) // 10 + i * (len(paragraphs) * 9 // 10) // pages
        [(image, text)] = render_pages(paragraphs[start : start + 80], pack)
        out.append((png_of(image), text))
    return out


def snippets_of(pack: str, paragraphs: list[str], n: int) -> list[bytes]:
    """`n` two-line pages of `pack`'s paragraphs, from starts spread over them."""
    step = max(1, len(paragraphs) // max(n, 1))
    return [
        png_of(render_pages(paragraphs[i * step : i * step + 5], pack, max_lines=2)[0][0])
        for i in range(n)
    ]


def accuracy(pairs: list[tuple[str, str]]) -> float:
    """1 - CER over all `pairs` (printed text, what OCR read) together: each page weighs
    by its characters."""
    chars = sum(len(normalised(want)) for want, _ in pairs)
    return sum(char_accuracy(want, got) * len(normalised(want)) for want, got in pairs) / chars


def cpu_time() -> float:
    """CPU seconds (user and system) of this process and its ended children (the
    Tesseract processes) so far."""
    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(pack: str, pages: list[tuple[bytes, str]], snippets: list[bytes]) -> dict:
    from attnswitch.documents.readers.blocks import ReadOptions
    from attnswitch.documents.readers.ocr import read_image
    from attnswitch.documents.readers.tesseract import detect_script, recognise_png

    shipped, own, english, seconds, cpu_seconds, scripts = [], [], [], [], [], []
    osd_cpu = 0.0
    han: dict[str, list[tuple[str, str]]] = {packs: [] for packs in HAN_PACKS}
    han_cpu: dict[str, float] = dict.fromkeys(HAN_PACKS, 0.0)
    for png, text in pages:
        started, cpu_started = time.perf_counter(), cpu_time()
        got = read_image(png, ReadOptions(ocr_languages="eng", ocr_timeout_s=TIMEOUT_S)).text
        seconds.append(time.perf_counter() - started)
        cpu_seconds.append(cpu_time() - cpu_started)
        shipped.append((text, got))
        cpu_started = cpu_time()
        scripts.append(detect_script(png, TIMEOUT_S))
        osd_cpu += cpu_time() - cpu_started
        own.append((text, recognise_png(png, pack, TIMEOUT_S)))
        english.append((text, recognise_png(png, "eng", TIMEOUT_S)))
        if LANGUAGES[pack] == "Han":
            for packs in HAN_PACKS:
                cpu_started = cpu_time()
                han[packs].append((text, recognise_png(png, packs, TIMEOUT_S)))
                han_cpu[packs] += cpu_time() - cpu_started
    expected = DEBIAN_SOURCES[pack].script
    short = [detect_script(png, TIMEOUT_S) for png in snippets]
    row = {
        "language": pack,
        "script": LANGUAGES[pack],
        "pages": len(pages),
        "chars": sum(len(normalised(text)) for _, text in pages),
        "osd_right": sum(s == expected for s in scripts),
        "osd_found": scripts,
        "shipped": accuracy(shipped),
        "shipped_min": min(char_accuracy(*p) for p in shipped),
        "own_pack": accuracy(own),
        "english_alone": accuracy(english),
        "s_per_page": statistics.mean(seconds),
        "cpu_s_per_page": statistics.mean(cpu_seconds),
        "osd_cpu_s_per_page": osd_cpu / len(pages),
        "pages_per_min_core": 60 / statistics.mean(cpu_seconds),
        "snippets": len(short),
        "snippets_osd_right": sum(s == expected for s in short),
        "snippets_osd_found": sorted({str(s) for s in short if s != expected}),
    }
    if han["chi_sim"]:
        row["han"] = {packs: accuracy(pairs) for packs, pairs in han.items()}
        row["han_cpu_s_per_page"] = {packs: t / len(pages) for packs, t in han_cpu.items()}
    return row


def tesseract_versions() -> str:
    """Tesseract's version and the Debian versions of its packs (dpkg)."""
    version = subprocess.run(
        ["tesseract", "--version"], capture_output=True, text=True
    ).stdout.splitlines()[0]
    packs = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${Version}\n", "tesseract-ocr-*"],
        capture_output=True,
        text=True,
    ).stdout
    versions = sorted({line.split()[1] for line in packs.splitlines() if len(line.split()) == 2})
    return f"{version}; packs (Debian tesseract-ocr-*) {', '.join(versions) or 'unknown'}"


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [
        "# OCR per script",
        "",
        "    make system-packages",
        f"    python benchmarks/ocr_languages.py --pages {meta['pages']} "
        f"--snippets {meta['snippets']} \\",
        "        --md docs/results/ocr_languages.md --json docs/results/ocr_languages.json",
        "",
        f"{meta['cpu']}; {meta['tesseract']}; one Tesseract thread a page "
        f"(`OMP_THREAD_LIMIT=1`), one page at a time; load average at the start "
        f"{meta['load']}. Pages: A4 printed at 200 dpi in Noto fonts from Debian's "
        "translated documentation (benchmarks/ocr_languages.py says which). Character "
        "accuracy = 1 - CER (NFKC, whitespace ignored) over the language's pages.",
        "",
        "| script | language | pages | characters | OSD right | shipped (English chosen, OSD) "
        "| worst page | own pack chosen | English alone, no OSD | CPU s a page (shipped) "
        "| of which OSD | pages/min/core | wall s a page | OSD right on 2-line pages |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        wrong = f" (else {', '.join(r['snippets_osd_found'])})" if r["snippets_osd_found"] else ""
        lines.append(
            f"| {r['script']} | {r['language']} | {r['pages']} | {r['chars']} "
            f"| {r['osd_right']}/{r['pages']} | {r['shipped']:.3f} | {r['shipped_min']:.3f} "
            f"| {r['own_pack']:.3f} | {r['english_alone']:.3f} | {r['cpu_s_per_page']:.1f} "
            f"| {r['osd_cpu_s_per_page']:.1f} | {r['pages_per_min_core']:.1f} "
            f"| {r['s_per_page']:.1f} "
            f"| {r['snippets_osd_right']}/{r['snippets']}{wrong} |"
        )
    han = [r for r in rows if "han" in r]
    if han:
        lines += [
            "",
            "Han pages by the Chinese packs (OSD says Han for both; the shipped "
            "reader takes both packs, then English): 1 - CER, and CPU seconds a page "
            "of the recognition alone (no OSD):",
            "",
            "| language | " + " | ".join(HAN_PACKS) + " |",
            "|---|" + "---:|" * len(HAN_PACKS),
        ]
        for r in han:
            lines.append(
                f"| {r['language']} | "
                + " | ".join(
                    f"{r['han'][p]:.3f} ({r['han_cpu_s_per_page'][p]:.1f} s)" for p in HAN_PACKS
                )
                + " |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=4, help="full pages a language")
    parser.add_argument("--snippets", type=int, default=10, help="two-line pages a language")
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    parser.add_argument(
        "--work",
        type=Path,
        default=ROOT / ".bench" / "ocr_languages",
        help="where the Debian packages are downloaded and unpacked",
    )
    parser.add_argument("--md", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("LANG", "C.UTF-8")
    languages = args.languages.split(",")
    for pack in languages:
        if (why := tesseract_missing("osd", "eng", pack) or missing_font(pack)) is not None:
            raise SystemExit(f"ocr_languages: {pack}: {why}")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    root = fetch_debian_sources(args.work, languages)
    rows = []
    for pack in languages:
        paragraphs = debian_paragraphs(pack, root)
        row = measure(
            pack,
            pages_of(pack, paragraphs, args.pages),
            snippets_of(pack, paragraphs, args.snippets),
        )
        rows.append(row)
        print(
            f"{pack:8} {row['script']:10} shipped {row['shipped']:.3f} own "
            f"{row['own_pack']:.3f} eng {row['english_alone']:.3f} "
            f"{row['pages_per_min_core']:.1f} pages/min/core, OSD "
            f"{row['osd_right']}/{row['pages']}, 2-line "
            f"{row['snippets_osd_right']}/{row['snippets']}",
            flush=True,
        )
    meta = {
        "cpu": cpu_description(),
        "machine": platform.machine(),
        "tesseract": tesseract_versions(),
        "load": load,
        "pages": args.pages,
        "snippets": args.snippets,
    }
    if args.md:
        args.md.write_text(markdown(rows, meta))
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
