"""Chunking: a document's text cut into chunks of at most `max_tokens` model tokens, each
carrying its character span in the document's text, its heading path and its location.

Two ways (`CHUNKINGS`, the index config's `chunking`):

- "blocks" (the default, `chunk_blocks`): chunks are built from the document's blocks
  (`readers.blocks`). A heading starts a new chunk (headings in a row stay together), so
  a chunk never spans two sections and its heading path is exact. Within a section,
  whole blocks are packed while they fit; a block longer than the window is cut at its
  sentences (sentencex) packed while they fit (code at its lines), and only a single
  sentence (or line) longer than the window is cut inside, at word boundaries. A table
  with a header row (spreadsheets, CSV, most document tables) makes chunks of its own,
  one row each (`ROWS_PER_CHUNK`; a document's table of at most `SMALL_TABLE_TOKENS`
  tokens stays one chunk), each row written as "header: value" pairs (`record`), so the values of one
  row sit with their column names in a chunk about that row, which a query for that
  row finds by its words and by its meaning; any other table longer than the window is
  cut by rows. So a chunk
  ends at a section, paragraph or sentence boundary whenever one lies in reach. No
  overlap by default: the boundaries are the text's own, and carrying whole sentences of
  the chunk before (`chunk_blocks(overlap=N)`) moved no kind of query for 1-11% more
  tokens (benchmarks/chunk_overlap.py, docs/results/chunk_overlap.md).
- "windows" (`chunk_text`): fixed token windows with `overlap` tokens shared between
  neighbours, cut on word boundaries only; the old chunker, kept as the baseline of
  benchmarks/known_item_structure.py. Its chunks get the heading path and location of
  the blocks they start in.

`heading_path` is the titles of the headings a chunk lies under, outermost first
(`("json", "Basic Usage")`, shown as "json › Basic Usage", `HEADING_SEPARATOR`), a
heading that repeats the one it lies under given once;
`location` is the span of its blocks' locations (pages, rows...). `embed_prefix` is
what the encoder reads before the chunk's text when the heading path is embedded with it
(`embed_headings`): the path and a blank line, "" otherwise; the window then leaves
room for it.

`max_tokens` counts the text's tokens only; the encoder adds its special tokens ([CLS],
[SEP]) on top, so pass the model's limit minus those (`config.special_tokens`;
`config.IndexConfig.build` does).

Sentence boundaries come from sentencex (Wikimedia's rule-based segmenter, in Rust:
abbreviations, numbers and quotes known, no model to load). It replaced pysbd, the
Python port of the Pragmatic Segmenter, which was the hot spot of reading: on the
corpus, half of the profiled time of reading and chunking, mostly compiling regular
expressions its abbreviation rules build per call (more than Python's cache of 512
holds); sentencex segments the same paragraphs in a thousandth of the Python calls. It
is run only on blocks longer than the window.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from attnswitch.documents.readers.blocks import Block, BlockKind, Location
from attnswitch.errors import ConfigError

CHUNKINGS = ("blocks", "windows")
HEADING_SEPARATOR = " › "
BLOCK_SEPARATOR = "\n\n"  # between blocks in a document's text (`Extracted.text`)
# An embedded heading path may take at most this share of the window; a longer one keeps
# its innermost heading only, and none when even that is too long.
MAX_PREFIX_SHARE = 0.25
# A table with a header row is chunked by rows, each row as "header: value" pairs
# (`record`): `ROWS_PER_CHUNK` row a chunk, so that the chunk a query for one row's values
# finds is about that row, its vector as well as its words; only a table of a document (not
# a sheet's rows, which are cut into numbered blocks) whose records together take at most
# `SMALL_TABLE_TOKENS` tokens stays one chunk. Measured on a 500-row CSV
# file (40 queries of one row's name, city and salary; the row's chunk as the answer,
# MRR@10): five rows a chunk gave hybrid 0.40 and dense 0.19, two 0.71 and 0.48, one 0.99
# and 0.96 (keyword 1.0 each time); on a CSV file of short rows, two rows a chunk gave
# hybrid 0.67-0.74, one 0.96-1.0.
ROWS_PER_CHUNK = 1
SMALL_TABLE_TOKENS = 64
RECORD_SEPARATOR = " | "
# Characters of text tokenized in one call when counting tokens (`_token_counts`).
COUNT_BATCH_CHARS = 256 * 1024


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk of a document: `text == document[start:end]` (except a table's chunks:
    the rows of a table with a header as "header: value" records, or a later chunk of a
    long table without one repeating its first row; `start:end` spans the rows),
    `n_tokens` model tokens of `text`. `heading_path`: the headings it lies under,
    outermost first; `location`: the span of its blocks' locations;
    `embed_prefix`: what the encoder reads before `text` ("" unless headings are
    embedded)."""

    ordinal: int
    text: str
    start: int
    end: int
    n_tokens: int
    heading_path: tuple[str, ...] = ()
    location: Location = Location()  # frozen: one empty location shared by all
    embed_prefix: str = ""

    @property
    def encoder_text(self) -> str:
        """The text the encoder embeds: `embed_prefix` + `text`."""
        return self.embed_prefix + self.text


