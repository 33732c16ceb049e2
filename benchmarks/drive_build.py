"""Build a mixed "shared drive" of real documents at a chosen size, for benchmarks/drive.py.

    python benchmarks/drive_build.py OUT --size-mb 100 [--seed 0]

Every document is made from real text that Debian packages ship (no text is written here):
the HTML manuals of `python3-doc`, `debian-handbook`, `debian-reference-en`,
`developers-reference` and `maint-guide`, and the gzip'd changelogs of /usr/share/doc.
Their pages are cut into sections (a heading and what follows it up to the next one); each
document of the drive takes a few sections (seeded random choice, so documents do not repeat
whole pages) and is written in one format, in about the mix of a team's drive:

| kind | made with |
|---|---|
| HTML page | the sections as a page |
| `.docx`, `.odt`, `.epub`, `.pptx`, `.txt` | pandoc from that page |
| PDF, legacy `.doc` | LibreOffice headless from that page (one call per batch) |
| scanned PDF, PNG scan | pdftoppm renders pages of such a PDF (pages that render blank dropped), img2pdf re-assembles them |

The converters run on every core: pandoc calls in a thread pool, each LibreOffice batch
split over one headless LibreOffice per core (each with a profile of its own). A batch that
runs past `OFFICE_BATCH_S` is stopped (the converter's whole process group) and its pages
are converted one at a time, each within `OFFICE_PAGE_S`; a page LibreOffice cannot
convert in that time (it has been seen to loop on one) is left out of the drive, and said
so on stderr. File names and the manifest do not depend on the order conversions finish.
| `.eml` | the standard library's `email`: a body of sections, a `.docx` or PDF attached |
| `.ipynb` | nbformat: Markdown cells from paragraphs, code cells from `<pre>` blocks |
| `.xlsx`, `.csv` | openpyxl / csv: one row per section (title, first sentence, page) |
| `.gz` | a Debian changelog, as the package ships it |

Known items: a section used in exactly one document of the drive gives a query (its heading,
or for a table its row's sentence) whose answer is that document; at most `--queries` of
them, spread over the kinds. OUT/queries.json lists them (`{"text", "target", "kind"}`) and
OUT/manifest.json the files with their kinds. The Debian packages come from
`make drive-sources` (root, apt-get).
"""

from __future__ import annotations

import argparse
import csv
import email.message
import html
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

MANUALS = (
    ("python", Path("/usr/share/doc/python3.11/html"), "**/*.html"),
    ("handbook", Path("/usr/share/doc/debian-handbook/html/en-US"), "*.html"),
    ("reference", Path("/usr/share/debian-reference"), "*.en.html"),
    ("developers", Path("/usr/share/doc/developers-reference/docs"), "*.html"),
    ("maint-guide", Path("/usr/share/doc/maint-guide/html"), "*.en.html"),
)
CHANGELOGS = Path("/usr/share/doc")
SKIP_PAGES = re.compile(r"(genindex|modindex|search|index|contents|copyright|bugs|download)")
# The mix of the 50 MB drive of issue 39 (files per kind), which follows a team's drive.
MIX = {
    "html": 424,
    "docx": 172,
    "eml": 153,
    "pdf": 106,
    "pptx": 75,
    "odt": 72,
    "gz": 72,
    "ipynb": 70,
    "xlsx": 64,
    "scan": 25,
    "png": 18,
    "epub": 20,
    "csv": 20,
    "txt": 20,
    "doc": 13,
}
PANDOC = {"docx": "docx", "odt": "odt", "epub": "epub", "pptx": "pptx", "txt": "plain"}
OFFICE = {"pdf": "pdf:writer_web_pdf_Export", "doc": "doc:MS Word 97"}
SECTIONS_PER_DOC = (2, 6)
# Seconds a LibreOffice batch may take before its pages are converted one at a time, and
# seconds one page may take then (a page of these manuals converts in about a second).
OFFICE_BATCH_S = 300
OFFICE_PAGE_S = 120
WORKERS = os.cpu_count() or 1


@dataclass(frozen=True)
class Section:
    """A heading of a manual page and what follows it, as HTML and as text."""

    page: str
    heading: str
    html: str
    text: str
    code: tuple[str, ...]


