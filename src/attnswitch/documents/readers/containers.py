"""Checks on a container file before its format's library opens it, and the guard that
turns a library's parse error into a skip.

Office Open XML (`.docx`, `.pptx`, `.xlsx`), OpenDocument and EPUB files are ZIP
archives of XML members. Before a reader hands one to its library, `open_zip` makes sure
that it is one (a password-protected Office file is an OLE2 compound file holding an
`EncryptedPackage` stream instead, found with olefile), that its central directory is
readable (a truncated file has none), that it has at most `max_members` members, and that
its members inflate to at most `max_bytes` together, none of more than 1 MiB expanding
more than `max_ratio` times: a decompression bomb is refused after at most `max_bytes`
of output, whatever sizes its headers declare, because the members are inflated here as
streams with a running count (which also finds corrupt data and bad checksums).
"""

from __future__ import annotations

import contextlib
import io
import zipfile
from collections.abc import Iterator

from attnswitch.documents.readers.blocks import ReadOptions
from attnswitch.documents.readers.skip import Skip, Skipped

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
ZIP_MAGIC = b"PK\x03\x04"
_RATIO_FLOOR = 2**20  # members smaller than this are not judged by their ratio
_PIECE = 2**20
_DETAIL_CHARS = 200


def open_zip(data: bytes, options: ReadOptions, what: str) -> zipfile.ZipFile:
    """The ZIP archive `data` (a file of format `what`, such as "docx"), checked as the
    module says; `Skipped` (encrypted, corrupt or too large) when it fails a check."""
    if data.startswith(OLE_MAGIC):
        raise ole_skip(data, what)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise Skipped(
            Skip.CORRUPT, f"{what}: not a readable ZIP container (truncated?): {_line(exc)}"
        ) from None
    if len(infos) > options.max_members:
        raise Skipped(
            Skip.TOO_LARGE,
            f"{what}: {len(infos)} members, more than the limit {options.max_members}",
        )
    budget = options.max_bytes
    for info in infos:
        if info.flag_bits & 0x1:
            raise Skipped(Skip.ENCRYPTED, f"{what}: member {info.filename} is encrypted")
        size = _inflated_size(archive, info, budget, what)
        if size is None:
            raise Skipped(
                Skip.TOO_LARGE,
                f"{what}: members expand to more than the limit {_mib(options.max_bytes)}",
            )
        if size > _RATIO_FLOOR and size > options.max_ratio * max(info.compress_size, 1):
            raise Skipped(
                Skip.TOO_LARGE,
                f"{what}: member {info.filename} expands "
                f"{size / max(info.compress_size, 1):.0f} times, "
                f"more than the limit {options.max_ratio:g}",
            )
        budget -= size
    return archive


def _inflated_size(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: int, what: str
) -> int | None:
    """The bytes member `info` inflates to, read as a stream; None past `budget` (the
    rest is not inflated)."""
    size = 0
    try:
        with archive.open(info) as stream:
            while piece := stream.read(_PIECE):
                size += len(piece)
                if size > budget:
                    return None
    except Exception as exc:  # BadZipFile (bad CRC), zlib.error, EOFError: corrupt data
        raise Skipped(Skip.CORRUPT, f"{what}: member {info.filename}: {_line(exc)}") from None
    return size


def ole_skip(data: bytes, what: str) -> Skipped:
    """Why an OLE2 compound file given as `what` is skipped: a password-protected Office
    file (its `EncryptedPackage` stream), or another OLE2 file (old binary Office files
    are known by content and read by `legacy_office` before a reader gets here)."""
    import olefile

    try:
        with olefile.OleFileIO(io.BytesIO(data)) as ole:
            encrypted = ole.exists("EncryptedPackage")
    except Exception as exc:  # olefile raises OSError and others on a broken file
        return Skipped(Skip.CORRUPT, f"{what}: a broken OLE2 file: {_line(exc)}")
    if encrypted:
        return Skipped(Skip.ENCRYPTED, f"{what}: password-protected (an encrypted Office file)")
    return Skipped(Skip.BINARY, f"{what}: an OLE2 compound file, not {what}")


@contextlib.contextmanager
def library_errors(what: str) -> Iterator[None]:
    """Inside: any error of a format's library becomes `Skipped(CORRUPT, ...)` naming it.

    The libraries (lxml, python-docx, openpyxl, odfpy, ebooklib, nbformat...) share no
    base class for "this file is malformed"; any exception they raise on input that
    passed `open_zip` means the file is not what its format says, so all are caught."""
    try:
        yield
    except Skipped:
        raise
    except MemoryError:
        raise Skipped(Skip.TOO_LARGE, f"{what}: out of memory while reading") from None
    except Exception as exc:
        raise Skipped(Skip.CORRUPT, f"{what}: {_line(exc)}") from None


def _line(exc: BaseException) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"
