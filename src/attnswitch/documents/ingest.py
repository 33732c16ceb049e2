"""Ingest: walk a folder and turn each file into text, or into a reason it was skipped.

`scan(root)` lists the files under `root` recursively in a deterministic order (names
sorted by code point, directories descended in that order) without reading them;
`load(entry)` reads one file, hashes its bytes and extracts its text; `ingest(root)` does
both, lazily, one `Document` at a time.

Formats, known by content as well as by name (`readers.formats`):

- `.txt`, `.text`, `.rst`, `.md`, `.markdown`: text, decoded as UTF-8 (a BOM wins), else
  with the charset that charset-normalizer detects; plain text as one paragraph block per
  run of lines between blank lines, Markdown as its headings, paragraphs, list items,
  tables and code (`readers.markdown`);
- `.html`, `.htm`, `.xhtml`: HTML, decoded as above with the page's declared charset tried
  after UTF-8; the page's main content extracted (`readers.html`: trafilatura judges
  which blocks are content, so navigation, headers, footers and sidebars are dropped),
  one paragraph per block element, headings kept;
- `.pdf`, or any file whose bytes start with `%PDF-`: PDF, text extracted page by page
  with pypdf, each block knowing its page, headings from the outline, pages with no
  text layer recognised by OCR (`readers.ocr`, unless `ocr=False`);
- Word, PowerPoint, Excel, OpenDocument, EPUB, RTF, mail, notebooks, CSV/TSV, source and
  config files, and images (OCR): by extension, or by content where the name does not
  say (`formats.sniff_container`), each read by its reader in `readers.dispatch`
  (docs/formats.md); a mail's attachments are read as files of their own;
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
`.attnswitch/` inside the root is never ingested; a hidden folder is listed once as skipped
(`Skip.HIDDEN_FOLDER`, with the reason), a hidden file not at all. `rules` (`rules.FileRules`) decide the
rest: system folders are listed once as skipped and not walked, and the files and folders
that include/exclude globs or ignore files leave out are not listed at all. The root is pinned once: `scan` resolves
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

import errno
import hashlib
import logging
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from attnswitch.documents import beneath, permissions
from attnswitch.documents.filesystems import pseudo_devices
from attnswitch.documents.readers.blocks import DEFAULT_OCR_MAX_PAGES, Block, ReadOptions
from attnswitch.documents.readers.dispatch import extract, with_attachments
from attnswitch.documents.readers.formats import compression_of, detect, not_text
from attnswitch.documents.readers.skip import Skip
from attnswitch.documents.readers.skip import Skipped as _Skipped
from attnswitch.documents.rules import SYSTEM_FOLDER, FileRules, Walker
from attnswitch.errors import AttnswitchError

DEFAULT_MAX_BYTES = 20 * 2**20
# Folders nested deeper below the root are skipped with the reason (one descriptor is open
# per level while the walk is inside).
MAX_DEPTH = 128
# The most of an ignore file (`.gitignore`, `.ignore`) read.
IGNORE_FILE_MAX = 2**20
log = logging.getLogger(__name__)


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
    the file was not read); `sha256` is the hex digest of the bytes read, compressed as
    they are on disk (None when they could not be read or were not read: too large).
    `kind` is "text", "markdown", "html", "pdf" or a kind of `readers.dispatch` ("docx",
    "eml", "image", ...; None when no reader took the file);
    `compression` is "gzip", "bzip2" or "xz" when the file was read through that stream.
    `encoding` is the codec the text was decoded with (None for PDF) and
    `encoding_detected` is True when it came from charset detection rather than UTF-8,
    a BOM or the page's declaration. `text` is None exactly when `skip` is set, and then
    `reason` reads "<category>: <detail>". `pages_failed` counts PDF pages whose text
    could not be extracted while others could (scanned pages OCR could not read, and
    those past its `ocr_max_pages`, included; an image's frames likewise; for other
    formats, the parts the reader could not read, such as mail attachments); `failed`
    says why, one line per reason (`Extracted.failed`: "page 2: no text layer, and
    Tesseract has no data for the Korean script (Debian: tesseract-ocr-kor)").
    `blocks` are the document's blocks in reading order (`readers.blocks`; empty when
    skipped) and `text` is their texts joined by blank lines. `access` is who may read the
    file, as its folders and the file said just before reading (`permissions.of_file`;
    None when it could not be looked at).
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
    blocks: tuple[Block, ...] = ()
    failed: tuple[str, ...] = ()
    access: permissions.Access | None = None

    @property
    def ok(self) -> bool:
        return self.skip is None

    @property
    def reason(self) -> str | None:
        if self.skip is None:
            return None
        return f"{self.skip.value}: {self.detail}" if self.detail else self.skip.value


def scan(
    root: str | os.PathLike,
    *,
    include_hidden: bool = False,
    max_depth: int = MAX_DEPTH,
    root_id: tuple[int, int] | None = None,
    rules: FileRules | None = None,
) -> list[SourceFile]:
    """Every file under `root` that `rules` (`rules.FileRules`; None: the defaults, every
    file but those in system folders) keep, recursively, in deterministic order.

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
        root_fd = beneath.open_beneath(
            beneath.open_dir("/", None), base.parts[1:], beneath.DIR_FLAGS
        )
    except OSError as exc:
        raise NotADirectoryError(
            f"root: expected a folder, got {_shown_path(root)!r} "
            f"({exc.strerror or type(exc).__name__})"
        ) from None
    try:
        st = os.fstat(root_fd)
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(f"root: expected a folder, got {_shown_path(root)!r}")
        check_root_name(base)
        pseudo = pseudo_devices()
        check_root_filesystem(base, st.st_dev, pseudo)
        pinned = (st.st_dev, st.st_ino)
        if root_id is not None and pinned != tuple(root_id):
            raise NotADirectoryError(
                f"root: expected the folder checked before, got "
                f"another at {_shown_path(base)!r} (it was replaced)"
            )
        return _walk(
            root_fd,
            base,
            pinned,
            include_hidden,
            max_depth,
            pseudo,
            (rules or FileRules()).walker(),
        )
    finally:
        os.close(root_fd)


