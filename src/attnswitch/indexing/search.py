"""Search: the top-k chunks for a query, by meaning (dense), by words (keyword) or both
(hybrid, the default), with source and text.

- dense: cosine similarity of the query's vector to the chunks' (the store keeps vectors
  L2-normalised, so a dot product, in [-1, 1]); the store answers exactly or from its ANN
  index (`Store.dense`).
- keyword: the store's full-text ranking of the query's words (SQLite FTS5 BM25,
  PostgreSQL `ts_rank`), any word matching; exact terms such as error codes, function
  names and config keys are found even where the embedding misses them.
- hybrid: both lists fused by a convex combination of their min-max normalised scores
  (Bruch et al., "An Analysis of Fusion Functions for Hybrid Retrieval", TOIS 2023; the
  `minmax` normaliser of Elasticsearch's linear retriever): each list's scores are scaled
  to [0, 1] between its lowest and highest, and a chunk scores `DENSE_WEIGHT` times its
  dense part plus the rest times its keyword part (0 in a list it is not in). Each list is
  `max(k, CANDIDATES)` long. A chunk that holds the query's words as one phrase gains
  `PHRASE_BONUS` and ranks above every chunk that does not (`phrase_first`; a one-word
  query's phrase is its word): without it, a dense list that is wrong for a verbatim query
  (a heading, a phrase from the text, a name the model does not know) pulls the keyword
  list's answer down. Unlike reciprocal rank fusion (the fusion before), a score keeps how
  far apart two chunks are, not only their order: a chunk that keyword search ranks first
  only because it repeats the query's common words many times does not beat the chunk
  dense search finds much closer in meaning (docs/results/search_quality.md).

The keyword list (keyword and hybrid) is ranked on the query's words less the opening of
a question ("how do I", "what is", "can I", `keyword_text`): those words say how the
query is asked, not what it is about, and matched they rank pages that ask many
questions (an FAQ) over the answer. Only a leading run of at least two such words goes,
so "WHERE clause" or "How WAL works" keep every word; the dense vector is of the whole
query.

Each result is a `Hit`, the one shape of the Python API, `attnswitch search --json` and
`/v1/search`, with the score parts beside the score (see `Hit`). Ties are broken by chunk
id, so results are deterministic. Encoding the query text is the engine's job; this takes
its vector (dense, hybrid) and its text (keyword, hybrid).
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from attnswitch.documents.chunk import heading_label
from attnswitch.documents.readers.blocks import Location
from attnswitch.indexing import analyzer
from attnswitch.indexing.ann import exact_top_k
from attnswitch.indexing.copies import shown_order
from attnswitch.indexing.diversity import PER_DOCUMENT, check_group, keep_keyword_finds, spread
from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.records import StoredDocument
from attnswitch.indexing.requests import Mode
from attnswitch.indexing.store import (
    MAX_EF_SEARCH,
    ChunkRow,
    Store,
    StoreDeadlineError,
    StoreInputError,
    check_ef_search,
    keyword_terms,
)

if TYPE_CHECKING:
    from attnswitch.indexing.access import Reader

# Words that open a question: interrogatives, auxiliaries and the asker ("how do I ...").
QUESTION_OPENING = frozenset(
    "how what why when where which who whom whose can could should would will shall may "
    "might must do does did is are was were am i we you one to".split()
)
# Hybrid: the dense part's weight in the fused score, the keyword part's is the rest; tuned
# on the example corpus, at or above the better of dense and keyword on every held-out set
# (docs/results/search_quality.md).
DENSE_WEIGHT = 0.8
# The dense part's weight for a chunk, or a query, in a language the model's card does not
# declare (`IndexConfig.languages`): its vectors there are weak (all-MiniLM-L6-v2 learned
# English only), so the keyword part carries the fusion; measured per language in
# docs/results/multilingual_search.md.
FOREIGN_DENSE_WEIGHT = 0.2
CANDIDATES = 50
# Hybrid: a chunk holding the query as a phrase gains 1, so its score (1 to 2) is above
# every fused score (0 to 1) of a chunk that does not; it ranks first in any case.
PHRASE_BONUS = 1.0
# A one-word query counts too: the chunks holding that word (a name such as `temp_hi` that
# the model does not know) go first; with two words at least, hybrid was 0.055 of MRR@10
# under keyword alone on such names (docs/results/search_quality.md, exact terms).
MIN_PHRASE_WORDS = 1
SNIPPET_CHARS = 240  # a hit's one-line snippet


@dataclass(frozen=True)
class Hit:
    """One search result, in the one shape that the Python API returns, `attnswitch search
    --json` prints and `/v1/search` answers (`to_dict`; the service's schema is this class).

    `score` and `rank` order the results: the cosine similarity (dense), the store's
    keyword rank score (keyword) or the fused score (hybrid, `fuse`). The score
    parts say where a hybrid score came from: the chunk's cosine similarity and rank in the
    dense list, and its keyword score and rank in the keyword list, each None when the
    chunk was not in that list (not searched in this mode, or not among its best
    `max(k, CANDIDATES)`)."""

    __pydantic_config__ = {"use_attribute_docstrings": True}  # the fields' docs in OpenAPI

    rank: int
    """Position in the results, from 1."""
    score: float
    """dense: cosine similarity to the query, -1 to 1; keyword: full-text rank score; hybrid:
    0.8 times the dense similarity and 0.2 times the keyword score, each scaled to 0-1
    between the lowest and highest of its list (0 when not in it), plus 1 when the chunk
    holds the query's words as one phrase (so 0 to 2). Higher is better; in hybrid the
    order is the fused one after its guards (`diversity`: a keyword find lifted to rank 3,
    a document's third and later chunks after the others' first two), so a lower score
    may rank above a higher one."""
    path: str
    """The document's path relative to the indexed folder (`root`), with / separators."""
    root: str
    """The indexed folder. The service shows it relative to its jobs root when inside it,
    else by its name only (never an absolute server path)."""
    source: str
    """The same as `path` (the name earlier versions gave it)."""
    chunk_id: int
    """The chunk's id in the index (stable until its document changes)."""
    ordinal: int
    """The chunk's position in its document, from 0."""
    start: int
    """Character offset of the chunk's start in the document's extracted text."""
    end: int
    """Character offset just past the chunk's end."""
    heading_path: list[str]
    """The titles of the headings the chunk lies under, outermost first (["json", "Basic
    Usage"]; [] when its document has no headings above it)."""
    location: dict[str, Any]
    """Where the chunk lies in its file, the fields that are known: page (from 1) and
    page_end (when it spans pages), slide, sheet and rows ([first, last]), part (a mail
    part), cell (a notebook cell); {} when the format has no such places."""
    dense_similarity: float | None
    """Cosine similarity of the chunk to the query, -1 to 1 (None: not in the dense list)."""
    dense_rank: int | None
    """Rank in the dense list, from 1 (None: not in it)."""
    keyword_score: float | None
    """The store's full-text rank score, higher is better (None: not in the keyword list)."""
    keyword_rank: int | None
    """Rank in the keyword list, from 1 (None: not in it)."""
    snippet: str
    """The passage of the chunk that best matches the query, on one line, at most 240
    characters (an ellipsis marks a cut): the window holding the most of the query's words
    (`passage`), else the chunk's start."""
    text: str
    """The chunk's text."""
    snippet_start: int = 0
    """Character offset in `text` where the snippet's passage starts."""
    highlights: list[list[int]] = dataclasses.field(default_factory=list)
    """[start, end] character offsets in `snippet` of each query word found there (case
    ignored; a word also matches with a suffix: "update" marks "updates")."""
    uri: str = ""
    """The original file as a `file://` URI (the indexed folder joined with `path`),
    ending `#page=N` for a PDF whose chunk's page is known; from the service, the path
    `/v1/chunks/{chunk_id}/file` that serves it (no server path in its answers; a mail
    attachment alone there, also with `#page=N` when a PDF: `mail_parts`)."""
    also_at: list[dict[str, str]] = dataclasses.field(default_factory=list)
    """The other places of this document's copies (the same bytes), each {"root", "path"}
    as `root` and `path` say them: copies are one result, not several. The hit shows the
    copy without a copy marker in its path ("(copy)", "Copy of", "(1)"), then the oldest,
    then the shortest path, then alphabetically (`copies.shown_order`); these follow in that
    order."""
    more_in_document: int = 0
    """Grouped by document (`group="document"`, `--per-document`): how many other passages
    of this hit's document matched (among the candidates searched); 0 otherwise."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def where(self) -> str:
        """Where the hit is, as a person reads it (`where`)."""
        return where(self.path, self.location, self.heading_path)


def file_uri(root: str, source: str) -> str:
    """The `file://` URI of `source` below the folder `root` ("" when `root` is not an
    absolute path)."""
    from pathlib import PurePosixPath

    folder = PurePosixPath(root)
    return (folder / source).as_uri() if folder.is_absolute() else ""


def where(path: str, location: dict[str, Any] | None, heading_path: Sequence[str]) -> str:
    """A hit's place as one line: "guide.pdf p. 12 · json › Basic Usage" (the path, the
    location's label, the heading path), the parts that are known."""
    place = " ".join(p for p in (path, Location.from_dict(location).label()) if p)
    return " · ".join(p for p in (place, heading_label(heading_path)) if p)


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """`text` with its whitespace runs made single spaces, cut to `limit` characters with an
    ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


# Words not marked in a snippet: a query's question opening and function words, which
# every passage holds.
UNMARKED = QUESTION_OPENING | frozenset(
    "a an the of in on at by for with and or not no as it its this that these those be "
    "been from into than then there their".split()
)
CONTEXT_CHARS = 60  # shown before the first matched word of a passage


def highlight_terms(query: str | None) -> list[str]:
    """The words of `query` a snippet marks: its keyword words (`keyword_text`) less
    `UNMARKED`, lower-cased, each once."""
    if not query:
        return []
    words = [w.lower() for w in keyword_terms(keyword_text(query))]
    return list(dict.fromkeys(w for w in words if w not in UNMARKED))


def passage(
    text: str, terms: Sequence[str], limit: int = SNIPPET_CHARS
) -> tuple[str, int, list[list[int]]]:
    """(snippet, its start in `text`, the [start, end] offsets of the matched words in the
    snippet) for the window of `text`, at most `limit` characters on one line, that holds
    the most distinct `terms` (then the most matches, then the earliest), opening
    `CONTEXT_CHARS` before its first match at a word boundary; the chunk's start when no
    term is found. A term matches a whole word, or the start of one ("row" in "rows"),
    case ignored."""
    found = (
        [
            (m.start(), m.end(), m.group(1).lower())
            for m in re.finditer(
                r"(?<!\w)("
                + "|".join(map(re.escape, sorted(terms, key=len, reverse=True)))
                + r")\w*",
                text,
                re.IGNORECASE,
            )
        ]
        if terms
        else []
    )
    start = 0
    if found:
        best: tuple[tuple[int, int, int], int] | None = None
        for i, (first, _, _) in enumerate(found):
            inside = [f for f in found[i:] if f[1] <= first + limit - CONTEXT_CHARS]
            score = (len({f[2] for f in inside}), len(inside), -first)
            if best is None or score > best[0]:
                best = (score, first)
        assert best is not None  # `found` is not empty
        start = max(0, best[1] - CONTEXT_CHARS)
        if start > 0 and not text[start - 1].isspace():  # open at a word boundary
            space = re.compile(r"\s").search(text, start, best[1])
            start = space.end() if space else best[1]
    flat, where = _flatten(text, start, limit + 1)
    cut = len(flat) > limit - (1 if start else 0)
    opening = "…" if start > 0 else ""
    body = flat[: limit - len(opening) - (1 if cut else 0)]
    if cut:
        body = body.rstrip() + "…"
    shown = opening + body
    marks = []
    for first, last, _ in found:
        if first < start or where.get(first) is None:
            continue
        a, b = where[first] + len(opening), where.get(last - 1, -1) + 1 + len(opening)
        if b > len(opening) + len(body) - (1 if cut else 0) or b <= a:
            continue
        marks.append([a, b])
    return shown, start, marks


def _flatten(text: str, start: int, most: int) -> tuple[str, dict[int, int]]:
    """`text[start:]` with whitespace runs made single spaces and leading space dropped, up
    to `most` characters of the result, and the offset in the result of each kept
    character of `text`."""
    out: list[str] = []
    where: dict[int, int] = {}
    space = False
    for i in range(start, len(text)):
        if len(out) >= most:  # a snippet shows `limit` characters: the rest is cut
            break
        c = text[i]
        if c.isspace():
            space = bool(out)
            continue
        if space:
            out.append(" ")
            space = False
        where[i] = len(out)
        out.append(c)
    return "".join(out), where


def check_mode(mode: str) -> str:
    """`mode` as one of `requests.MODES`, else `StoreInputError` naming `mode`."""
    return Mode.parse(mode).value


def check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise StoreInputError("k", "an int >= 1", repr(k))
    return int(k)


def search(
    store: Store,
    query: Any = None,
    k: int = 5,
    *,
    text: str | None = None,
    mode: str | None = None,
    ef: int | None = None,
    where: SearchFilter | None = None,
    deadline: float | None = None,
    config: Any = None,
    extra_dense: Sequence[tuple[int, float]] = (),
    group: str | None = None,
) -> list[Hit]:
    """The `k` best chunks of `store`, best first. `query` is the query's vector `[dim]`
    (dense and hybrid), `text` its text (keyword and hybrid); `mode` None is hybrid when
    `text` is given, else dense. `ef`: the ANN search beam of a large store (wider finds
    more of the exact nearest chunks, slower; default the store's `ef_search`). `where`:
    only chunks of the documents this filter keeps (`filters.SearchFilter`), applied in the
    store's dense and keyword queries, so `k` hits come back when `k` chunks pass.
    `deadline`: a `time.monotonic()` time by which the search stops, done or not
    (`StoreDeadlineError`; its statements under `Store.deadline`, its loops looking at the
    clock); None: no deadline. `config`: the store's `IndexConfig` when the caller has read
    it (`Index.config`; hybrid weighs by its model's languages), else read here.
    `extra_dense`: (chunk id, score) pairs the dense list takes besides the store's, on the
    same scale (chunks a search scored itself: `query_fill`); a chunk in both keeps its
    better score. `group`: "chunk" (None, the default) the best chunks; "document" the
    best chunk of each of the `k` best documents, each with how many other chunks of its
    document the lists held (`Hit.more_in_document`): the lists are read longer until `k`
    documents are found or they are exhausted, not cut from a list of `k` chunks. Hybrid
    keeps the keyword list's finds that dense lacks and spreads a document's chunks
    (`diversity`).

    The store's statements per search are a fixed number whatever `k` is, for each round
    (one round unless copies of documents, or grouping, leave fewer than `k` distinct
    results): the dense and keyword lists, their chunks, their documents and the kept
    ones' copies (and a shown copy's chunks when the lists lack them)."""
    k = check_k(k)
    group = check_group(group)
    if ef is not None:  # also where no dense search will use it (mode "keyword")
        try:
            check_ef_search(ef)
        except StoreInputError:  # named as this function's argument, not the store's
            raise StoreInputError("ef", f"an integer from 1 to {MAX_EF_SEARCH}", repr(ef)) from None
    kind = Mode.parse(mode if mode is not None else Mode.HYBRID if text is not None else Mode.DENSE)
    if kind.needs_vector and query is None:
        raise StoreInputError("query", f"the query's vector for mode {kind.value!r}", None)
    if kind.needs_text and (not isinstance(text, str) or not text.strip()):
        raise StoreInputError("text", f"the query's text for mode {kind.value!r}", repr(text))
    q = None
    if kind.needs_vector:
        if np.ndim(query) != 1:
            raise StoreInputError("query", "one vector [dim]", f"shape {list(np.shape(query))}")
        q = normalised(np.asarray(query)[None, :], store.dim)
    with store.deadline(deadline):
        # The store's model languages, read once whatever the rounds (hybrid's weights).
        languages = (
            None
            if kind is not Mode.HYBRID
            else model_languages(store)
            if config is None
            else config.languages
        )
        # Copies of a document are one result (and, grouped by document, a document's
        # chunks): a list holding them is read again, twice as
        # long, until k distinct results are found or the lists are exhausted. Each round
        # reads its chunks and their documents once, in bulk: the store's statements per
        # search do not grow with k.
        n = 2 * k if kind is not Mode.HYBRID else max(2 * k, CANDIDATES)
        while True:
            on_time(deadline)
            dense = None if q is None else store.dense(q, n, ef, where=where)[0]
            if dense is not None and extra_dense:
                dense = merged(dense, extra_dense, n)
            keyword = (
                store.keyword(keyword_text(cast(str, text)), n, where=where)
                if kind.needs_text
                else None
            )
            rows = store.chunks({cid for cid, _ in [*(dense or ()), *(keyword or ())]})
            if kind is not Mode.HYBRID:
                ranked = (dense if keyword is None else keyword) or []
            else:  # hybrid: both lists were read, and `text` was checked
                assert dense is not None and keyword is not None and text is not None
                weights = dense_weights(languages, text, rows)
                fused = fuse(dense, keyword, weights)
                ranked = phrase_first(fused, {cid: row.text for cid, row in rows.items()}, text)
                ranked = keep_keyword_finds(ranked, dense, keyword)
            found = distinct_documents(
                store,
                ranked,
                k,
                deadline,
                rows,
                group=group,
                per_document=PER_DOCUMENT if kind is Mode.HYBRID else None,
                reader=None if where is None else where.reader,
            )
            full = any(lst is not None and len(lst) >= n for lst in (dense, keyword))
            if len(found.kept) >= k or not full:
                break
            n *= 2
        return _hits(
            store, [found.kept], [dense], [keyword], text, found.also, found.rows, found.more
        )[0]


def merged(
    first: Sequence[tuple[int, float]], second: Sequence[tuple[int, float]], n: int
) -> list[tuple[int, float]]:
    """The `n` best (chunk id, score) of both lists, each chunk once at its better score;
    score descending, then id ascending."""
    best: dict[int, float] = {}
    for cid, score in (*first, *second):
        if cid not in best or score > best[cid]:
            best[cid] = score
    return sorted(best.items(), key=lambda item: (-item[1], item[0]))[:n]


@dataclass
class Distinct:
    """What `distinct_documents` keeps: `kept` (chunk id, score) best first; `also`, kept
    chunk id -> its document's other places ({"root", "path"} each, in `copies.shown_order`);
    `more`, kept chunk id -> how many other passages of its document the lists held (when
    grouped by document); `rows`, the chunk rows of `kept` and of the lists."""

    kept: list[tuple[int, float]]
    also: dict[int, list[dict[str, str]]]
    more: dict[int, int]
    rows: dict[int, ChunkRow]


def distinct_documents(
    store: Store,
    ranked: list[tuple[int, float]],
    k: int,
    deadline: float | None = None,
    rows: Mapping[int, ChunkRow] | None = None,
    *,
    group: str = "chunk",
    per_document: int | None = None,
    reader: Reader | None = None,
) -> Distinct:
    """The first `k` of `ranked` (chunk id, score) with the chunks of a document's copies
    (the same bytes at other paths: `Store.copies_of`) folded into one: the passage is
    shown at the copy `copies.shown_copy` picks (the same rule in every interface), the
    other places in `also`. `group` "document": only each document's best passage, with
    how many others of it `ranked` holds (`more`). `per_document`: a document's passages
    after its first `per_document` rank after every other document's (`diversity.spread`;
    None: rank order). `reader` (None: an admin): only the copies it may read are shown
    or listed (`Store.may_read`), so `also` names no place it may not read. `rows`: the chunk rows of `ranked` when the caller has read them
    (None: read here); a chunk missing from them (deleted) is left out. The documents,
    then their copies, are read in one statement each (`Store.lookup_many`,
    `Store.copies_of_many`), each looking at the clock first (`deadline`, as `search`'s);
    a shown copy whose chunk the lists lack is read by `Store.document_chunks`."""
    rows = dict(store.chunks(cid for cid, _ in ranked) if rows is None else rows)
    present = [(cid, score, row) for cid, score in ranked if (row := rows.get(cid)) is not None]
    on_time(deadline)
    documents = store.lookup_many({(row.root, row.source) for _, _, row in present})

    def document_key(row: ChunkRow) -> tuple[Any, ...]:
        doc = documents.get((row.root, row.source))
        if doc is not None and doc.sha256:
            return ("content", doc.sha256, doc.config)
        return ("place", row.root, row.source)

    passages: list[tuple[int, float, tuple[Any, ...]]] = []  # (cid, score, document key)
    places: dict[tuple[Any, ...], list[int]] = {}  # passage key -> its chunks, rank order
    more: dict[tuple[Any, ...], int] = {}
    for cid, score, row in present:
        doc_key = document_key(row)
        key = (doc_key, row.ordinal) if doc_key[0] == "content" else (cid,)
        if key in places:
            places[key].append(cid)
            continue
        places[key] = [cid]
        if group == "document" and doc_key in more:
            more[doc_key] += 1
            continue
        more.setdefault(doc_key, 0)
        passages.append((cid, score, doc_key))
    if per_document is not None and group != "document":
        order = spread([(cid, doc_key) for cid, _, doc_key in passages], per_document)
        passages = [passages[i] for i in order]
    passages = passages[:k]
    kept = [(cid, score) for cid, score, _ in passages]
    counts = {cid: more[doc_key] for cid, _, doc_key in passages} if group == "document" else {}
    # kept chunk id -> its document's (sha256, config), where the document has a hash
    held = {
        cid: (doc_key[1], doc_key[2]) for cid, _, doc_key in passages if doc_key[0] == "content"
    }
    if not held:
        return Distinct(kept, {}, counts, rows)
    on_time(deadline)
    copies = store.copies_of_many(held.values())
    also: dict[int, list[dict[str, str]]] = {}
    for i, (cid, score) in enumerate(kept):
        if cid not in held:
            continue
        row = rows[cid]
        docs = copies.get(held[cid], [])
        own = documents.get((row.root, row.source))
        if reader is not None:  # the hit's own document passed the reader's filter
            docs = [d for d in docs if d == own or store.may_read(reader, d.id)]
        if own is not None and own not in docs:
            docs = [*docs, own]
        ordered = sorted(docs, key=shown_order)
        shown = ordered[0] if ordered else None
        if shown is not None and (shown.root, shown.source) != (row.root, row.source):
            chosen = _copy_chunk(
                store, shown, row, places.get((held_key(held[cid]), row.ordinal), []), rows
            )
            if chosen is not None:
                kept[i] = (chosen, score)
                if cid in counts:
                    counts[chosen] = counts.pop(cid)
                cid, row = chosen, rows[chosen]
        others = [
            {"root": c.root, "path": c.source}
            for c in ordered
            if (c.root, c.source) != (row.root, row.source)
        ]
        if others:
            also[cid] = others
    return Distinct(kept, also, counts, rows)


def held_key(content: tuple[str, str]) -> tuple[Any, ...]:
    """The document key of a content hash and config (as `distinct_documents` keys it)."""
    return ("content", *content)


def _copy_chunk(
    store: Store,
    shown: StoredDocument,
    row: ChunkRow,
    candidates: Sequence[int],
    rows: dict[int, ChunkRow],
) -> int | None:
    """The id of the chunk of the copy `shown` at `row`'s ordinal: one of `candidates`
    (the lists' chunks of that passage) when they hold it, else read from the store
    (added to `rows`); None when the copy has no such chunk (changed since)."""
    for cid in candidates:
        other = rows[cid]
        if (other.root, other.source) == (shown.root, shown.source):
            return cid
    for other in store.document_chunks(shown.root, shown.source):
        if other.ordinal == row.ordinal:
            rows[other.id] = other
            return other.id
    return None


def on_time(deadline: float | None) -> None:
    """Raise `StoreDeadlineError` when the `time.monotonic()` time `deadline` has passed
    (None: never)."""
    if deadline is not None and time.monotonic() >= deadline:
        raise StoreDeadlineError()


def keyword_text(text: str) -> str:
    """The words of `text` that keyword search ranks on: all of them less a leading run of
    at least two question-opening words (`QUESTION_OPENING`), when words remain after it."""
    words = text.split()
    opening = 0
    while opening < len(words) and _bare(words[opening]) in QUESTION_OPENING:
        opening += 1
    if opening < 2 or opening == len(words):
        return text
    return " ".join(words[opening:])


def phrase_first(
    fused: list[tuple[int, float]], texts: dict[int, str], query: str, bonus: float = PHRASE_BONUS
) -> list[tuple[int, float]]:
    """`fused` (chunk id, fused score) re-sorted so that the chunks whose text holds the
    query's keyword words (`keyword_text`) as one phrase (in order, only punctuation or
    spaces between them, case ignored) come first, each group in its fused order, with
    `bonus` added to their score; the phrase of a one-word query is that word. Queries of
    fewer than `MIN_PHRASE_WORDS` words (none left) keep their order. Chunks missing from
    `texts` (deleted) are dropped."""
    words = keyword_terms(keyword_text(query))
    if len(words) < MIN_PHRASE_WORDS:
        return [(cid, score) for cid, score in fused if cid in texts]
    phrase = re.compile(r"(?<!\w)" + r"\W+".join(map(re.escape, words)) + r"(?!\w)", re.IGNORECASE)
    scored = [
        (cid, score, phrase.search(texts[cid]) is not None) for cid, score in fused if cid in texts
    ]
    scored.sort(key=lambda item: (not item[2], -item[1], item[0]))
    return [(cid, score + bonus if held else score) for cid, score, held in scored]


def _bare(word: str) -> str:
    return word.strip("¿?¡!.,;:'\"()").lower()


def min_max(ranked: list[tuple[int, float]]) -> dict[int, float]:
    """chunk id -> its score scaled to [0, 1] between the lowest and the highest of
    `ranked` (1 for every chunk when they are equal)."""
    if not ranked:
        return {}
    hi, lo = max(s for _, s in ranked), min(s for _, s in ranked)
    return {cid: (s - lo) / (hi - lo) if hi > lo else 1.0 for cid, s in ranked}


def model_languages(store: Store) -> tuple[str, ...] | None:
    """The languages the store's model declares (`IndexConfig.languages`; None: any, or
    a store whose config predates them)."""
    from attnswitch.indexing.config import stored_config

    config = stored_config(store)
    return None if config is None else config.languages


def dense_weights(
    model: Sequence[str] | None, query: str, rows: Mapping[int, Any]
) -> dict[int, float]:
    """chunk id -> the dense part's weight in its fused score: `DENSE_WEIGHT` where the
    model declares the query's language (`analyzer.detect_language`: a query too short to
    be sure of counts as declared) and the chunk's (`ChunkRow.language`; "" counts as
    declared), else `FOREIGN_DENSE_WEIGHT`; `DENSE_WEIGHT` for all when `model` is None
    (any language)."""
    if model is None:
        return {cid: DENSE_WEIGHT for cid in rows}
    if analyzer.detect_language(query) not in (*model, ""):
        return {cid: FOREIGN_DENSE_WEIGHT for cid in rows}
    return {
        cid: DENSE_WEIGHT if row.language in (*model, "") else FOREIGN_DENSE_WEIGHT
        for cid, row in rows.items()
    }


def fuse(
    dense: list[tuple[int, float]],
    keyword: list[tuple[int, float]],
    dense_weight: float | Mapping[int, float] = DENSE_WEIGHT,
) -> list[tuple[int, float]]:
    """The convex combination of two ranked (chunk id, score) lists: every chunk of either,
    with `dense_weight` (one for all, or per chunk id; `DENSE_WEIGHT` for an id it lacks)
    times its min-max normalised dense score plus the rest times its keyword one (0 in a
    list it is not in), so in [0, 1]; score descending, then chunk id ascending."""
    d, k = min_max(dense), min_max(keyword)
    weight = (
        dense_weight.get if isinstance(dense_weight, Mapping) else lambda cid, default: dense_weight
    )
    scores = {
        cid: (w := weight(cid, DENSE_WEIGHT)) * d.get(cid, 0.0) + (1.0 - w) * k.get(cid, 0.0)
        for cid in d.keys() | k.keys()
    }
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


class VectorIndex:
    """A store's vectors loaded once (`[N, dim]` float32) for repeated exact dense
    queries: the reference the ANN index is measured against, and the search of small
    stores (`ann.exact_top_k`)."""

    def __init__(self, store: Store):
        self.store = store
        self.ids, self.matrix = store.vectors()

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: Any, k: int = 5) -> list[Hit]:
        """The `k` chunks most similar to one query vector `[dim]`, best first."""
        q = np.asarray(query, dtype=np.float32)
        if q.ndim != 1:
            raise StoreInputError("query", "one vector [dim]", f"shape {list(q.shape)}")
        return self.search_many(q[None, :], k)[0]

    def search_many(self, queries: Any, k: int = 5) -> list[list[Hit]]:
        """Top `k` for each row of `queries` `[Q, dim]`."""
        k = check_k(k)
        q = normalised(queries, self.matrix.shape[1] if len(self) else self.store.dim)
        ranked = exact_top_k(self.ids, self.matrix, q, k)
        return _hits(self.store, ranked, list(ranked), [None] * len(ranked))


def _hits(
    store: Store,
    ranked: list[list[tuple[int, float]]],
    dense: Sequence[list[tuple[int, float]] | None],
    keyword: Sequence[list[tuple[int, float]] | None],
    query: str | None = None,
    also: dict[int, list[dict[str, str]]] | None = None,
    rows: Mapping[int, ChunkRow] | None = None,
    more: Mapping[int, int] | None = None,
) -> list[list[Hit]]:
    """The `Hit`s of each query's `ranked` (chunk id, score) list, with each chunk's place
    in that query's `dense` and `keyword` lists (None: that list was not searched), and
    the snippet at the words of the query's text `query` (`passage`). `rows`: the chunk
    rows when the caller has read them (None: read here, in one statement)."""
    from attnswitch.documents.readers.mail_parts import page_fragment

    terms = highlight_terms(query)
    if rows is None:
        rows = store.chunks({cid for hits in ranked for cid, _ in hits})
    out = []
    for hits, by_meaning, by_words in zip(ranked, dense, keyword, strict=True):
        in_dense, in_keyword = _places(by_meaning), _places(by_words)
        found: list[Hit] = []
        for cid, score in hits:
            if (row := rows.get(cid)) is None:  # deleted since the lists were read
                continue
            shown, offset, marks = passage(row.text, terms)
            d_rank, d_score = in_dense.get(cid, (None, None))
            k_rank, k_score = in_keyword.get(cid, (None, None))
            found.append(
                Hit(
                    rank=len(found) + 1,
                    score=float(score),
                    path=row.source,
                    root=row.root,
                    source=row.source,
                    chunk_id=int(cid),
                    ordinal=row.ordinal,
                    start=row.start,
                    end=row.end,
                    heading_path=list(row.heading_path),
                    location=dict(row.location),
                    dense_similarity=d_score,
                    dense_rank=d_rank,
                    keyword_score=k_score,
                    keyword_rank=k_rank,
                    snippet=shown,
                    text=row.text,
                    snippet_start=offset,
                    highlights=marks,
                    uri=file_uri(row.root, row.source)
                    + page_fragment(row.source, row.location, attachments=False),
                    also_at=list((also or {}).get(int(cid), ())),
                    more_in_document=int((more or {}).get(int(cid), 0)),
                )
            )
        out.append(found)
    return out


def _places(ranked: list[tuple[int, float]] | None) -> dict[int, tuple[int, float]]:
    """chunk id -> (rank from 1, score) in a ranked list."""
    return {
        int(cid): (rank, float(score)) for rank, (cid, score) in enumerate(ranked or (), start=1)
    }


def normalised(queries: Any, dim: int | None) -> np.ndarray:
    """`queries` `[Q, dim]` as float32 rows of norm 1; refuses another dimension than the
    store's, non-finite and zero vectors."""
    try:
        q = np.asarray(queries, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise StoreInputError(
            "query", "a numeric array", f"{type(queries).__name__} ({exc})"
        ) from None
    if q.ndim != 2:
        raise StoreInputError("queries", "shape [Q, dim]", list(q.shape))
    if dim is not None and q.shape[1] != dim:
        raise StoreInputError("query", f"dimension {dim} (this store's)", q.shape[1])
    if not np.isfinite(q).all():
        raise StoreInputError("query", "finite values", "NaN or inf")
    norms = np.linalg.norm(q, axis=1, keepdims=True)
    if (norms == 0).any():
        raise StoreInputError("query", "a non-zero vector", "a zero vector")
    unit: np.ndarray = q / norms
    return unit
