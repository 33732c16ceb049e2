"""OpenDocument text (`.odt`), presentations (`.odp`) and spreadsheets (`.ods`) as blocks,
read with odfdo (lxml underneath).

Each file is checked as a container first (`containers.open_zip`); a file whose
manifest declares encrypted members (a password-protected document) is skipped as
encrypted.

- Text: headings (`text:h`, level from `text:outline-level`; a paragraph styled
  "Title" is a level-1 heading), paragraphs (a paragraph
  whose style, or a style it inherits from, is "Preformatted Text" or "Source Text" is
  code; consecutive code lines make one code block), list items (nested lists too),
  tables (the first row the header when there are more than one), sections entered.
- Presentations: each page at `Location(slide=n)`: the title frame a level-1 heading,
  outline frames' paragraphs list items, other text paragraphs, tables, speaker notes.
- Spreadsheets: each sheet's rows (trailing empty rows and columns trimmed) as table
  blocks with the header row kept (`tabular.sheet_blocks`); a sheet whose repeated rows
  and columns would expand to more than `max_bytes // 16` cells is too large.
"""

from __future__ import annotations

import io

from attnswitch.documents.readers.blocks import (
    Block,
    BlockKind,
    Extracted,
    Location,
    ReadOptions,
    table_block,
)
from attnswitch.documents.readers.containers import library_errors, open_zip
from attnswitch.documents.readers.skip import Skip, Skipped
from attnswitch.documents.readers.tabular import cell_text, sheet_blocks

_CODE_STYLES = (
    "preformatted text",
    "preformatted_20_text",
    "source text",
    "source_text",
    "source code",
)
_BYTES_PER_CELL = 16
_MANIFEST = "META-INF/manifest.xml"


def read_odt(data: bytes, options: ReadOptions) -> Extracted:
    """An OpenDocument text's blocks (see the module)."""
    document = _open(data, options, "odt")
    with library_errors("odt"):
        styles = _StyleChains(document)
        blocks: list[Block] = []
        for element in document.body.children:
            blocks += _text_blocks(element, styles, Location())
    return _done(_merge_code(blocks), "odt")


def read_odp(data: bytes, options: ReadOptions) -> Extracted:
    """An OpenDocument presentation's blocks, page by page (see the module)."""
    document = _open(data, options, "odp")
    with library_errors("odp"):
        styles = _StyleChains(document)
        blocks: list[Block] = []
        for number, page in enumerate(document.body.get_draw_pages(), start=1):
            where = Location(slide=number)
            for frame in page.children:
                role = frame.get_attribute("presentation:class")
                if frame.tag == "presentation:notes" or role == "notes":
                    blocks += _paragraphs_of(frame, where)
                elif role == "title":
                    text = _plain(frame.get_formatted_text())
                    if text:
                        blocks.append(Block(BlockKind.HEADING, text, where, level=1))
                elif role == "outline":
                    blocks += [
                        Block(BlockKind.LIST_ITEM, b.text, where)
                        for b in _paragraphs_of(frame, where)
                    ]
                else:
                    for element in frame.children:
                        blocks += _text_blocks(element, styles, where)
    return _done(_merge_code(blocks), "odp")


