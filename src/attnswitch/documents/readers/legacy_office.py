"""Old binary Office files (OLE2 compound files): Word 97-2003 (`.doc`), Excel 97-2003
(`.xls`) and PowerPoint 97-2003 (`.ppt`) as blocks.

- Word: Debian's `antiword` (package antiword) gives the text, one paragraph block per
  run of lines between blank lines; a file antiword refuses (Word 2/6/95, or a layout it
  does not know) is read by `catdoc` (package catdoc) instead.
- Excel: catdoc's `xls2csv` gives each sheet as CSV (sheets apart by a form feed), read
  into table blocks with the header row repeated (`tabular.sheet_blocks`); xls2csv does
  not give sheet names, so sheets are named by their number ("1", "2", ...).
- PowerPoint: the text atoms of each slide's drawing, walked in the `PowerPoint Document`
  stream (olefile), at `Location(slide=n)`, a title placeholder's text as a level-1
  heading. PowerPoint itself keeps placeholder text in the presentation's slide list
  instead, which catdoc's `catppt` reads (without slide numbers); it is used when the
  slides hold no text. catppt alone is not enough: it does not read the drawings, where
  LibreOffice and other writers keep all text.

The programs run as subprocesses on a temporary copy of the file, with at most
`ReadOptions.tool_timeout_s` each (`Skip.TIMED_OUT` past it), through
`readers.helper_process`: none outlives its call, nor the process that made it. A
program that is not installed skips the file as `Skip.NEEDS_TOOL` naming the Debian
package, never silently empty. A password-protected OOXML file (an OLE2 file with an `EncryptedPackage`) is
skipped as encrypted, like under its own name.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Iterator
from types import MappingProxyType

from attnswitch.documents.readers.blocks import Block, BlockKind, Extracted, Location, ReadOptions
from attnswitch.documents.readers.containers import OLE_MAGIC, ole_skip
from attnswitch.documents.readers.helper_process import run
from attnswitch.documents.readers.skip import Skip, Skipped
from attnswitch.documents.readers.tabular import sheet_blocks
from attnswitch.documents.readers.text import paragraphs

# The stream each legacy kind keeps its content in: how an OLE2 file is known by content.
OLE_STREAMS = (
    ("WordDocument", "doc"),
    ("Workbook", "xls"),
    ("Book", "xls"),
    ("PowerPoint Document", "ppt"),
)
_PACKAGES = MappingProxyType(
    {"antiword": "antiword", "catdoc": "catdoc", "xls2csv": "catdoc", "catppt": "catdoc"}
)
_DETAIL_CHARS = 160


def ole_kind(data: bytes) -> str | None:
    """ "doc", "xls" or "ppt" for an OLE2 file holding that kind's stream; None for any
    other OLE2 file (an encrypted OOXML package, an Outlook message...) or a broken one."""
    if not data.startswith(OLE_MAGIC):
        return None
    import olefile

    try:
        with olefile.OleFileIO(io.BytesIO(data)) as ole:
            for stream, kind in OLE_STREAMS:
                if ole.exists(stream):
                    return kind
    except Exception:  # olefile raises OSError and others on a broken file
        return None
    return None


def read_doc(data: bytes, options: ReadOptions) -> Extracted:
    """A Word 97-2003 file's paragraphs (see the module)."""
    _check_ole(data, "doc", "WordDocument")
    try:
        text = run_tool(["antiword", "-w", "0", "-m", "UTF-8.txt"], data, options, "doc")
    except Skipped as refused:
        if refused.skip is Skip.TIMED_OUT:
            raise
        try:
            text = run_tool(["catdoc", "-w", "-d", "utf-8"], data, options, "doc")
        except Skipped as also:  # neither installed: name the first choice
            raise refused if also.skip is Skip.NEEDS_TOOL else also from None
    blocks = tuple(Block(BlockKind.PARAGRAPH, p) for p in paragraphs(text))
    if not blocks:
        raise Skipped(Skip.EMPTY, "doc: no text")
    return Extracted(blocks)


def read_xls(data: bytes, options: ReadOptions) -> Extracted:
    """An Excel 97-2003 file's sheets as table blocks (see the module)."""
    _check_ole(data, "xls", "Workbook", "Book")
    # -q 3: every cell quoted, so a cell's commas and line breaks stay in it; ISO dates.
    text = run_tool(["xls2csv", "-d", "utf-8", "-q", "3", "-f", "%Y-%m-%d"], data, options, "xls")
    blocks: list[Block] = []
    for number, sheet in enumerate(text.split("\f"), start=1):
        reader = csv.reader(io.StringIO(sheet))
        try:
            rows = [(reader.line_num, [" ".join(c.split()) for c in row]) for row in reader]
        except csv.Error as exc:
            raise Skipped(Skip.CORRUPT, f"xls: sheet {number}: {exc}") from None
        blocks.extend(sheet_blocks(rows, sheet=str(number)))
    if not blocks:
        raise Skipped(Skip.EMPTY, "xls: no cells")
    return Extracted(tuple(blocks))


def read_ppt(data: bytes, options: ReadOptions) -> Extracted:
    """A PowerPoint 97-2003 file's slides (see the module)."""
    stream = _check_ole(data, "ppt", "PowerPoint Document")
    blocks = list(slide_blocks(stream))
    if not blocks:
        text = run_tool(["catppt", "-d", "utf-8"], data, options, "ppt")
        blocks = [Block(BlockKind.PARAGRAPH, p) for p in paragraphs(text)]
    if not blocks:
        raise Skipped(Skip.EMPTY, "ppt: no text")
    return Extracted(tuple(blocks))


