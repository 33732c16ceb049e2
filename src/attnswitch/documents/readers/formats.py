"""Format detection: which reader a file's bytes go to, by its name and its content.

- Compressed files (gzip, bzip2, xz: known by their magic bytes, whatever the name) are
  read through their decompressed stream, at most `max_bytes` of it: a file that
  decompresses to more (a decompression bomb) is skipped as too large without being
  inflated further. The name without its `.gz`, `.bz2` or `.xz` suffix then chooses the
  reader of the content, so `README.md.gz` is Markdown and `changelog.Debian.gz` text.
- Content that starts with `%PDF-` is a PDF, whatever the name; so is an OLE2 compound
  file holding a Word, Excel or PowerPoint 97-2003 stream (`.doc`, `.xls`, `.ppt`) that
  kind (`legacy_office.ole_kind`), whatever the name (a `.doc` saved as `report.docx`);
  a `.doc`, `.xls` or `.ppt` that is no OLE2 file is read as what it is (RTF, HTML, a
  renamed `.docx`...) where its content says.
- A known extension picks its reader (`registry.extension_kinds`): text, Markdown, HTML,
  PDF, Office Open
  XML, old binary Office and OpenDocument files, EPUB, RTF, mail (`.eml`, `.mbox`),
  notebooks, CSV/TSV,
  images (read by OCR) and source and config files (`code.LANGUAGES`).
- Any other name whose content says what it is (`sniff_container`): an image by its
  signature (PNG, JPEG, TIFF); a ZIP archive that is a document by its members
  (`word/document.xml`, ... or the `mimetype` of OpenDocument and EPUB); a mail
  message or an mbox mailbox by the mail headers it opens with.
- Any other name (`README.Debian`, `setup.py`, `NEWS`) is sniffed: content with a known
  binary signature (image, archive, executable, database...) is skipped naming it, and
  so is an extension whose registered media type is binary (`.png`, `.so`, `.zip`);
  markup that opens like an HTML page is HTML; anything else is text, and the text
  reader refuses it as binary when it has NUL bytes, does not decode as UTF-8 or a
  detected charset, or is mostly control characters.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import PurePath
from types import MappingProxyType

from attnswitch.documents.readers.containers import OLE_MAGIC
from attnswitch.documents.readers.legacy_office import ole_kind
from attnswitch.documents.readers.registry import extension_kinds
from attnswitch.documents.readers.skip import Skip, Skipped

PDF_MAGIC = b"%PDF-"
# (magic bytes, name, suffixes the name drops): the compressions read through their stream.
COMPRESSIONS = (
    (b"\x1f\x8b", "gzip", (".gz", ".tgz")),
    (b"BZh", "bzip2", (".bz2",)),
    (b"\xfd7zXZ\x00", "xz", (".xz",)),
)
# Signatures of common binary formats, to name what a skipped file is.
_BINARY_SIGNATURES = (
    (b"\x7fELF", "an ELF executable or library"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"PK\x03\x04", "a ZIP archive (or an office document)"),
    (b"PK\x05\x06", "a ZIP archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"(\xb5/\xfd", "zstd-compressed data"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"\x00asm", "a WebAssembly module"),
    (b"\xca\xfe\xba\xbe", "a Java class or Mach-O file"),
    (b"OggS", "an Ogg media file"),
    (b"fLaC", "a FLAC audio file"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"BZh", "bzip2-compressed data"),
    (b"\xfd7zXZ\x00", "xz-compressed data"),
    (b"!<arch>\n", "an ar archive (a .deb?)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an OLE2 file that is no Word, Excel or PowerPoint file"),
)
# Registered media types (Python's built-in table, not the machine's) of extensions that
# hold text although their type is not text/*.
_TEXT_APPLICATION_TYPES = frozenset(
    {
        "application/javascript",
        "application/json",
        "application/xml",
        "application/n-quads",
        "application/n-triples",
        "application/trig",
        "application/x-csh",
        "application/x-sh",
        "application/x-shar",
        "application/x-tcl",
        "application/x-tex",
        "application/x-latex",
        "application/x-texinfo",
        "application/x-troff",
        "application/x-troff-man",
        "application/x-troff-me",
        "application/x-troff-ms",
        "application/x-wais-source",
        "application/vnd.apple.mpegurl",
        "message/rfc822",
    }
)
_SUFFIXES = MappingProxyType({codec: suffixes for _, codec, suffixes in COMPRESSIONS})
_TAR_MAGIC_AT = 257  # "ustar" at this offset marks a tar archive
_HTML_OPENINGS = (b"<!doctype html", b"<html")
_RTF_MAGIC = b"{\\rtf"
LEGACY_KINDS = frozenset({"doc", "xls", "ppt"})
# Images read by OCR, known by their signature whatever the name.
_IMAGE_SIGNATURES = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*")
# ZIP-based documents known by a member (OOXML) or by the `mimetype` member's content
# (OpenDocument, EPUB), for a file whose name does not say (`report`, `scan.zip`).
_OOXML_MEMBERS = (
    ("word/document.xml", "docx"),
    ("ppt/presentation.xml", "pptx"),
    ("xl/workbook.xml", "xlsx"),
)
_ZIP_MIMETYPES = MappingProxyType(
    {
        b"application/epub+zip": "epub",
        b"application/vnd.oasis.opendocument.text": "odt",
        b"application/vnd.oasis.opendocument.presentation": "odp",
        b"application/vnd.oasis.opendocument.spreadsheet": "ods",
    }
)
# A mail message or mailbox without a name that says so: it opens with mail headers.
_MAIL_HEADER = re.compile(
    rb"^(Received|Return-Path|From|To|Subject|Date|Message-ID|"
    rb"MIME-Version|Delivered-To|Content-Type): ",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Format:
    """What a file holds: `kind` (a key of `registry.readers()`), the bytes its reader
    takes (`data`, decompressed when `compression` names the compression) and
    whether the kind came from sniffing the content (`sniffed`) rather than the name."""

    kind: str
    data: bytes
    compression: str | None = None
    sniffed: bool = False


def detect(name: str, data: bytes, max_bytes: int) -> Format:
    """The format of the file called `name` whose bytes are `data`. Raises `Skipped` for a
    binary file, a corrupt or too large compressed stream, or an empty one."""
    compression = compression_of(data)
    if compression is not None:
        data = decompress(data, compression, max_bytes)
        path = PurePath(name)
        if path.suffix.lower() in _SUFFIXES[compression]:
            name = path.stem + (".tar" if path.suffix.lower() == ".tgz" else "")
    if data.startswith(PDF_MAGIC):
        return Format("pdf", data, compression)
    suffix = PurePath(name).suffix.lower()
    kinds = extension_kinds()
    if data.startswith(OLE_MAGIC):
        legacy = ole_kind(data)
        if legacy is not None:
            return Format(legacy, data, compression, sniffed=kinds.get(suffix) != legacy)
    if kinds.get(suffix) in LEGACY_KINDS and not data.startswith(OLE_MAGIC):
        other = _not_legacy(data)
        if other is not None:
            return Format(other, data, compression, sniffed=True)
    if suffix in kinds and suffix:
        return Format(kinds[suffix], data, compression)
    sniffed = sniff_container(data)
    if sniffed is not None:
        return Format(sniffed, data, compression, sniffed=True)
    inside = f" inside {compression}" if compression else ""
    what = binary_signature(data)
    if what is not None:
        raise Skipped(Skip.BINARY, f"{what}{inside} ({_shown(suffix)})")
    media = binary_media_type(suffix)
    if media is not None:
        raise Skipped(Skip.BINARY, f"{suffix} is {media}{inside}, not a text format")
    head = data[:512].lstrip().lower()
    kind = "html" if head.startswith(_HTML_OPENINGS) else "text"
    return Format(kind, data, compression, sniffed=True)


def _not_legacy(data: bytes) -> str | None:
    """What a file named as an old binary Office file (`.doc`, `.xls`, `.ppt`) but with
    no OLE2 content is: RTF, HTML (Word and Excel save both under these names, and web
    applications export HTML tables as `.xls`), or a document known by its content (a
    `.docx` renamed); None for anything else (its reader then says it is no OLE2 file)."""
    head = data[:512].lstrip().lower()
    if head.startswith(_RTF_MAGIC):
        return "rtf"
    if head.startswith(_HTML_OPENINGS):
        return "html"
    return sniff_container(data)


def sniff_container(data: bytes) -> str | None:
    """The kind of a document known by its content alone: an image by its signature, a
    ZIP-based document by its members, a mail message or mailbox by its headers; None
    for anything else."""
    if data.startswith(_IMAGE_SIGNATURES):
        return "image"
    if data.startswith(b"PK\x03\x04"):
        return _zip_kind(data)
    head = data[:2048]
    if (
        head.startswith(b"From ")
        and sum(bool(_MAIL_HEADER.match(line)) for line in head.splitlines()[1:8]) >= 2
    ):
        return "mbox"
    lines = head.splitlines()[:8]
    if (
        lines
        and _MAIL_HEADER.match(lines[0])
        and sum(bool(_MAIL_HEADER.match(line)) for line in lines) >= 3
    ):
        return "eml"
    return None


def _zip_kind(data: bytes) -> str | None:
    """The document kind of a ZIP archive by its member names (read from its central
    directory; nothing is inflated but the few bytes of an OpenDocument or EPUB
    `mimetype` member)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            for member, kind in _OOXML_MEMBERS:
                if member in names:
                    return kind
            if "mimetype" in names and archive.getinfo("mimetype").file_size < 100:
                return _ZIP_MIMETYPES.get(archive.read("mimetype").strip())
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError, NotImplementedError):
        return None  # named as a ZIP archive (or a broken one) by the binary check
    return None


