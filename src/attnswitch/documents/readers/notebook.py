"""Jupyter notebooks (`.ipynb`) as blocks, read with nbformat (any nbformat version,
upgraded to 4): each Markdown cell through the Markdown handling
(`markup.markdown_to_blocks`: headings with their levels) and each code cell as one code
block with the kernel's language, at `Location(cell=n)` (1-based, counting every cell).
Outputs and raw cells are left out."""

from __future__ import annotations

from attnswitch.documents.readers.blocks import Block, BlockKind, Extracted, Location, ReadOptions
from attnswitch.documents.readers.containers import library_errors
from attnswitch.documents.readers.markup import markdown_to_blocks
from attnswitch.documents.readers.skip import Skip, Skipped
from attnswitch.documents.readers.text import decode


def read_ipynb(data: bytes, options: ReadOptions) -> Extracted:
    """A notebook's blocks (see the module)."""
    text, encoding, detected = decode(data)
    with library_errors("ipynb"):
        import nbformat

        notebook = nbformat.reads(text, as_version=4)
        metadata = notebook.get("metadata", {})
        language = (
            metadata.get("kernelspec", {}).get("language")
            or metadata.get("language_info", {}).get("name")
            or None
        )
        blocks: list[Block] = []
        for number, cell in enumerate(notebook.get("cells", []), start=1):
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else str(source)
            if not source.strip():
                continue
            where = Location(cell=number)
            if cell.get("cell_type") == "markdown":
                blocks += markdown_to_blocks(source, where)
            elif cell.get("cell_type") == "code":
                blocks.append(Block(BlockKind.CODE, source.strip("\n"), where, language=language))
    if not blocks:
        raise Skipped(Skip.EMPTY, "ipynb: no Markdown or code cells with text")
    return Extracted(tuple(blocks), encoding, detected)
