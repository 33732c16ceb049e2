"""How fast each reader extracts, per core: MB/s of input and pages/s, per format.

    python benchmarks/readers_throughput.py [--out docs/results] [--min-seconds 2]
        [--before-json PATH]

The inputs are generated from the example corpus by the tools people use, larger than the
test fixtures:

- the corpus' 10 Markdown files joined (about 110 KB of text, 110 headings): pandoc writes
  Word, OpenDocument text, EPUB, RTF and PowerPoint (a slide per level-2 section) files,
  LibreOffice Impress the OpenDocument and PowerPoint 97 presentations and Writer the
  Word 97 file (old binary Office, read by antiword and the PowerPoint record walk); the
  joined Markdown itself, and its
  HTML by pandoc, are measured too, and so is a notebook of it (nbformat);
- a table of every line of the Python tutorial's sources (file, line, text; about 11,000
  rows): CSV, then LibreOffice Calc writes the Excel (.xlsx and Excel 97 .xls) and
  OpenDocument spreadsheets;
- a mailbox of one message per corpus text file (stdlib `email`, `mailbox`);
- this repository's Python sources joined, as a source file;
- PDF with a text layer: the corpus' ReportLab user guide (134 pages);
- OCR: its first 4 pages printed at 150 dpi (pdftoppm) as PNG images, and as a scanned
  PDF with no text layer (Pillow), recognised by Tesseract.

Each file is read the way `run` reads it (`ingest.load`: read, hash, detect, extract; the
OCR cache emptied before each read, so a scan is recognised every time) in
this one process and thread, repeated until `--min-seconds` have passed; the figure is
the best of three such rounds. A scanned PDF's pages are recognised side by side (one
Tesseract process a page, up to one per CPU): its figures are divided by the processes
it ran. pages/s counts real pages for PDFs and images and slides
for presentations; for the others it counts text pages of 3,000 extracted characters.
The machine is named (lscpu); while other work runs on it, the figures are those of a
busy machine and are labelled so.

`--before-json` adds the MB/s per core of another revision's run of this script (its
readers on `PYTHONPATH`, the same inputs and machine, run just before) and the ratio.
"""

from __future__ import annotations

import argparse
import csv
import email.policy
import json
import mailbox
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from email.message import EmailMessage
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "examples" / "corpus"
TEXT_PAGE_CHARS = 3000
NO_IMAGES = """
function Image(el) return {} end
function RawInline(el)
  if el.format == "html" and el.text:match("^<img") then return {} end
end
"""


def run(*args: str) -> None:
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def soffice(source: Path, to: str, out: Path, work: Path, infilter: str | None = None) -> Path:
    args = [
        "soffice",
        f"-env:UserInstallation=file://{work}/lo-profile",
        "--headless",
        "--convert-to",
        to,
        "--outdir",
        str(out),
    ]
    if infilter:
        args.append(f"--infilter={infilter}")
    run(*args, str(source))
    return out / f"{source.stem}.{to}"


def generate(out: Path, work: Path) -> dict[str, tuple[Path, int | None]]:
    """name -> (file, its real pages or None); written into `out`."""
    files: dict[str, tuple[Path, int | None]] = {}
    markdown = "\n\n".join(
        p.read_text() for p in sorted(CORPUS.rglob("*.md")) if p.name != "LICENSE-NOTICE.md"
    )
    joined = out / "guide.md"
    joined.write_text(markdown)
    files["Markdown"] = (joined, None)
    lua = work / "no-images.lua"
    lua.write_text(NO_IMAGES)
    for suffix, label in (
        ("docx", "Word .docx"),
        ("odt", "OpenDocument .odt"),
        ("epub", "EPUB"),
        ("rtf", "RTF"),
        ("pptx", "PowerPoint .pptx"),
        ("html", "HTML"),
    ):
        target = out / f"guide.{suffix}"
        run(
            "pandoc",
            "-s",
            "-f",
            "gfm",
            "--lua-filter",
            str(lua),
            "--slide-level=2",
            "--metadata",
            "title=guide",
            str(joined),
            "-o",
            str(target),
        )
        files[label] = (target, None)
    from pptx import Presentation

    slides = len(Presentation(out / "guide.pptx").slides)
    files["PowerPoint .pptx"] = (out / "guide.pptx", slides)
    files["OpenDocument .odp"] = (soffice(out / "guide.pptx", "odp", out, work), slides)
    files["PowerPoint .ppt"] = (soffice(out / "guide.pptx", "ppt", out, work), slides)
    files["Word .doc"] = (soffice(out / "guide.docx", "doc", out, work), None)
    notebook(markdown, out / "guide.ipynb")
    files["Jupyter .ipynb"] = (out / "guide.ipynb", None)

    table = out / "lines.csv"
    with open(table, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["file", "line", "text"])
        for path in sorted((CORPUS / "python-tutorial").iterdir()):
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                if line.strip():
                    writer.writerow([path.name, number, line.strip()])
    files["CSV"] = (table, None)
    files["Excel .xlsx"] = (soffice(table, "xlsx", out, work, "CSV:44,34,76,1"), None)
    files["OpenDocument .ods"] = (soffice(table, "ods", out, work, "CSV:44,34,76,1"), None)
    files["Excel .xls"] = (soffice(table, "xls", out, work, "CSV:44,34,76,1"), None)

    box_path = out / "corpus.mbox"
    box = mailbox.mbox(str(box_path))
    for path in sorted(CORPUS.rglob("*.txt")) + sorted(CORPUS.rglob("*.md")):
        message = EmailMessage(policy=email.policy.SMTP)
        message["From"] = "docs@example.org"
        message["To"] = "readers@example.org"
        message["Subject"] = path.name
        message.set_content(path.read_text())
        box.add(mailbox.mboxMessage(message.as_bytes()))
    box.close()
    files["mail .mbox"] = (box_path, None)

    code = out / "sources.py"
    code.write_text("\n\n".join(p.read_text() for p in sorted((ROOT / "src").rglob("*.py"))))
    files["Python source"] = (code, None)

    guide = CORPUS / "reportlab" / "reportlab-userguide.pdf"
    shutil.copy(guide, out / "userguide.pdf")
    from pypdf import PdfReader

    files["PDF (text layer)"] = (out / "userguide.pdf", len(PdfReader(guide).pages))
    run(
        "pdftoppm",
        "-r",
        "150",
        "-gray",
        "-png",
        "-f",
        "1",
        "-l",
        "4",
        str(guide),
        str(work / "page"),
    )
    from PIL import Image

    pages = [Image.open(p).convert("L") for p in sorted(work.glob("page-*.png"))]
    pages[0].save(out / "page1.png")
    files["PNG (OCR)"] = (out / "page1.png", 1)
    pages[0].save(out / "scanned.pdf", resolution=150, save_all=True, append_images=pages[1:])
    files["scanned PDF (OCR)"] = (out / "scanned.pdf", len(pages))
    return files