def compression_of(data: bytes) -> str | None:
    """ "gzip", "bzip2" or "xz" when `data` starts with that format's magic bytes."""
    for magic, codec, _ in COMPRESSIONS:
        if data.startswith(magic):
            return codec
    return None


def decompress(data: bytes, codec: str, max_bytes: int) -> bytes:
    """At most `max_bytes` of the decompressed stream of `data`; `Skipped` when there is
    more (the rest is never inflated), when the stream is corrupt or when it is empty."""
    opener = {
        "gzip": lambda f: gzip.GzipFile(fileobj=f, mode="rb"),
        "bzip2": bz2.BZ2File,
        "xz": lzma.LZMAFile,
    }[codec]
    try:
        with opener(io.BytesIO(data)) as stream:
            out = stream.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError) as exc:
        raise Skipped(Skip.CORRUPT_COMPRESSED, f"{codec}: {exc}") from None
    if len(out) > max_bytes:
        raise Skipped(
            Skip.TOO_LARGE,
            f"{codec} stream decompresses to more than the limit {max_bytes / 2**20:.1f} MiB",
        )
    if not out:
        raise Skipped(Skip.EMPTY, f"{codec} stream of 0 bytes")
    return out


def binary_signature(data: bytes) -> str | None:
    """What binary format `data` starts with, among common ones, or None."""
    for magic, what in _BINARY_SIGNATURES:
        if data.startswith(magic):
            return what
    if data[_TAR_MAGIC_AT : _TAR_MAGIC_AT + 5] == b"ustar":
        return "a tar archive"
    return None


def binary_media_type(suffix: str) -> str | None:
    """The registered media type of `suffix` when it is a binary one (images, audio,
    video, fonts, archives, executables, office files...), else None (text, or unknown)."""
    import mimetypes

    media, _ = mimetypes.MimeTypes(filenames=()).guess_type(f"name{suffix}", strict=False)
    if media is None or media.startswith("text/") or media in _TEXT_APPLICATION_TYPES:
        return None
    if media.endswith(("+xml", "+json")):
        return None
    return media


def not_text(skip: Skipped, suffix: str) -> Skipped:
    """The reason a sniffed file (unknown extension) that the text reader refused is
    skipped: binary, saying why its content is not text."""
    return Skipped(Skip.BINARY, f"{_shown(suffix)}, content is not text: {skip.detail}")


def _shown(suffix: str) -> str:
    return f"unknown extension {suffix}" if suffix else "no extension"
