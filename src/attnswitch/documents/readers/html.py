"""HTML: a page's main content as text, one paragraph per block element, headings kept.

Decoding: a BOM, strict UTF-8, the page's declared charset, then detection
(`text.decode`).

Parsing: lxml (libxml2's HTML parser), once per page; Beautiful Soup's tree did it
before and was more than a third of the profiled time of reading the corpus (2.6 s and 4.7
million calls over its 54 pages under cProfile; lxml: 0.14 s, 0.13 million, the same
blocks on every page). Characters XML does not allow (NUL, most controls) read as spaces;
a page nested deeper than libxml2's 2,048 levels is skipped as too large (libxml2 stops
reading there), never cut silently.

Structure: the page is cut into blocks by its block elements (paragraphs, headings, list
items, table rows, `<pre>`, ...); scripts, styles and other non-text elements are
dropped; runs of whitespace collapse to one space except the line breaks of `<pre>` and
`<br>`. The `<title>` is the first block unless a heading of the page says the same.
Permalink anchors (a link to a place in the page showing only "¶", "#" or a like mark,
as Sphinx, MkDocs and Jupyter put after each heading) are dropped, so headings read as
their own words.

Main content: trafilatura (`favor_recall`, tables kept) judges which text of the page is
its content; navigation, headers, footers and sidebars are what it leaves out. Its own
output drops the headings and lists of pages it finds no article container in (manual
pages such as PostgreSQL's and SQLite's), so it is used as a judge only: a block is kept
when at least half of its words are in trafilatura's text, in order (a word-sequence
alignment: the longest common subsequence of the page's words and trafilatura's, by
rapidfuzz's bit-parallel `Indel` in C++; difflib's `SequenceMatcher` did it before and was
half of the profiled time of reading the corpus), and a heading is kept when it is
itself kept or any block of its section (up to the next heading of its level or higher)
is. When trafilatura finds nothing, or
nothing aligns, the whole page is kept (trafilatura then logs "discarding data" on its
logger, "trafilatura"), and so is a page of more than `MAX_ALIGNED_WORDS` words.
docs/architecture.md has the measurement behind this choice
(benchmarks/html_extraction.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType

from attnswitch.documents.readers.blocks import Block, BlockKind, Extracted, ReadOptions
from attnswitch.documents.readers.skip import Skip, Skipped
from attnswitch.documents.readers.text import SNIFF_BYTES, decode

_BLOCK = "\ue000"  # marks a paragraph break through whitespace collapsing
_LINE = "\ue001"  # marks a kept line break (<br>, <pre>)
_HEADING = "\ue002"  # followed by the level digit: this block is a heading
_KIND = "\ue003"  # followed by a letter: this block is a list item (l), pre (p) or row (r)
_CELL = "\ue004"  # ends a table cell
_HEAD_CELL = "\ue005"  # ends a table header cell
_MARKS = (_BLOCK, _LINE, _HEADING, _KIND, _CELL, _HEAD_CELL)
_KIND_TAGS = MappingProxyType({"li": "l", "pre": "p", "tr": "r"})
_KINDS = MappingProxyType({"l": "li", "p": "pre", "r": "tr"})
_BLOCK_TAGS = (
    "address",
    "article",
    "aside",
    "blockquote",
    "caption",
    "dd",
    "details",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "tbody",
    "thead",
    "tfoot",
    "tr",
    "ul",
    "title",
)
_HEADING_TAGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_CELL_TAGS = ("td", "th")
_DROP_TAGS = ("script", "style", "noscript", "template", "svg", "math", "iframe", "object")
# What a permalink anchor shows: Sphinx's and Jupyter's pilcrow, MkDocs' and VuePress'
# hash sign, a section sign or a link symbol (GitHub's holds an icon, dropped as `<svg>`).
PERMALINK_MARKS = frozenset({"", "¶", "#", "§", "🔗", "⚓", "⚓︎"})
_WORD = re.compile(r"\w+")
# lxml refuses a str that declares its encoding; the text is decoded already.
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
# Characters lxml refuses in text.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_KEEP_SHARE = 0.5  # a block is content when at least this share of its words aligns
# The alignment's work grows with the page's words times the content's (bit-parallel, a
# 64th of that); longer pages are kept whole rather than held up.
MAX_ALIGNED_WORDS = 250_000


@dataclass(frozen=True)
class HtmlBlock:
    """One block of a page: `level` 1-6 for a heading, 0 for the `<title>`, None for any
    other block. `tag`: "li", "pre" or "tr" when the block is (the direct text of) such an
    element, else None; a row's `cells` are its cells' texts and `header` says whether they
    were header cells (`<th>`)."""

    text: str
    level: int | None = None
    tag: str | None = None
    cells: tuple[str, ...] | None = None
    header: bool = False

    @property
    def heading(self) -> bool:
        return self.level is not None


def html_text(data: bytes, *, main_content: bool = True) -> tuple[str, str, bool]:
    """(text, codec, detected?) of an HTML page: its main content's blocks (all of the
    page's blocks with `main_content=False`) joined by blank lines."""
    blocks, encoding, detected = page_blocks(data, main_content=main_content)
    return "\n\n".join(b.text for b in blocks), encoding, detected


