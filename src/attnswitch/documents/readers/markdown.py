"""Markdown: the blocks of a CommonMark document with GitHub's tables, parsed by
markdown-it-py (the maintained Python port of markdown-it).

Headings (ATX `#` and Setext underlines) keep their level; paragraphs, list items (one
block per paragraph of an item, nested items their own blocks), fenced and indented code
(with the fence's language), tables (rows of cells, the header row first) and block
quotes' paragraphs each become a block. Inline markup is dropped: a block's text is what
a reader sees (`**bold**` is "bold", a link its text, an image its alt text, inline code
its code). HTML in Markdown reads as the HTML reader reads a page (`html.html_blocks`,
the whole of it): a raw HTML block gives its text as blocks (`<h1>` a heading, `<table>`
a table) and no tags, an image or a comment nothing; inline HTML's tags are dropped
(`<br>` a line break) and the text between them kept. So a README's centred logo
(`<p align="center"><img src=...></p>`) leaves no `<img ...>` in the text. Decoding is
the text reader's, wherever the file lies (a `README.md.gz` or a mail's `.md`
attachment is read here, chosen by its inner name: `formats.detect`).
"""

from __future__ import annotations

import re
from typing import Any

from attnswitch.documents.readers.blocks import Block, BlockKind, Extracted, ReadOptions
from attnswitch.documents.readers.html import as_blocks, html_blocks
from attnswitch.documents.readers.skip import Skipped
from attnswitch.documents.readers.text import decoded_text

_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")
_SPACED_BREAK = re.compile(r"[ \t]*\n[ \t]*")


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
            blocks += _html(tok.content)
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
    if kind is BlockKind.CODE:
        text = text.strip("\n")
    else:  # no spaces left at a line break ("text <br> more")
        text = _SPACED_BREAK.sub("\n", text).strip()
    return Block(kind, text, **extra) if text.strip() else None


def _html(markup: str) -> list[Block]:
    """The blocks of a raw HTML block: its text as the HTML reader finds it; its text
    with the tags taken out where libxml2 refuses it (nested too deep)."""
    try:
        return as_blocks(html_blocks(markup))
    except Skipped:
        block = _block(BlockKind.PARAGRAPH, " ".join(_TAG.sub(" ", markup).split()))
        return [] if block is None else [block]


def _inline(token: Any) -> str:
    """The text a reader sees of an inline token: markup dropped, line breaks kept."""
    out = []
    for child in token.children or ():
        if child.type in ("text", "code_inline"):
            out.append(child.content)
        elif child.type == "html_inline" and _BREAK.fullmatch(child.content.strip()):
            out.append("\n")
        elif child.type in ("softbreak", "hardbreak"):
            out.append("\n")
        elif child.type == "image":
            out.append(child.content or "")
    return "".join(out)
