"""Regenerate the reader fixtures (tests/documents/readers/fixtures/) from the example corpus,
converted by the real tools people use, so the tests read what those tools write.

Sources (examples/corpus, see its LICENSE-NOTICE.md):
- rust/anyhow/README.md (headings at levels 1, 2 and 4, lists, code): pandoc writes
  anyhow.docx, .odt, .epub, .rtf and .pptx (a slide per level-2 section), with the
  title "anyhow"; LibreOffice Impress turns the .pptx into
  anyhow.odp and into anyhow.ppt (PowerPoint 97), and Writer the .docx into anyhow.doc
  (Word 97, an OLE2 file).
- postgresql/datatype-json.html, its table "JSON Primitive Types and Corresponding
  PostgreSQL Types" (cells taken from pandoc's JSON reading of the page): written as
  json-types.csv and .tsv, turned by LibreOffice Calc into json-types.xlsx, .ods and .xls
  (Excel 97) and by
  pandoc into json-types.docx (a Word table).
- sqlite/copyright-release.pdf printed to an image (pdftoppm, 150 dpi, the top of the
  page, black and white): scan.png, scan.tif (CCITT G4), scan.jpg (greyscale), scan.pdf (a
  scanned PDF with no text layer, by Pillow), mixed.pdf (the original page, with a text
  layer, then the scanned one; joined with pypdf).
- anyhow.ipynb: the README as a notebook (nbformat): its prose as Markdown cells, its
  fenced Rust code as code cells of a Rust kernel.
- mail.eml (stdlib email): the table's page as the HTML body with a plain alternative,
  json-types.csv and anyhow.docx attached; mail.mbox (stdlib mailbox): that message and a
  plain one.
- anyhow-encrypted.docx: anyhow.docx encrypted with the password "secret" by
  msoffcrypto-tool (LibreOffice 7.4's command line cannot set a password).
- anyhow-drm.epub: anyhow.epub with a `META-INF/encryption.xml` that lists its chapter as
  encrypted, as DRM'd e-books do (the chapter itself is left readable: the reader must
  refuse on the declaration).

Needs pandoc, LibreOffice (libreoffice-writer/-impress/-calc, `soffice`), poppler-utils
(pdftoppm) and the Python packages nbformat, pillow, pypdf and msoffcrypto-tool.
Run: python scripts/make_reader_fixtures.py (from the repository root).
"""

from __future__ import annotations

import csv
import email.policy
import io
import json
import mailbox
import re
import shutil
import subprocess
import tempfile
import zipfile
from email.message import EmailMessage
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "examples" / "corpus"
OUT = ROOT / "tests" / "pipeline" / "readers" / "fixtures"
ANYHOW = CORPUS / "rust" / "anyhow" / "README.md"
JSON_PAGE = CORPUS / "postgresql" / "datatype-json.html"
TABLE_SUMMARY = "JSON Primitive Types and Corresponding PostgreSQL Types"
RELEASE_PDF = CORPUS / "sqlite" / "copyright-release.pdf"
# pandoc would fetch the README's badge images from the network: drop images.
NO_IMAGES = """
function Image(el) return {} end
function RawInline(el)
  if el.format == "html" and el.text:match("^<img") then return {} end
end
"""