def read_html(data: bytes, options: ReadOptions) -> Extracted:
    """An HTML page's main content as blocks: headings with their levels (the `<title>`,
    when kept, as level 1), list items, `<pre>` as code, runs of table rows as one table
    (its header row first when it was made of `<th>` cells), any other block a
    paragraph."""
    found, encoding, detected = page_blocks(data)
    return Extracted(tuple(as_blocks(found)), encoding, detected)


def as_blocks(found: list[HtmlBlock]) -> list[Block]:
    """`HtmlBlock`s as blocks: headings with their levels (the `<title>` as level 1), list
    items, `<pre>` as code, runs of table rows as one table (its header row first when it
    was made of `<th>` cells), any other block a paragraph."""
    blocks: list[Block] = []
    rows: list[HtmlBlock] = []
    for b in [*found, None]:
        if b is not None and b.tag == "tr":
            rows.append(b)
            continue
        if rows:
            cells = tuple(r.cells or (r.text,) for r in rows)
            blocks.append(
                Block(
                    BlockKind.TABLE,
                    "\n".join("\t".join(c) for c in cells),
                    rows=cells,
                    header=rows[0].header,
                )
            )
            rows = []
        if b is None:
            break
        if b.heading:
            blocks.append(Block(BlockKind.HEADING, b.text, level=b.level or 1))
        elif b.tag == "li":
            blocks.append(Block(BlockKind.LIST_ITEM, b.text))
        elif b.tag == "pre":
            blocks.append(Block(BlockKind.CODE, b.text))
        else:
            blocks.append(Block(BlockKind.PARAGRAPH, b.text))
    return blocks


def page_blocks(data: bytes, *, main_content: bool = True) -> tuple[list[HtmlBlock], str, bool]:
    """(blocks, codec, detected?) of an HTML page: its main content's blocks (all of the
    page's blocks with `main_content=False`)."""
    from bs4.dammit import EncodingDetector

    declared = EncodingDetector.find_declared_encoding(data[: SNIFF_BYTES * 4], is_html=True)
    markup, encoding, detected = decode(data, declared)
    blocks = html_blocks(markup)
    if main_content and len(blocks) > 1:  # one block or none: nothing to choose from
        blocks = main_blocks(blocks, _content_text(markup))
    return blocks, encoding, detected


def html_blocks(markup: str) -> list[HtmlBlock]:
    """Every text block of the page, in document order."""
    for mark in _MARKS:
        markup = markup.replace(mark, " ")
    text = _marked_text(markup)
    text = re.sub(r"\s+", " ", text)
    text = re.sub(rf" ?{_LINE} ?", "\n", text)
    blocks = []
    for part in text.split(_BLOCK):
        level = None
        if _HEADING in part:  # the marker of the innermost heading around this block
            at = part.rindex(_HEADING)
            level = int(part[at + 1])
            part = part.replace(part[at : at + 2], "").replace(_HEADING, "")
        tag = None
        if _KIND in part:  # the marker of the innermost kind of element around this block
            at = part.rindex(_KIND)
            tag = _KINDS[part[at + 1]]
            part = part.replace(part[at : at + 2], "").replace(_KIND, "")
        cells, header = None, False
        if tag == "tr" and level is None:
            header = _HEAD_CELL in part
            cells = tuple(c.strip(" \n") for c in re.split(f"[{_CELL}{_HEAD_CELL}]", part))
            cells = cells[:-1] if cells and not cells[-1] else cells
            part = " ".join(cells)
        elif tag == "tr":
            tag = None
        part = part.replace(_CELL, " ").replace(_HEAD_CELL, " ").strip(" \n")
        if part:
            blocks.append(HtmlBlock(part, level, tag, cells, header))
    titles = [b for b in blocks if b.level == 0]
    named = {_phrase(b.text) for b in blocks if b.heading and b.level}
    return [b for b in blocks if b.level != 0 or (b is titles[0] and _phrase(b.text) not in named)]


