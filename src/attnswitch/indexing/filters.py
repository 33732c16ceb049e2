"""Search filters: which documents a search may return, the same in every interface (the
CLI's `--path/--type/--modified-after/--modified-before`, `/v1/search`'s `filter` object,
the keyword arguments of `attnswitch.search`) and on both stores.

- `path`: globs or folder prefixes, any of which a document's path must match. A value
  without a glob character is a folder or file prefix (`postgresql` or `postgresql/`
  matches `postgresql/x.html`, and the file `postgresql` itself); one with `*`, `?` or `[`
  is a glob in gitignore's syntax (`*.pdf` matches at any depth, `docs/**/*.md` below
  `docs`), as `--include` reads it. A relative value is matched, with `/` separators,
  against the document's path from its indexed folder and from each folder above that one
  (`relative_paths`), so the path a hit shows passes whichever way an interface shows it:
  the document `Scans/a.pdf` of the folder `/srv/team/drive` passes `Scans/`, `drive/Scans`
  (the folder's name first, as the page and `also_at` show it) and `team/drive/Scans/*.pdf`
  (a folder shown from the service's jobs root). A value that starts with `/` is an
  absolute path (`/home/me/drive/reports`,
  `/home/me/drive/*.md` for the folder's top level only), matched against the indexed
  folder joined with the path, so a store holding several folders can be narrowed to one.
  Globs are compiled by `documents.globs` (RE2: matched in time linear in the path,
  whatever the glob); one it refuses (longer than `globs.MAX_CHARS` characters, `[z-a]`,
  an unclosed `[`, a `#` comment that would match nothing) is a `StoreInputError` naming
  `path` (or `path[i]`), and so are more than `MAX_PATHS` values.
- `type`: kinds or extensions, any of which a document must be. A kind is what the readers
  record (`pdf`, `docx`, `html`, `markdown`, `text`, `code`, `image`, `eml`, ...) or a
  group of them (`mail`, `office`, `spreadsheet`, `presentation`, `notebook`, `ebook`,
  `word`); an extension (`.md`, or `md` when it is no kind name) matches the path's last
  suffix, case ignored. A bare word that is neither a kind, a group nor an extension the
  readers know is refused.
- `modified_after`, `modified_before`: the file's modification time as indexed, an ISO 8601
  date or date-time (`2024-05-01`, `2024-05-01T12:00`, `2024-05-01T12:00+02:00`) or a
  `datetime`/`date`; a bare date or a time without an offset is UTC. Both bounds are
  inclusive: `modified_after=2024-05-01` keeps files changed from 2024-05-01 00:00 UTC on,
  `modified_before=2024-05-31` those changed up to 2024-05-31 00:00 UTC (give
  `2024-05-31T23:59:59` for the whole day).

- `reader` (`access.Reader`, set by `SearchFilter.for_reader`, never by a user's filter
  values): only the documents that reader may read (indexing/access.py); None: an admin's
  search, every document.

A filter is applied inside the store's query (`Store.dense(..., where=)` and
`Store.keyword(..., where=)`), so a filtered search returns `k` hits when `k` chunks match.
Bad values raise `StoreInputError` naming the field (`path`, `type`, `modified_after`,
`modified_before`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from attnswitch.indexing.store_errors import StoreInputError

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

    from attnswitch.indexing.access import Reader

# A modification-time bound as given: an ISO 8601 text, a `date` or a `datetime`.
When = str | dt.date

# Groups of reader kinds a user names by what the files are.
GROUPS = MappingProxyType(
    {
        "mail": ("eml", "mbox"),
        "word": ("docx", "odt", "doc", "rtf"),
        "spreadsheet": ("xlsx", "ods", "xls", "csv"),
        "presentation": ("pptx", "odp", "ppt"),
        "office": ("docx", "odt", "doc", "rtf", "xlsx", "ods", "xls", "pptx", "odp", "ppt"),
        "notebook": ("ipynb",),
        "ebook": ("epub",),
    }
)
FIELDS = ("path", "type", "modified_after", "modified_before")
# One line per field, which every front end shows (CLI help, HTTP and MCP schemas, the page).
FIELD_HELP = MappingProxyType(
    {
        "path": "folder prefixes or globs (gitignore syntax) a document's path must match, "
        "from its indexed folder or with that folder's name first, as hits show it",
        "type": "kinds (pdf, mail, office, ...) or extensions (.md) a document must be",
        "modified_after": "only files modified at or after this ISO 8601 date or time (UTC)",
        "modified_before": "only files modified at or before this ISO 8601 date or time (UTC)",
    }
)
# Each glob is an RE2 program of up to a MiB asked about every document; no one narrows a
# search by more folders or globs than this.
MAX_PATHS = 100
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class SearchFilter:
    """Parsed, checked filter values (see the module doc). `kinds` and `extensions` come
    from `type`; `after_ns` and `before_ns` are the bounds in nanoseconds since the epoch,
    as the stores keep `mtime_ns`."""

    paths: tuple[str, ...] = ()
    kinds: frozenset[str] = frozenset()
    extensions: frozenset[str] = frozenset()
    after_ns: int | None = None
    before_ns: int | None = None
    _specs: tuple[GitIgnoreSpec | None, ...] = field(default=(), compare=False, repr=False)
    reader: Reader | None = None
    # the compiled specs of `reader.granted` (`for_reader`)
    _granted: tuple[GitIgnoreSpec | None, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def for_reader(cls, where: SearchFilter | None, reader: Reader | None) -> SearchFilter | None:
        """`where` narrowed to what `reader` may read (see indexing/access.py); `where`
        unchanged when `reader` is None (an admin). A grant's path value `filters` cannot
        read is a `StoreInputError` naming `granted[i]`."""
        if reader is None:
            return where
        specs = tuple(_spec(p, f"granted[{i}]") for i, p in enumerate(reader.granted))
        return dataclasses.replace(where or cls(), reader=reader, _granted=specs)

    def granted(self, root: str, source: str) -> bool:
        """Whether an access-file grant of the reader covers the document `source` of the
        folder `root` (False without a reader or grants)."""
        if self.reader is None or not self.reader.granted:
            return False
        full = root.rstrip("/") + "/" + source
        relative = relative_paths(root, source)
        return any(
            _path_matches(p, spec, relative, full)
            for p, spec in zip(self.reader.granted, self._granted, strict=True)
        )

    @classmethod
    def of(
        cls,
        path: str | Iterable[str] | None = None,
        type: str | Iterable[str] | None = None,
        modified_after: When | None = None,
        modified_before: When | None = None,
    ) -> SearchFilter | None:
        """The filter the values give, None when none is given (no filter)."""
        paths = _strings("path", path)
        if len(paths) > MAX_PATHS:
            raise StoreInputError(
                "path", f"at most {MAX_PATHS} folder prefixes or globs", f"{len(paths)} of them"
            )
        kinds, extensions = _types(_strings("type", type))
        after = _when("modified_after", modified_after)
        before = _when("modified_before", modified_before)
        if after is not None and before is not None and after > before:
            raise StoreInputError(
                "modified_before",
                f"a time not before modified_after ({_shown(after)})",
                _shown(before),
            )
        if not (paths or kinds or extensions) and after is None and before is None:
            return None
        specs = tuple(
            _spec(p, "path" if len(paths) == 1 else f"path[{i}]") for i, p in enumerate(paths)
        )
        return cls(paths, kinds, extensions, after, before, specs)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> SearchFilter | None:
        """The filter of a mapping with the keys of `FIELDS` (an HTTP request's `filter`)."""
        if not values:
            return None
        unknown = sorted(set(values) - set(FIELDS))
        if unknown:
            raise StoreInputError(
                f"filter.{unknown[0]}", f"one of {', '.join(FIELDS)}", repr(unknown[0])
            )
        return cls.of(**{k: values.get(k) for k in FIELDS})

    def to_dict(self) -> dict[str, Any]:
        """The filter as the fields a user gives (for `--json` and logs)."""
        return {
            "path": list(self.paths),
            "type": sorted(self.kinds) + sorted("." + e for e in self.extensions),
            "modified_after": _shown(self.after_ns),
            "modified_before": _shown(self.before_ns),
        }

    def sql(self, mark: str) -> tuple[str, list[Any]]:
        """The conditions on a documents row `d` that SQL checks (kinds and times), joined
        by AND ("" for none), with their parameters; `mark` is the driver's placeholder."""
        conditions: list[str] = ["d.status = 'indexed'"]
        params: list[Any] = []
        if self.kinds and not self.extensions:  # with extensions, `matches` decides the type
            conditions.append(f"d.kind IN ({', '.join([mark] * len(self.kinds))})")
            params += sorted(self.kinds)
        if self.after_ns is not None:
            conditions.append(f"d.mtime_ns >= {mark}")
            params.append(self.after_ns)
        if self.before_ns is not None:
            conditions.append(f"d.mtime_ns <= {mark}")
            params.append(self.before_ns)
        return " AND ".join(conditions), params

    def matches(self, root: str, source: str, kind: str | None) -> bool:
        """Whether the document `source` of the folder `root` passes the path and type
        parts (the times are checked by `sql`)."""
        if self.kinds or self.extensions:
            suffix = os.path.splitext(source)[1].lower().lstrip(".")
            if kind not in self.kinds and suffix not in self.extensions:
                return False
        if not self.paths:
            return True
        full = root.rstrip("/") + "/" + source
        relative = relative_paths(root, source)
        return any(
            _path_matches(p, spec, relative, full)
            for p, spec in zip(self.paths, self._specs, strict=True)
        )


def relative_paths(root: str, source: str) -> tuple[str, ...]:
    """The relative paths a relative `path` value is matched against: `source` (from the
    folder `root`), then `source` from each folder above `root`, nearest first:
    ("Scans/a.pdf", "drive/Scans/a.pdf", "team/drive/Scans/a.pdf", ...) for the root
    `/srv/team/drive` (up to `srv/team/drive/Scans/a.pdf`)."""
    names = [n for n in root.replace(os.sep, "/").split("/") if n]
    return (source,) + tuple(
        "/".join(names[i:]) + "/" + source for i in range(len(names) - 1, -1, -1)
    )


def _strings(name: str, value: str | Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        values = [value]
    elif isinstance(value, (list, tuple, set, frozenset)):
        values = list(value)
    else:
        raise StoreInputError(name, "a string or a list of strings", repr(value))
    for i, v in enumerate(values):
        if not isinstance(v, str) or not v.strip():
            raise StoreInputError(
                name if len(values) == 1 else f"{name}[{i}]", "a non-empty string", repr(v)
            )
    return tuple(v.strip() for v in values)


def _types(values: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    from attnswitch.documents.readers.registry import extension_kinds, readers

    kinds: set[str] = set()
    extensions: set[str] = set()
    for value in values:
        word = value.lower()
        if word.startswith("."):
            if len(word) < 2 or not word[1:].replace("_", "").replace("-", "").isalnum():
                raise StoreInputError("type", "an extension such as .pdf", repr(value))
            extensions.add(word[1:])
        elif word in GROUPS:
            kinds.update(GROUPS[word])
        elif word in readers():
            kinds.add(word)
        elif "." + word in extension_kinds():
            extensions.add(word)
        else:
            known = ", ".join(sorted(set(readers()) | set(GROUPS)))
            raise StoreInputError(
                "type", f"a kind ({known}) or an extension such as .md", repr(value)
            )
    return frozenset(kinds), frozenset(extensions)


def _when(name: str, value: object) -> int | None:
    """`value` as nanoseconds since the epoch (naive times are UTC)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, dt.date):
        moment = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str) and value.strip():
        try:
            moment = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise StoreInputError(
                name,
                "an ISO 8601 date or date-time such as 2024-05-01 or 2024-05-01T12:00",
                repr(value),
            ) from None
    else:
        raise StoreInputError(name, "an ISO 8601 date or date-time such as 2024-05-01", repr(value))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    ns = int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000
    if not -(2**63) <= ns < 2**63:  # the stores keep mtime_ns as a signed 64-bit integer
        raise StoreInputError(name, "a time between the years 1678 and 2262", repr(value))
    return ns


def _shown(ns: int | None) -> str | None:
    if ns is None:
        return None
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).isoformat()


def _spec(pattern: str, name: str) -> GitIgnoreSpec | None:
    """A glob's compiled gitignore spec (`globs`, as `--include` reads it); None for a
    prefix. A glob `globs` refuses is a `StoreInputError` naming `name`."""
    from attnswitch.documents import globs

    if not _GLOB_CHARS & set(pattern):
        return None
    body = pattern[1:] if os.path.isabs(pattern) else pattern
    expected = f"a folder prefix or {globs.EXPECTED}"
    try:
        compiled = globs.compile_glob(body)
    except globs.GlobError as exc:
        raise StoreInputError(name, expected, f"{globs.shown(pattern)} ({exc.reason})") from None
    if compiled is None:  # "#*.md": a comment to gitignore
        raise StoreInputError(
            name,
            expected,
            f"{globs.shown(pattern)} (a comment by gitignore's rules, which matches no path)",
        )
    return globs.spec([compiled])


def _path_matches(
    pattern: str, spec: GitIgnoreSpec | None, relative: tuple[str, ...], full: str
) -> bool:
    """Whether `pattern` (its compiled `spec`, None for a prefix) keeps a document: an
    absolute one tested on its `full` path, a relative one on any of its `relative`
    paths (`relative_paths`)."""
    absolute = os.path.isabs(pattern)
    targets = (full.lstrip("/"),) if absolute else relative
    if spec is not None:
        return any(spec.match_file(t) for t in targets)
    prefix = (pattern.lstrip("/") if absolute else pattern).rstrip("/")
    return any(t == prefix or t.startswith(prefix + "/") for t in targets)


__all__ = ["FIELDS", "GROUPS", "SearchFilter", "relative_paths"]

# What each field takes, for the front ends that build their inputs from FIELDS (options,
# schemas, the page's controls): "paths" and "types" a text or a list of texts, any of
# which passes; "time" one ISO 8601 date or date-time.
FIELD_VALUES = MappingProxyType(
    {"path": "paths", "type": "types", "modified_after": "time", "modified_before": "time"}
)


def type_names() -> tuple[str, ...]:
    """The words `type` takes besides extensions: the readers' kinds and `GROUPS`, sorted."""
    from attnswitch.documents.readers.registry import readers

    return tuple(sorted(set(readers()) | set(GROUPS)))


__all__ += ["FIELD_HELP", "FIELD_VALUES", "type_names"]
