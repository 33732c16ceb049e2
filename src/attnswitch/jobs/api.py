"""The document engine in two Python calls, re-exported by the package root:
`attnswitch.index(folder, db=...)` and `attnswitch.search(query, db=..., k=..., mode=...,
path=..., type=..., modified_after=..., modified_before=...)`.

They do what `attnswitch run` and `attnswitch search` do, with the same defaults (`db` names a
SQLite file or data folder, or a `postgresql://` URL; with none, the index is found as
`indexing/index.py` says: the nearest `.attnswitch/` here or above, else the per-user
default; `index` writes to a found index only when it holds `folder`, else to `./.attnswitch/`),
and return what those commands print with `--json`: `search` a list of `search.Hit` (the
shape of `/v1/search`'s hits; `Hit.to_dict()`), `index` the run's summary (`run.RunSummary`;
`.to_dict()`). A bad argument raises `StoreInputError` (a `ValueError`) naming it.

`search` keeps the index it opened open for the next call in the same thread
(`open_indexes`, an `OpenIndexes`: it sees every write committed since, and
`open_indexes.close()` closes them), so a script's searches after the first cost a search,
not an open.

    import attnswitch
    attnswitch.index("examples/corpus")
    for hit in attnswitch.search("how do I update rows in a table", k=3, type="html"):
        print(hit.rank, hit.where(), hit.snippet)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from attnswitch.indexing.access import Reader
from attnswitch.indexing.index import Index
from attnswitch.indexing.open_indexes import OpenIndexes
from attnswitch.indexing.query_fill import check_fill
from attnswitch.indexing.requests import Mode, SearchRequest
from attnswitch.indexing.search import Hit
from attnswitch.indexing.store_errors import StoreInputError

open_indexes = OpenIndexes()
"""The indexes `search` keeps open, per thread (`indexing/open_indexes.py`)."""


def location_of(db: str | os.PathLike[str] | None) -> str | Path:
    """What `db` names, as `--db` reads it (`Index.resolve`): a PostgreSQL URL as given,
    else the SQLite file (a data folder's `index.sqlite3`; None: the index found, else
    `./.attnswitch/index.sqlite3`, `index.default_location`)."""
    return Index.resolve(db)


def search(
    query: str,
    db: str | os.PathLike[str] | None = None,
    k: int = 5,
    mode: str = Mode.HYBRID,
    *,
    path: str | list[str] | None = None,
    type: str | list[str] | None = None,
    modified_after: Any = None,
    modified_before: Any = None,
    model: str | None = None,
    ef: int | None = None,
    group: str | None = None,
    reader: Reader | None = None,
    fill: int | None = None,
) -> list[Hit]:
    """The `k` chunks of the index at `db` that best match `query`, best first.

    mode: "hybrid" (meaning and words, fused), "dense" (meaning) or "keyword" (words; loads
    no model). The filters keep only documents under a folder or matching a glob (`path`),
    of a kind or extension (`type`: "pdf", "mail", ".md", ...), modified in a range (ISO
    dates or datetimes, inclusive, UTC unless they say); lists mean any of them
    (`filters`). The query is encoded by the model, engine and precision the index was
    built with; `model` may name that model's folder. `ef`: the ANN search beam of a large
    index. `group`: "chunk" (None, the default) the best chunks, "document" the best chunk
    of each of the `k` best documents, with how many other chunks of it matched
    (`Hit.more_in_document`). `reader` (an `indexing.access.Reader`; None: no one in
    particular): only documents it may read (`SearchFilter.for_reader`). `fill`: while
    the full pass is not done, how many of its best candidates without the transformer's
    vector this search encodes and keeps (0 to 1000; None: 20). A hit whose
    document has copies shows the copy without a copy marker in its path, then the oldest
    (`Hit.also_at`). The request is checked (`requests.SearchRequest`) before the index is opened;
    the index is `Index.open(db)`, kept open for the next call (`open_indexes`), searched
    by its `Searcher`.

        hits = attnswitch.search("vacuum", db="team-index", k=5, mode="keyword",
                                 path="postgresql/", modified_after="2024-01-01")
        print([h.path for h in hits])
    """
    request = SearchRequest.of(
        query,
        k,
        mode,
        ef=ef,
        path=path,
        type=type,
        modified_after=modified_after,
        modified_before=modified_before,
        group=group,
    )
    if fill is not None:
        check_fill(fill)
    if reader is not None:
        from dataclasses import replace

        from attnswitch.indexing.filters import SearchFilter

        request = replace(request, where=SearchFilter.for_reader(request.where, reader))
    with open_indexes.using(db) as index:
        return index.searcher(model, fill=fill).search(request).hits


def index(
    folder: str | os.PathLike[str],
    db: str | os.PathLike[str] | None = None,
    *,
    model: str | None = None,
    engine: str = "auto",
    precision: str = "auto",
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    gitignore: bool | None = None,
    include_only: list[str] | None = None,
    clear_rules: bool = False,
    ocr: bool = True,
    on_progress: Any = None,
    **options: Any,
) -> Any:
    """Index `folder` into the store at `db`, as `attnswitch run` does: new and changed files
    read, chunked, encoded and stored; deleted ones dropped; unchanged ones left alone; a
    killed call finished by the next one. Which files are indexed is kept with the index
    for later runs, and changes only as the arguments say, as `run`'s options do
    (`rules.RulesChange`): `include` and `exclude` (gitignore globs) are added to the
    stored patterns, `gitignore` True or False turns the ignore files on or off (None: as
    stored), `include_only` replaces the stored include patterns, `clear_rules` drops
    every stored rule (the paths `forget` recorded too) before the others apply. Other
    keyword arguments are the fields of `RunOptions`' parts, by name (`RunOptions.of`:
    `max_tokens`, `overlap`, `read_workers`, `ocr_max_pages`, ...). `on_progress(progress)`
    is called as files are committed. Returns the run's summary (`run.RunSummary`;
    `.to_dict()` is `attnswitch run --json`'s, less what the command adds).

        summary = attnswitch.index("examples/corpus", db="team-index")
        print(summary.indexed, summary.chunks_encoded)
    """
    from attnswitch.documents.ingest import check_root_filesystem
    from attnswitch.documents.rules import RulesChange
    from attnswitch.indexing.location import run_location
    from attnswitch.jobs.options import RunOptions
    from attnswitch.jobs.run import run

    if not isinstance(folder, (str, os.PathLike)) or not Path(folder).is_dir():
        raise StoreInputError("folder", "a folder to index", repr(folder))
    try:
        check_root_filesystem(Path(folder))
    except NotADirectoryError as exc:  # "root: expected a folder of documents, got ..."
        raise StoreInputError(
            "folder", "a folder of documents", str(exc).split(", got ", 1)[-1]
        ) from None
    try:
        rules = (
            None
            if not (include or exclude or include_only is not None or clear_rules)
            and gitignore is None
            else RulesChange(
                include or (),  # type: ignore[arg-type]  # a lone string: refused, named
                exclude or (),  # type: ignore[arg-type]
                gitignore,
                include_only,  # type: ignore[arg-type]
                clear_rules,
            )
        )
        run_options = RunOptions.of(
            model=model, engine=engine, precision=precision, ocr=ocr, rules=rules, **options
        )
    except TypeError as exc:  # an unknown keyword: named by Python's message
        raise StoreInputError("options", "fields of RunOptions", str(exc)) from None
    with Index.open_store(run_location(folder, db)) as store:
        return run(Path(folder), store, run_options, on_progress=on_progress)


__all__ = ["index", "location_of", "open_indexes", "search"]