def heading_label(path: Sequence[str]) -> str:
    """A heading path as a person reads it: "json › Basic Usage"."""
    return HEADING_SEPARATOR.join(path)


def chunk_text(
    text: str, tokenizer: Any, *, max_tokens: int = 254, overlap: int = 32
) -> list[Chunk]:
    """Split `text` into overlapping token windows.

    tokenizer: a `tokenizers.Tokenizer` (its `encode(text, add_special_tokens=False)` gives
    `offsets` and `word_ids`). A window never ends inside a word unless a single word is
    longer than the window. Whitespace-only text gives no chunks.
    """
    if max_tokens < 1:
        raise ConfigError(f"max_tokens: expected >= 1, got {max_tokens}")
    if not 0 <= overlap < max_tokens:
        raise ConfigError(
            f"overlap: expected 0 <= overlap < max_tokens ({max_tokens}), got {overlap}"
        )
    if not text.strip():
        return []
    enc = tokenizer.encode(text, add_special_tokens=False)
    offsets, words = enc.offsets, enc.word_ids
    n = len(offsets)
    chunks: list[Chunk] = []
    start = 0
    while start < n:
        end = min(start + max_tokens, n)
        if end < n:
            cut = end
            # Step back to a word start so no word is split across windows.
            while cut > start + 1 and words[cut] is not None and words[cut] == words[cut - 1]:
                cut -= 1
            if cut > start + overlap:
                end = cut
        s, e = offsets[start][0], offsets[end - 1][1]
        chunks.append(Chunk(len(chunks), text[s:e], s, e, end - start))
        if end >= n:
            break
        nxt = max(end - overlap, start + 1)
        while nxt < end and words[nxt] is not None and nxt > 0 and words[nxt] == words[nxt - 1]:
            nxt += 1  # start the next window on a word start too
        start = nxt
    return chunks