def notebook(markdown: str, path: Path) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    cells = []
    for i, part in enumerate(re.split(r"^```[a-z]*\n(.*?)^```\n", markdown, flags=re.M | re.S)):
        if part.strip():
            cells.append(new_code_cell(part) if i % 2 else new_markdown_cell(part))
    nbformat.write(
        new_notebook(
            cells=cells,
            metadata={"kernelspec": {"name": "rust", "display_name": "Rust", "language": "rust"}},
        ),
        path,
    )


def measure(path: Path, min_seconds: float) -> tuple[float, int, int] | str:
    """(seconds per read, best of three rounds; characters extracted; pages_failed), or
    why the readers could not read the file (an earlier revision's, `--before-json`)."""
    try:
        from attnswitch.documents.ingest import load, scan
    except ImportError:  # revisions before the split of issue 44
        from attnswitch.pipeline.ingest import load, scan

    [entry] = [e for e in scan(path.parent) if e.source == path.name]
    best = float("inf")
    for _ in range(3):
        reads, start = 0, time.perf_counter()
        while True:
            forget_ocr()
            doc = load(entry)
            reads += 1
            spent = time.perf_counter() - start
            if spent >= min_seconds:
                break
        best = min(best, spent / reads)
    if not doc.ok:
        return f"{path.name}: {doc.reason}"
    return best, len(doc.text), doc.pages_failed


def forget_ocr() -> None:
    """Empty the OCR cache (this run's own cache folder, `main`): each read of a scan is
    timed recognising its pages, not finding them kept from the read before."""
    for kept in Path(os.environ["ATTNSWITCH_CACHE_DIR"]).glob("ocr.sqlite3*"):
        kept.unlink()


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(
            line.split(":", 1)[1].strip()
            for line in out.splitlines()
            if line.startswith("Model name")
        )
    except (OSError, StopIteration):
        return "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    parser.add_argument("--min-seconds", type=float, default=2.0)
    parser.add_argument(
        "--before-json",
        type=Path,
        help="readers_throughput.json of an earlier revision, to compare",
    )
    args = parser.parse_args()
    for tool in ("pandoc", "soffice", "pdftoppm", "tesseract"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool}: not installed (make system-packages)")
    load_avg = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        os.environ["ATTNSWITCH_CACHE_DIR"] = str(Path(folder) / "cache")
        out, work = Path(folder) / "files", Path(folder) / "work"
        out.mkdir()
        work.mkdir()
        files = generate(out, work)
        for label, (path, pages) in files.items():
            measured = measure(path, args.min_seconds)
            if isinstance(measured, str):
                print(f"{label:22} not read: {measured}", flush=True)
                rows.append({"format": label, "file": path.name, "not_read": measured})
                continue
            seconds, chars, failed = measured
            size = path.stat().st_size
            text_pages = pages if pages is not None else chars / TEXT_PAGE_CHARS
            # A scanned PDF's pages are recognised side by side, one Tesseract each.
            cores = min(os.cpu_count() or 1, pages) if "scanned" in label else 1
            rows.append(
                {
                    "format": label,
                    "file": path.name,
                    "bytes": size,
                    "chars": chars,
                    "pages": text_pages,
                    "real_pages": pages is not None,
                    "seconds": seconds,
                    "cores": cores,
                    "mb_per_s": size / 2**20 / seconds / cores,
                    "pages_per_s": text_pages / seconds / cores,
                    "pages_failed": failed,
                }
            )
            print(
                f"{label:22} {size / 1024:8.0f} KiB {seconds * 1000:9.1f} ms "
                f"{cores} core(s) {size / 2**20 / seconds / cores:8.2f} MB/s per core "
                f"{text_pages / seconds / cores:9.1f} pages/s per core",
                flush=True,
            )
    cpu, load_after = cpu_model(), os.getloadavg()[0]
    busy = max(load_avg, load_after) > 1.5
    before = None
    if args.before_json:
        before = {r["format"]: r for r in json.loads(args.before_json.read_text())["rows"]}
    write(args.out, rows, cpu, busy, (load_avg, load_after), before)