def _marked_text(markup: str) -> str:
    """The page's text, parsed by lxml (libxml2's HTML parser), with the markers that
    `html_blocks` cuts it at: blocks, kept line breaks, headings, kinds and cells.
    Scripts, styles and the other `_DROP_TAGS`, comments and processing instructions
    give no text."""
    from lxml import etree
    from lxml import html as lxml_html

    markup = _NOT_XML.sub(" ", _XML_DECLARATION.sub("", markup, count=1))
    parser = _parser()
    try:
        root = lxml_html.document_fromstring(markup, parser=parser)
    except etree.ParserError:  # "Document is empty": no element, comments at most
        return ""
    for error in parser.error_log:
        if error.type_name == "ERR_RESOURCE_LIMIT":  # the rest of the page is not read
            raise Skipped(
                Skip.TOO_LARGE, f"html: more than libxml2 reads ({error.message.split(',')[0]})"
            )
    etree.strip_elements(
        root, etree.Comment, etree.ProcessingInstruction, *_DROP_TAGS, with_tail=False
    )
    for anchor in [a for a in root.iter("a") if _permalink(a)]:
        anchor.drop_tree()  # its tail (the text after it) stays
    for pre in root.iter("pre"):
        for el in pre.iter():
            if el.text:
                el.text = el.text.replace("\n", _LINE)
            if el is not pre and el.tail:
                el.tail = el.tail.replace("\n", _LINE)
    for el in root.iter("br"):
        el.tail = _LINE + (el.tail or "")
    for el in root.iter(*_HEADING_TAGS):
        el.text = f"{_HEADING}{el.tag[1]}" + (el.text or "")
    for el in root.iter("title"):
        el.text = f"{_HEADING}0" + (el.text or "")
    for el in root.iter(*_KIND_TAGS):
        el.text = f"{_KIND}{_KIND_TAGS[el.tag]}" + (el.text or "")
    for el in root.iter(*_BLOCK_TAGS):
        el.text = _BLOCK + (el.text or "")
        el.tail = _BLOCK + (el.tail or "")
    for el in root.iter(*_CELL_TAGS):
        el.tail = (_HEAD_CELL if el.tag == "th" else _CELL) + (el.tail or "")
    return "".join(root.itertext())


def _permalink(anchor) -> bool:
    """Whether `<a>` element `anchor` is a heading's (or definition's) permalink: a link to
    a place in its page (`href="#..."`) that shows only a mark (`PERMALINK_MARKS`), such
    as Sphinx's `<a class="headerlink" href="#id">¶</a>`, which would otherwise end the
    heading's text and every heading path under it."""
    href = anchor.get("href") or ""
    if "#" not in href or href.split("#", 1)[0].strip():
        return False
    return "".join(anchor.itertext()).strip() in PERMALINK_MARKS


def _parser():
    """A new libxml2 HTML parser (one per page: parsers are not shared between threads)
    with its higher limits (`huge_tree`): 2,048 levels of elements, not 256."""
    from lxml import html as lxml_html

    return lxml_html.HTMLParser(huge_tree=True)


def main_blocks(
    blocks: list[HtmlBlock], content: str | None, *, max_words: int = MAX_ALIGNED_WORDS
) -> list[HtmlBlock]:
    """The blocks that the extracted main-content text `content` covers, with the headings
    of their sections; all of `blocks` when `content` is empty or covers none, or when the
    blocks have more than `max_words` words."""
    if not content or not content.strip():
        return blocks
    words, owner = [], []
    for i, b in enumerate(blocks):
        found = _words(b.text)
        words += found
        owner += [i] * len(found)
    if len(words) > max_words:
        return blocks
    from rapidfuzz.distance import Indel

    matched = [0] * len(blocks)
    for m in Indel.opcodes(words, _words(content)).as_matching_blocks():
        for j in range(m.a, m.a + m.size):
            matched[owner[j]] += 1
    kept = [bool(n) and n >= _KEEP_SHARE * len(_words(b.text)) for b, n in zip(blocks, matched)]
    if not any(kept):
        return blocks
    for i, b in enumerate(blocks):
        if b.heading and not kept[i]:
            for j in range(i + 1, len(blocks)):
                if blocks[j].heading and 0 < (blocks[j].level or 0) <= (b.level or 0):
                    break
                if kept[j] and not blocks[j].heading:
                    kept[i] = True
                    break
    return [b for b, keep in zip(blocks, kept) if keep]


def _content_text(markup: str) -> str | None:
    """trafilatura's main-content text of the page, or None where it finds none."""
    import trafilatura

    return trafilatura.extract(
        markup,
        output_format="txt",
        favor_recall=True,
        include_tables=True,
        include_comments=False,
        include_formatting=False,
        deduplicate=False,
    )


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _phrase(text: str) -> str:
    return " ".join(_words(text))
