"""Chunks built from blocks: boundaries, sentence cuts, tables, heading paths and locations,
with the real model tokenizer and real corpus documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnswitch.documents.chunk import (
    BLOCK_SEPARATOR,
    ROWS_PER_CHUNK,
    SMALL_TABLE_TOKENS,
    chunk_blocks,
    chunk_document,
    heading_label,
    sentence_spans,
)
from attnswitch.documents.ingest import load, scan
from attnswitch.documents.readers.blocks import Block, BlockKind, Location
from attnswitch.documents.readers.markdown import markdown_blocks

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"


@pytest.fixture(scope="module")
def tok():
    from attnswitch.engines import ModelSpec
    from attnswitch.indexing.config import chunk_tokenizer

    return chunk_tokenizer(ModelSpec.load(None))


def n_tokens(tok, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False).ids)


def corpus_doc(source: str):
    (entry,) = [e for e in scan(CORPUS) if e.source == source]
    doc = load(entry)
    assert doc.ok, doc.reason
    return doc


SENTENCES = [f"Sentence number {i} talks about topic {i} at some length here." for i in range(40)]


def paragraph(first: int, count: int) -> str:
    return " ".join(SENTENCES[first : first + count])


@pytest.mark.parametrize("max_tokens", [16, 40, 64, 128])
def test_a_chunk_never_ends_mid_sentence_when_a_boundary_is_in_reach(tok, max_tokens) -> None:
    # Paragraphs of 1 to 7 sentences; each sentence is about 13 tokens, so one fits in
    # every window but the smallest, and longer paragraphs must be cut at sentences.
    blocks = [Block(BlockKind.PARAGRAPH, paragraph(i * 7, 1 + i % 7)) for i in range(5)]
    chunks = chunk_blocks(blocks, tok, max_tokens=max_tokens)
    text = "\n\n".join(b.text for b in blocks)
    sentence_ends = {text.index(s) + len(s) for s in SENTENCES if s in text}
    longest = max(n_tokens(tok, s) for s in SENTENCES)
    for c in chunks:
        assert c.text == text[c.start : c.end]
        assert c.n_tokens == n_tokens(tok, c.text) <= max_tokens
        if longest <= max_tokens:
            assert c.end in sentence_ends, f"chunk {c.ordinal} ends mid-sentence: {c.text[-30:]!r}"
    assert "".join(c.text.replace("\n\n", " ") + " " for c in chunks).split() == text.split()


def test_a_paragraph_boundary_is_preferred_to_a_sentence_boundary(tok) -> None:
    short, long = paragraph(0, 2), paragraph(2, 6)
    chunks = chunk_blocks(
        [Block(BlockKind.PARAGRAPH, short), Block(BlockKind.PARAGRAPH, long)], tok, max_tokens=60
    )
    assert chunks[0].text == short  # the long paragraph starts its own chunk


def test_a_sentence_longer_than_the_window_is_cut_at_words(tok) -> None:
    long_sentence = " ".join(f"word{i}" for i in range(200)) + "."
    chunks = chunk_blocks([Block(BlockKind.PARAGRAPH, long_sentence)], tok, max_tokens=32)
    assert len(chunks) > 1
    assert all(c.n_tokens <= 32 for c in chunks)
    assert " ".join(c.text for c in chunks).split() == long_sentence.split()


def test_sentence_spans_keep_abbreviations_and_numbers() -> None:
    text = "Dr. Smith paid $3.50 for it. Then he left! Did he? Yes."
    assert [text[s:e] for s, e in sentence_spans(text)] == [
        "Dr. Smith paid $3.50 for it.",
        "Then he left!",
        "Did he?",
        "Yes.",
    ]


def test_a_table_chunk_holds_one_row_with_its_header(tok) -> None:
    rows = (("name", "type", "notes"),) + tuple(
        (f"column_{i}", "integer", f"the value of measurement {i} in units") for i in range(60)
    )
    table = Block(BlockKind.TABLE, "\n".join("\t".join(r) for r in rows), rows=rows, header=True)
    chunks = chunk_blocks([Block(BlockKind.HEADING, "Columns", level=1), table], tok, max_tokens=48)
    table_chunks = [c for c in chunks if "column_" in c.text]
    assert ROWS_PER_CHUNK == 1 and len(table_chunks) == 60
    assert [c.text for c in table_chunks] == [
        f"name: {a} | type: {b} | notes: {c}" for a, b, c in rows[1:]
    ]
    assert all(c.heading_path == ("Columns",) and c.n_tokens <= 48 for c in table_chunks)
    text = BLOCK_SEPARATOR.join(
        b.text for b in (Block(BlockKind.HEADING, "Columns", level=1), table)
    )
    for c, row in zip(table_chunks, rows[1:], strict=True):  # each spans its row
        assert text[c.start : c.end] == "\t".join(row)


def test_a_small_table_of_a_document_stays_one_chunk_but_a_sheet_s_rows_do_not(tok) -> None:
    rows = (("option", "meaning"), ("-v", "verbose"), ("-q", "quiet"), ("-n", "dry run"))
    text = "\n".join("\t".join(r) for r in rows)
    small = Block(BlockKind.TABLE, text, rows=rows, header=True)
    (chunk,) = chunk_blocks([small], tok, max_tokens=254)
    assert chunk.n_tokens <= SMALL_TABLE_TOKENS
    assert chunk.text.split("\n") == [
        "option: -v | meaning: verbose",
        "option: -q | meaning: quiet",
        "option: -n | meaning: dry run",
    ]
    sheet = Block(
        BlockKind.TABLE, text, Location(sheet="flags", rows=(2, 4)), rows=rows, header=True
    )
    chunks = chunk_blocks([sheet], tok, max_tokens=254)
    assert [c.text for c in chunks] == chunk.text.split("\n")
    assert [c.location.rows for c in chunks] == [(2, 2), (3, 3), (4, 4)]


def test_a_table_without_a_header_is_cut_only_when_longer_than_the_window(tok) -> None:
    rows = tuple((f"column_{i}", "integer") for i in range(40))
    table = Block(BlockKind.TABLE, "\n".join("\t".join(r) for r in rows), rows=rows, header=False)
    chunks = chunk_blocks([table], tok, max_tokens=48)
    assert len(chunks) > 1 and all("\t" in c.text and c.n_tokens <= 48 for c in chunks)
    assert [line for c in chunks for line in c.text.split("\n")] == ["\t".join(r) for r in rows]


def test_a_table_with_sheet_rows_narrows_its_rows(tok) -> None:
    rows = (("a", "b"),) + tuple((str(i), "x " * 10) for i in range(30))
    table = Block(
        BlockKind.TABLE,
        "\n".join("\t".join(r) for r in rows),
        rows=rows,
        header=True,
        location=Location(sheet="Q3", rows=(2, 31)),
    )
    chunks = chunk_blocks([table], tok, max_tokens=40)
    assert chunks[0].location.rows[0] == 2
    assert chunks[-1].location.rows[1] == 31
    for a, b in zip(chunks, chunks[1:]):
        assert b.location.rows[0] == a.location.rows[1] + 1


MARKDOWN = """# json