def manual_sections() -> list[Section]:
    """Every section of the installed manuals with a heading and some text, in a fixed
    order."""
    from bs4 import BeautifulSoup

    found = []
    for name, folder, pattern in MANUALS:
        if not folder.is_dir():
            raise SystemExit(
                f"{folder}: expected the {name} manual (make drive-sources), got no folder"
            )
        for page in sorted(folder.glob(pattern)):
            if SKIP_PAGES.search(page.stem):
                continue
            soup = BeautifulSoup(page.read_bytes(), "lxml")
            body = soup.find(attrs={"role": "main"}) or soup.body
            if body is None:
                continue
            found.extend(_sections(f"{name}/{page.relative_to(folder)}", body))
    return found


def _sections(page: str, body) -> list[Section]:
    out, heading, parts = [], None, []

    def close() -> None:
        text = " ".join(" ".join(p.get_text(" ").split()) for p in parts)
        if heading and len(text) > 200:
            code = tuple(p.get_text() for p in parts if p.name == "pre")
            out.append(Section(page, heading, "".join(str(p) for p in parts), text, code))

    for el in body.find_all(["h1", "h2", "h3", "p", "pre", "ul", "ol", "dl", "table"]):
        if el.find_parent(["p", "ul", "ol", "dl", "table", "pre"]):
            continue
        if el.name in ("h1", "h2", "h3"):
            close()
            heading = " ".join(el.get_text(" ").replace("¶", "").split())
            parts = []
        else:
            parts.append(el)
    close()
    return out


def first_sentence(text: str) -> str:
    return re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0][:300]