def folder_id(path: str | os.PathLike) -> tuple[int, int]:
    """The (device, inode) of the folder at the absolute, resolved `path`, opened without
    following any link on the way (`OSError` when there is one, or no folder): what
    `scan(..., root_id=)` pins."""
    fd = beneath.open_beneath(beneath.open_dir("/", None), Path(path).parts[1:], beneath.DIR_FLAGS)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", os.fspath(path))
    return st.st_dev, st.st_ino


class RootNameError(AttnswitchError, NotADirectoryError, ValueError):
    """The root's path is not valid UTF-8: the store could not record it."""


def check_root_filesystem(
    path: str | os.PathLike, device: int | None = None, pseudo: dict[int, str] | None = None
) -> None:
    """Refuse a root on a pseudo filesystem (`filesystems.PSEUDO_TYPES`: /proc, /sys, ...)
    with `NotADirectoryError` naming its type. `device`: the root's `st_dev` (stat'ed when
    None); `pseudo`: the mount table's pseudo devices (read when None)."""
    device = os.stat(path).st_dev if device is None else device
    pseudo = pseudo_devices() if pseudo is None else pseudo
    if device in pseudo:
        raise NotADirectoryError(
            f"root: expected a folder of documents, got {_shown_path(path)!r} on a "
            f"{pseudo[device]} pseudo filesystem (the kernel's files, not documents)"
        )


def check_root_name(path: str | os.PathLike) -> None:
    """Raise `RootNameError` unless the resolved `path` is valid UTF-8 (a store records it
    as text; a file name below it is escaped instead, see `scan`)."""
    shown = _shown_path(path)
    if shown != os.fspath(path):
        raise RootNameError(f"root: expected a folder whose path is valid UTF-8, got {shown!r}")


