"""A notebook (fixtures/anyhow.ipynb, written by nbformat from the anyhow README):
Markdown cells give the source's headings, code cells its fenced code with the kernel's
language, each at its cell; outputs are left out."""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from reader_sources import anyhow_headings, anyhow_tokens, anyhow_words, headings, read, recall

from attnswitch.documents.readers.blocks import BlockKind, ReadOptions
from attnswitch.documents.readers.notebook import read_ipynb


def test_markdown_cells_give_the_headings_and_code_cells_the_code() -> None:
    got = read("anyhow.ipynb")
    assert headings(got.blocks) == anyhow_headings()
    assert recall(anyhow_words(), got.text) == 1.0
    # Code cells carry the kernel's language (code inside a Markdown cell has none).
    code = [b for b in got.blocks if b.kind is BlockKind.CODE and b.language is not None]
    # The fixture's code cells are the source's top-level fences (those inside list
    # items stay in their Markdown cell).
    fences = [t.content.rstrip("\n") for t in anyhow_tokens() if t.type == "fence" and t.level == 0]
    assert [b.text for b in code] == fences
    assert {b.language for b in code} == {"rust"}
    cells = [b.location.cell for b in got.blocks]
    assert None not in cells and cells == sorted(cells)
    assert code[0].location.cell == 2  # after the first Markdown cell


def test_outputs_and_empty_cells_are_left_out() -> None:
    book = new_notebook(
        cells=[
            new_markdown_cell("# Load\n\nRead the *table*."),
            new_code_cell(""),
            new_code_cell(
                "print('hello')",
                outputs=[new_output("stream", name="stdout", text="output-only-word\n")],
            ),
        ],
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
    )
    got = read_ipynb(nbformat.writes(book).encode(), ReadOptions())
    assert [(b.kind, b.text, b.location.cell) for b in got.blocks] == [
        (BlockKind.HEADING, "Load", 1),
        (BlockKind.PARAGRAPH, "Read the table.", 1),
        (BlockKind.CODE, "print('hello')", 3),
    ]
    assert got.blocks[-1].language == "python" and "output-only-word" not in got.text
