"""What went into the reader fixtures (fixtures/, made by scripts/make_reader_fixtures.py
from the example corpus), read straight from the sources, to check what comes out."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from attnswitch.documents.readers.blocks import Block, BlockKind, Extracted, ReadOptions
from attnswitch.documents.readers.dispatch import read_named, with_attachments

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CORPUS = ROOT / "examples" / "corpus"
ANYHOW = CORPUS / "rust" / "anyhow" / "README.md"
RELEASE_PDF = CORPUS / "sqlite" / "copyright-release.pdf"
_WORD = re.compile(r"\w+")


def read(name: str, **options) -> Extracted:
    """A fixture read as the walk reads a file: by its name and bytes."""
    return read_named(
        name, (FIXTURES / name).read_bytes(), with_attachments(ReadOptions(**options))
    )


def anyhow_tokens():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").parse(ANYHOW.read_text())


def anyhow_headings() -> list[tuple[int, str]]:
    """(level, text) of every heading of the Markdown source, in order."""
    tokens = anyhow_tokens()
    out = []
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            text = "".join(
                c.content for c in tokens[i + 1].children if c.type in ("text", "code_inline")
            )
            out.append((int(token.tag[1]), " ".join(text.split())))
    return out


def anyhow_words() -> set[str]:
    """The words of the Markdown source's text and code (not its raw HTML badges)."""
    text = []
    for token in anyhow_tokens():
        if token.type == "inline":
            text += [c.content for c in token.children if c.type in ("text", "code_inline")]
        elif token.type in ("fence", "code_block"):
            text.append(token.content)
    return words(" ".join(text))


def json_types_rows() -> list[list[str]]:
    with open(FIXTURES / "json-types.csv", newline="") as fh:
        return [[" ".join(c.split()) for c in row] for row in csv.reader(fh)]


def words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def recall(expected: set[str], got: str) -> float:
    """The share of the expected words found in `got`."""
    return len(expected & words(got)) / len(expected)


def headings(blocks: tuple[Block, ...]) -> list[tuple[int, str]]:
    return [(b.level, b.text) for b in blocks if b.kind is BlockKind.HEADING]
