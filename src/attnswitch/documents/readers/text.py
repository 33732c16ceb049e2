"""Plain text: bytes to str by a BOM, strict UTF-8, a declared charset or detection, the
check that decoded text is not binary, and `read_text`, the reader of plain text files
(one paragraph block per run of lines between blank lines).

Detection (`decode`) corrects charset-normalizer where it goes wrong on real files:
- Text that is UTF-8 but for a few bytes (a changelog with older entries in Latin-1) is
  UTF-8, the stray bytes read as cp1252: when its valid multi-byte UTF-8 characters are
  at least as many as its invalid bytes (Latin-1 text almost never has a valid UTF-8
  sequence: an accented capital followed by a symbol).
- An East Asian multi-byte codec (Big5, GB18030, Shift_JIS, EUC-KR...) is taken only
  when its text reads like one: at least half of its ideographs, kana or hangul stand
  next to another. A mostly-ASCII Western text with a few Latin-1 letters decodes in Big5
  too, each accented letter and the ASCII letter after it becoming one ideograph between
  Latin letters ("L\u5db2er"); charset-normalizer samples a file in chunks and can miss
  the one chunk that shows it. Such a guess gives way to the best single-byte one.
- Among Western single-byte codecs that fit equally, windows-1252 is preferred.
"""

from __future__ import annotations

import codecs
import contextlib
import re

from attnswitch.documents.readers.blocks import Block, BlockKind, Extracted, ReadOptions
from attnswitch.documents.readers.skip import Skip, Skipped

SNIFF_BYTES = 8192
_CHAOS_MARGIN = 0.05
_BOMS = (  # longest first: the UTF-32 LE BOM starts with the UTF-16 LE one
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
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
    if _mostly_utf8(data):
        return data.decode("utf-8", _CP1252_FALLBACK), "utf-8", True
    from charset_normalizer import from_bytes

    matches = from_bytes(data)
    best = matches.best()
    if best is not None and _east_asian(best.encoding) and not _reads_east_asian(str(best)):
        best = next((m for m in matches if not _east_asian(m.encoding)), None)
    if best is None:
        raise Skipped(Skip.UNDECODABLE, "not UTF-8 and no charset detected")
    # Short Western text fits cp1250, cp1252 and cp1257 about equally well and the
    # detector's pick among them is arbitrary; prefer windows-1252, the legacy default
    # of the web (WHATWG), whenever it is as plausible as the best.
    if any(
        m.chaos <= best.chaos + _CHAOS_MARGIN and "cp1252" in m.could_be_from_charset
        for m in matches
    ):
        with contextlib.suppress(UnicodeDecodeError):
            return data.decode("cp1252"), "cp1252", True
    return str(best), best.encoding, True


def _cp1252_fallback(error: UnicodeDecodeError) -> tuple[str, int]:
    """A codec error handler: the bytes UTF-8 could not decode, read as cp1252 (its five
    unassigned bytes as Latin-1)."""
    bad = error.object[error.start : error.end]
    return "".join(bytes([b]).decode("cp1252", "ignore") or chr(b) for b in bad), error.end


_CP1252_FALLBACK = "attnswitch-cp1252-fallback"
codecs.register_error(_CP1252_FALLBACK, _cp1252_fallback)
# A valid multi-byte UTF-8 character: a lead byte and its continuation bytes.
_UTF8_MULTIBYTE = re.compile(
    rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}"
    rb"|[\xf0-\xf4][\x80-\xbf]{3}"
)
_HIGH_BYTE = re.compile(rb"[\x80-\xff]")


def _mostly_utf8(data: bytes) -> bool:
    """Whether `data` (not valid UTF-8) has at least as many valid multi-byte UTF-8
    characters as other bytes >= 0x80, and at least one."""
    valid = _UTF8_MULTIBYTE.findall(data)
    if not valid:
        return False
    stray = len(_HIGH_BYTE.findall(data)) - sum(len(v) for v in valid)
    return len(valid) >= stray


# Python's multi-byte East Asian codecs, as charset-normalizer names them.
_EAST_ASIAN = frozenset(
    {
        "big5",
        "big5hkscs",
        "cp950",
        "gb2312",
        "gbk",
        "gb18030",
        "hz",
        "cp932",
        "shift_jis",
        "shift_jis_2004",
        "shift_jisx0213",
        "euc_jp",
        "euc_jis_2004",
        "euc_jisx0213",
        "euc_kr",
        "cp949",
        "johab",
    }
)
# Runs of hangul jamo, kana, CJK ideographs and hangul syllables.
_EAST_ASIAN_RUN = re.compile(
    "[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+"
)


def _east_asian(codec: str) -> bool:
    return codec in _EAST_ASIAN


def _reads_east_asian(text: str) -> bool:
    """Whether at least half of the ideographs, kana and hangul of `text` stand next to
    another (East Asian text is runs of them; Latin-1 read as Big5 gives lone ones)."""
    runs = [len(m) for m in _EAST_ASIAN_RUN.findall(text)]
    return sum(runs) > 0 and sum(n for n in runs if n > 1) * 2 >= sum(runs)


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
