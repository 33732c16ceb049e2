"""A search as one typed value: `SearchRequest` (query, k, mode, filter, ef, group) and
`Mode`.

Every entry point (the CLI's `search`, `POST /v1/search`, MCP's `search` tool, the LangChain
and LlamaIndex retrievers, `attnswitch.search`) builds a `SearchRequest` from its inputs and
hands it to the index's searcher; none of them spells out the modes, the filter fields or
the bounds of `k` and `ef` again. The names are defined here (`Mode`) and in `filters`
(`FIELDS`, `FIELD_HELP`), the bounds in `records` (`MAX_K`, `MAX_EF_SEARCH`); front ends
derive their options, schemas and controls from them.

Bad values raise `StoreInputError` naming the field (`query`, `k`, `mode`, `ef`, or the
filter's field), before the index is opened.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from numbers import Integral
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

from attnswitch.indexing.diversity import check_group
from attnswitch.indexing.filters import FIELDS, SearchFilter
from attnswitch.indexing.records import MAX_EF_SEARCH, MAX_K
from attnswitch.indexing.store_errors import StoreInputError

if TYPE_CHECKING:
    from attnswitch.indexing.filters import When

DEFAULT_K = 5


class Mode(str, enum.Enum):
    """How a search ranks chunks: by meaning (`dense`, the query's vector against the
    chunks'), by words (`keyword`, BM25 over the analyzer's terms) or both fused by
    reciprocal rank (`hybrid`, the default)."""

    HYBRID = "hybrid"
    DENSE = "dense"
    KEYWORD = "keyword"

    def __repr__(self) -> str:  # as a signature's default shows it: mode='hybrid'
        return repr(self.value)

    @property
    def needs_vector(self) -> bool:
        """Whether the query must be encoded (and so a model loaded) for this mode."""
        return self is not Mode.KEYWORD

    @property
    def needs_text(self) -> bool:
        """Whether the query's words are searched (keyword terms) in this mode."""
        return self is not Mode.DENSE

    @property
    def help(self) -> str:
        """One line a front end shows for this mode."""
        return _MODE_HELP[self]

    @classmethod
    def parse(cls, value: object) -> Mode:
        """`value` (a `Mode` or its name) as a `Mode`; else `StoreInputError` naming `mode`."""
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            raise StoreInputError("mode", f"one of {', '.join(MODES)}", repr(value)) from None


_MODE_HELP = MappingProxyType(
    {
        Mode.HYBRID: "meaning and words, fused (the default)",
        Mode.DENSE: "meaning: the query's vector against the chunks'",
        Mode.KEYWORD: "words: BM25 over the analyzer's terms (loads no model)",
    }
)

MODES: tuple[str, ...] = tuple(m.value for m in Mode)


def check_k(k: object) -> int:
    """`k` as an int from 1 to `MAX_K`, else `StoreInputError` naming `k`."""
    if isinstance(k, bool) or not isinstance(k, Integral) or not 1 <= int(k) <= MAX_K:
        raise StoreInputError("k", f"an integer from 1 to {MAX_K}", repr(k))
    return int(k)


def check_ef(ef: object) -> int | None:
    """`ef` (the ANN search beam) as an int from 1 to `MAX_EF_SEARCH`, or None (the
    store's default); else `StoreInputError` naming `ef`."""
    if ef is None:
        return None
    if isinstance(ef, bool) or not isinstance(ef, Integral) or not 1 <= int(ef) <= MAX_EF_SEARCH:
        raise StoreInputError("ef", f"an integer from 1 to {MAX_EF_SEARCH}", repr(ef))
    return int(ef)


def check_query(query: object) -> str:
    """`query` as a non-empty text, else `StoreInputError` naming `query`."""
    if not isinstance(query, str) or not query.strip():
        raise StoreInputError("query", "a non-empty text", repr(query))
    return query


@dataclass(frozen=True)
class SearchRequest:
    """One search, checked: the `k` best chunks for `query` in `mode`, among the documents
    `where` keeps (None: all), with the ANN beam `ef` (None: the store's default).
    Build it with `SearchRequest.of` (keyword filters, as the CLI and the Python call take
    them) or `SearchRequest.from_mapping` (a `filter` object, as HTTP and MCP take it)."""

    query: str
    k: int = DEFAULT_K
    mode: Mode = Mode.HYBRID
    where: SearchFilter | None = None
    ef: int | None = None
    group: str = "chunk"
    """"chunk": the best chunks; "document": the best chunk of each of the k best
    documents, with how many other chunks of it matched (`Hit.more_in_document`)."""

    def __post_init__(self) -> None:
        check_query(self.query)
        object.__setattr__(self, "k", check_k(self.k))
        object.__setattr__(self, "mode", Mode.parse(self.mode))
        object.__setattr__(self, "ef", check_ef(self.ef))
        object.__setattr__(self, "group", check_group(self.group))
        if self.where is not None and not isinstance(self.where, SearchFilter):
            raise StoreInputError("where", "a SearchFilter or None", repr(self.where))

    @classmethod
    def of(
        cls,
        query: str,
        k: int = DEFAULT_K,
        mode: Mode | str = Mode.HYBRID,
        *,
        ef: int | None = None,
        path: str | Iterable[str] | None = None,
        type: str | Iterable[str] | None = None,
        modified_after: When | None = None,
        modified_before: When | None = None,
        group: str | None = None,
    ) -> SearchRequest:
        """A request from flat filter values (each a value, a list of values or None)."""
        where = SearchFilter.of(
            path=path, type=type, modified_after=modified_after, modified_before=modified_before
        )
        # a name: `__post_init__` parses it
        return cls(query, k, cast(Mode, mode), where, ef, check_group(group))

    @classmethod
    def from_mapping(
        cls,
        query: str,
        k: int = DEFAULT_K,
        mode: Mode | str = Mode.HYBRID,
        *,
        ef: int | None = None,
        filter: Mapping[str, Any] | None = None,
        group: str | None = None,
    ) -> SearchRequest:
        """A request whose filter is a mapping with the keys of `filters.FIELDS` (an
        unknown key is refused as `filter.<key>`)."""
        where = SearchFilter.from_mapping(filter)
        # a name: `__post_init__` parses it
        return cls(query, k, cast(Mode, mode), where, ef, check_group(group))

    @property
    def needs_vector(self) -> bool:
        """Whether the query must be encoded for this request (`Mode.needs_vector`)."""
        return self.mode.needs_vector

    def to_dict(self) -> dict[str, Any]:
        """The request as a user gives it (for `--json` and logs)."""
        return {
            "query": self.query,
            "k": self.k,
            "mode": self.mode.value,
            "filter": None if self.where is None else self.where.to_dict(),
            "ef": self.ef,
            "group": self.group,
        }


__all__ = [
    "DEFAULT_K",
    "FIELDS",
    "MODES",
    "Mode",
    "SearchRequest",
    "check_ef",
    "check_k",
    "check_query",
]

# The modes and their help on one line ("hybrid: ...; dense: ...; keyword: ..."), as the
# front ends describe the `mode` option, field and control.
MODES_HELP = "; ".join(f"{m.value}: {m.help}" for m in Mode)

__all__ += ["MODES_HELP"]
