"""PDF: the text of every page, extracted with pypdf."""

from __future__ import annotations

import io

from attnswitch.pipeline.readers.blocks import ReadOptions
from attnswitch.pipeline.readers.ocr import ocr_pdf_pages, textless
from attnswitch.pipeline.readers.skip import Skip, Skipped

def pdf_text(data: bytes, options: ReadOptions = ReadOptions()) -> tuple[str, int]:
    """Text of every page joined by blank lines, and how many pages failed (pages with no
    text layer are recognised by OCR: `readers.ocr`)."""
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
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, AttributeError,
            IndexError, AssertionError, RecursionError, OSError) as exc:
        raise Skipped(Skip.CORRUPT_PDF, f"{type(exc).__name__}: {exc}") from None
    if not pages:
        raise Skipped(Skip.CORRUPT_PDF, "no pages")
    texts, failed = [], 0
    for page in pages:
        try:
            texts.append(page.extract_text() or "")
        except Exception:  # one broken page should not cost the others
            texts.append(None)
            failed += 1
    if failed == len(pages):
        raise Skipped(Skip.CORRUPT_PDF, f"text extraction failed on all {failed} pages")
    scanned = [n for n, t in enumerate(texts, start=1) if t is not None and not t.strip()]
    found, notes = ocr_pdf_pages(data, scanned, options)
    texts = ["\n\n".join(b.text for b in found.get(n, ())) or t or ""
             for n, t in enumerate(texts, start=1)]
    text = "\n\n".join(t.strip() for t in texts if t.strip())
    if not text:
        raise textless(len(pages), notes, options)
    return text, failed + len(scanned) - len(found)
