"""Markup inside other formats as blocks: the XHTML chapters of an e-book, the HTML body
of a mail, the Markdown cells of a notebook. All go through the HTML reader's block
cutter (`readers.html.html_blocks`), so headings come out the same as from a web page;
the whole markup is kept (no main-content judging: a chapter or a mail body is content).
Markdown is rendered to HTML first with markdown-it-py (CommonMark with tables)."""

from __future__ import annotations

import dataclasses

from attnswitch.documents.readers.blocks import Block, BlockKind, Location, table_block


def html_to_blocks(markup: str, location: Location = Location()) -> list[Block]:
    """The blocks of an HTML or XHTML document, each at `location`: headings with their
    level (a `<title>` the page keeps is a level-1 heading); where the HTML reader marks
    them (`HtmlBlock.tag`), list items, `<pre>` as code and runs of table rows as one
    table; any other block a paragraph."""
    from attnswitch.documents.readers.html import html_blocks

    out: list[Block] = []
    rows: list = []
    for found in [*html_blocks(markup), None]:
        tag = getattr(found, "tag", None)
        if tag == "tr":
            rows.append(found)
            continue
        if rows:
            table = table_block(
                (getattr(r, "cells", None) or (r.text,) for r in rows),
                location,
                header=bool(getattr(rows[0], "header", 0)),
            )
            if table is not None:
                out.append(table)
            rows = []
        if found is None:
            break
        if isinstance(found, Block):
            out.append(dataclasses.replace(found, location=location))
        elif found.level is not None:
            out.append(
                Block(BlockKind.HEADING, found.text, location, level=min(max(found.level, 1), 6))
            )
        else:
            kind = {"li": BlockKind.LIST_ITEM, "pre": BlockKind.CODE}.get(tag, BlockKind.PARAGRAPH)
            out.append(Block(kind, found.text, location))
    return out


def markdown_to_blocks(source: str, location: Location = Location()) -> list[Block]:
    """The blocks of a Markdown text (CommonMark with tables), each at `location`."""
    from markdown_it import MarkdownIt

    return html_to_blocks(MarkdownIt("commonmark").enable("table").render(source), location)
