"""The one shape every reader gives: a document as a sequence of blocks, each with its kind
and its place in the file.

A reader turns the bytes of one file into an `Extracted`: its blocks in reading order
(heading, paragraph, list item, table, code), each with a `Location` (page, slide, sheet
and rows, mail part, notebook cell), plus what the reader learnt on the way (the codec,
pages it could not read). Chunking (`documents.chunk`) builds chunks from blocks and keeps
each chunk's heading path and location; nothing downstream knows which format a block
came from.

A reader is a function `(data: bytes, options: ReadOptions) -> Extracted` registered by
kind in `readers.dispatch`; it raises `skip.Skipped` when the file gives no text.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any


class BlockKind(str, enum.Enum):
    """What a block is. The value is what the store and the JSON output say."""

    HEADING = "heading"
    PARAGRAPH = "paragraph"
    LIST_ITEM = "list_item"
    TABLE = "table"
    CODE = "code"


@dataclass(frozen=True, slots=True)
class Location:
    """Where a block (or a chunk: the span of its blocks) lies in its file. Every field is
    optional; numbers are 1-based and ranges inclusive.

    page: PDF page (or e-book/document page where the format has them); `page_end` when a
    chunk spans pages. slide: presentation slide. sheet: spreadsheet sheet name, with
    `rows` the first and last data row. part: mail part ("body", or an attachment's file
    name). cell: notebook cell number.
    """

    page: int | None = None
    page_end: int | None = None
    slide: int | None = None
    sheet: str | None = None
    rows: tuple[int, int] | None = None
    part: str | None = None
    cell: int | None = None

    def __bool__(self) -> bool:
        # The fields by name, not dataclasses.fields(): this runs for every block of every
        # chunk, and fields() was a tenth of chunking plain text under cProfile.
        return (
            self.page is not None
            or self.page_end is not None
            or self.slide is not None
            or self.sheet is not None
            or self.rows is not None
            or self.part is not None
            or self.cell is not None
        )

    def label(self) -> str:
        """How a person reads it: "p. 12", "pp. 3–4", "slide 3", "sheet Q3 rows 2–40",
        "attachment.pdf p. 2", "cell 4"; "" for no location."""
        parts = []
        if self.part is not None:
            parts.append(self.part)
        if self.page is not None:
            end = self.page_end if self.page_end not in (None, self.page) else None
            parts.append(f"pp. {self.page}–{end}" if end else f"p. {self.page}")
        if self.slide is not None:
            parts.append(f"slide {self.slide}")
        if self.sheet is not None:
            parts.append(f"sheet {self.sheet}")
        if self.rows is not None:
            first, last = self.rows
            parts.append(f"row {first}" if first == last else f"rows {first}–{last}")
        if self.cell is not None:
            parts.append(f"cell {self.cell}")
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set (JSON-ready: `rows` as a list)."""
        out = {k: v for k, v in asdict(self).items() if v is not None}
        if "rows" in out:
            out["rows"] = list(out["rows"])
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Location:
        """The inverse of `to_dict`; unknown keys are refused."""
        if not data:
            return cls()
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(
                f"location: expected keys among {sorted(known)}, got {sorted(unknown)}"
            )
        values = dict(data)
        if values.get("rows") is not None:
            values["rows"] = tuple(values["rows"])
        return cls(**values)

    def span(self, other: Location) -> Location:
        """The location of a chunk that runs from this block to `other`: the first block's
        fields, with the page and row ranges widened to reach `other`'s."""
        page_end = other.page_end or other.page
        rows = self.rows
        if self.rows is not None and other.rows is not None and self.sheet == other.sheet:
            rows = (self.rows[0], other.rows[1])
        return Location(
            self.page,
            page_end if page_end != self.page else None,
            self.slide,
            self.sheet,
            rows,
            self.part,
            self.cell,
        )


@dataclass(frozen=True, slots=True)
class Block:
    """One block of a document, in reading order.

    text: the block's text as a person reads it (a table's rows as tab-separated lines, a
    list item without its bullet). level: 1-6 for a heading (1 the title or top level),
    None otherwise. rows: a table's cells, the header row first (None for other kinds);
    `header` says whether the first row is a header. language: a code block's language
    when known ("python").
    """

    kind: BlockKind
    text: str
    location: Location = Location()  # frozen: one empty location shared by all
    level: int | None = None
    rows: tuple[tuple[str, ...], ...] | None = None
    header: bool = False
    language: str | None = None

    def __post_init__(self) -> None:
        if self.kind is BlockKind.HEADING and not (self.level and 1 <= self.level <= 6):
            raise ValueError(f"heading level: expected 1 to 6, got {self.level}")
        if self.kind is not BlockKind.HEADING and self.level is not None:
            raise ValueError(f"level: expected None for a {self.kind.value}, got {self.level}")
        if self.rows is not None and self.kind is not BlockKind.TABLE:
            raise ValueError(f"rows: expected None for a {self.kind.value}, got rows")


