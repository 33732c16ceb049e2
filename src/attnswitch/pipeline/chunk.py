"""Token-aware chunking: windows of at most `max_tokens` model tokens with `overlap` tokens
shared between neighbours, cut on word boundaries, each carrying its character span so the
stored text is the document's own text.

`max_tokens` counts the text's tokens only; the encoder adds its special tokens ([CLS],
[SEP]) on top, so pass the model's limit minus those (`config.special_tokens`;
`config.IndexConfig.build` does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attnswitch.errors import ConfigError


@dataclass(frozen=True)
class Chunk:
    """One window of a document: `text == document[start:end]`, `n_tokens` model tokens."""

    ordinal: int
    text: str
    start: int
    end: int
    n_tokens: int


def chunk_text(text: str, tokenizer: Any, *, max_tokens: int = 254, overlap: int = 32) -> list[Chunk]:
    """Split `text` into overlapping token windows.

    tokenizer: a `tokenizers.Tokenizer` (its `encode(text, add_special_tokens=False)` gives
    `offsets` and `word_ids`). A window never ends inside a word unless a single word is
    longer than the window. Whitespace-only text gives no chunks.
    """
    if max_tokens < 1:
        raise ConfigError(f"max_tokens: expected >= 1, got {max_tokens}")
    if not 0 <= overlap < max_tokens:
        raise ConfigError(f"overlap: expected 0 <= overlap < max_tokens ({max_tokens}), got {overlap}")
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