def shown_name(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 (held as surrogates) escaped."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _shown_path(path: str | os.PathLike) -> str:
    return shown_name(os.fspath(path)) if isinstance(os.fspath(path), str) else repr(path)


def _walk(
    root_fd: int,
    base: Path,
    root_id: tuple[int, int],
    include_hidden: bool,
    max_depth: int,
    pseudo: dict[int, str],
    walker: Walker,
) -> list[SourceFile]:
    """The iterative walk of `scan` below the open folder `root_fd` (not closed here),
    asking `walker` which folders to walk and which files to list."""
    out: list[SourceFile] = []

    def entry(
        parts: tuple[str, ...],
        shown: str,
        *,
        st: os.stat_result | None = None,
        error: str | None = None,
        skip: Skip | None = None,
        target: tuple[str, ...] | None = None,
    ) -> None:
        size, mtime = (st.st_size, st.st_mtime_ns) if st is not None else (-1, -1)
        out.append(
            SourceFile(
                str(base),
                shown,
                base.joinpath(*parts),
                size,
                mtime,
                error,
                skip,
                target or parts,
                root_id,
            )
        )

    first = beneath.listing(root_fd)
    if isinstance(first, str):
        entry((), ".", error=f"cannot list folder: {first}")
        return out
    walker.enter("", _text_reader(root_fd))
    # One frame per open folder: (its descriptor, its names, shown names, the rest to visit).
    stack: list[tuple[int, tuple[str, ...], tuple[str, ...], Iterator[str]]] = [
        (root_fd, (), (), iter(first))
    ]
    try:
        while stack:
            fd, parts, shown_parts, names = stack[-1]
            name = next(names, None)
            if name is None:
                stack.pop()
                walker.leave("/".join(shown_parts))
                if fd != root_fd:
                    os.close(fd)
                continue
            if not include_hidden and name.startswith("."):
                _hidden(fd, parts + (name,), "/".join(shown_parts + (shown_name(name),)), entry)
                continue
            here, shown = parts + (name,), "/".join(shown_parts + (shown_name(name),))
            try:
                child = _visit(
                    fd,
                    root_fd,
                    base,
                    here,
                    shown,
                    len(stack),
                    include_hidden,
                    max_depth,
                    entry,
                    pseudo,
                    walker,
                )
            except Exception as exc:  # a bad entry never stops the walk
                entry(here, shown, error=f"{type(exc).__name__}: {exc}")
                continue
            if child is not None:
                walker.enter(shown, _text_reader(child[0]))
                stack.append((child[0], here, shown_parts + (shown_name(name),), iter(child[1])))
    finally:
        for fd, *_ in stack:
            if fd != root_fd:
                os.close(fd)
    return _unique(out)


def _hidden(fd: int, parts: tuple[str, ...], shown: str, entry: Callable[..., None]) -> None:
    """A hidden name (the last of `parts`, in the folder `fd`) is left out; a hidden folder
    is listed once as skipped, with the reason, so that a user sees what was not walked
    (hidden files are not listed: dotfiles are settings, not documents)."""
    try:
        st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode):
        entry(
            parts,
            shown,
            error='not walked: its name starts with "." (hidden folders '
            "are walked only when asked)",
            skip=Skip.HIDDEN_FOLDER,
        )


