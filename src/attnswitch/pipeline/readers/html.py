"""HTML: the page's text, decoded with its declared charset as a fallback, one paragraph per
block element, scripts and styles dropped."""

from __future__ import annotations

import re

from attnswitch.pipeline.readers.text import SNIFF_BYTES, decode

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


def html_text(data: bytes) -> tuple[str, str, bool]:
    from bs4 import BeautifulSoup
    from bs4.dammit import EncodingDetector

    declared = EncodingDetector.find_declared_encoding(data[:SNIFF_BYTES * 4], is_html=True)
    markup, encoding, detected = decode(data, declared)
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