def write(
    out: Path,
    rows: list[dict],
    cpu: str,
    busy: bool,
    loads: tuple[float, float],
    before: dict[str, dict] | None = None,
) -> None:
    state = (
        f"busy machine (load average {loads[0]:.1f} before, {loads[1]:.1f} after: "
        f"other work ran on it)"
        if busy
        else "quiet machine"
    )
    lines = [
        "# Reader throughput per format, per core",
        "",
        f"Measured on {cpu}, {os.cpu_count()} cores, a {state}, by "
        "`python benchmarks/readers_throughput.py`: each file read as `run` reads it "
        "(`ingest.load`: read, hash, detect, extract) in one process and thread, the best "
        "of three rounds; the scanned PDF's pages are recognised side by side, one "
        "Tesseract process each, so its figures are divided by the processes it ran (the "
        "cores column). pages/s counts real pages for the PDFs and the image, slides for "
        "the presentations (marked *), and text pages of 3,000 extracted characters for the "
        "others. Inputs are generated from the example corpus by pandoc, LibreOffice and "
        "pdftoppm (see the script)."
        + (
            " On a busy machine every figure is a lower bound, "
            "the side-by-side OCR processes most of all (they compete with the other work for "
            "the same cores)."
            if busy
            else ""
        ),
        "",
        "| format | input | extracted text | ms per file | cores | MB/s per core | "
        "pages/s per core |",
        "|---|---|---|---|---|---|---|",
    ]
    unread = [r for r in rows if "not_read" in r]
    rows = [r for r in rows if "not_read" not in r]
    for r in rows:
        mark = "*" if r["real_pages"] else ""
        lines.append(
            f"| {r['format']} | {r['bytes'] / 1024:.0f} KiB | "
            f"{r['chars'] / 1000:.0f} k chars | {r['seconds'] * 1000:.1f} | "
            f"{r['cores']} | {r['mb_per_s']:.2f} | {r['pages_per_s']:.1f}{mark} |"
        )
    if unread:
        lines += [
            "",
            "Not read: " + "; ".join(f"{r['format']} ({r['not_read']})" for r in unread) + ".",
        ]
    if before is not None:
        lines += [
            "",
            "## Before and after",
            "",
            "MB/s per core of the revision given by `--before-json` (its own run of "
            "this script, same machine and inputs) against this one:",
            "",
            "| format | before | after | after / before |",
            "|---|---:|---:|---:|",
        ]
        for r in rows:
            b = before.get(r["format"])
            if b is None or "not_read" in b:
                lines.append(f"| {r['format']} | not read | {r['mb_per_s']:.2f} | – |")
            else:
                lines.append(
                    f"| {r['format']} | {b['mb_per_s']:.2f} | {r['mb_per_s']:.2f} | "
                    f"{r['mb_per_s'] / b['mb_per_s']:.1f}x |"
                )
    lines += [
        "",
        "## In a run: reading beside the encoder",
        "",
        "These figures are per reader, in one process and thread. In `attnswitch run` "
        "the readers work in worker processes beside the encoder (`--read-workers`, "
        "default half the CPUs); the end-to-end rate by the number of workers is in "
        "[read_workers.md](read_workers.md) (`benchmarks/read_workers.py`).",
    ]
    (out / "readers_throughput.md").write_text("\n".join(lines) + "\n")
    (out / "readers_throughput.json").write_text(
        json.dumps(
            {"cpu": cpu, "busy": busy, "load_average": loads, "rows": rows + unread}, indent=1
        )
        + "\n"
    )
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    ordered = sorted(rows, key=lambda r: r["pages_per_s"])
    ax.barh([r["format"] for r in ordered], [r["pages_per_s"] for r in ordered])
    ax.set_xscale("log")
    ax.set_xlabel("pages per second per core (log scale)")
    ax.set_title(f"Reader throughput ({state.split(' (')[0]}, {cpu})", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "readers_throughput.png", dpi=110)


if __name__ == "__main__":
    main()
