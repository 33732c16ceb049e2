"""The text analyzer of keyword search: what a chunk is indexed under and what a query
looks for, the same on both stores (docs/architecture.md, "Keyword search").

A text is cut into runs by script:
- Chinese, Japanese and Korean runs (Han, Hiragana, Katakana, Hangul) give overlapping
  character bigrams (a run of one character gives itself), as Lucene's `cjk` analyzer
  does: no dictionary, and a Korean word with its particle (하드웨어를) holds every
  bigram of the word without it (하드웨어). Measured per language in
  docs/results/multilingual_search.md; no morphological analyser was measured against it.
- every other run of letters, combining marks, digits and underscores is a word
  (Devanagari keeps its vowel signs and viramas, which Python's `\\w` splits on), case-
  folded after NFKC normalisation; its Snowball stem in the chunk's language (PyStemmer,
  where Snowball has one) is indexed beside it, in a field of its own (`document_stems`).

A chunk's language is detected once when it is stored (py3langid, `detect_language`);
"" when the detector is unsure, and it then gets no stems. A query's words are looked for
as written among the chunks' words, and their stems in every stored language among the
chunks' stems, a stem's match weighing `STEM_WEIGHT` of a word's (`query_terms`), so a
query finds a chunk whatever language each was detected in, and the chunk holding the
word itself ranks first. No word is a stop word: a query looks for all its words, and
BM25's inverse document frequency weighs the common ones down. Dropping the query's stop
words, Snowball's lists or stopwords-iso's, lowered keyword MRR@10 on questions and
partial sentences in English and most other languages measured
(docs/results/multilingual_search.md, docs/results/english_analyzer.md).
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

# What the stored terms depend on; a store whose terms were made by another version (or
# another PyStemmer) analyses its chunks again (`fingerprint`).
ANALYZER_VERSION = 2
# The weight of a match of stems against a match of words as written: stems find other
# forms of a word (configuring: configuration) without outranking the chunks that hold
# the word itself; stemmed alone, English keyword search put the README's demo query's
# answer second (docs/languages.md).
STEM_WEIGHT = 0.25
# A chunk's language is kept when the detector gives it at least this probability.
MIN_LANGUAGE_PROBABILITY = 0.5
# Longer words are not indexed (Lucene's default maximum token length): they are not
# words (base64, hashes) and PostgreSQL refuses lexemes over 2,046 bytes.
MAX_TERM_CHARS = 255
# The Snowball stemmers (PyStemmer's names) by ISO 639-1 code.
STEMMERS = MappingProxyType(
    {
        "ar": "arabic",
        "ca": "catalan",
        "cs": "czech",
        "da": "danish",
        "de": "german",
        "el": "greek",
        "en": "english",
        "eo": "esperanto",
        "es": "spanish",
        "et": "estonian",
        "eu": "basque",
        "fa": "persian",
        "fi": "finnish",
        "fr": "french",
        "ga": "irish",
        "hi": "hindi",
        "hu": "hungarian",
        "hy": "armenian",
        "id": "indonesian",
        "it": "italian",
        "lt": "lithuanian",
        "ne": "nepali",
        "nl": "dutch",
        "no": "norwegian",
        "nb": "norwegian",
        "pl": "polish",
        "pt": "portuguese",
        "ro": "romanian",
        "ru": "russian",
        "sr": "serbian",
        "sv": "swedish",
        "ta": "tamil",
        "tr": "turkish",
        "yi": "yiddish",
    }
)
_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"


@functools.cache
def _runs() -> Any:
    """The pattern of a text's runs: group 1 a CJK run, group 2 a word."""
    import regex

    return regex.compile(rf"([{_CJK}]+)|((?:(?![{_CJK}])[\p{{L}}\p{{M}}\p{{N}}_])+)")


@functools.cache
def _stemmer(language: str) -> Any:
    import Stemmer

    return Stemmer.Stemmer(STEMMERS[language])


@functools.cache
def _identifier() -> Any:
    """py3langid's identifier with normalised probabilities, over `_model_arrays`: its
    tables memory-mapped from attnswitch's cache, so a process reads only the pages a text
    visits (a short query touches a few of the model's 68 MB). py3langid's own loader
    inflates the model into a temporary file, which fails where the disk is full or the
    temporary folder read-only, and a run must then stop on its own store's error, not on
    the detector's."""
    from py3langid.langid import LanguageIdentifier

    model = _model_arrays()
    return LanguageIdentifier(
        model["ptc"],
        model["pc"],
        model["classes"].tolist(),
        model["nextmove"].data,  # a memoryview, indexed per byte of text: Python ints, no copy
        model["out_feat"].tolist(),
        norm_probs=True,
        tk_row=model["nextmove_row"].data,
    )


MODEL_ARRAYS = ("ptc", "pc", "classes", "nextmove", "nextmove_row", "out_feat")


