"""HTML main-content extraction on the shipped corpus's real pages: the site chrome
(navigation, header, footer) is dropped, the content and its headings are kept."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from attnswitch.documents.readers.html import HtmlBlock, html_text, main_blocks

CORPUS = Path(__file__).resolve().parents[3] / "examples" / "corpus"


def text_of(relative: str) -> str:
    return html_text((CORPUS / relative).read_bytes())[0]


def headings(relative: str) -> list[str]:
    soup = BeautifulSoup((CORPUS / relative).read_bytes(), "html.parser")
    return [" ".join(h.get_text(" ").split()) for h in soup.find_all(["h1", "h2", "h3", "h4"])]


def flat(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def test_postgresql_page_without_its_navigation() -> None:
    text = text_of("postgresql/tutorial-update.html")
    assert text.startswith("2.8. Updates\n\nYou can update existing rows using the UPDATE command.")
    assert text.endswith("(3 rows)")
    for chrome in ("Prev", "Next", "Home", "Chapter 2", "Aggregate Functions", "Deletions"):
        assert chrome not in text
    assert "UPDATE weather\nSET temp_hi = temp_hi - 2" in text  # <pre> keeps its lines


def test_sqlite_page_without_its_site_header() -> None:
    text = text_of("sqlite/wal.html")
    for chrome in (
        "Small. Fast. Reliable.",
        "Choose any three",
        "Search Documentation",
        "Download",
        "Purchase",
        "toggle_search",
    ):
        assert chrome not in text
    assert text.startswith("Write-Ahead Logging")
    assert "1. Overview\n\nThe default method by which SQLite implements atomic commit" in text
    assert "WAL is significantly faster in most scenarios." in text  # a list item


@pytest.mark.parametrize(
    "page",
    [
        "postgresql/sql-select.html",
        "postgresql/mvcc-intro.html",
        "sqlite/wal.html",
        "sqlite/faq.html",
        "postgresql/ddl-partitioning.html",
    ],
)
def test_every_heading_of_the_content_is_kept(page: str) -> None:
    text = f" {flat(text_of(page))} "
    found = headings(page)
    assert found
    assert [h for h in found if f" {flat(h)} " not in text] == []


def test_the_title_is_kept_once() -> None:
    # PostgreSQL's <title> repeats the page's h2; SQLite's FAQ names the page differently.
    assert text_of("postgresql/tutorial-update.html").count("2.8. Updates") == 1
    assert text_of("sqlite/faq.html").startswith(
        "SQLite Frequently Asked Questions\n\nFrequently Asked Questions\n\n"
    )


def test_main_content_false_keeps_the_whole_page() -> None:
    whole = html_text(
        (CORPUS / "postgresql/tutorial-update.html").read_bytes(), main_content=False
    )[0]
    assert "Prev" in whole and "Next" in whole and "You can update existing rows" in whole


def test_blocks_are_kept_by_alignment_and_headings_by_their_section() -> None:
    blocks = [
        HtmlBlock("Site menu", 2),
        HtmlBlock("Home About Download"),
        HtmlBlock("Guide", 1),
        HtmlBlock("Install", 2),
        HtmlBlock("Run the installer and follow its steps."),
        HtmlBlock("Empty section", 2),
        HtmlBlock("Copyright 2024 Example Inc."),
    ]
    content = "Run the installer and follow its steps."
    assert [b.text for b in main_blocks(blocks, content)] == [
        "Guide",
        "Install",
        "Run the installer and follow its steps.",
    ]
    assert main_blocks(blocks, None) == blocks  # nothing judged: the whole page
    assert main_blocks(blocks, "words that are nowhere on the page") == blocks
    assert main_blocks(blocks, content, max_words=10) == blocks  # too long to align


def test_read_html_gives_kinds_levels_and_table_rows() -> None:
    from attnswitch.documents.readers.blocks import BlockKind, ReadOptions
    from attnswitch.documents.readers.html import read_html

    page = (
        b"<html><body><h1>Guide</h1><p>Intro.</p><h2>Steps</h2><ul><li>one</li>"
        b"<li>two</li></ul><pre>x = 1\ny = 2</pre><table><tr><th>k</th><th>v</th></tr>"
        b"<tr><td>a</td><td>1</td></tr><tr><td>b</td><td>2</td></tr></table></body></html>"
    )
    got = read_html(page, ReadOptions()).blocks
    assert [(b.kind, b.level, b.text) for b in got] == [
        (BlockKind.HEADING, 1, "Guide"),
        (BlockKind.PARAGRAPH, None, "Intro."),
        (BlockKind.HEADING, 2, "Steps"),
        (BlockKind.LIST_ITEM, None, "one"),
        (BlockKind.LIST_ITEM, None, "two"),
        (BlockKind.CODE, None, "x = 1\ny = 2"),
        (BlockKind.TABLE, None, "k\tv\na\t1\nb\t2"),
    ]
    assert got[-1].rows == (("k", "v"), ("a", "1"), ("b", "2")) and got[-1].header


def test_read_html_headings_of_a_real_page() -> None:
    from attnswitch.documents.readers.blocks import BlockKind, ReadOptions
    from attnswitch.documents.readers.html import read_html

    got = read_html((CORPUS / "postgresql/datatype-json.html").read_bytes(), ReadOptions())
    heads = [(b.level, b.text) for b in got.blocks if b.kind is BlockKind.HEADING]
    assert heads[0] == (2, "8.14. JSON Types")
    assert (3, "8.14.4. jsonb Indexing") in heads
    tables = [b for b in got.blocks if b.kind is BlockKind.TABLE]
    assert tables and tables[0].rows[0] == ("JSON primitive type", "PostgreSQL type", "Notes")


@pytest.mark.parametrize(
    ("markup", "texts"),
    [
        ("", []),
        ("<!-- only a comment -->", []),
        ("just words", ["just words"]),
        ("<p>a\x00b\x0cc</p>", ["a b c"]),
        (
            '<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml">'
            "<body><h1>Title</h1><p>x &amp; y</p></body></html>",
            ["Title", "x & y"],
        ),
        ("<div>" * 1000 + "deep" + "</div>" * 1000, ["deep"]),
    ],
)
def test_odd_pages_give_their_text(markup: str, texts: list[str]) -> None:
    from attnswitch.documents.readers.html import html_blocks

    assert [b.text for b in html_blocks(markup)] == texts


def test_a_page_nested_deeper_than_libxml2_reads_is_skipped_not_cut() -> None:
    from attnswitch.documents.readers.html import html_blocks
    from attnswitch.documents.readers.skip import Skip, Skipped

    with pytest.raises(Skipped) as caught:
        html_blocks("<p>before</p>" + "<div>" * 3000 + "deep" + "</div>" * 3000)
    assert caught.value.skip is Skip.TOO_LARGE
    assert caught.value.detail == (
        "html: more than libxml2 reads (Excessive depth in document: 2048)"
    )


SPHINX_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8">
<title>subprocess — Subprocess management</title></head><body><div role="main">
<h1><code><span class="pre">subprocess</span></code> — Subprocess management<a
 class="headerlink" href="#module-subprocess" title="Link to this heading">¶</a></h1>
<p>The subprocess module allows you to spawn new processes.</p>
<h2>Using the subprocess Module<a class="headerlink" href="#using" title="Link">¶</a></h2>
<dl><dt id="subprocess.run">subprocess.run(args)<a class="headerlink" href="#subprocess.run"
 title="Link to this definition">¶</a></dt><dd><p>Run the command described by args.</p></dd></dl>
<h2 id="mk">Installation<a class="headerlink" href="#mk" title="Permanent link">#</a></h2>
<p>MkDocs marks its headings with a hash sign.</p>
<h2><a id="user-content-usage" class="anchor" href="#usage"><svg><path d="M7"></path></svg></a
>Usage</h2><p>GitHub puts an anchor before each heading.</p>
<h2>Options <a href="#table-3">#3</a> and <a href="other.html#x">¶</a></h2>
<p>A link that says something is kept.</p>
</div></body></html>"""


def test_permalink_anchors_leave_no_mark_in_headings() -> None:
    """Sphinx's `¶`, MkDocs' `#` and GitHub's icon anchors are dropped; a link to a place
    in the page that says something, or a mark linking to another page, stays."""
    from attnswitch.documents.readers.html import html_blocks

    got = [(b.level, b.text) for b in html_blocks(SPHINX_PAGE)]
    assert got == [
        (1, "subprocess — Subprocess management"),
        (None, "The subprocess module allows you to spawn new processes."),
        (2, "Using the subprocess Module"),
        (None, "subprocess.run(args)"),
        (None, "Run the command described by args."),
        (2, "Installation"),
        (None, "MkDocs marks its headings with a hash sign."),
        (2, "Usage"),
        (None, "GitHub puts an anchor before each heading."),
        (2, "Options #3 and ¶"),
        (None, "A link that says something is kept."),
    ]