Intro to the module.

## Basic Usage

Call dumps to encode.

### Options

Indent makes it pretty.

## Decoding

Call loads.
"""


def test_heading_path_of_a_chunk_under_a_nested_heading(tok) -> None:
    chunks = chunk_blocks(markdown_blocks(MARKDOWN), tok, max_tokens=254)
    by_text = {c.text.split("\n\n")[-1]: c.heading_path for c in chunks}
    assert by_text["Intro to the module."] == ("json",)
    assert by_text["Call dumps to encode."] == ("json", "Basic Usage")
    assert by_text["Indent makes it pretty."] == ("json", "Basic Usage", "Options")
    assert by_text["Call loads."] == ("json", "Decoding")
    assert heading_label(("json", "Basic Usage")) == "json › Basic Usage"
    # a chunk never spans two sections
    assert len(chunks) == 4


def test_headings_in_a_row_stay_with_the_text_below(tok) -> None:
    blocks = markdown_blocks("# A\n\n## B\n\nBody of B.\n")
    (chunk,) = chunk_blocks(blocks, tok, max_tokens=254)
    assert chunk.text == "A\n\nB\n\nBody of B." and chunk.heading_path == ("A", "B")


def test_embedded_heading_path_fits_the_window(tok) -> None:
    blocks = markdown_blocks(MARKDOWN + "\n" + "\n\n".join(SENTENCES) + "\n")
    chunks = chunk_blocks(blocks, tok, max_tokens=40, embed_headings=True)
    for c in chunks:
        assert c.embed_prefix == heading_label(c.heading_path) + "\n\n"
        assert n_tokens(tok, c.encoder_text) <= 40


def test_pdf_chunks_know_their_pages(tok) -> None:
    doc = corpus_doc("reportlab/reportlab-userguide.pdf")
    chunks = chunk_document(doc.text, doc.blocks, tok, max_tokens=254)
    found = [c for c in chunks if "The ReportLab library forms the foundation" in c.text]
    assert found and found[0].location.page == 7  # printed "Page 7" of the guide
    assert found[0].heading_path == (
        "Chapter 1 Introduction",
        "1.3 ReportLab's commercial software",
    )
    pages = [c.location.page for c in chunks]
    assert pages == sorted(pages) and pages[-1] == 134


def test_html_chunks_carry_section_paths(tok) -> None:
    doc = corpus_doc("postgresql/datatype-json.html")
    chunks = chunk_document(doc.text, doc.blocks, tok, max_tokens=254)
    indexing = [c for c in chunks if "CREATE INDEX idxgin ON api USING GIN (jdoc);" in c.text]
    assert indexing[0].heading_path == ("8.14. JSON Types", "8.14.4. jsonb Indexing")
    for c in chunks:
        assert c.text == doc.text[c.start : c.end] or "\t" in doc.text[c.start : c.end]
        assert c.n_tokens <= 254


def test_windows_keep_the_old_cut_and_gain_a_place(tok) -> None:
    from attnswitch.documents.chunk import chunk_text

    doc = corpus_doc("postgresql/datatype-json.html")
    windows = chunk_document(
        doc.text, doc.blocks, tok, chunking="windows", max_tokens=64, overlap=8
    )
    plain = chunk_text(doc.text, tok, max_tokens=64, overlap=8)
    assert [(c.text, c.start) for c in windows] == [(c.text, c.start) for c in plain]
    assert windows[0].heading_path == ("8.14. JSON Types",)
    assert windows[-1].heading_path[0] == "8.14. JSON Types" and len(windows[-1].heading_path) == 2


@pytest.mark.parametrize("bad", ["pages", "", "Blocks"])
def test_an_unknown_chunking_is_refused(tok, bad: str) -> None:
    with pytest.raises(ValueError, match="chunking: expected one of blocks, windows"):
        chunk_document("text", (), tok, chunking=bad)


@pytest.mark.parametrize(("max_tokens", "overlap"), [(40, 13), (40, 32), (128, 32), (128, 60)])
def test_block_overlap_repeats_whole_sentences_of_the_chunk_before(
    tok, overlap, max_tokens
) -> None:
    # Two sections of long paragraphs: within a section, each chunk after the first starts
    # with whole sentences the chunk before ends with (at most `overlap` tokens of them);
    # a section's first chunk repeats nothing of the section before.
    blocks = [
        Block(BlockKind.HEADING, "First part", level=1),
        Block(BlockKind.PARAGRAPH, paragraph(0, 9)),
        Block(BlockKind.PARAGRAPH, paragraph(9, 11)),
        Block(BlockKind.HEADING, "Second part", level=1),
        Block(BlockKind.PARAGRAPH, paragraph(20, 20)),
    ]
    plain = chunk_blocks(blocks, tok, max_tokens=max_tokens)
    chunks = chunk_blocks(blocks, tok, max_tokens=max_tokens, overlap=overlap)
    text = BLOCK_SEPARATOR.join(b.text for b in blocks)
    assert len(chunks) >= len(plain)
    repeated = 0
    for before, after in zip(chunks, chunks[1:]):
        assert after.n_tokens <= max_tokens
        if after.heading_path != before.heading_path:
            assert after.start >= before.end
            continue
        if after.start < before.end:
            shared = text[after.start : before.end]
            assert before.text.endswith(shared) and after.text.startswith(shared)
            assert n_tokens(tok, shared) <= overlap
            assert after.end > before.end, "a chunk of repeated text only"
            starts = {text.index(s) for s in SENTENCES if s in text}
            assert after.start in starts, "the overlap starts inside a sentence"
            repeated += 1
    assert repeated >= 1
    # Every sentence is in some chunk, and in order.
    for s in SENTENCES:
        assert any(s in c.text for c in chunks), s


def test_block_overlap_zero_is_the_default_and_refuses_a_full_window(tok) -> None:
    doc = corpus_doc("postgresql/datatype-json.html")
    default = chunk_document(doc.text, doc.blocks, tok, max_tokens=128)
    assert default == chunk_document(doc.text, doc.blocks, tok, max_tokens=128, block_overlap=0)
    with_overlap = chunk_document(doc.text, doc.blocks, tok, max_tokens=128, block_overlap=32)
    assert len(with_overlap) > len(default)
    with pytest.raises(ValueError, match="overlap: expected 0 <= overlap < max_tokens"):
        chunk_blocks(doc.blocks, tok, max_tokens=64, overlap=64)


def test_a_heading_that_repeats_the_one_it_lies_under_is_in_the_path_once(tok) -> None:
    blocks = [
        Block(BlockKind.HEADING, "9.2. Remote Login", level=1),
        Block(BlockKind.PARAGRAPH, "Use ssh to log in."),
        Block(BlockKind.HEADING, "9.2.  Remote login", level=2),
        Block(BlockKind.PARAGRAPH, "The client reads ~/.ssh/config."),
        Block(BlockKind.HEADING, "Keys", level=3),
        Block(BlockKind.PARAGRAPH, "Generate a key pair."),
    ]
    paths = [c.heading_path for c in chunk_blocks(blocks, tok, max_tokens=254)]
    assert paths == [
        ("9.2. Remote Login",),
        ("9.2. Remote Login",),
        ("9.2. Remote Login", "Keys"),
    ]
