"""Ingest: walk a folder and turn each file into text, or into a reason it was skipped.

`scan(root)` lists the files under `root` recursively in a deterministic order (names
sorted by code point, directories descended in that order) without reading them;
`load(entry)` reads one file, hashes its bytes and extracts its text; `ingest(root)` does
both, lazily, one `Document` at a time.

Formats, chosen by extension and checked against content:

- `.txt`, `.text`, `.rst`, `.md`, `.markdown`, and files with no extension: text, decoded
  as UTF-8 (a BOM wins), else with the charset that charset-normalizer detects;
- `.html`, `.htm`, `.xhtml`: HTML, decoded as above with the page's declared charset tried
  after UTF-8; text extracted with Beautiful Soup (stdlib `html.parser`), one paragraph
  per block element, scripts and styles dropped, runs of whitespace collapsed to one
  space except the line breaks of `<pre>` and `<br>`;
- `.pdf`: PDF, text extracted page by page with pypdf.

A file of any of these extensions whose bytes start with `%PDF-` is read as a PDF; text
that is mostly control characters is binary. Hidden files and folders (a name starting
with ".") are not walked unless `include_hidden=True`, so a data folder such as
`.attnswitch/` inside the root is never ingested. The root is pinned once: `scan` resolves
it, opens it without following any link on its path, and walks below it iteratively, each
folder opened relative to its parent's descriptor without following links; `load` opens a
file the same way, below the root's path, after checking that this path still leads to the
folder scanned (its device and inode). So a folder or file swapped for a link during the
run, or the root itself swapped for a link to another folder, is never followed. Symbolic
links never lead out of the root: a link (to a file or a folder) whose target resolves
outside the root, or to a hidden path inside it, is listed as skipped ("link not
followed") and never read; other links to folders are not followed (their target is
walked in its own place); other links to files are read (their target, opened below the
root). Folders more than `MAX_DEPTH` levels below the root are skipped with the reason.
Special files (pipes, sockets, devices) are never read. A name that is not valid UTF-8
is shown escaped (`caf\\xe9.txt`) and read by its real name.

A bad file or folder never raises out of `scan`, `load` or `ingest` (only an unusable
root does): it becomes a `Document` whose `skip` names one of the `Skip` categories and
whose `reason` says what happened.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import hashlib
import io
import logging
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAX_BYTES = 20 * 2**20
# Folders nested deeper below the root are skipped with the reason (one descriptor is open
# per level while the walk is inside).
MAX_DEPTH = 128
TEXT_EXTENSIONS = {".txt": "text", ".text": "text", ".rst": "text", "": "text",
                   ".md": "markdown", ".markdown": "markdown"}
HTML_EXTENSIONS = {".html": "html", ".htm": "html", ".xhtml": "html"}
PDF_EXTENSIONS = {".pdf": "pdf"}
KINDS = {**TEXT_EXTENSIONS, **HTML_EXTENSIONS, **PDF_EXTENSIONS}

_SNIFF_BYTES = 8192
_CHAOS_MARGIN = 0.05
_PDF_MAGIC = b"%PDF-"
_BOMS = (  # longest first: the UTF-32 LE BOM starts with the UTF-16 LE one
    (b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"),
)
log = logging.getLogger(__name__)


class Skip(str, enum.Enum):
    """Why a file gave no text. The value is the category shown in summaries."""

    UNREADABLE = "unreadable"
    NOT_A_FILE = "not a regular file"
    UNSUPPORTED = "unsupported extension"
    TOO_LARGE = "too large"
    EMPTY = "empty"
    BINARY = "binary"
    UNDECODABLE = "undecodable text"
    CORRUPT_PDF = "corrupt PDF"
    LINK = "link not followed"
    ENCRYPTED_PDF = "encrypted PDF"
    TOO_DEEP = "folder too deep"
    ENCODE_FAILED = "encode failed"  # set by the pipeline run, never by ingest


@dataclass(frozen=True)
class SourceFile:
    """A file found by `scan`, not read yet.

    `source` is the path relative to `root` with "/" separators (the document's identity
    within its root); `path` is absolute. `size` and `mtime_ns` come from `os.stat`
    (following a link); both are -1 when the file could not be stat'ed or was refused,
    and then `error` says why and `skip` is the category (unreadable unless set).
    `parts` are the real names `load` opens below the root (a link's: its target's; None:
    those of `path`), `root_id` the root's (device, inode) when it was scanned (None: not
    checked).
    """

    root: str
    source: str
    path: Path
    size: int
    mtime_ns: int
    error: str | None = None
    skip: Skip | None = None
    parts: tuple[str, ...] | None = None
    root_id: tuple[int, int] | None = None


@dataclass(frozen=True)
class Document:
    """One ingested file: its text, or why it has none.

    `size` and `mtime_ns` are from the stat taken just before reading (the scan's when
    the file was not read); `sha256` is the hex digest of the bytes read (None when they
    could not be read or were not read: unsupported, too large). `kind` is "text", "markdown", "html" or "pdf".
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

    @property
    def ok(self) -> bool:
        return self.skip is None

    @property
    def reason(self) -> str | None:
        if self.skip is None:
            return None
        return f"{self.skip.value}: {self.detail}" if self.detail else self.skip.value