def table_block(
    rows: Iterable[Iterable[str]], location: Location = Location(), *, header: bool | None = None
) -> Block | None:
    """The table block of `rows` (each a sequence of cell texts), rows with no text left
    out; its text is the rows as tab-separated lines. `header` None: the first row is the
    header when there is more than one. None when no row has text."""
    table = tuple(tuple(r) for r in rows)
    table = tuple(r for r in table if any(r))
    if not table:
        return None
    return Block(
        BlockKind.TABLE,
        "\n".join("\t".join(r) for r in table),
        location,
        rows=table,
        header=len(table) > 1 if header is None else header,
    )


# Tesseract reads a page in about 2.4 s on one core: 200 pages fit in the read pool's
# default 600 s a file (`jobs.read_pool`), so a long scan gives its first pages
# rather than timing out with none.
DEFAULT_OCR_MAX_PAGES = 200


@dataclass(frozen=True)
class ReadOptions:
    """What a reader may do. max_bytes: the most bytes a file (or any member of a
    container, decompressed) may give. ocr: render and recognise pages and images with
    no text layer. ocr_languages: Tesseract's language packs ("eng+deu", or "eng,deu"; None:
    the system locale's language and English, those installed); ocr_detect: find each
    page's script first (Tesseract's OSD) and read a page in a script the languages do not
    cover with that script's packs (`readers.ocr_languages`). name: the file's name (a
    reader of source code takes its language from it). read_attachment: reads an
    embedded file (mail attachments) by name and bytes, the way the walk reads a file;
    None: attachments are not read.

    Limits on containers (ZIP-based office files and e-books), checked before their
    library opens them (`readers.containers`): max_members, the most members; the members
    together may expand to at most `max_bytes`; max_ratio, the most a member of more than
    1 MiB may expand over its compressed size (a decompression bomb's is in the
    thousands; office XML's is about 10 to 50). max_pixels: the largest image (or rendered
    page) read, width times height. ocr_dpi: the resolution scanned PDF pages are
    rendered at for OCR; ocr_timeout_s: the most Tesseract may take over one page;
    ocr_workers: scanned pages of a PDF recognised at once (0: one per CPU);
    ocr_max_pages: the most pages (scanned PDF pages, image frames) of one file recognised,
    the first ones: the rest are listed as not read in `Extracted.failed`, so that one
    file of thousands of blank pages costs minutes, not hours;
    tool_timeout_s: the most a reading program (antiword, xls2csv...) may take over one
    file."""

    max_bytes: int = 20 * 2**20
    ocr: bool = True
    ocr_languages: str | None = None
    ocr_detect: bool = True
    name: str = ""
    read_attachment: Callable[[str, bytes], Extracted] | None = None
    max_members: int = 10_000
    max_ratio: float = 200.0
    max_pixels: int = 100_000_000
    ocr_dpi: int = 200
    ocr_timeout_s: float = 120.0
    ocr_workers: int = 0
    ocr_max_pages: int = DEFAULT_OCR_MAX_PAGES
    tool_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_members", "max_pixels", "ocr_dpi", "ocr_max_pages"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected >= 1, got {getattr(self, name)}")
        if self.ocr_workers < 0:
            raise ValueError(f"ocr_workers: expected >= 0, got {self.ocr_workers}")
        for name in ("max_ratio", "ocr_timeout_s", "tool_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: expected > 0, got {getattr(self, name)}")
        if self.ocr_languages is not None:
            from attnswitch.documents.readers.ocr_languages import parse_languages

            parse_languages(self.ocr_languages)  # ValueError naming the field


@dataclass(frozen=True)
class Extracted:
    """What a reader got from one file: its blocks in reading order, the codec its text was
    decoded with (None for binary formats) and whether that came from detection, and the
    parts it could not read (`failed`: one line each, such as "page 7: no text layer and
    Tesseract is not installed") while others could. `pages_failed`: how many pages
    the `failed` lines name, where one line names a span of pages ("pages 201–900: ...");
    None: one part a line."""

    blocks: tuple[Block, ...]
    encoding: str | None = None
    encoding_detected: bool = False
    failed: tuple[str, ...] = ()
    pages_failed: int | None = None

    @property
    def failed_count(self) -> int:
        """The pages (or parts) that could not be read: `pages_failed`, else one a line
        of `failed`."""
        return len(self.failed) if self.pages_failed is None else self.pages_failed

    @property
    def text(self) -> str:
        """The document's text: the blocks' texts joined by blank lines."""
        return "\n\n".join(b.text for b in self.blocks)


Reader = Callable[[bytes, ReadOptions], Extracted]
