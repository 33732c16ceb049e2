"""Ingest: walk a folder and turn each file into text, or into a reason it was skipped.

`scan(root)` lists the files under `root` recursively in a deterministic order (names
sorted by code point, directories descended in that order) without reading them;
`load(entry)` reads one file, hashes its bytes and extracts its text; `ingest(root)` does
both, lazily, one `Document` at a time.

Formats, known by content as well as by name (`readers.formats`):

- `.txt`, `.text`, `.rst`, `.md`, `.markdown`: text, decoded as UTF-8 (a BOM wins), else
  with the charset that charset-normalizer detects;
- `.html`, `.htm`, `.xhtml`: HTML, decoded as above with the page's declared charset tried
  after UTF-8; the page's main content extracted (`readers.html`: trafilatura judges
  which blocks are content, so navigation, headers, footers and sidebars are dropped),
  one paragraph per block element, headings kept;
- `.pdf`, or any file whose bytes start with `%PDF-`: PDF, text extracted page by page
  with pypdf;
- gzip, bzip2 and xz files (known by their magic bytes): read through their
  decompressed stream, at most `max_bytes` of it (more is skipped as too large, so a
  decompression bomb is never inflated), the name without `.gz`, `.bz2` or `.xz` then
  choosing the format of the content;
- any other name (`README.Debian`, `NEWS`, `setup.py`): text when its content is text (no
  NUL bytes, decodes, not mostly control characters), HTML when it opens like a page;
  skipped as binary, saying why, when it is not: a known binary signature, a binary
  media type registered for its extension, or content that is not text.

Hidden files and folders (a name starting
with ".") are not walked unless `include_hidden=True`, so a data folder such as
`.attnswitch/` inside the root is never ingested. Symbolic links never lead out of the
root: a link (to a file or a folder) whose target resolves outside the root, or to a
hidden path inside it, is listed as skipped ("link not followed") and never read; other
links to folders are not followed (their target is walked in its own place); other links
to files are read. `load` resolves the path again just before opening it and opens the
resolved file without following links, so a link swapped in after the scan is refused
too. Special files (pipes, sockets, devices) are never read.

A bad file never raises out of `scan`, `load` or `ingest`: it becomes a `Document` whose
`skip` names one of the `Skip` categories and whose `reason` says what happened.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from attnswitch.pipeline.readers.formats import compression_of, detect, not_text
from attnswitch.pipeline.readers.html import html_text
from attnswitch.pipeline.readers.pdf import pdf_text
from attnswitch.pipeline.readers.skip import Skip
from attnswitch.pipeline.readers.skip import Skipped as _Skipped
from attnswitch.pipeline.readers.text import check_controls, decode

DEFAULT_MAX_BYTES = 20 * 2**20
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceFile:
    """A file found by `scan`, not read yet.

    `source` is the path relative to `root` with "/" separators (the document's identity
    within its root); `path` is absolute. `size` and `mtime_ns` come from `os.stat`
    (following a link); both are -1 when the file could not be stat'ed or was refused,
    and then `error` says why and `skip` is the category (unreadable unless set).
    """

    root: str
    source: str
    path: Path
    size: int
    mtime_ns: int
    error: str | None = None
    skip: Skip | None = None


@dataclass(frozen=True)
class Document:
    """One ingested file: its text, or why it has none.

    `size` and `mtime_ns` are from the stat taken just before reading (the scan's when
    the file was not read); `sha256` is the hex digest of the bytes read, compressed as
    they are on disk (None when they could not be read or were not read: too large).
    `kind` is "text", "markdown", "html" or "pdf" (None when no reader took the file);
    `compression` is "gzip", "bzip2" or "xz" when the file was read through that stream.
    `encoding` is the codec the text was decoded with (None for PDF) and
    `encoding_detected` is True when it came from charset detection rather than UTF-8,
    a BOM or the page's declaration. `text` is None exactly when `skip` is set, and then
    `reason` reads "<category>: <detail>". `pages_failed` counts PDF pages whose text
    could not be extracted while others could.
    """

    root: str
    source: str
    path: Path
    size: int
    mtime_ns: int
    sha256: str | None
    kind: str | None
    text: str | None
    encoding: str | None = None
    encoding_detected: bool = False
    skip: Skip | None = None
    detail: str | None = None
    pages_failed: int = 0
    compression: str | None = None

    @property
    def ok(self) -> bool:
        return self.skip is None

    @property
    def reason(self) -> str | None:
        if self.skip is None:
            return None
        return f"{self.skip.value}: {self.detail}" if self.detail else self.skip.value


def scan(root: str | os.PathLike, *, include_hidden: bool = False) -> list[SourceFile]:
    """Every file under `root`, recursively, in deterministic order.

    A folder that cannot be listed becomes one entry (its relative path, with `error`
    set) so that `load` reports it as unreadable; the walk goes on.
    """
    base = Path(root).resolve()
    if not base.is_dir():
        raise NotADirectoryError(f"root: expected a folder, got {str(root)!r}")
    out: list[SourceFile] = []
    _scan_dir(base, base, include_hidden, out)
    return out


def _scan_dir(base: Path, folder: Path, include_hidden: bool, out: list[SourceFile]) -> None:
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        rel = folder.relative_to(base).as_posix()
        out.append(SourceFile(str(base), rel, folder, -1, -1, f"cannot list folder: {exc}"))
        return
    for entry in entries:
        if not include_hidden and entry.name.startswith("."):
            continue
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if is_dir:
            _scan_dir(base, Path(entry.path), include_hidden, out)
            continue
        path = Path(entry.path)
        rel = path.relative_to(base).as_posix()
        if entry.is_symlink() and (why := _link_refusal(base, path, include_hidden)):
            out.append(SourceFile(str(base), rel, path, -1, -1, why, Skip.LINK))
            continue
        try:
            st = os.stat(path)
        except OSError as exc:
            out.append(SourceFile(str(base), rel, path, -1, -1, f"cannot stat: {exc}"))
            continue
        if stat.S_ISDIR(st.st_mode):
            continue  # a link to a folder: not followed
        out.append(SourceFile(str(base), rel, path, st.st_size, st.st_mtime_ns))


def _link_refusal(base: Path, path: Path, include_hidden: bool) -> str | None:
    """Why the link at `path` must not be followed from the root `base`, or None."""
    target = Path(os.path.realpath(path))
    if not target.is_relative_to(base):
        return "its target is outside the root"
    hidden = [part for part in target.relative_to(base).parts if part.startswith(".")]
    if hidden and not include_hidden:
        return "its target is a hidden path"
    return None


def ingest(root: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES,
           include_hidden: bool = False) -> Iterator[Document]:
    """`load` each file that `scan(root)` finds, in its order."""
    for entry in scan(root, include_hidden=include_hidden):
        yield load(entry, max_bytes=max_bytes)


def load(entry: SourceFile, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Document:
    """Read, hash and extract one file. Never raises for a bad file."""
    fields = dict(root=entry.root, source=entry.source, path=entry.path, size=entry.size,
                  mtime_ns=entry.mtime_ns)
    data: bytes | None = None
    kind: str | None = None
    compression: str | None = None
    try:
        if entry.error is not None:
            raise _Skipped(entry.skip or Skip.UNREADABLE, entry.error)
        data, st = _read(entry.path, max_bytes, Path(entry.root))
        # The stat taken just before reading: if the file changes after it, the stored
        # mtime is older than the file's and the next run reads it again.
        fields.update(size=st.st_size, mtime_ns=st.st_mtime_ns)
        compression = compression_of(data)
        found = detect(entry.path.name, data, max_bytes)
        kind = found.kind
        if kind == "pdf":
            text, pages_failed = pdf_text(found.data)
            encoding, detected = None, False
        else:
            try:
                if kind == "html":
                    text, encoding, detected = html_text(found.data)
                else:
                    text, encoding, detected = decode(found.data)
                    text = text.replace("\r\n", "\n").replace("\r", "\n")
                check_controls(text)
            except _Skipped as s:
                if found.sniffed and s.skip in (Skip.BINARY, Skip.UNDECODABLE):
                    kind = None
                    raise not_text(s, entry.path.suffix.lower()) from None
                raise
            pages_failed = 0
        if not text.strip():
            raise _Skipped(Skip.EMPTY, "no text after extraction")
    except _Skipped as s:
        return Document(**fields, sha256=_digest(data), kind=kind, text=None, skip=s.skip,
                        detail=s.detail, compression=compression)
    except Exception as exc:  # a bad file must never stop the walk
        log.warning("ingest: %s: unexpected %s: %s", entry.source, type(exc).__name__, exc)
        skip = Skip.CORRUPT_PDF if kind == "pdf" else Skip.UNREADABLE
        return Document(**fields, sha256=_digest(data), kind=kind, text=None, skip=skip,
                        detail=f"{type(exc).__name__}: {exc}", compression=compression)
    return Document(**fields, sha256=_digest(data), kind=kind, text=text, encoding=encoding,
                    encoding_detected=detected, pages_failed=pages_failed,
                    compression=compression)


def _digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _read(path: Path, max_bytes: int, root: Path) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file at `path`, which must resolve inside `root`: the
    resolved path is opened without following links, and the file opened must be the one
    stat'ed (a path swapped for a link after the scan is refused, not read)."""
    try:
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(os.path.realpath(root)):
            raise _Skipped(Skip.LINK, "its target is outside the root")
        st = os.stat(real)
        if not stat.S_ISREG(st.st_mode):
            raise _Skipped(Skip.NOT_A_FILE, _mode_name(st.st_mode))
        if st.st_size > max_bytes:
            raise _Skipped(Skip.TOO_LARGE, f"{_mb(st.st_size)} > limit {_mb(max_bytes)}")
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with open(fd, "rb") as fh:
            opened = os.fstat(fh.fileno())
            if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
                raise _Skipped(Skip.UNREADABLE, "the file changed while it was opened")
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise _Skipped(Skip.UNREADABLE, f"{type(exc).__name__}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:  # grew after stat
        raise _Skipped(Skip.TOO_LARGE, f"more than limit {_mb(max_bytes)}")
    if not data:
        raise _Skipped(Skip.EMPTY, "0 bytes")
    return data, st


def _mode_name(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "named pipe"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return f"mode {stat.filemode(mode)}"


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