class _Skipped(Exception):
    def __init__(self, skip: Skip, detail: str):
        super().__init__(detail)
        self.skip = skip
        self.detail = detail


def scan(root: str | os.PathLike, *, include_hidden: bool = False,
         max_depth: int = MAX_DEPTH, root_id: tuple[int, int] | None = None) -> list[SourceFile]:
    """Every file under `root`, recursively, in deterministic order.

    The walk is iterative and never follows a link to a folder: `root` is resolved once,
    opened without following any link on its way, and every folder below it is opened
    relative to its parent's descriptor, also without following links, so a folder
    swapped for a link while the walk runs is not entered. Each entry carries the
    device and inode of the root (`root_id`), and `load` refuses to read when the root's
    path no longer leads to that folder. Given `root_id`, the root must be that folder
    (a caller that checked the path earlier pins what it checked).

    A folder that cannot be listed, and one more than `max_depth` folders below the root,
    becomes one entry (its relative path, with `error` and `skip` set) so that `load`
    reports it as skipped; the walk goes on. A name that is not valid UTF-8 is shown with
    its undecodable bytes escaped (`caf\\xe9.txt`) and read by its real name.
    Raises `NotADirectoryError` (a `ValueError` too when the root's own path is not valid
    UTF-8) only for the root itself.
    """
    try:
        base = Path(os.path.realpath(root))
        root_fd = _open_beneath(_open_dir("/", None), base.parts[1:], _DIR_FLAGS)
    except OSError as exc:
        raise NotADirectoryError(f"root: expected a folder, got {_shown_path(root)!r} "
                                 f"({exc.strerror or type(exc).__name__})") from None
    try:
        st = os.fstat(root_fd)
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(f"root: expected a folder, got {_shown_path(root)!r}")
        check_root_name(base)
        pinned = (st.st_dev, st.st_ino)
        if root_id is not None and pinned != tuple(root_id):
            raise NotADirectoryError(f"root: expected the folder checked before, got "
                                     f"another at {_shown_path(base)!r} (it was replaced)")
        return _walk(root_fd, base, pinned, include_hidden, max_depth)
    finally:
        os.close(root_fd)


def folder_id(path: str | os.PathLike) -> tuple[int, int]:
    """The (device, inode) of the folder at the absolute, resolved `path`, opened without
    following any link on the way (`OSError` when there is one, or no folder): what
    `scan(..., root_id=)` pins."""
    fd = _open_beneath(_open_dir("/", None), Path(path).parts[1:], _DIR_FLAGS)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", os.fspath(path))
    return st.st_dev, st.st_ino