def read_ods(data: bytes, options: ReadOptions) -> Extracted:
    """An OpenDocument spreadsheet's sheets as table blocks (see the module)."""
    document = _open(data, options, "ods")
    max_cells = max(options.max_bytes // _BYTES_PER_CELL, 1)
    with library_errors("ods"):
        blocks: list[Block] = []
        for table in document.body.get_tables():
            table.rstrip(aggressive=True)
            width, height = table.size
            if width * height > max_cells:
                raise Skipped(
                    Skip.TOO_LARGE,
                    f"ods: sheet {table.name} expands to "
                    f"{width * height} cells, more than the limit "
                    f"{max_cells}",
                )
            rows = (
                (n, [cell_text(v) for v in values])
                for n, values in enumerate(table.get_values(), start=1)
            )
            blocks += sheet_blocks(rows, sheet=table.name)
    return _done(blocks, "ods")


def _open(data: bytes, options: ReadOptions, what: str):
    archive = open_zip(data, options, what)
    with archive:
        names = set(archive.namelist())
        if _MANIFEST in names and b"encryption-data" in archive.read(_MANIFEST):
            raise Skipped(
                Skip.ENCRYPTED,
                f"{what}: password-protected (its manifest declares encrypted members)",
            )
    with library_errors(what):
        from odfdo import Document

        return Document(io.BytesIO(data))


class _StyleChains:
    """The names of a paragraph style and of the styles it inherits from, lower-cased
    (all paragraph styles, automatic and common, are listed once: looking each up as it
    is met costs an XPath search of the styles per paragraph)."""

    def __init__(self, document) -> None:
        self.styles: dict[str, tuple[str | None, str | None]] = {}
        for style in document.get_styles("paragraph"):
            if style.name:
                self.styles[style.name] = (
                    style.parent_style,
                    style.get_attribute("style:display-name"),
                )
        self.known: dict[str, tuple[str, ...]] = {}

    def __call__(self, name: str | None) -> tuple[str, ...]:
        if not name:
            return ()
        if name not in self.known:
            chain, current = [name.lower()], name
            for _ in range(8):  # inheritance is shallow; a loop in a broken file ends here
                if current not in self.styles:
                    break
                parent, display = self.styles[current]
                if display:
                    chain.append(str(display).lower())
                if not parent:
                    break
                chain.append(str(parent).lower())
                current = parent
            self.known[name] = tuple(chain)
        return self.known[name]


def _text_blocks(element, styles: _StyleChains, where: Location) -> list[Block]:
    tag = element.tag
    if tag == "text:h":
        text = _plain(element.get_formatted_text())
        level = element.get_attribute("text:outline-level") or 1
        return (
            [Block(BlockKind.HEADING, text, where, level=min(max(int(level), 1), 6))]
            if text
            else []
        )
    if tag == "text:p":
        raw = element.get_formatted_text()
        chain = styles(element.get_attribute("text:style-name"))
        if "title" in chain and _plain(raw):
            return [Block(BlockKind.HEADING, _plain(raw), where, level=1)]
        if any(s in _CODE_STYLES for s in chain):
            code = raw.strip("\n")
            return [Block(BlockKind.CODE, code, where)] if code.strip() else []
        text = _plain(raw)
        return [Block(BlockKind.PARAGRAPH, text, where)] if text else []
    if tag == "text:list":
        out = []
        for item in element.children:
            for child in item.children:
                if child.tag == "text:list":
                    out += _text_blocks(child, styles, where)
                else:
                    out += [
                        Block(BlockKind.LIST_ITEM, b.text, where)
                        if b.kind is BlockKind.PARAGRAPH
                        else b
                        for b in _text_blocks(child, styles, where)
                    ]
        return out
    if tag == "table:table":
        block = table_block(
            ([_plain(c) for c in values] for values in _table_texts(element)), where
        )
        return [] if block is None else [block]
    out = []
    for child in element.children:  # sections, frames, text boxes: their content
        out += _text_blocks(child, styles, where)
    return out


def _table_texts(table) -> list[list[str]]:
    table.rstrip(aggressive=True)
    return [
        [
            cell.get_formatted_text() if cell.children else cell_text(cell.value)
            for cell in row.traverse()
        ]
        for row in table.traverse()
    ]


def _paragraphs_of(frame, where: Location) -> list[Block]:
    out = []
    for paragraph in frame.get_paragraphs():
        text = _plain(paragraph.get_formatted_text())
        if text:
            out.append(Block(BlockKind.PARAGRAPH, text, where))
    return out


def _merge_code(blocks: list[Block]) -> list[Block]:
    """Consecutive code lines (one paragraph each) as one code block."""
    out: list[Block] = []
    for block in blocks:
        if (
            block.kind is BlockKind.CODE
            and out
            and out[-1].kind is BlockKind.CODE
            and out[-1].location == block.location
        ):
            out[-1] = Block(BlockKind.CODE, out[-1].text + "\n" + block.text, block.location)
        else:
            out.append(block)
    return out


def _plain(text: str) -> str:
    return " ".join(text.split())


def _done(blocks: list[Block], what: str) -> Extracted:
    if not blocks:
        raise Skipped(Skip.EMPTY, f"{what}: no text")
    return Extracted(tuple(blocks))
