"""Office Open XML: Word (`.docx`, python-docx), PowerPoint (`.pptx`, python-pptx) and Excel
(`.xlsx`, openpyxl in read-only mode) files as blocks.

Each file is first checked as a container (`containers.open_zip`: encrypted, truncated,
corrupt, decompression bombs), then read by its library; the library's errors on a
malformed file become a skip (`containers.library_errors`).

- Word: the body in reading order. A paragraph styled "Title" is a level-1 heading and
  one styled "Heading N" a level-N heading (N capped at 6); a paragraph with list
  numbering (or a "List ..." style) is a list item; a "Source Code", "HTML Preformatted"
  or "Code" style makes a code block; a table is a table block, its first row taken as
  the header when it has more than one. Word files have no fixed pages: no location.
- PowerPoint: each slide's blocks at `Location(slide=n)`: its title a level-1 heading,
  then its shapes in order (groups entered): text in body placeholders as list items,
  other text as paragraphs, tables as table blocks, then the speaker notes.
- Excel: each worksheet's rows as table blocks with the header row kept
  (`tabular.sheet_blocks`): `Location(sheet=name, rows=(first, last))`. Cached values
  are read (`data_only`), not formulas.
"""

from __future__ import annotations

import io
import re

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

_HEADING_STYLE = re.compile(r"heading\s*(\d+)$", re.IGNORECASE)
_CODE_STYLES = frozenset({"source code", "html preformatted", "code", "verbatim char"})


def read_docx(data: bytes, options: ReadOptions) -> Extracted:
    """A Word file's blocks (see the module)."""
    open_zip(data, options, "docx").close()
    with library_errors("docx"):
        import docx
        import docx.enum.style
        from docx.table import Table

        document = docx.Document(io.BytesIO(data))
        # Style names by id, once: `paragraph.style` looks each up in the styles part.
        styles = {s.style_id: s.name or "" for s in document.styles}
        default = document.styles.default(docx.enum.style.WD_STYLE_TYPE.PARAGRAPH)
        blocks: list[Block] = []
        for item in document.iter_inner_content():
            if isinstance(item, Table):
                blocks += _table(_docx_rows(item), Location())
            else:
                style_id = item._p.style  # the paragraph's style id (None: the default)
                style = (
                    styles.get(style_id, "")
                    if style_id
                    else (default.name if default is not None else "")
                )
                block = _docx_paragraph(item, style or "")
                if block is not None:
                    blocks.append(block)
    return _done(blocks, "docx")


def _docx_paragraph(paragraph, style: str) -> Block | None:
    text = " ".join(paragraph.text.split())
    if not text:
        return None
    lowered = style.lower()
    if lowered == "title":
        return Block(BlockKind.HEADING, text, level=1)
    heading = _HEADING_STYLE.match(style)
    if heading:
        return Block(BlockKind.HEADING, text, level=min(max(int(heading.group(1)), 1), 6))
    if lowered in _CODE_STYLES:
        return Block(BlockKind.CODE, paragraph.text.rstrip())
    p_pr = paragraph._p.pPr  # list numbering has no public API in python-docx
    if lowered.startswith("list") or (p_pr is not None and p_pr.numPr is not None):
        return Block(BlockKind.LIST_ITEM, text)
    return Block(BlockKind.PARAGRAPH, text)


def _docx_rows(table) -> list[list[str]]:
    rows = []
    for row in table.rows:
        cells, last = [], None
        for cell in row.cells:  # a merged cell repeats: keep it once
            if cell._tc is not last:
                cells.append(" ".join(cell.text.split()))
            last = cell._tc
        rows.append(cells)
    return rows


def read_pptx(data: bytes, options: ReadOptions) -> Extracted:
    """A PowerPoint file's blocks, slide by slide (see the module)."""
    open_zip(data, options, "pptx").close()
    with library_errors("pptx"):
        from pptx import Presentation

        deck = Presentation(io.BytesIO(data))
        blocks: list[Block] = []
        for number, slide in enumerate(deck.slides, start=1):
            where = Location(slide=number)
            title = slide.shapes.title
            if title is not None and title.has_text_frame and title.text_frame.text.strip():
                blocks.append(
                    Block(
                        BlockKind.HEADING, " ".join(title.text_frame.text.split()), where, level=1
                    )
                )
            for shape in slide.shapes:
                if title is not None and shape.shape_id == title.shape_id:
                    continue
                blocks += _pptx_shape(shape, where)
            if slide.has_notes_slide:
                notes = slide.notes_slide.notes_text_frame
                if notes is not None:
                    blocks += [Block(BlockKind.PARAGRAPH, t, where) for t in _lines(notes.text)]
    return _done(blocks, "pptx")


def _pptx_shape(shape, where: Location) -> list[Block]:
    from pptx.enum.shapes import MSO_SHAPE_TYPE, PP_PLACEHOLDER

    if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
        return [b for inner in shape.shapes for b in _pptx_shape(inner, where)]
    if getattr(shape, "has_table", False) and shape.has_table:
        rows = [[" ".join(c.text.split()) for c in row.cells] for row in shape.table.rows]
        return _table(rows, where)
    if not shape.has_text_frame:
        return []
    kind = BlockKind.PARAGRAPH
    if shape.is_placeholder and shape.placeholder_format.type in (
        PP_PLACEHOLDER.BODY,
        PP_PLACEHOLDER.OBJECT,
    ):
        kind = BlockKind.LIST_ITEM
    return [Block(kind, t, where) for p in shape.text_frame.paragraphs for t in _lines(p.text)]


def read_xlsx(data: bytes, options: ReadOptions) -> Extracted:
    """An Excel file's worksheets as table blocks (see the module)."""
    open_zip(data, options, "xlsx").close()
    with library_errors("xlsx"):
        import openpyxl

        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        try:
            blocks: list[Block] = []
            for sheet in book.worksheets:
                rows = (
                    (n, [cell_text(v) for v in values])
                    for n, values in enumerate(
                        sheet.iter_rows(min_row=1, values_only=True), start=1
                    )
                )
                blocks += sheet_blocks(rows, sheet=sheet.title)
        finally:
            book.close()
    return _done(blocks, "xlsx")


def _table(rows: list[list[str]], where: Location) -> list[Block]:
    """One table block of `rows` (the first the header when there are more than one)."""
    block = table_block(rows, where)
    return [] if block is None else [block]


def _lines(text: str) -> list[str]:
    """The non-empty lines of a text frame (python-pptx gives a line break as "\\v")."""
    return [" ".join(t.split()) for t in re.split(r"[\n\v]+", text) if t.strip()]


def _done(blocks: list[Block], what: str) -> Extracted:
    if not blocks:
        raise Skipped(Skip.EMPTY, f"{what}: no text")
    return Extracted(tuple(blocks))