def run(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(args, check=True, cwd=cwd, stdout=subprocess.DEVNULL)


def pandoc_documents(work: Path) -> None:
    lua = work / "no-images.lua"
    lua.write_text(NO_IMAGES)
    for suffix in ("docx", "odt", "epub", "rtf", "pptx"):
        # Slides: one per section of level 2 (each titled by its heading).
        run(
            "pandoc",
            "-s",
            "-f",
            "gfm",
            "--lua-filter",
            str(lua),
            "--metadata",
            "title=anyhow",
            "--slide-level=2",
            str(ANYHOW),
            "-o",
            str(OUT / f"anyhow.{suffix}"),
        )
    soffice(OUT / "anyhow.pptx", "odp", work)
    soffice(OUT / "anyhow.docx", "doc", work)  # the old binary (OLE2) Word format
    soffice(OUT / "anyhow.pptx", "ppt", work)  # and PowerPoint's


def soffice(source: Path, to: str, work: Path, infilter: str | None = None) -> None:
    """Convert with LibreOffice into OUT (its own profile in `work`, so a running
    LibreOffice is not disturbed)."""
    args = [
        "soffice",
        f"-env:UserInstallation=file://{work}/lo-profile",
        "--headless",
        "--convert-to",
        to,
        "--outdir",
        str(OUT),
    ]
    if infilter:
        args.append(f"--infilter={infilter}")
    run(*args, str(source))


def json_types_table() -> list[list[str]]:
    """The cells of the page's table, as pandoc reads them."""
    tree = json.loads(
        subprocess.run(
            ["pandoc", "-f", "html", "-t", "json", str(JSON_PAGE)], check=True, capture_output=True
        ).stdout
    )
    for table in walk(tree):
        attrs = dict(table["c"][0][2])
        if attrs.get("summary") == TABLE_SUMMARY:
            head, bodies = table["c"][3], table["c"][4]
            rows = head[1] + [row for body in bodies for row in body[3]]
            return [[stringify(cell[4]) for cell in row[1]] for row in rows]
    raise SystemExit(f"no table {TABLE_SUMMARY!r} in {JSON_PAGE}")


def walk(node):
    if isinstance(node, dict):
        if node.get("t") == "Table":
            yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def stringify(node) -> str:
    """The text of pandoc JSON inlines and blocks (pandoc.utils.stringify, in Python)."""
    if isinstance(node, list):
        return re.sub(r"\s+", " ", "".join(stringify(n) for n in node)).strip()
    if not isinstance(node, dict):
        return ""
    kind, content = node.get("t"), node.get("c")
    if kind == "Str":
        return content
    if kind in ("Space", "SoftBreak", "LineBreak"):
        return " "
    if kind == "Code":
        return content[1]
    if isinstance(content, list):
        return " ".join(stringify(c) for c in content if isinstance(c, (list, dict)))
    return ""


def tables(work: Path) -> None:
    rows = json_types_table()
    with open(OUT / "json-types.csv", "w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    with open(OUT / "json-types.tsv", "w", newline="") as fh:
        csv.writer(fh, dialect="excel-tab").writerows(rows)
    # CSV filter options: comma (44), double quote (34), UTF-8 (76), from line 1.
    soffice(OUT / "json-types.csv", "xlsx", work, "CSV:44,34,76,1")
    soffice(OUT / "json-types.csv", "ods", work, "CSV:44,34,76,1")
    soffice(OUT / "json-types.csv", "xls", work, "CSV:44,34,76,1")  # and Excel 97's
    run("pandoc", "-f", "csv", str(OUT / "json-types.csv"), "-o", str(OUT / "json-types.docx"))


def scans(work: Path) -> None:
    from PIL import Image
    from pypdf import PdfReader, PdfWriter

    run(
        "pdftoppm",
        "-r",
        "150",
        "-gray",
        "-png",
        "-singlefile",
        str(RELEASE_PDF),
        str(work / "page"),
    )
    page = Image.open(work / "page.png").convert("L")
    top = page.crop((0, 120, page.width, 720))  # the title and two paragraphs
    bilevel = top.point(lambda v: 255 if v > 160 else 0).convert("1")
    bilevel.save(OUT / "scan.png", optimize=True)
    bilevel.save(OUT / "scan.tif", compression="group4")
    top.crop((0, 0, top.width, 300)).save(OUT / "scan.jpg", quality=40, optimize=True)
    bilevel.save(OUT / "scan.pdf", resolution=150)
    writer = PdfWriter()
    for source in (RELEASE_PDF, OUT / "scan.pdf"):
        for p in PdfReader(source).pages:
            writer.add_page(p)
    with open(OUT / "mixed.pdf", "wb") as fh:
        writer.write(fh)


def notebook() -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    text = re.sub(r"<img[^>]*>", "", ANYHOW.read_text())
    cells = []
    for i, part in enumerate(re.split(r"^```[a-z]*\n(.*?)^```\n", text, flags=re.M | re.S)):
        if not part.strip():
            continue
        cells.append(
            new_code_cell(part.rstrip("\n")) if i % 2 else new_markdown_cell(part.strip("\n"))
        )
    book = new_notebook(
        cells=cells,
        metadata={
            "kernelspec": {"name": "rust", "display_name": "Rust", "language": "rust"},
            "language_info": {"name": "rust"},
        },
    )
    nbformat.write(book, OUT / "anyhow.ipynb")


def mail() -> None:
    page = subprocess.run(
        ["pandoc", "-s", "-f", "html", "-t", "html", str(JSON_PAGE)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    plain = subprocess.run(
        ["pandoc", "-f", "html", "-t", "plain", str(JSON_PAGE)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    first = EmailMessage(policy=email.policy.SMTP)
    first["From"] = "Docs Team <docs@example.org>"
    first["To"] = "Readers <readers@example.org>"
    first["Date"] = "Wed, 02 Dec 2026 09:00:00 +0000"
    first["Subject"] = "JSON types in PostgreSQL"
    first["Message-ID"] = "<json-types@example.org>"
    first.set_content(plain[:3000])
    first.add_alternative(page[:20000], subtype="html")
    first.add_attachment(
        (OUT / "json-types.csv").read_bytes(),
        maintype="text",
        subtype="csv",
        filename="json-types.csv",
    )
    first.add_attachment(
        (OUT / "anyhow.docx").read_bytes(),
        maintype="application",
        subtype="vnd.openxmlformats-officedocument.wordprocessingml.document",
        filename="anyhow.docx",
    )
    (OUT / "mail.eml").write_bytes(first.as_bytes())
    second = EmailMessage(policy=email.policy.SMTP)
    second["From"] = "Rust Notes <rust@example.org>"
    second["To"] = "Readers <readers@example.org>"
    second["Date"] = "Thu, 03 Dec 2026 10:30:00 +0000"
    second["Subject"] = "Error handling with anyhow"
    second.set_content(re.sub(r"<img[^>]*>", "", ANYHOW.read_text())[:2500])
    path = OUT / "mail.mbox"
    path.unlink(missing_ok=True)
    box = mailbox.mbox(str(path))
    try:
        for message in (first, second):
            box.add(mailbox.mboxMessage(message.as_bytes()))
        box.flush()
    finally:
        box.close()


def encrypted() -> None:
    from msoffcrypto.format.ooxml import OOXMLFile

    out = io.BytesIO()
    with open(OUT / "anyhow.docx", "rb") as fh:
        office = OOXMLFile(fh)
        office.encrypt("secret", out)
    (OUT / "anyhow-encrypted.docx").write_bytes(out.getvalue())
    drm = """<?xml version="1.0" encoding="UTF-8"?>
<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container"
            xmlns:enc="http://www.w3.org/2001/04/xmlenc#">
  <enc:EncryptedData>
    <enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/>
    <enc:CipherData><enc:CipherReference URI="EPUB/text/ch001.xhtml"/></enc:CipherData>
  </enc:EncryptedData>
</encryption>
"""
    shutil.copy(OUT / "anyhow.epub", OUT / "anyhow-drm.epub")
    with zipfile.ZipFile(OUT / "anyhow-drm.epub", "a") as archive:
        archive.writestr("META-INF/encryption.xml", drm)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        pandoc_documents(work)
        tables(work)
        scans(work)
    notebook()
    mail()
    encrypted()
    for path in sorted(OUT.iterdir()):
        print(f"{path.stat().st_size:>8}  {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
