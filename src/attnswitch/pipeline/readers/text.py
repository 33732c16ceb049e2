"""Plain text: bytes to str by a BOM, strict UTF-8, a declared charset or detection, the
check that decoded text is not binary, and `read_text`, the reader of plain text files
(one paragraph block per run of lines between blank lines)."""

from __future__ import annotations

import contextlib
import re

from attnswitch.pipeline.readers.blocks import Block, BlockKind, Extracted, ReadOptions
from attnswitch.pipeline.readers.skip import Skip, Skipped

SNIFF_BYTES = 8192
_CHAOS_MARGIN = 0.05
_BOMS = (  # longest first: the UTF-32 LE BOM starts with the UTF-16 LE one
    (b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"),
)


def decode(data: bytes, declared: str | None = None) -> tuple[str, str, bool]:
    """Text, codec, detected?: a BOM, then strict UTF-8, then `declared`, then detection."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec), codec, False
            except UnicodeDecodeError:
                raise Skipped(Skip.UNDECODABLE, f"invalid {codec} after its BOM") from None
    if b"\x00" in data[:SNIFF_BYTES]:
        raise Skipped(Skip.BINARY, f"NUL bytes in the first {SNIFF_BYTES} bytes")
    try:
        return data.decode("utf-8"), "utf-8", False
    except UnicodeDecodeError:
        pass
    if declared:
        try:
            return data.decode(declared), declared, False
        except (UnicodeDecodeError, LookupError):
            pass
    from charset_normalizer import from_bytes

    matches = from_bytes(data)
    best = matches.best()
    if best is None:
        raise Skipped(Skip.UNDECODABLE, "not UTF-8 and no charset detected")
    # Short Western text fits cp1250, cp1252 and cp1257 about equally well and the
    # detector's pick among them is arbitrary; prefer windows-1252, the legacy default
    # of the web (WHATWG), whenever it is as plausible as the best.
    if any(m.chaos <= best.chaos + _CHAOS_MARGIN and "cp1252" in m.could_be_from_charset
           for m in matches):
        with contextlib.suppress(UnicodeDecodeError):
            return data.decode("cp1252"), "cp1252", True
    return str(best), best.encoding, True


_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def check_controls(text: str) -> None:
    """Decodable is not enough: text that is mostly control characters is binary."""
    head = text[:SNIFF_BYTES]
    if head and len(_CONTROLS.findall(head)) > 0.1 * len(head):
        raise Skipped(Skip.BINARY, "mostly control characters")


_BLANK_LINES = re.compile(r"\n[ \t\f\v]*\n\s*")


def decoded_text(data: bytes) -> tuple[str, str, bool]:
    """(text with its line ends made "\\n", codec, detected?) of a text file's bytes,
    refused as binary when mostly control characters."""
    text, encoding, detected = decode(data)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    check_controls(text)
    return text, encoding, detected


def paragraphs(text: str) -> list[str]:
    """The paragraphs of plain text: runs of lines between blank lines, stripped, empty
    ones left out."""
    return [p for p in (part.strip() for part in _BLANK_LINES.split(text)) if p]


def read_text(data: bytes, options: ReadOptions) -> Extracted:
    """A plain text file as paragraph blocks (`paragraphs`)."""
    text, encoding, detected = decoded_text(data)
    blocks = tuple(Block(BlockKind.PARAGRAPH, p) for p in paragraphs(text))
    return Extracted(blocks, encoding, detected)
