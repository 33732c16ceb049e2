"""PDF: the text of every page, extracted with PDFium (pypdfium2), as blocks that know
their page.

pypdf opens the file (encryption, corrupt files, the outline) and PDFium extracts each
page's text: PDFium spaces words as `pdftotext` does, where pypdf runs the words of some
PDFs together (Debian's debian-reference.en.pdf: 8% of pypdf's words were runs of 25
letters or more, "thelinkcountofthedirectoryincreases", against none in PDFium's and
`pdftotext`'s). A page whose PDFium text still has such runs (more than
`RUN_TOGETHER_SHARE` of its words) is extracted by pypdf too and the text with fewer is
kept; a page PDFium cannot read, or a file it cannot open, is extracted by pypdf.
PDFium marks a hyphen at a line end with U+0002; it is kept as a hyphen, as `pdftotext`
keeps it (whether it splits a word or belongs to one, "attribute-based", the text does
not say).

Each page gives one paragraph block per run of lines between blank lines (pypdf rarely
emits blank lines, so mostly one block a page), with `Location(page=n)` (from 1).
Headings come from the document's outline (its bookmarks), where it has one: each entry
is a heading of its depth (1 for the top level, at most 6) at the page it points to,
placed where its title is first found in that page's text (the text before it stays
above it), else at the page's start. PDFs without an outline give no headings: finding
them by font size is left to a layout-aware reader.
"""

from __future__ import annotations

import io
import re
from typing import Any

from attnswitch.documents.readers.blocks import Block, BlockKind, Extracted, Location, ReadOptions
from attnswitch.documents.readers.ocr import ocr_pdf_pages, textless
from attnswitch.documents.readers.skip import Skip, Skipped
from attnswitch.documents.readers.text import paragraphs


def read_pdf(data: bytes, options: ReadOptions) -> Extracted:
    """A PDF's pages as blocks (see the module doc); pages with no text layer are
    recognised by OCR (`readers.ocr`, unless `options.ocr` is off); `failed` names the pages
    whose text could not be extracted, or recognised, while others could."""
    reader, texts, failed = _pages(data)
    scanned = [n for n, t in enumerate(texts, start=1) if t is not None and not t.strip()]
    by_ocr = ocr_pdf_pages(data, scanned, options)  # the pages with no text layer
    recognised = by_ocr.blocks
    headings = _outline(reader)
    blocks: list[Block] = []
    for number, text in enumerate(texts, start=1):
        if text is None:
            continue
        if number in recognised:
            blocks += recognised[number]
            continue
        rest = text
        for title, level in headings.get(number, ()):
            at = _find(title, rest)
            before, rest = (rest[: at[0]], rest[at[1] :]) if at else ("", rest)
            blocks += _paragraphs(before, number)
            blocks.append(Block(BlockKind.HEADING, title, Location(page=number), level=level))
        blocks += _paragraphs(rest, number)
    if not any(b.kind is not BlockKind.HEADING for b in blocks):
        raise textless(len(texts), by_ocr)
    return Extracted(
        tuple(blocks),
        failed=tuple(f"page {n}: text extraction failed" for n in failed) + tuple(by_ocr.notes),
        pages_failed=len(failed) + len(scanned) - len(recognised),
    )


def _paragraphs(text: str, page: int) -> list[Block]:
    return [Block(BlockKind.PARAGRAPH, p, Location(page=page)) for p in paragraphs(text)]


def _find(title: str, text: str) -> tuple[int, int] | None:
    """The span of `title` in `text`, any whitespace between its words, or None."""
    words = title.split()
    if not words:
        return None
    found = re.search(r"\s+".join(re.escape(w) for w in words), text)
    return found.span() if found else None


def _outline(reader: Any) -> dict[int, list[tuple[str, int]]]:
    """page (from 1) -> [(title, level)] of the outline entries pointing to it, in order;
    empty when the PDF has no outline or it cannot be read."""
    out: dict[int, list[tuple[str, int]]] = {}

    def walk(entries: Any, level: int) -> None:
        for entry in entries:
            if isinstance(entry, list):
                walk(entry, level + 1)
                continue
            try:
                page = reader.get_destination_page_number(entry)
                title = " ".join(str(entry.title).split())
            except Exception:  # a broken entry costs only itself
                continue
            if page is not None and page >= 0 and title:
                out.setdefault(page + 1, []).append((title, min(level, 6)))

    try:
        walk(reader.outline, 1)
    except Exception:  # an unreadable outline: no headings, the text is still there
        return {}
    return out


RUN_TOGETHER_SHARE = 0.01
_RUN_TOGETHER = re.compile(r"[^\W\d_]{25,}")  # a "word" of 25 letters or more
_WORD = re.compile(r"[^\W\d_]+")


def run_together_share(text: str) -> float:
    """The share of the words of `text` that are runs of 25 letters or more: words an
    extractor ran together (English has almost none; German compounds a few)."""
    words = len(_WORD.findall(text))
    return len(_RUN_TOGETHER.findall(text)) / words if words else 0.0


def _pdfium_texts(data: bytes, count: int) -> list[str | None] | None:
    """Each page's text by PDFium (None for a page it cannot read), or None when PDFium
    cannot open the file or sees another number of pages than pypdf's `count`."""
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError:
        return None
    texts: list[str | None] = []
    try:
        if len(document) != count:
            return None
        for index in range(count):
            try:
                page = document[index]
                textpage = page.get_textpage()
                text = textpage.get_text_bounded()
                textpage.close()
                page.close()
            except (pdfium.PdfiumError, RuntimeError):  # one broken page costs only itself
                texts.append(None)
                continue
            texts.append(text.replace("\x02", "-").replace("\r\n", "\n"))
    finally:
        document.close()
    return texts


def _pypdf_text(page: Any) -> str | None:
    try:
        return page.extract_text() or ""
    except Exception:  # one broken page should not cost the others
        return None


def _pages(data: bytes) -> tuple[Any, list[str | None], list[int]]:
    """(the pypdf reader, each page's text or None where extraction failed, the failed
    page numbers from 1)."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError, PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                if not reader.decrypt(""):
                    raise Skipped(Skip.ENCRYPTED_PDF, "needs a password")
            except (PyPdfError, NotImplementedError) as exc:
                raise Skipped(Skip.ENCRYPTED_PDF, str(exc)) from None
        pages = list(reader.pages)
    except Skipped:
        raise
    except (
        PdfReadError,
        PyPdfError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        IndexError,
        AssertionError,
        RecursionError,
        OSError,
    ) as exc:
        raise Skipped(Skip.CORRUPT_PDF, f"{type(exc).__name__}: {exc}") from None
    if not pages:
        raise Skipped(Skip.CORRUPT_PDF, "no pages")
    texts = _pdfium_texts(data, len(pages)) or [None] * len(pages)
    for index, page in enumerate(pages):
        text = texts[index]
        if text is None:
            texts[index] = _pypdf_text(page)
        elif run_together_share(text) > RUN_TOGETHER_SHARE:
            other = _pypdf_text(page)
            if other is not None and run_together_share(other) < run_together_share(text):
                texts[index] = other
    failed = [number for number, text in enumerate(texts, start=1) if text is None]
    if len(failed) == len(pages):
        raise Skipped(Skip.CORRUPT_PDF, f"text extraction failed on all {len(failed)} pages")
    return reader, texts, failed
