"""The Markdown reader: CommonMark and GitHub tables as blocks (markdown-it-py)."""

from __future__ import annotations

import pytest

from attnswitch.documents.readers.blocks import BlockKind, ReadOptions
from attnswitch.documents.readers.dispatch import extract, readers
from attnswitch.documents.readers.markdown import markdown_blocks

DOC = """Title
=====

Intro with **bold**, a [link](https://example.org) and `code`.

## Install

- first item
- second item
  1. nested item

| name | type |
|------|------|
| id   | int  |
| tag  | text |

```python
print("hi")
```

> A quoted paragraph.

### Deeper
"""


def test_blocks_in_reading_order_with_kinds_levels_and_rows() -> None:
    got = [(b.kind, b.level, b.text) for b in markdown_blocks(DOC)]
    assert got == [
        (BlockKind.HEADING, 1, "Title"),
        (BlockKind.PARAGRAPH, None, "Intro with bold, a link and code."),
        (BlockKind.HEADING, 2, "Install"),
        (BlockKind.LIST_ITEM, None, "first item"),
        (BlockKind.LIST_ITEM, None, "second item"),
        (BlockKind.LIST_ITEM, None, "nested item"),
        (BlockKind.TABLE, None, "name\ttype\nid\tint\ntag\ttext"),
        (BlockKind.CODE, None, 'print("hi")'),
        (BlockKind.PARAGRAPH, None, "A quoted paragraph."),
        (BlockKind.HEADING, 3, "Deeper"),
    ]
    table = markdown_blocks(DOC)[6]
    assert table.rows == (("name", "type"), ("id", "int"), ("tag", "text")) and table.header
    assert markdown_blocks(DOC)[7].language == "python"


@pytest.mark.parametrize("text", ["", "\n\n   \n", "```\n```\n"])
def test_empty_markdown_gives_no_blocks(text: str) -> None:
    assert markdown_blocks(text) == []


def test_dispatch_reads_each_registered_kind_and_refuses_others() -> None:
    assert {"text", "markdown", "html", "pdf"} <= set(readers())
    got = extract("markdown", b"# A\n\nbody\n", ReadOptions())
    assert [b.kind for b in got.blocks] == [BlockKind.HEADING, BlockKind.PARAGRAPH]
    assert got.text == "A\n\nbody" and got.encoding == "utf-8"
    from attnswitch.documents.readers.skip import Skip, Skipped

    with pytest.raises(Skipped) as caught:
        extract("spreadsheet-of-the-future", b"x", ReadOptions())
    assert caught.value.skip is Skip.UNSUPPORTED


README = """<p align="center">
  <img src="https://example.org/logo.png" alt="bc logo" width="200">
</p>

<h1 align="center">bc</h1>

<img src="docs/shot.png" width="400"> An **arbitrary precision** calculator <br/> language.

## Build <a name="build"></a>

Run `make`, then <kbd>Enter</kbd>. See <a href="https://example.org/docs">the docs</a>.

<!-- a comment -->
<table><tr><th>flag</th><th>meaning</th></tr><tr><td>-q</td><td>quiet</td></tr></table>
"""


def test_html_in_markdown_gives_its_text_and_no_tags() -> None:
    """A README's raw HTML block reads as the HTML reader reads it (an image and a comment
    give nothing, `<h1>` is a heading, `<table>` a table); inline tags are dropped and the
    words between them kept."""
    got = [(b.kind, b.level, b.text) for b in markdown_blocks(README)]
    assert got == [
        (BlockKind.HEADING, 1, "bc"),
        (BlockKind.PARAGRAPH, None, "An arbitrary precision calculator\nlanguage."),
        (BlockKind.HEADING, 2, "Build"),
        (BlockKind.PARAGRAPH, None, "Run make, then Enter. See the docs."),
        (BlockKind.TABLE, None, "flag\tmeaning\n-q\tquiet"),
    ]
    assert markdown_blocks(README)[-1].rows == (("flag", "meaning"), ("-q", "quiet"))


def test_markdown_in_a_container_is_read_as_markdown(tmp_path) -> None:
    """`README.md.gz` is Markdown (its inner name chooses the reader), and so are a mail's
    `.md` and `.md.gz` attachments: no `<img` in their text, the same blocks as the plain
    file's."""
    import email.message
    import gzip

    from attnswitch.documents.ingest import load, scan

    (tmp_path / "README.md").write_text(README)
    (tmp_path / "README.md.gz").write_bytes(gzip.compress(README.encode()))
    mail = email.message.EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = "a@example.org", "b@example.org", "readme"
    mail.set_content("The readme is attached, twice.")
    mail.add_attachment(README.encode(), "text", "markdown", filename="README.md")
    mail.add_attachment(gzip.compress(README.encode()), "application", "gzip", filename="N.md.gz")
    (tmp_path / "mail.eml").write_bytes(bytes(mail))
    docs = {e.source: load(e) for e in scan(tmp_path)}
    plain = docs["README.md"]
    texts = [(b.kind, b.level, b.text) for b in plain.blocks]
    packed = docs["README.md.gz"]
    assert packed.kind == "markdown" and packed.compression == "gzip"
    assert packed.blocks == plain.blocks and "<" not in packed.text
    mailed = docs["mail.eml"]
    for part in ("README.md", "N.md.gz"):
        got = [(b.kind, b.level, b.text) for b in mailed.blocks if b.location.part == part]
        assert got == texts, part
    assert "<" not in mailed.text
