"""PDF text spaced as `pdftotext` spaces it: the words of real PDFs read back (pages,
outline headings), against poppler's `pdftotext` and pypdf, whose text ran the words of
Debian's reference manual together."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pytest
from reader_sources import CORPUS, read_named, words

from attnswitch.documents.readers.blocks import BlockKind, ReadOptions
from attnswitch.documents.readers.pdf import run_together_share

DEBIAN_REFERENCE = Path("/usr/share/doc/debian-reference-common/docs/debian-reference.en.pdf")
PDFS = [
    pytest.param(CORPUS / "docbook-xsl" / "reference.pdf", id="docbook-xsl-reference"),
    pytest.param(CORPUS / "reportlab" / "reportlab-userguide.pdf", id="reportlab"),
    pytest.param(
        DEBIAN_REFERENCE,
        id="debian-reference",
        marks=pytest.mark.skipif(
            not DEBIAN_REFERENCE.exists(),
            reason="Debian's debian-reference-en is not installed (make system-packages)",
        ),
    ),
]


def read_pdf(path: Path):
    return read_named(path.name, path.read_bytes(), ReadOptions(ocr=False))


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")
@pytest.mark.parametrize("path", PDFS)
def test_words_are_the_words_pdftotext_finds(path: Path) -> None:
    got = read_pdf(path)
    reference = subprocess.run(
        ["pdftotext", "-raw", str(path), "-"], check=True, capture_output=True
    ).stdout.decode()
    ours, theirs = words(got.text), words(reference)
    assert len(ours & theirs) >= 0.98 * len(ours)
    assert run_together_share(got.text) <= run_together_share(reference) + 0.0005


@pytest.mark.skipif(not DEBIAN_REFERENCE.exists(), reason="debian-reference-en not installed")
def test_debian_reference_is_spaced_and_keeps_its_pages_and_outline() -> None:
    from pypdf import PdfReader

    got = read_pdf(DEBIAN_REFERENCE)
    pypdf_text = "\n".join(
        p.extract_text() for p in PdfReader(io.BytesIO(DEBIAN_REFERENCE.read_bytes())).pages
    )
    assert run_together_share(pypdf_text) > 0.05  # what the reader read before: 8%
    assert run_together_share(got.text) == 0.0
    assert "thelinkcountofthedirectoryincreases" in pypdf_text
    assert "the link count of the directory increases" in " ".join(got.text.split())
    pages = [b.location.page for b in got.blocks]
    assert pages == sorted(pages) and pages[-1] > 250
    headings = [b for b in got.blocks if b.kind is BlockKind.HEADING]
    assert len(headings) > 400 and any(h.text.startswith("GNU/Linux tutorials") for h in headings)


def test_run_together_share_counts_words_of_25_letters_or_more() -> None:
    assert run_together_share("") == 0.0
    assert run_together_share("the link count of the directory increases") == 0.0
    assert run_together_share("see thelinkcountofthedirectoryincreases now") == 1 / 3