def _model_arrays() -> dict[str, np.ndarray]:
    """py3langid's model as arrays: `.npy` files in a folder of attnswitch's cache,
    memory-mapped (read-only), the folder made on first use (written whole, then renamed
    into place); else, where the cache cannot be written or holds a torn copy that cannot be
    replaced, the model decompressed in memory. Decompressing its LZMA costs 0.25-0.35 s on
    2 cores, and reading a whole uncompressed copy about 0.1 s (most of a cold hybrid
    search's store time: the query's language decides the dense part's weight); mapping the
    copy costs a millisecond."""
    import io
    import lzma
    import os
    import shutil
    import tempfile
    from pathlib import Path

    import numpy as np
    import py3langid
    from py3langid.langid import MODEL_DIR, MODEL_FILE

    from attnswitch.kernels.cache import cache_file

    # py3langid's own version string: importlib.metadata costs a cold search 15 ms
    cached = cache_file(f"langid-model-{py3langid.__version__}")
    try:
        return {name: np.load(cached / f"{name}.npy", mmap_mode="r") for name in MODEL_ARRAYS}
    except (OSError, ValueError):  # not made yet, or torn: made (again) below
        pass
    with lzma.open(MODEL_DIR / MODEL_FILE) as packed:
        unpacked = io.BytesIO(packed.read())
    with np.load(unpacked, allow_pickle=False) as data:
        arrays = {name: data[name] for name in MODEL_ARRAYS}
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(dir=cached.parent, prefix=cached.name, suffix=".part"))
        try:
            for name, values in arrays.items():
                np.save(partial / f"{name}.npy", values, allow_pickle=False)
            if cached.exists():  # a torn copy: replaced by the whole one
                shutil.rmtree(cached)
            os.rename(partial, cached)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
    except OSError:  # a full disk, a read-only cache, a race lost: the model stays in memory
        pass
    return arrays


def fingerprint() -> str:
    """What a store's terms were made by: `ANALYZER_VERSION` and PyStemmer's version."""
    from importlib.metadata import version

    return f"{ANALYZER_VERSION}:pystemmer-{version('pystemmer')}"


def detect_language(text: str) -> str:
    """`text`'s language as an ISO 639-1 code, or "" when the detector gives none at least
    `MIN_LANGUAGE_PROBABILITY` (a text of digits and symbols, a mix)."""
    if not any(c.isalpha() for c in text):
        return ""
    language, probability = _identifier().classify(text)
    return str(language) if probability >= MIN_LANGUAGE_PROBABILITY else ""


def _tokens(text: str) -> list[tuple[bool, str]]:
    """(is CJK, run) for each run of `text`, NFKC-normalised and case-folded."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return [(bool(m.group(1)), m.group(0)) for m in _runs().finditer(text)]


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


def document_terms(text: str, language: str) -> list[str]:
    """The terms a chunk of `text` is indexed under as written, in order (a term once per
    occurrence): CJK bigrams and words."""
    terms: list[str] = []
    for cjk, run in _tokens(text):
        if cjk:
            terms.extend(_bigrams(run))
        elif len(run) <= MAX_TERM_CHARS:
            terms.append(run)
    return terms


def document_stems(text: str, language: str) -> list[str]:
    """The Snowball stems of the words of a chunk of `text` in `language`
    (`detect_language`), in order; [] for a language without a stemmer. Indexed apart
    from the words (`STEM_WEIGHT`). A word Snowball stems to nothing (Nepali's `को`, a
    suffix alone) has no stem: PostgreSQL refuses an empty lexeme."""
    if language not in STEMMERS:
        return []
    stem = _stemmer(language).stemWord
    stems = (stem(run) for cjk, run in _tokens(text) if not cjk and len(run) <= MAX_TERM_CHARS)
    return [s for s in stems if s]


def query_terms(text: str, languages: Iterable[str]) -> tuple[list[str], list[str]]:
    """(words, stems) a keyword query of `text` looks for (any of them), each once, in
    query order, where the stored chunks are in `languages` ("" for undetected): its words
    as written (and the bigrams of its CJK runs), matched against the chunks' words, and
    each word's stem in every stored language with a stemmer, matched against the chunks'
    stems."""
    languages = sorted(set(languages))
    tokens = _tokens(text)
    stemmers = [_stemmer(lang) for lang in languages if lang in STEMMERS]
    terms: list[str] = []
    stems: list[str] = []
    for cjk, run in tokens:
        if cjk:
            terms.extend(_bigrams(run))
        elif len(run) <= MAX_TERM_CHARS:
            terms.append(run)
            stems.extend(stem for stem in (s.stemWord(run) for s in stemmers) if stem)
    return list(dict.fromkeys(terms)), list(dict.fromkeys(stems))


def tsvector_literal(terms: Sequence[str], stems: Sequence[str] = ()) -> str:
    """One chunk's `terms` and `stems` (`document_terms`, `document_stems`, in order) as
    a PostgreSQL `tsvector` literal: each distinct lexeme quoted, so PostgreSQL's parser
    never re-splits one, with its positions (1-based, at most 256 each, capped at 16,383
    as PostgreSQL caps them; the stems' after the words'), those of words as written
    weighted A, of stems D."""
    positions: dict[str, set[str]] = {}
    # the stems after the words: a stem equal to its word keeps a position of its own
    for weight, items, first in (("A", terms, 1), ("", stems, len(terms) + 1)):
        for i, term in enumerate(items, first):
            at = positions.setdefault(term, set())
            if len(at) < 256:
                at.add(f"{min(i, 16383)}{weight}")
    return " ".join(
        f"{_quoted(t)}:{','.join(sorted(p, key=_position))}" for t, p in positions.items()
    )


def _position(mark: str) -> tuple[int, str]:
    return int(mark.rstrip("AD")), mark


def tsquery_literal(terms: Sequence[str], stems: Sequence[str] = ()) -> str:
    """A PostgreSQL `tsquery` literal matching any of `terms` among a chunk's words as
    written (weight A) or any of `stems` among its stems (weight D)."""
    return " | ".join([*(f"{_quoted(t)}:A" for t in terms), *(f"{_quoted(s)}:D" for s in stems)])


def _quoted(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"
