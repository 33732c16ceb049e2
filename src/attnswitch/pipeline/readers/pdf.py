"""PDF: the text of every page, extracted with pypdf."""

from __future__ import annotations

import io

from attnswitch.pipeline.readers.skip import Skip, Skipped

def pdf_text(data: bytes) -> tuple[str, int]:
    """Text of every page joined by blank lines, and how many pages failed."""
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
            failed += 1
    if failed == len(pages):
        raise Skipped(Skip.CORRUPT_PDF, f"text extraction failed on all {failed} pages")
    text = "\n\n".join(t.strip() for t in texts if t.strip())
    if not text:
        raise Skipped(Skip.EMPTY, f"no extractable text in {len(pages)} pages (scanned?)")
    return text, failed