def run_tool(args: list[str], data: bytes, options: ReadOptions, what: str) -> str:
    """The standard output of program `args` run on a temporary copy of `data`, decoded as
    UTF-8. `Skipped`: NEEDS_TOOL when the program is not installed, TIMED_OUT past
    `options.tool_timeout_s`, TOO_LARGE past `options.max_bytes` of output, CORRUPT when
    it fails (its first line of error output in the detail)."""
    program = args[0]
    if shutil.which(program) is None:
        raise Skipped(
            Skip.NEEDS_TOOL, f"{what}: {program} is not installed (Debian: {_PACKAGES[program]})"
        )
    with tempfile.TemporaryDirectory(prefix="attnswitch-") as folder:
        path = os.path.join(folder, f"file.{what}")
        with open(path, "wb") as fh:
            fh.write(data)
        try:
            done = run([*args, path], timeout_s=options.tool_timeout_s)
        except subprocess.TimeoutExpired:
            raise Skipped(
                Skip.TIMED_OUT, f"{what}: {program} took more than {options.tool_timeout_s:g} s"
            ) from None
    if done.returncode != 0:
        said = " ".join(done.stderr.decode("utf-8", "replace").replace(path, what).split())
        raise Skipped(
            Skip.CORRUPT,
            f"{what}: {program} failed (exit {done.returncode}): "
            f"{said[:_DETAIL_CHARS] or 'no message'}",
        )
    if len(done.stdout) > options.max_bytes:
        raise Skipped(
            Skip.TOO_LARGE, f"{what}: more than {options.max_bytes / 2**20:.1f} MiB of text"
        )
    return done.stdout.decode("utf-8", "replace")


def _check_ole(data: bytes, what: str, *streams: str) -> bytes:
    """The content of the first of `streams` in OLE2 file `data`; `Skipped` when `data`
    is not OLE2, is encrypted OOXML, is broken or has none of them."""
    if not data.startswith(OLE_MAGIC):
        raise Skipped(Skip.CORRUPT, f"{what}: not an OLE2 (old binary Office) file")
    import olefile

    try:
        with olefile.OleFileIO(io.BytesIO(data)) as ole:
            for stream in streams:
                if ole.exists(stream):
                    return ole.openstream(stream).read()
    except Exception as exc:  # olefile raises OSError and others on a broken file
        raise Skipped(
            Skip.CORRUPT, f"{what}: a broken OLE2 file: {type(exc).__name__}: {exc}"[:200]
        ) from None
    skip = ole_skip(data, what)
    if skip.skip is Skip.ENCRYPTED:
        raise skip
    raise Skipped(Skip.CORRUPT, f"{what}: an OLE2 file with no {streams[0]} stream")


# PowerPoint binary records ([MS-PPT] 2.3.1): a header of version/instance (16 bits),
# type (16 bits) and length (32 bits); version 0xF marks a container of records.
_HEADER = struct.Struct("<HHI")
_SLIDE = 0x03EE
_TEXT_HEADER = 0x0F9F
_TEXT_CHARS = 0x0FA0  # UTF-16LE
_TEXT_BYTES = 0x0FA8  # the low bytes of UTF-16 code units: Latin-1
_MAX_DEPTH = 32
_TITLE_TYPES = frozenset({0, 6})  # TextHeaderAtom: Tx_TYPE_TITLE, Tx_TYPE_CENTERTITLE


def slide_blocks(stream: bytes) -> Iterator[Block]:
    """The blocks of the slides (not masters or notes) in a `PowerPoint Document` stream,
    in stream order: each text atom's paragraphs, a title's as a level-1 heading."""
    slide = 0
    text_type: int | None = None
    for kind, in_slide, payload in _records(stream, 0, len(stream), False, 0):
        if kind == _SLIDE:
            slide += 1
        elif not in_slide:
            continue
        elif kind == _TEXT_HEADER and len(payload) >= 4:
            text_type = struct.unpack_from("<I", payload)[0]
        elif kind in (_TEXT_CHARS, _TEXT_BYTES):
            text = payload.decode("utf-16-le" if kind == _TEXT_CHARS else "latin-1", "replace")
            where = Location(slide=slide)
            for part in text.replace("\x0b", "\n").split("\r"):
                line = " ".join(part.split())
                if not line or line == "*":  # "*": a field (slide number, date)
                    continue
                if text_type in _TITLE_TYPES:
                    yield Block(BlockKind.HEADING, line, where, level=1)
                else:
                    yield Block(BlockKind.PARAGRAPH, line, where)
            text_type = None


def _records(
    stream: bytes, start: int, end: int, in_slide: bool, depth: int
) -> Iterator[tuple[int, bool, bytes]]:
    """(type, inside a slide?, payload) of the records between `start` and `end`, depth
    first; a container's payload is empty (its records follow it). A record that claims
    more bytes than its container holds ends the walk there (a truncated stream), and so
    does nesting deeper than PowerPoint writes."""
    if depth > _MAX_DEPTH:
        return
    at = start
    while at + _HEADER.size <= end:
        version_instance, kind, length = _HEADER.unpack_from(stream, at)
        body = at + _HEADER.size
        if body + length > end:
            return
        if version_instance & 0xF == 0xF:
            yield kind, in_slide, b""
            yield from _records(stream, body, body + length, in_slide or kind == _SLIDE, depth + 1)
        else:
            yield kind, in_slide, stream[body : body + length]
        at = body + length