def _text_reader(fd: int) -> Callable[[str], str | None]:
    """`read(name)`: the text of the regular file `name` in the folder `fd` (at most
    `IGNORE_FILE_MAX` bytes, opened without following a link), or None."""

    def read(name: str) -> str | None:
        try:
            file_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except OSError:
            return None
        with open(file_fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            return fh.read(IGNORE_FILE_MAX).decode("utf-8", "replace")

    return read


def _visit(
    fd: int,
    root_fd: int,
    base: Path,
    parts: tuple[str, ...],
    shown: str,
    depth: int,
    include_hidden: bool,
    max_depth: int,
    entry: Callable[..., None],
    pseudo: dict[int, str],
    walker: Walker,
) -> tuple[int, list[str]] | None:
    """Record the entry `parts` (the last name in the folder `fd`) if `walker` lists it;
    for a folder to descend into, return its open descriptor and its names. A folder on
    a pseudo filesystem (`pseudo`: device id -> type) is skipped with that reason."""
    name = parts[-1]
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError as exc:
        entry(parts, shown, error=f"cannot stat: {exc.strerror or exc}")
        return None
    if stat.S_ISDIR(st.st_mode):
        why = walker.folder(shown)
        if why == SYSTEM_FOLDER:
            entry(
                parts,
                shown,
                error="not walked (recycle bins, file-system bookkeeping, "
                "dependency and cache folders)",
                skip=Skip.SYSTEM_FOLDER,
            )
            return None
        if why is not None:
            return None
        if depth > max_depth:
            entry(
                parts,
                shown,
                error=f"more than {max_depth} folders below the root",
                skip=Skip.TOO_DEEP,
            )
            return None
        if st.st_dev in pseudo:
            entry(
                parts,
                shown,
                error=f"a {pseudo[st.st_dev]} pseudo filesystem (the "
                "kernel's files, not documents)",
                skip=Skip.NOT_A_FILE,
            )
            return None
        try:
            child = beneath.open_dir(name, fd)
        except OSError as exc:
            entry(parts, shown, error=f"cannot list folder: {exc.strerror or exc}")
            return None
        names = beneath.listing(child)
        if isinstance(names, str):
            os.close(child)
            entry(parts, shown, error=f"cannot list folder: {names}")
            return None
        return child, names
    if not walker.listed(shown):
        return None
    if stat.S_ISLNK(st.st_mode):
        target, why = _link_target(base, parts, include_hidden)
        if why is not None:
            entry(parts, shown, error=why, skip=Skip.LINK)
            return None
        if not target:
            return None  # a link to the root: a folder, not followed
        try:
            st = beneath.lstat_beneath(root_fd, target)
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


def _link_target(
    base: Path, parts: tuple[str, ...], include_hidden: bool
) -> tuple[tuple[str, ...], str | None]:
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
            log.warning(
                "ingest: %s: two files show as this name (one name is not UTF-8); "
                "the second is left out",
                e.source,
            )
            continue
        seen.add(e.source)
        out.append(e)
    return out


def ingest(
    root: str | os.PathLike,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    include_hidden: bool = False,
    ocr: bool = True,
    ocr_max_pages: int = DEFAULT_OCR_MAX_PAGES,
    rules: FileRules | None = None,
    ocr_languages: str | None = None,
) -> Iterator[Document]:
    """`load` each file that `scan(root)` finds, in its order."""
    for entry in scan(root, include_hidden=include_hidden, rules=rules):
        yield load(
            entry,
            max_bytes=max_bytes,
            ocr=ocr,
            ocr_max_pages=ocr_max_pages,
            ocr_languages=ocr_languages,
        )


def load(
    entry: SourceFile,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    ocr: bool = True,
    ocr_max_pages: int = DEFAULT_OCR_MAX_PAGES,
    ocr_languages: str | None = None,
    ocr_workers: int = 0,
) -> Document:
    """Read, hash and extract one file. Never raises for a bad file. `ocr`: recognise
    scanned PDF pages and images (`readers.ocr`), at most `ocr_max_pages` of a file, in
    `ocr_languages` (Tesseract's packs, "eng+deu"; None: the locale's language and
    English; `readers.ocr_languages`), `ocr_workers` pages at once (0: one per CPU)."""
    fields = dict(
        root=entry.root,
        source=entry.source,
        path=entry.path,
        size=entry.size,
        mtime_ns=entry.mtime_ns,
    )
    data: bytes | None = None
    kind: str | None = None
    compression: str | None = None
    try:
        if entry.error is not None:
            raise _Skipped(entry.skip or Skip.UNREADABLE, entry.error)
        data, st = _read(entry, max_bytes)
        # The stat taken just before reading: if the file changes after it, the stored
        # mtime is older than the file's and the next run reads it again.
        fields.update(size=st.st_size, mtime_ns=st.st_mtime_ns)
        fields.update(access=permissions.of_file(entry.path))
        compression = compression_of(data)
        found = detect(entry.path.name, data, max_bytes)
        kind = found.kind
        try:
            extracted = extract(
                kind,
                found.data,
                with_attachments(
                    ReadOptions(
                        max_bytes=max_bytes,
                        ocr=ocr,
                        name=entry.path.name,
                        ocr_max_pages=ocr_max_pages,
                        ocr_languages=ocr_languages,
                        ocr_workers=ocr_workers,
                    )
                ),
            )
        except _Skipped as s:
            if found.sniffed and s.skip in (Skip.BINARY, Skip.UNDECODABLE):
                kind = None
                raise not_text(s, entry.path.suffix.lower()) from None
            raise
        text = extracted.text
        if not text.strip():
            raise _Skipped(Skip.EMPTY, "no text after extraction")
    except _Skipped as s:
        return Document(
            **fields,
            sha256=_digest(data),
            kind=kind,
            text=None,
            skip=s.skip,
            detail=s.detail,
            compression=compression,
        )
    except Exception as exc:  # a bad file must never stop the walk
        log.warning("ingest: %s: unexpected %s: %s", entry.source, type(exc).__name__, exc)
        skip = Skip.CORRUPT_PDF if kind == "pdf" else Skip.UNREADABLE
        return Document(
            **fields,
            sha256=_digest(data),
            kind=kind,
            text=None,
            skip=skip,
            detail=f"{type(exc).__name__}: {exc}",
            compression=compression,
        )
    return Document(
        **fields,
        sha256=_digest(data),
        kind=kind,
        text=text,
        encoding=extracted.encoding,
        encoding_detected=extracted.encoding_detected,
        pages_failed=extracted.failed_count,
        compression=compression,
        blocks=extracted.blocks,
        failed=extracted.failed,
    )


def digest(entry: SourceFile, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[str, int, int] | None:
    """(sha256, size, mtime_ns) of the file `entry` names, read as `load` reads it but not
    extracted: what a run compares with the stored hashes before it pays for extraction.
    None when `load` would skip the file (unreadable, too large, empty, a link...)."""
    if entry.error is not None:
        return None
    try:
        data, st = _read(entry, max_bytes)
    except _Skipped:
        return None
    return hashlib.sha256(data).hexdigest(), st.st_size, st.st_mtime_ns


def _digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def open_indexed(root: str | os.PathLike, source: str) -> int:
    """A read-only descriptor of the regular file that a store records as `source` (its
    "/"-separated names) below `root` (the absolute, resolved path a store records), opened
    the way `load` reads it; the caller closes it.

    Every folder from "/" down to the file, and the file itself, is opened without
    following a link, so a root, folder or file swapped for a link since the scan is never
    followed. A `source` that is itself a link is read as the scan read it: its target, when
    that lies below `root` and is not a hidden path (`_link_target`), opened below the root
    without following links. What is opened is checked to be what was looked at (device
    and inode), so a file renamed over it meanwhile is not returned either.

    Raises `FileNotFoundError` or `NotADirectoryError` when nothing is at that path now,
    and another `OSError` when what is there is not a file `load` would read: a link on the
    way or to outside the root or a hidden path (ELOOP), not a regular file or not a path
    a scan records (EINVAL), replaced while it was opened (ESTALE), unreadable (EACCES).
    """
    base = Path(root)
    parts = tuple(source.split("/"))
    if not base.is_absolute() or any(part in ("", ".", "..") for part in parts):
        raise OSError(errno.EINVAL, "not a path below the root", source)
    root_fd = beneath.open_beneath(beneath.open_dir("/", None), base.parts[1:], beneath.DIR_FLAGS)
    try:
        st = beneath.lstat_beneath(root_fd, parts)
        if stat.S_ISLNK(st.st_mode):
            parts, why = _link_target(base, parts, include_hidden=False)
            if why is not None or not parts:
                raise OSError(
                    errno.ELOOP, f"a link not followed ({why or 'to its folder'})", source
                )
            st = beneath.lstat_beneath(root_fd, parts)
            if stat.S_ISLNK(st.st_mode):
                raise OSError(errno.ELOOP, "a link whose target is a link now", source)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(
                errno.EINVAL, f"not a regular file ({beneath.mode_name(st.st_mode)})", source
            )
        fd = beneath.open_beneath(
            os.dup(root_fd),
            parts,
            os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_BINARY", 0),
        )
    finally:
        os.close(root_fd)
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise OSError(errno.ESTALE, "replaced while it was opened", source)
    return fd


def _read(entry: SourceFile, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file `entry` names, opened below its root without following
    any link (a path swapped for a link after the scan is refused, not read). The root's
    path must still lead to the folder the scan walked (`entry.root_id`): a root swapped
    for a link to another folder is refused too."""
    root = Path(entry.root)
    parts = entry.parts or entry.path.relative_to(root).parts
    try:
        root_fd = beneath.open_beneath(
            beneath.open_dir("/", None), root.parts[1:], beneath.DIR_FLAGS
        )
        try:
            here = os.fstat(root_fd)
            if entry.root_id is not None and (here.st_dev, here.st_ino) != tuple(entry.root_id):
                raise _Skipped(Skip.LINK, "the root folder was replaced after the scan")
            st = beneath.lstat_beneath(root_fd, parts)
            if stat.S_ISLNK(st.st_mode):
                raise _Skipped(Skip.LINK, "it was replaced by a link after the scan")
            if not stat.S_ISREG(st.st_mode):
                raise _Skipped(Skip.NOT_A_FILE, beneath.mode_name(st.st_mode))
            if st.st_size > max_bytes:
                raise _Skipped(Skip.TOO_LARGE, f"{_mb(st.st_size)} > limit {_mb(max_bytes)}")
            fd = beneath.open_beneath(
                os.dup(root_fd), parts, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_BINARY", 0)
            )
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


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"