class DriveBuilder:
    """Writes documents into `out` until `size` bytes are there."""

    def __init__(self, out: Path, size: int, seed: int, sections: list[Section]):
        self.out, self.size, self.rng = out, size, random.Random(seed)
        self.sections = sections
        self.manifest: list[dict] = []  # {"path", "kind", "sections": [i...]}
        self.pending: dict[str, list[tuple[Path, list[int]]]] = {k: [] for k in OFFICE}
        self.scans: list[tuple[Path, str, list[int]]] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="drive-build-"))
        self.pool = ThreadPoolExecutor(WORKERS)
        self.converting: list[Future[None]] = []  # pandoc calls not yet waited for
        logs = [p for p in sorted(CHANGELOGS.glob("*/changelog*.gz")) if p.is_file()]
        self.rng.shuffle(logs)
        self.changelogs = iter(logs)
        self.n = 0  # documents named so far
        self.pages = 0  # pages written for LibreOffice so far

    def _tmp_page(self, picked: list[int], prefix: str) -> Path:
        self.pages += 1
        page = self.tmp / f"{prefix}{self.pages:06d}.html"
        page.write_text(self._page(picked), encoding="utf-8")
        return page

    def written(self) -> int:
        return sum(p.stat().st_size for p in self.out.rglob("*") if p.is_file())

    def build(self) -> None:
        kinds, weights = zip(*MIX.items())
        written, since = 0, 0
        while written < self.size:
            kind = self.rng.choices(kinds, weights)[0]
            self.make(kind)
            since += 1
            if since >= 50:  # the LibreOffice batches and scans land in `flush`
                self.flush()
                written, since = self.written(), 0
        self.flush()
        self.pool.shutdown()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _pick(self) -> list[int]:
        return self.rng.sample(range(len(self.sections)), self.rng.randint(*SECTIONS_PER_DOC))

    def _path(self, kind: str, ext: str) -> Path:
        self.n += 1
        folder = self.out / f"team{self.n % 7}" / kind
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"doc{self.n:06d}.{ext}"

    def _page(self, picked: list[int]) -> str:
        secs = [self.sections[i] for i in picked]
        body = "".join(f"<h2>{html.escape(s.heading)}</h2>{s.html}" for s in secs)
        title = html.escape(secs[0].heading)
        return (
            f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>"
            f"</head><body><h1>{title}</h1>{body}</body></html>"
        )

    def _record(self, path: Path, kind: str, picked: list[int]) -> None:
        self.manifest.append(
            {"path": path.relative_to(self.out).as_posix(), "kind": kind, "sections": picked}
        )

    def make(self, kind: str) -> None:
        picked = self._pick()
        if kind == "html":
            path = self._path(kind, "html")
            path.write_text(self._page(picked), encoding="utf-8")
        elif kind in PANDOC:
            path = self._path(kind, kind)
            page = self._page(picked)
            self.converting.append(self.pool.submit(self._pandoc, page, PANDOC[kind], path))
        elif kind in OFFICE:
            self.pending[kind].append((self._tmp_page(picked, "page"), picked))
            return
        elif kind in ("scan", "png"):
            page = self._tmp_page(picked[:2], "scan")
            self.pending["pdf"].append((page, picked[:2]))
            self.scans.append((page.with_suffix(".pdf"), kind, picked[:2]))
            return
        elif kind == "eml":
            path, picked = self._mail(picked)
        elif kind == "ipynb":
            path = self._path(kind, "ipynb")
            self._notebook(picked, path)
        elif kind in ("xlsx", "csv"):
            path = self._path(kind, kind)
            self._table(picked, path)
        elif kind == "gz":
            source = next(self.changelogs, None)
            if source is None:
                return
            path = self._path(kind, "changelog.gz")
            shutil.copyfile(source, path)
            picked = []
        self._record(path, kind, picked)

    def _pandoc(self, page: str, to: str, path: Path) -> None:
        subprocess.run(
            ["pandoc", "-f", "html", "-t", to, "-o", str(path)],
            input=page.encode(),
            check=True,
            capture_output=True,
        )

    def _mail(self, picked: list[int]) -> tuple[Path, list[int]]:
        path = self._path("eml", "eml")
        body, attached = picked[:2], picked[2:]
        msg = email.message.EmailMessage()
        msg["From"] = "docs-team@example.org"
        msg["To"] = "everyone@example.org"
        msg["Subject"] = self.sections[body[0]].heading
        text = "\n\n".join(f"{self.sections[i].heading}\n\n{self.sections[i].text}" for i in body)
        quoted = "\n".join("> " + line for line in text.splitlines()[:12])
        msg.set_content(f"Hello,\n\n{text}\n\nOn an earlier day someone wrote:\n{quoted}\n")
        if attached:
            doc = self.tmp / "attachment.docx"
            self._pandoc(self._page(attached), "docx", doc)
            msg.add_attachment(
                doc.read_bytes(),
                maintype="application",
                subtype="vnd.openxmlformats-officedocument.wordprocessingml.document",
                filename="notes.docx",
            )
        path.write_bytes(bytes(msg))
        return path, body + attached

    def _notebook(self, picked: list[int], path: Path) -> None:
        import nbformat

        cells = []
        for i in picked:
            s = self.sections[i]
            cells.append(nbformat.v4.new_markdown_cell(f"## {s.heading}\n\n{s.text}"))
            cells += [nbformat.v4.new_code_cell(code) for code in s.code[:3]]
        nbformat.write(nbformat.v4.new_notebook(cells=cells), str(path))

    def _table(self, picked: list[int], path: Path) -> None:
        rows = [("topic", "summary", "manual page")]
        rows += [
            (self.sections[i].heading, first_sentence(self.sections[i].text), self.sections[i].page)
            for i in picked
        ]
        if path.suffix == ".csv":
            with path.open("w", newline="", encoding="utf-8") as f:
                csv.writer(f).writerows(rows)
            return
        from openpyxl import Workbook

        book = Workbook()
        for row in rows:
            book.active.append(row)
        book.save(path)

    def flush(self) -> None:
        """Waits for the pandoc calls, converts the pending pages with LibreOffice (each
        format's batch split over `WORKERS` converters) and makes the scans from the
        converted PDFs."""
        for done in self.converting:
            done.result()
        self.converting.clear()
        for kind, pages in self.pending.items():
            if not pages:
                continue
            target = OFFICE[kind]
            shares = [pages[i::WORKERS] for i in range(WORKERS)]
            for job in [
                self.pool.submit(self._office, target, [p for p, _ in share], i)
                for i, share in enumerate(shares)
                if share
            ]:
                job.result()
            for page, picked in pages:
                made = page.with_suffix("." + target.split(":")[0])
                if page.name.startswith("scan") or not made.is_file():
                    continue
                path = self._path(kind, made.suffix[1:])
                shutil.move(made, path)
                self._record(path, kind, picked)
            pages.clear()
        for pdf, kind, picked in self.scans:
            if pdf.is_file():
                self._scan(pdf, kind, picked)
        self.scans.clear()

    def _office(self, target: str, pages: list[Path], worker: int) -> None:
        """Convert `pages` to `target` with LibreOffice (profile `worker`), in one call;
        past `OFFICE_BATCH_S`, one page at a time, leaving out a page that takes longer
        than `OFFICE_PAGE_S` or fails."""
        if _soffice(target, pages, self.tmp, worker, OFFICE_BATCH_S):
            return
        for page in pages:
            if not _soffice(target, [page], self.tmp, worker, OFFICE_PAGE_S):
                page.with_suffix("." + target.split(":")[0]).unlink(missing_ok=True)
                print(f"{page.name}: LibreOffice did not convert it; left out", file=sys.stderr)

    def _scan(self, pdf: Path, kind: str, picked: list[int]) -> None:
        stem = self.tmp / "render"
        subprocess.run(
            ["pdftoppm", "-r", "150", "-gray", "-png", "-l", "2", str(pdf), str(stem)],
            check=True,
            capture_output=True,
        )
        pages = [p for p in sorted(self.tmp.glob("render*.png")) if not blank(p)]
        if not pages:  # nothing printed on the pages rendered: no scan of this document
            for p in self.tmp.glob("render*.png"):
                p.unlink()
            return
        if kind == "png":
            path = self._path("scan", "png")
            shutil.move(pages[0], path)
            picked = picked[:1]
        else:
            path = self._path("scan", "pdf")
            subprocess.run(
                ["img2pdf", *(str(p) for p in pages), "-o", str(path)],
                check=True,
                capture_output=True,
            )
        for p in self.tmp.glob("render*.png"):
            p.unlink()
        self._record(path, "scan" if kind == "scan" else "png", picked)


