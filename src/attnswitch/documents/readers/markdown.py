"""Markdown: the blocks of a CommonMark document with GitHub's tables, parsed by
markdown-it-py (the maintained Python port of markdown-it).

Headings (ATX `#` and Setext underlines) keep their level; paragraphs, list items (one
block per paragraph of an item, nested items their own blocks), fenced and indented code
(with the fence's language), tables (rows of cells, the header row first) and block
quotes' paragraphs each become a block. Inline markup is dropped: a block's text is what
a reader sees (`**bold**` is "bold", a link its text, an image its alt text, inline code
its code). Raw HTML blocks are kept as their text. Decoding is the text reader's.
"""

from __future__ import annotations

from typing import Any

from attnswitch.documents.readers.blocks import Block, BlockKind, Extracted, ReadOptions
from attnswitch.documents.readers.text import decoded_text


def read_markdown(data: bytes, options: ReadOptions) -> Extracted:
    """A Markdown file as blocks (see the module doc)."""
    text, encoding, detected = decoded_text(data)
    return Extracted(tuple(markdown_blocks(text)), encoding, detected)


def markdown_blocks(text: str) -> list[Block]:
    """The blocks of Markdown `text`, in reading order."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    blocks: list[Block] = []
    in_item = 0
    rows: list[tuple[str, ...]] = []
    row: list[str] = []
    header = False
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        kind = tok.type
        if kind == "list_item_open":
            in_item += 1
        elif kind == "list_item_close":
            in_item -= 1
        elif kind == "heading_open":
            blocks.append(_block(BlockKind.HEADING, _inline(tokens[i + 1]), level=int(tok.tag[1])))
            i += 2
        elif kind == "paragraph_open":
            where = BlockKind.LIST_ITEM if in_item else BlockKind.PARAGRAPH
            blocks.append(_block(where, _inline(tokens[i + 1])))
            i += 2
        elif kind in ("fence", "code_block"):
            language = tok.info.strip().split()[0] if tok.info.strip() else None
            blocks.append(_block(BlockKind.CODE, tok.content.rstrip("\n"), language=language))
        elif kind == "html_block":
            blocks.append(_block(BlockKind.PARAGRAPH, tok.content))
        elif kind == "table_open":
            rows, header = [], False
        elif kind == "tr_open":
            row = []
        elif kind in ("th_open", "td_open"):
            header = header or kind == "th_open"
            row.append(_inline(tokens[i + 1]))
            i += 2
        elif kind == "tr_close":
            rows.append(tuple(row))
        elif kind == "table_close" and rows:
            blocks.append(
                Block(
                    BlockKind.TABLE,
                    "\n".join("\t".join(r) for r in rows),
                    rows=tuple(rows),
                    header=header,
                )
            )
        i += 1
    return [b for b in blocks if b is not None and b.text.strip()]


def _block(kind: BlockKind, text: str, **extra: Any) -> Block | None:
    text = text.strip("\n") if kind is BlockKind.CODE else text.strip()
    return Block(kind, text, **extra) if text.strip() else None


def _inline(token: Any) -> str:
    """The text a reader sees of an inline token: markup dropped, line breaks kept."""
    out = []
    for child in token.children or ():
        if child.type in ("text", "code_inline", "html_inline"):
            out.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            out.append("\n")
        elif child.type == "image":
            out.append(child.content or "")
    return "".join(out)