def chunk_document(
    text: str,
    blocks: Sequence[Block],
    tokenizer: Any,
    *,
    chunking: str = "blocks",
    max_tokens: int = 254,
    overlap: int = 32,
    embed_headings: bool = False,
    block_overlap: int = 0,
) -> list[Chunk]:
    """The chunks of a document whose text is `text` and blocks `blocks` (its text is
    the blocks' texts joined by blank lines), by `chunking` ("blocks" or "windows");
    with no blocks, `text` is one paragraph. `overlap` is the windows' and
    `block_overlap` the blocks' (`chunk_blocks`)."""
    if chunking not in CHUNKINGS:
        raise ValueError(f"chunking: expected one of {', '.join(CHUNKINGS)}, got {chunking!r}")
    if not blocks and text.strip():
        blocks = (Block(BlockKind.PARAGRAPH, text),)
    if chunking == "blocks":
        return chunk_blocks(
            blocks,
            tokenizer,
            max_tokens=max_tokens,
            embed_headings=embed_headings,
            overlap=block_overlap,
        )
    # With the heading path embedded, every window leaves the most room a prefix may take.
    room = int(MAX_PREFIX_SHARE * max_tokens) if embed_headings else 0
    windows = chunk_text(
        BLOCK_SEPARATOR.join(b.text for b in blocks),
        tokenizer,
        max_tokens=max_tokens - room,
        overlap=min(overlap, max_tokens - room - 1),
    )
    return _placed(windows, blocks, tokenizer, max_tokens if embed_headings else 0)


@dataclass(frozen=True)
class _Piece:
    """A run of text inside one block: [start, end) in the document's text."""

    text: str
    start: int
    end: int
    n_tokens: int