def _soffice(target: str, pages: list[Path], out: Path, worker: int, timeout: float) -> bool:
    """Run one headless LibreOffice over `pages` (its own profile, `worker`'s), in a process
    group of its own so that a timeout stops all of it; whether it ended in time and well."""
    profile = out / f"lo-profile-{worker}"
    proc = subprocess.Popen(
        [
            "soffice",
            f"-env:UserInstallation=file://{profile}",
            "--headless",
            "--norestore",
            "--convert-to",
            target,
            "--outdir",
            str(out),
            *(str(p) for p in pages),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        return proc.wait(timeout) == 0
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return False


def blank(png: Path, ink_below: int = 160, least_ink: float = 0.001) -> bool:
    """Whether a rendered page holds no print: fewer than `least_ink` of its pixels are
    darker than `ink_below` (of 255; grey anti-aliasing and scanner noise are lighter)."""
    from PIL import Image

    with Image.open(png) as image:
        histogram = image.convert("L").histogram()
    dark = sum(histogram[:ink_below])
    return dark < least_ink * sum(histogram)


def known_items(builder: DriveBuilder, limit: int, seed: int) -> list[dict]:
    """Queries whose one answer is a file: sections used by one document only, the heading
    unique among all the drive's headings (a table's row: its sentence), spread over kinds."""
    uses = Counter(i for doc in builder.manifest for i in set(doc["sections"]))
    headings = Counter(builder.sections[i].heading.lower() for i in uses)
    by_kind: dict[str, list[dict]] = {}
    for doc in builder.manifest:
        for i in doc["sections"]:
            s = builder.sections[i]
            if uses[i] != 1 or headings[s.heading.lower()] != 1 or len(s.heading) < 12:
                continue
            table = doc["kind"] in ("xlsx", "csv")
            text = first_sentence(s.text) if table else s.heading
            by_kind.setdefault(doc["kind"], []).append(
                {"text": text, "target": doc["path"], "kind": doc["kind"]}
            )
            break
    rng = random.Random(seed)
    for items in by_kind.values():
        rng.shuffle(items)
    picked: list[dict] = []
    while len(picked) < limit and any(by_kind.values()):
        for kind in sorted(by_kind):
            if by_kind[kind] and len(picked) < limit:
                picked.append(by_kind[kind].pop())
    return picked


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--size-mb", type=float, default=100.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--queries", type=int, default=120)
    args = ap.parse_args()
    if args.size_mb <= 0:
        raise SystemExit(f"--size-mb: expected a size above 0, got {args.size_mb}")
    for tool in ("pandoc", "soffice", "pdftoppm", "img2pdf"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool}: expected on PATH (make drive-sources), got none")
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    builder = DriveBuilder(args.out, int(args.size_mb * 1e6), args.seed, manual_sections())
    builder.build()
    queries = known_items(builder, args.queries, args.seed)
    meta = args.out.parent / f"{args.out.name}.meta"
    meta.mkdir(exist_ok=True)
    (meta / "manifest.json").write_text(json.dumps(builder.manifest))
    (meta / "queries.json").write_text(json.dumps(queries, indent=1))
    kinds = Counter(d["kind"] for d in builder.manifest)
    print(
        f"{args.out}: {len(builder.manifest)} files, {builder.written() / 1e6:.1f} MB; "
        + ", ".join(f"{k} {n}" for k, n in kinds.most_common())
        + f"; {len(queries)} known-item queries in {meta}"
    )


if __name__ == "__main__":
    main()
