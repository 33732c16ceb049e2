"""Hostile files made in the test that reads them, small and quick to make: a TIFF whose
second frame is huge, a PNG that declares billions of pixels, a blank PDF of many pages, a TIFF of many frames, mail nested many
levels deep. Used by the reader tests and the security suite (tests/security/)."""

from __future__ import annotations

import io
import struct
import zlib


def tiff_with_huge_frame(width: int = 12_000, height: int = 12_500) -> bytes:
    """A valid two-frame bilevel TIFF: a 10x10 first frame, then a `width` x `height`
    one (150M pixels by default, under Pillow's own bomb limit), Deflate-compressed, so
    the file is tens of KB. Written by hand: Pillow would have to hold the huge frame in
    memory (a byte a pixel) to write it."""
    frames = [(10, 10), (width, height)]
    strips = [zlib.compress(bytes(((w + 7) // 8) * h), 9) for w, h in frames]
    tags = 9
    ifd_size = 2 + 12 * tags + 4
    out = io.BytesIO()
    out.write(b"II*\x00" + struct.pack("<I", 8))
    offset = 8
    layout = []
    for strip in strips:  # each IFD, then its strip right after it
        layout.append((offset, offset + ifd_size))
        offset += ifd_size + len(strip) + (len(strip) & 1)
    for index, ((w, h), strip, (at, data_at)) in enumerate(zip(frames, strips, layout)):
        following = layout[index + 1][0] if index + 1 < len(frames) else 0
        entries = [
            (256, 4, w),
            (257, 4, h),
            (258, 3, 1),
            (259, 3, 8),  # Deflate
            (262, 3, 0),
            (273, 4, data_at),
            (277, 3, 1),
            (278, 4, h),
            (279, 4, len(strip)),
        ]
        assert out.tell() == at and len(entries) == tags
        out.write(struct.pack("<H", tags))
        for tag, kind, value in entries:
            out.write(
                struct.pack("<HHI", tag, kind, 1)
                + (struct.pack("<HH", value, 0) if kind == 3 else struct.pack("<I", value))
            )
        out.write(struct.pack("<I", following))
        out.write(strip + b"\x00" * (len(strip) & 1))
    return out.getvalue()


def png_header(width: int, height: int) -> bytes:
    """A PNG that declares `width` x `height` pixels and holds none: what Pillow reads to
    know an image's size."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        + chunk(b"IEND", b"")
    )


def blank_pdf(pages: int, size_pt: float = 72.0) -> bytes:
    """A PDF of `pages` blank square pages of `size_pt` points (no text layer: each is a
    page for OCR), written with pypdf."""
    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=size_pt, height=size_pt)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def many_frame_tiff(frame, frames: int) -> bytes:
    """A TIFF of `frames` copies of the Pillow image `frame`."""
    out = io.BytesIO()
    frame.save(out, format="TIFF", save_all=True, append_images=[frame] * (frames - 1))
    return out.getvalue()


def nested_mail(depth: int) -> bytes:
    """An `.eml` whose message attaches a message that attaches a message ... `depth`
    levels down; the message at level n has the subject "level n" and the plain body
    "body at level n". Built as text: the standard library's own writer recurses per
    level and fails past about 150."""
    inner = f"Subject: level {depth}\r\nFrom: a@example.org\r\n\r\nbody at level {depth}\r\n"
    for level in range(depth - 1, -1, -1):
        b = f"level-{level}-boundary"
        inner = (
            f"Subject: level {level}\r\nFrom: a@example.org\r\nMIME-Version: 1.0\r\n"
            f'Content-Type: multipart/mixed; boundary="{b}"\r\n\r\n'
            f"--{b}\r\nContent-Type: text/plain\r\n\r\nbody at level {level}\r\n"
            f"--{b}\r\nContent-Type: message/rfc822\r\n\r\n{inner}\r\n--{b}--\r\n"
        )
    return inner.encode()