def chunk_blocks(
    blocks: Sequence[Block],
    tokenizer: Any,
    *,
    max_tokens: int = 254,
    embed_headings: bool = False,
    overlap: int = 0,
) -> list[Chunk]:
    """Chunks built from `blocks` (see the module doc); character spans are in the
    blocks' texts joined by blank lines. `overlap` > 0: a chunk that continues a section
    starts with the last whole pieces (sentences, lines or short paragraphs) of the chunk
    before, as many as fit in `overlap` tokens (never all of it), so its span overlaps the
    one before."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens: expected >= 1, got {max_tokens}")
    if not 0 <= overlap < max_tokens:
        raise ValueError(
            f"overlap: expected 0 <= overlap < max_tokens ({max_tokens}), got {overlap}"
        )
    offsets = _offsets(blocks)
    joined = BLOCK_SEPARATOR.join(b.text for b in blocks)
    counts = _token_counts([b.text for b in blocks], tokenizer)
    chunks: list[Chunk] = []
    for path, section in _sections(blocks):
        prefix = _prefix(path, tokenizer, max_tokens) if embed_headings else ""
        budget = max_tokens - (_count(prefix, tokenizer) if prefix else 0)
        run = _Run(budget, overlap)

        def close(
            run: _Run = run, path: tuple[str, ...] = path, prefix: str = prefix, carry: bool = False
        ) -> None:
            if run.fresh():
                chunks.append(_chunk(len(chunks), run.pieces, blocks, joined, path, prefix))
            run.restart(carry)

        for i in section:
            block, start = blocks[i], offsets[i]
            whole = _Piece(block.text, start, start + len(block.text), counts[i])
            if _records(block):  # rows of a table with a header: chunks of their own
                close()
                chunks += _table_chunks(len(chunks), block, start, path, prefix, budget, tokenizer)
                continue
            if whole.n_tokens <= budget:
                if not run.fits(whole):
                    close(carry=True)
                run.add(i, whole)
                continue
            # Longer than the window: a paragraph boundary ends the chunk before it, unless
            # the chunk holds headings only (a heading never ends a chunk).
            if any(blocks[j].kind is not BlockKind.HEADING for j, _ in run.pieces):
                close(carry=True)
            if block.kind is BlockKind.TABLE and block.rows:
                close()
                chunks += _table_chunks(len(chunks), block, start, path, prefix, budget, tokenizer)
                continue
            for piece in _split(block, start, budget, tokenizer):
                if not run.fits(piece):
                    close(carry=True)
                run.add(i, piece)
        close()
    kept = [c for c in chunks if c.text.strip()]
    return [c if c.ordinal == i else dataclasses.replace(c, ordinal=i) for i, c in enumerate(kept)]


class _Run:
    """The pieces of the chunk being built, (block index, piece) in text order, the first
    `carried` of them repeated from the chunk before (`overlap`)."""

    def __init__(self, budget: int, overlap: int):
        self.budget, self.overlap = budget, overlap
        self.pieces: list[tuple[int, _Piece]] = []
        self.carried = 0

    def fresh(self) -> bool:
        """Whether the run holds a piece no chunk holds yet."""
        return len(self.pieces) > self.carried

    def fits(self, piece: _Piece) -> bool:
        return sum(p.n_tokens for _, p in self.pieces) + piece.n_tokens <= self.budget

    def add(self, block: int, piece: _Piece) -> None:
        while self.carried and not self.fits(piece):  # carried text gives way to new text
            self.pieces.pop(0)
            self.carried -= 1
        self.pieces.append((block, piece))

    def restart(self, carry: bool) -> None:
        """Start the next chunk: empty, or (`carry`, after a chunk with new text) with the
        last pieces of this one that fit in `overlap` tokens, never all of them."""
        tail: list[tuple[int, _Piece]] = []
        if carry and self.fresh():
            n = 0
            for item in reversed(self.pieces[1:]):
                n += item[1].n_tokens
                if n > self.overlap:
                    break
                tail.insert(0, item)
        self.pieces[:] = tail
        self.carried = len(tail)


def _sections(blocks: Sequence[Block]) -> list[tuple[tuple[str, ...], list[int]]]:
    """(heading path, block indices) of each section: a heading (or headings in a row)
    and the blocks up to the next heading; the path includes the section's own headings
    (the innermost last). A heading that says what the heading it lies under says (a
    document's title, then its first section of the same name, as pandoc and LibreOffice
    write a page's `<title>` and `<h1>`) is in the path once."""
    out: list[tuple[tuple[str, ...], list[int]]] = []
    stack: list[tuple[int, str]] = []
    current: list[int] = []
    after_heading = False
    for i, block in enumerate(blocks):
        if block.kind is BlockKind.HEADING:
            if current and not after_heading:
                out.append((tuple(t for _, t in stack), current))
                current = []
            while stack and stack[-1][0] >= (block.level or 1):
                stack.pop()
            title = " ".join(block.text.split())
            if not stack or stack[-1][1].casefold() != title.casefold():
                stack.append((block.level or 1, title))
            after_heading = True
        else:
            after_heading = False
        current.append(i)
    if current:
        out.append((tuple(t for _, t in stack), current))
    return out


def _offsets(blocks: Sequence[Block]) -> list[int]:
    """Where each block's text starts in the blocks' texts joined by blank lines."""
    out, at = [], 0
    for b in blocks:
        out.append(at)
        at += len(b.text) + len(BLOCK_SEPARATOR)
    return out


def _token_counts(texts: list[str], tokenizer: Any) -> list[int]:
    """The model tokens of each of `texts`, tokenized in batches of at most
    `COUNT_BATCH_CHARS` characters: a batch's encodings (ids, tokens, offsets, masks) live
    in the tokenizer's native memory until the batch is counted, so one call over a large
    document's 50,000 blocks (a 6.7 MB changelog) held 350 MB; batches hold a few MB."""
    counts: list[int] = []
    start = 0
    while start < len(texts):
        end, size = start, 0
        while end < len(texts) and (end == start or size + len(texts[end]) <= COUNT_BATCH_CHARS):
            size += len(texts[end])
            end += 1
        batch = tokenizer.encode_batch(texts[start:end], add_special_tokens=False)
        counts += [len(e.ids) for e in batch]
        start = end
    return counts


def _count(text: str, tokenizer: Any) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


def _prefix(path: tuple[str, ...], tokenizer: Any, max_tokens: int) -> str:
    """The embedded heading path: the whole path, else its innermost heading, else ""
    when it would take more than `MAX_PREFIX_SHARE` of the window."""
    for shown in (path, path[-1:]):
        if shown:
            prefix = heading_label(shown) + BLOCK_SEPARATOR
            if _count(prefix, tokenizer) <= MAX_PREFIX_SHARE * max_tokens:
                return prefix
    return ""


_LINE = re.compile(r"[^\n]+")


def _split(block: Block, start: int, budget: int, tokenizer: Any) -> list[_Piece]:
    """A block longer than the window as pieces that each fit: its sentences (its lines
    for code), and a sentence that does not fit as word-boundary windows."""
    text = block.text
    if block.kind in (BlockKind.CODE, BlockKind.TABLE):
        spans = [m.span() for m in _LINE.finditer(text) if m.group().strip()]
    else:
        spans = sentence_spans(text)
    pieces = []
    counts = _token_counts([text[s:e] for s, e in spans], tokenizer)
    for (s, e), n in zip(spans, counts, strict=True):
        if n <= budget:
            pieces.append(_Piece(text[s:e], start + s, start + e, n))
            continue
        for w in chunk_text(text[s:e], tokenizer, max_tokens=budget, overlap=0):
            pieces.append(_Piece(w.text, start + s + w.start, start + s + w.end, w.n_tokens))
    return pieces


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The [start, end) spans of the sentences of `text` (sentencex), whitespace around
    them left out."""
    from sentencex import segment

    spans, at = [], 0
    for sentence in segment("en", text):
        body = sentence.strip()
        if not body:
            continue
        found = text.find(body, at)
        if found < 0:  # the segmenter changed the text: the rest as one sentence
            rest = text[at:].strip()
            if rest:
                s = text.index(rest, at)
                spans.append((s, s + len(rest)))
            return spans
        spans.append((found, found + len(body)))
        at = found + len(body)
    return spans


def _chunk(
    ordinal: int,
    run: list[tuple[int, _Piece]],
    blocks: Sequence[Block],
    joined: str,
    path: tuple[str, ...],
    prefix: str,
) -> Chunk:
    """A chunk of the pieces in `run` (consecutive in the document's text `joined`)."""
    first, last = run[0][1], run[-1][1]
    return Chunk(
        ordinal,
        joined[first.start : last.end],
        first.start,
        last.end,
        sum(p.n_tokens for _, p in run),
        path,
        _span([blocks[i].location for i, _ in run]),
        prefix,
    )


def _span(locations: list[Location]) -> Location:
    """The location of a chunk over blocks at `locations`: the first set one spanned to the
    last set one."""
    found = [loc for loc in locations if loc]
    return found[0].span(found[-1]) if found else Location()


def record(header: Sequence[str], row: Sequence[str]) -> str:
    """A table row as a person reads it out: "header: value" pairs joined by " | ", empty
    cells left out (a cell under an empty header alone)."""
    pairs = []
    for i, value in enumerate(row):
        if not value:
            continue
        name = header[i] if i < len(header) else ""
        pairs.append(f"{name}: {value}" if name else value)
    return RECORD_SEPARATOR.join(pairs)


def _records(block: Block) -> bool:
    """Whether `block` is a table chunked as records: it has a header row and two
    columns or more."""
    return (
        block.kind is BlockKind.TABLE
        and block.header
        and bool(block.rows)
        and len(block.rows[0]) > 1
        and len(block.rows) > 1
    )


def _table_chunks(
    ordinal: int,
    block: Block,
    start: int,
    path: tuple[str, ...],
    prefix: str,
    budget: int,
    tokenizer: Any,
) -> list[Chunk]:
    """A table cut by rows. A table with a header (`_records`): chunks of
    `ROWS_PER_CHUNK` row, each row a `record` ("header: value" pairs), or all of them in
    one chunk when they take at most `SMALL_TABLE_TOKENS` tokens and are no sheet's rows
    (the block names no rows).
    Other tables (longer than the window): each chunk as many tab-separated rows as fit."""
    rows = ["\t".join(r) for r in block.rows or ()]
    as_records = _records(block)
    header = rows[0] if block.header and rows else None
    first_body = 1 if header is not None else 0
    exact = block.text == "\n".join(rows)
    at, row_starts = 0, []
    for r in rows:
        row_starts.append(at)
        at += len(r) + 1
    if as_records:
        cells = block.rows or ()
        shown = [record(cells[0], r) for r in cells[1:]]
        header, most = None, ROWS_PER_CHUNK
    else:
        shown, most = rows[first_body:], len(rows)
    counts = _token_counts(([header] if header is not None else []) + shown, tokenizer)
    head_n = counts[0] if header is not None else 0
    if header is not None and head_n > budget // 2:  # a header too long to repeat
        header, head_n, shown, first_body = None, 0, rows, 0
        counts = [0] + _token_counts(shown, tokenizer)
    elif header is None:
        counts = [0] + counts
    small = sum(counts[1:]) <= min(SMALL_TABLE_TOKENS, budget)
    if as_records and small and block.location.rows is None:
        most = len(shown)  # a small table in a document: its records together
    chunks: list[Chunk] = []
    i = 0
    while i < len(shown):
        j, n = i, head_n
        while j < len(shown) and j - i < most and (j == i or n + counts[1 + j] <= budget):
            n += counts[1 + j]
            j += 1
        part = shown[i:j]
        k0, k1 = first_body + i, first_body + j - 1
        if n > budget:  # one row longer than the window: cut at word boundaries
            for w in chunk_text(part[0], tokenizer, max_tokens=budget - head_n, overlap=0):
                text = w.text if header is None else header + "\n" + w.text
                whole = exact and not as_records  # a window's span only in the row itself
                s = start + (row_starts[k0] + (w.start if whole else 0) if exact else 0)
                e = start + (
                    row_starts[k0] + (w.end if whole else len(rows[k0]))
                    if exact
                    else len(block.text)
                )
                chunks.append(
                    Chunk(
                        ordinal + len(chunks),
                        text,
                        s,
                        e,
                        head_n + w.n_tokens,
                        path,
                        _rows(block.location, i, i),
                        prefix,
                    )
                )
            i = j
            continue
        text = "\n".join(part) if header is None else "\n".join([header, *part])
        s = start + (row_starts[k0] if exact else 0)
        e = start + (row_starts[k1] + len(rows[k1]) if exact else len(block.text))
        chunks.append(
            Chunk(
                ordinal + len(chunks), text, s, e, n, path, _rows(block.location, i, j - 1), prefix
            )
        )
        i = j
    return chunks


def _rows(location: Location, first: int, last: int) -> Location:
    """A table block's location narrowed to its data rows `first..last` (from 0), where
    the block names rows (a sheet's)."""
    if location.rows is None:
        return location
    base = location.rows[0]
    return Location(
        location.page,
        location.page_end,
        location.slide,
        location.sheet,
        (base + first, base + last),
        location.part,
        location.cell,
    )


def _placed(
    windows: list[Chunk], blocks: Sequence[Block], tokenizer: Any, prefix_of: int
) -> list[Chunk]:
    """Fixed windows given the heading path of the block each starts in and the
    location span of the blocks each overlaps; `prefix_of`: the window the embedded
    heading path is sized for (0: not embedded)."""
    offsets = _offsets(blocks)
    paths: list[tuple[str, ...]] = [()] * len(blocks)
    for path, section in _sections(blocks):
        for i in section:
            paths[i] = path
    out = []
    for w in windows:
        first = max(bisect.bisect_right(offsets, w.start) - 1, 0)
        last = max(bisect.bisect_right(offsets, max(w.end - 1, w.start)) - 1, first)
        path = paths[first] if blocks else ()
        prefix = _prefix(path, tokenizer, prefix_of) if prefix_of else ""
        out.append(
            Chunk(
                w.ordinal,
                w.text,
                w.start,
                w.end,
                w.n_tokens,
                path,
                _span([b.location for b in blocks[first : last + 1]]),
                prefix,
            )
        )
    return out