class RootNameError(NotADirectoryError, ValueError):
    """The root's path is not valid UTF-8: the store could not record it."""


def check_root_name(path: str | os.PathLike) -> None:
    """Raise `RootNameError` unless the resolved `path` is valid UTF-8 (a store records it
    as text; a file name below it is escaped instead, see `scan`)."""
    shown = _shown_path(path)
    if shown != os.fspath(path):
        raise RootNameError(f"root: expected a folder whose path is valid UTF-8, got {shown!r}")


_DIR_FLAGS = (getattr(os, "O_PATH", 0) or os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW
_LIST_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def _open_dir(path: str, dir_fd: int | None, flags: int = _DIR_FLAGS) -> int:
    return os.open(path, flags, dir_fd=dir_fd)


def _open_beneath(dir_fd: int, parts: tuple[str, ...], flags: int) -> int:
    """Open `parts` (names) below the folder `dir_fd`, following no link on the way
    (`flags` for the last one, which gets `O_NOFOLLOW` too); `dir_fd` is closed. With no
    parts, `dir_fd` itself is returned. A link on the way raises `OSError` (ELOOP)."""
    fd = dir_fd
    try:
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            try:
                child = os.open(name, (flags if last else _DIR_FLAGS) | os.O_NOFOLLOW,
                                dir_fd=fd)
            except NotADirectoryError:  # O_PATH with O_NOFOLLOW: a link is "not a folder"
                if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise OSError(errno.ELOOP, "a link on the way", name) from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lstat_beneath(root_fd: int, parts: tuple[str, ...]) -> os.stat_result:
    """The stat of `parts` below `root_fd`, following no link (the last one included)."""
    parent = _open_beneath(os.dup(root_fd), parts[:-1], _DIR_FLAGS)
    try:
        return os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
    finally:
        os.close(parent)


def _shown_name(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 (held as surrogates) escaped."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _shown_path(path: str | os.PathLike) -> str:
    return _shown_name(os.fspath(path)) if isinstance(os.fspath(path), str) else repr(path)


def _walk(root_fd: int, base: Path, root_id: tuple[int, int], include_hidden: bool,
          max_depth: int) -> list[SourceFile]:
    """The iterative walk of `scan` below the open folder `root_fd` (not closed here)."""
    out: list[SourceFile] = []

    def entry(parts: tuple[str, ...], shown: str, *, st: os.stat_result | None = None,
              error: str | None = None, skip: Skip | None = None,
              target: tuple[str, ...] | None = None) -> None:
        size, mtime = (st.st_size, st.st_mtime_ns) if st is not None else (-1, -1)
        out.append(SourceFile(str(base), shown, base.joinpath(*parts), size, mtime, error,
                              skip, target or parts, root_id))

    first = _listing(root_fd)
    if isinstance(first, str):
        entry((), ".", error=f"cannot list folder: {first}")
        return out
    # One frame per open folder: (its descriptor, its names, shown names, the rest to visit).
    stack: list[tuple[int, tuple[str, ...], tuple[str, ...], Iterator[str]]] = [
        (root_fd, (), (), iter(first))]
    try:
        while stack:
            fd, parts, shown_parts, names = stack[-1]
            name = next(names, None)
            if name is None:
                stack.pop()
                if fd != root_fd:
                    os.close(fd)
                continue
            if not include_hidden and name.startswith("."):
                continue
            here, shown = parts + (name,), "/".join(shown_parts + (_shown_name(name),))
            try:
                child = _visit(fd, root_fd, base, here, shown, len(stack), include_hidden,
                               max_depth, entry)
            except Exception as exc:  # a bad entry never stops the walk
                entry(here, shown, error=f"{type(exc).__name__}: {exc}")
                continue
            if child is not None:
                stack.append((child[0], here, shown_parts + (_shown_name(name),),
                              iter(child[1])))
    finally:
        for fd, *_ in stack:
            if fd != root_fd:
                os.close(fd)
    return _unique(out)


def _listing(fd: int) -> list[str] | str:
    """The names in the folder `fd`, sorted by code point, or why it cannot be listed."""
    try:
        listed = os.open(".", _LIST_FLAGS, dir_fd=fd)
        try:
            return sorted(os.listdir(listed))
        finally:
            os.close(listed)
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror or exc}"


def _visit(fd: int, root_fd: int, base: Path, parts: tuple[str, ...], shown: str,
           depth: int, include_hidden: bool, max_depth: int,
           entry: Callable[..., None]) -> tuple[int, list[str]] | None:
    """Record the entry `parts` (the last name in the folder `fd`); for a folder to
    descend into, return its open descriptor and its names."""
    name = parts[-1]
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError as exc:
        entry(parts, shown, error=f"cannot stat: {exc.strerror or exc}")
        return None
    if stat.S_ISDIR(st.st_mode):
        if depth > max_depth:
            entry(parts, shown, error=f"more than {max_depth} folders below the root",
                  skip=Skip.TOO_DEEP)
            return None
        try:
            child = _open_dir(name, fd)
        except OSError as exc:
            entry(parts, shown, error=f"cannot list folder: {exc.strerror or exc}")
            return None
        names = _listing(child)
        if isinstance(names, str):
            os.close(child)
            entry(parts, shown, error=f"cannot list folder: {names}")
            return None
        return child, names
    if stat.S_ISLNK(st.st_mode):
        target, why = _link_target(base, parts, include_hidden)
        if why is not None:
            entry(parts, shown, error=why, skip=Skip.LINK)
            return None
        if not target:
            return None  # a link to the root: a folder, not followed
        try:
            st = _lstat_beneath(root_fd, target)
        except OSError as exc:
            entry(parts, shown, error=f"cannot stat: {exc.strerror or exc}")
            return None
        if stat.S_ISDIR(st.st_mode):
            return None  # a link to a folder: not followed (its target is walked in place)
        if stat.S_ISLNK(st.st_mode):
            entry(parts, shown, error="its target changed during the walk", skip=Skip.LINK)
            return None
        entry(parts, shown, st=st, target=target)
        return None
    entry(parts, shown, st=st)
    return None


def _link_target(base: Path, parts: tuple[str, ...],
                 include_hidden: bool) -> tuple[tuple[str, ...], str | None]:
    """Where the link `parts` leads, as names below the root `base`, or why it must not
    be followed. The target is only a name here: it is opened below the pinned root
    without following links, so a path resolved through a swapped link is never read
    outside the root."""
    try:
        target = Path(os.path.realpath(base.joinpath(*parts)))
    except (OSError, RuntimeError) as exc:
        return (), f"its target cannot be resolved ({getattr(exc, 'strerror', None) or exc})"
    if not target.is_relative_to(base):
        return (), "its target is outside the root"
    rel = target.relative_to(base).parts
    if not include_hidden and any(part.startswith(".") for part in rel):
        return (), "its target is a hidden path"
    return rel, None


def _unique(entries: list[SourceFile]) -> list[SourceFile]:
    """Leave out an escaped name equal to another file's real name (both would be one
    document): the real name keeps it, the other is logged."""
    seen: set[str] = set()
    out = []
    for e in entries:
        if e.source in seen:
            log.warning("ingest: %s: two files show as this name (one name is not UTF-8); "
                        "the second is left out", e.source)
            continue
        seen.add(e.source)
        out.append(e)
    return out


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
    try:
        if entry.error is not None:
            raise _Skipped(entry.skip or Skip.UNREADABLE, entry.error)
        suffix = entry.path.suffix.lower()
        if suffix not in KINDS:
            raise _Skipped(Skip.UNSUPPORTED, suffix)
        kind = KINDS[suffix]
        data, st = _read(entry, max_bytes)
        # The stat taken just before reading: if the file changes after it, the stored
        # mtime is older than the file's and the next run reads it again.
        fields.update(size=st.st_size, mtime_ns=st.st_mtime_ns)
        if data.startswith(_PDF_MAGIC):
            kind = "pdf"
        if kind == "pdf":
            text, pages_failed = _pdf_text(data)
            encoding, detected = None, False
        else:
            if kind == "html":
                text, encoding, detected = _html_text(data)
            else:
                text, encoding, detected = _decode(data)
                text = text.replace("\r\n", "\n").replace("\r", "\n")
            _check_controls(text)
            pages_failed = 0
        if not text.strip():
            raise _Skipped(Skip.EMPTY, "no text after extraction")
    except _Skipped as s:
        return Document(**fields, sha256=_digest(data), kind=kind, text=None, skip=s.skip,
                        detail=s.detail)
    except Exception as exc:  # a bad file must never stop the walk
        log.warning("ingest: %s: unexpected %s: %s", entry.source, type(exc).__name__, exc)
        skip = Skip.CORRUPT_PDF if kind == "pdf" else Skip.UNREADABLE
        return Document(**fields, sha256=_digest(data), kind=kind, text=None, skip=skip,
                        detail=f"{type(exc).__name__}: {exc}")
    return Document(**fields, sha256=_digest(data), kind=kind, text=text, encoding=encoding,
                    encoding_detected=detected, pages_failed=pages_failed)


def _digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _read(entry: SourceFile, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file `entry` names, opened below its root without following
    any link (a path swapped for a link after the scan is refused, not read). The root's
    path must still lead to the folder the scan walked (`entry.root_id`): a root swapped
    for a link to another folder is refused too."""
    root = Path(entry.root)
    parts = entry.parts or entry.path.relative_to(root).parts
    try:
        root_fd = _open_beneath(_open_dir("/", None), root.parts[1:], _DIR_FLAGS)
        try:
            here = os.fstat(root_fd)
            if entry.root_id is not None and (here.st_dev, here.st_ino) != tuple(entry.root_id):
                raise _Skipped(Skip.LINK, "the root folder was replaced after the scan")
            st = _lstat_beneath(root_fd, parts)
            if stat.S_ISLNK(st.st_mode):
                raise _Skipped(Skip.LINK, "it was replaced by a link after the scan")
            if not stat.S_ISREG(st.st_mode):
                raise _Skipped(Skip.NOT_A_FILE, _mode_name(st.st_mode))
            if st.st_size > max_bytes:
                raise _Skipped(Skip.TOO_LARGE, f"{_mb(st.st_size)} > limit {_mb(max_bytes)}")
            fd = _open_beneath(os.dup(root_fd), parts, os.O_RDONLY | os.O_NONBLOCK
                               | getattr(os, "O_BINARY", 0))
        finally:
            os.close(root_fd)
        with open(fd, "rb") as fh:
            opened = os.fstat(fh.fileno())
            if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
                raise _Skipped(Skip.UNREADABLE, "the file changed while it was opened")
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _Skipped(Skip.LINK, "a link appeared on its path after the scan") from None
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


def _decode(data: bytes, declared: str | None = None) -> tuple[str, str, bool]:
    """Text, codec, detected?: a BOM, then strict UTF-8, then `declared`, then detection."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec), codec, False
            except UnicodeDecodeError:
                raise _Skipped(Skip.UNDECODABLE, f"invalid {codec} after its BOM") from None
    if b"\x00" in data[:_SNIFF_BYTES]:
        raise _Skipped(Skip.BINARY, f"NUL bytes in the first {_SNIFF_BYTES} bytes")
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
        raise _Skipped(Skip.UNDECODABLE, "not UTF-8 and no charset detected")
    # Short Western text fits cp1250, cp1252 and cp1257 about equally well and the
    # detector's pick among them is arbitrary; prefer windows-1252, the legacy default
    # of the web (WHATWG), whenever it is as plausible as the best.
    if any(m.chaos <= best.chaos + _CHAOS_MARGIN and "cp1252" in m.could_be_from_charset
           for m in matches):
        with contextlib.suppress(UnicodeDecodeError):
            return data.decode("cp1252"), "cp1252", True
    return str(best), best.encoding, True


_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def _check_controls(text: str) -> None:
    """Decodable is not enough: text that is mostly control characters is binary."""
    head = text[:_SNIFF_BYTES]
    if head and len(_CONTROLS.findall(head)) > 0.1 * len(head):
        raise _Skipped(Skip.BINARY, "mostly control characters")


_BLOCK = "\ue000"  # marks a paragraph break through whitespace collapsing
_LINE = "\ue001"  # marks a kept line break (<br>, <pre>)
_BLOCK_TAGS = (
    "address", "article", "aside", "blockquote", "caption", "dd", "details", "div", "dl",
    "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4",
    "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section",
    "summary", "table", "tbody", "thead", "tfoot", "tr", "ul", "title",
)
_CELL_TAGS = ("td", "th")
_DROP_TAGS = ("script", "style", "noscript", "template", "svg", "math", "iframe", "object")


def _html_text(data: bytes) -> tuple[str, str, bool]:
    from bs4 import BeautifulSoup
    from bs4.dammit import EncodingDetector

    declared = EncodingDetector.find_declared_encoding(data[:_SNIFF_BYTES * 4], is_html=True)
    markup, encoding, detected = _decode(data, declared)
    soup = BeautifulSoup(markup.replace(_BLOCK, " ").replace(_LINE, " "), "html.parser")
    for tag in soup.find_all(_DROP_TAGS):
        tag.decompose()
    for tag in soup.find_all("pre"):
        for s in tag.find_all(string=True):
            s.replace_with(s.replace("\n", _LINE))
    for tag in soup.find_all("br"):
        tag.replace_with(_LINE)
    for tag in soup.find_all(_BLOCK_TAGS):
        tag.insert_before(_BLOCK)
        tag.insert_after(_BLOCK)
    for tag in soup.find_all(_CELL_TAGS):
        tag.insert_after(" ")
    text = re.sub(r"\s+", " ", soup.get_text())
    text = re.sub(rf" ?{_LINE} ?", "\n", text)
    text = re.sub(rf"[ \n]*{_BLOCK}[ \n{_BLOCK}]*", "\n\n", text)
    return text.strip(), encoding, detected


def _pdf_text(data: bytes) -> tuple[str, int]:
    """Text of every page joined by blank lines, and how many pages failed."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError, PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                if not reader.decrypt(""):
                    raise _Skipped(Skip.ENCRYPTED_PDF, "needs a password")
            except (PyPdfError, NotImplementedError) as exc:
                raise _Skipped(Skip.ENCRYPTED_PDF, str(exc)) from None
        pages = list(reader.pages)
    except _Skipped:
        raise
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, AttributeError,
            IndexError, AssertionError, RecursionError, OSError) as exc:
        raise _Skipped(Skip.CORRUPT_PDF, f"{type(exc).__name__}: {exc}") from None
    if not pages:
        raise _Skipped(Skip.CORRUPT_PDF, "no pages")
    texts, failed = [], 0
    for page in pages:
        try:
            texts.append(page.extract_text() or "")
        except Exception:  # one broken page should not cost the others
            failed += 1
    if failed == len(pages):
        raise _Skipped(Skip.CORRUPT_PDF, f"text extraction failed on all {failed} pages")
    text = "\n\n".join(t.strip() for t in texts if t.strip())
    if not text:
        raise _Skipped(Skip.EMPTY, f"no extractable text in {len(pages)} pages (scanned?)")
    return text, failed
