"""PDFs with real text on each page, written byte by byte (no PDF library): for tests
that need a chunk on a known page of a small file (a hit's `#page=N`)."""

from __future__ import annotations

import textwrap


def text_pdf(pages: list[str]) -> bytes:
    """A PDF of one page per text of `pages`, each text in lines of Helvetica (ASCII,
    without parentheses or backslashes; up to 60 lines of 90 characters a page), with a
    correct cross-reference table."""
    count = len(pages)
    font = 3
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(f"{4 + 2 * i} 0 R".encode() for i in range(count))
        + f"] /Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, text in enumerate(pages):
        assert text.isascii() and not set("()\\") & set(text), text
        lines = textwrap.wrap(text, 90) or [""]
        assert len(lines) <= 60, f"page {i + 1}: {len(lines)} lines"
        shown = " T* ".join(f"({line}) Tj" for line in lines)
        stream = f"BT /F1 10 Tf 12 TL 54 750 Td {shown} ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font "
            f"<< /F1 {font} 0 R >> >> /Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return bytes(out)
