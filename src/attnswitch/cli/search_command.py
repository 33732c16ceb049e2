"""The index's read commands: `search` and `status`, as plain typer-annotated functions.

    attnswitch search "QUERY" [-k 5] [--mode hybrid|dense|keyword] [--per-document] [--db DIR]
        [--json]
    attnswitch status [--db DIR] [--json]

Both open the index with `opening.open_index` (`Index.open`: the one place `--db` is
resolved) and fail in one line as `run` does (`opening._fail`); `search` builds a
`requests.SearchRequest` and hands it to the index's `Searcher`, and renders what it
returns: a table, or with `--json` the hits as `/v1/search` answers them.
"""

from __future__ import annotations

import json
import os
import time
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attnswitch.cli.cells import NARROW, PathCell, source_width
from attnswitch.cli.files_table import render_files
from attnswitch.cli.opening import (
    _fail,
    _interruptible,
    _store_errors,
    open_index,
    store_location,
)
from attnswitch.cli.options import (
    FilterValues,
    JsonOption,
    ModeOption,
    StoreOption,
    filter_option_name,
    with_filter_options,
)
from attnswitch.cli.output import highlighted, print_json, rich_console, terminal_text
from attnswitch.cli.timings import report_timings, search_timings
from attnswitch.indexing.requests import Mode

if TYPE_CHECKING:
    from attnswitch.indexing.records import Coverage


@with_filter_options
def search_command(
    query: Annotated[
        str, typer.Argument(help="What to look for.", show_default=False, metavar="QUERY")
    ],
    k: Annotated[
        int,
        typer.Option(
            "-k",
            "--k",
            help="How many chunks: at least 1, at most what the service's /v1/search returns.",
        ),
    ] = 5,
    mode: ModeOption = Mode.HYBRID,
    db: StoreOption = None,
    model: Annotated[
        str | None,
        typer.Option(help="Model folder: the index's (the default).", show_default=False),
    ] = None,
    ef: Annotated[
        int | None,
        typer.Option(
            "--ef",
            help="ANN beam of large stores, 1 to 1000: wider finds more of the exact "
            "nearest chunks, slower (default: the store's).",
            show_default=False,
        ),
    ] = None,
    fill: Annotated[
        int | None,
        typer.Option(
            "--fill",
            help="While the full pass is not done: how many of its best candidates without "
            "the transformer's vectors this search encodes and keeps, 0 to 1000 (default: "
            "20; 0: none).",
            show_default=False,
        ),
    ] = None,
    filters: FilterValues = MappingProxyType({}),
    per_document: Annotated[
        bool,
        typer.Option(
            "--per-document",
            help="The best passage of each of the k best documents, with how many other "
            "passages of it matched.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """The chunks that best match QUERY, with score, source and a snippet.

    The query is encoded as the index was built (model and precision). A hybrid result
    shows its fused score beside its cosine similarity and keyword score, each with its
    rank in its own list. --json prints the hits as /v1/search answers them, and each
    step's seconds.
    \f
    The query's engine is the quickest to start whose vectors are the index's
    (`engines.query_engine`). Large stores answer from an ANN index: the SQLite store's
    HNSW graph beside its file (memory-mapped), or pgvector's on the server. With --json,
    the hits under `data` have the shape of /v1/search's (docs/service.md), and `timings`
    gives each step's seconds (`search_timings`). `$ATTNSWITCH_TIMINGS=1` prints the
    timings on stderr after the results (any output).
    """
    from attnswitch.errors import AttnswitchError
    from attnswitch.indexing.filters import SearchFilter
    from attnswitch.indexing.index import IndexEmptyError
    from attnswitch.indexing.query_fill import MAX_QUERY_FILL
    from attnswitch.indexing.records import MAX_EF_SEARCH
    from attnswitch.indexing.requests import SearchRequest
    from attnswitch.indexing.store_errors import StoreInputError, is_store_error
    from attnswitch.observe.startup import process_age_s

    startup_s = process_age_s()
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:  # a shell passes bytes; those that are not UTF-8 arrive as lone surrogates
        query.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _fail(
            "search",
            f"QUERY: expected UTF-8 text, got a byte that is not UTF-8 at character {exc.start}",
            as_json,
            2,
        ) from None
    from attnswitch.indexing.records import MAX_K  # the limit of /v1/search's k too

    if not 1 <= k <= MAX_K:  # refused before the store opens
        raise _fail("search", f"-k: expected an integer from 1 to {MAX_K}, got {k}", as_json, 2)
    location = store_location(db)
    if ef is not None and not 1 <= ef <= MAX_EF_SEARCH:  # refused before the model loads
        raise _fail(
            "search", f"--ef: expected an integer from 1 to {MAX_EF_SEARCH}, got {ef}", as_json
        )
    if fill is not None and not 0 <= fill <= MAX_QUERY_FILL:  # refused before the model loads
        raise _fail(
            "search",
            f"--fill: expected an integer from 0 to {MAX_QUERY_FILL}, got {fill}",
            as_json,
        )
    try:
        where = SearchFilter.of(**filters)
    except StoreInputError as exc:  # named as the option: "--type: expected ..."
        option = filter_option_name(exc.argument)
        raise _fail("search", option + str(exc)[len(exc.argument) :], as_json, 2) from None
    try:
        request = SearchRequest(query, k, mode, where, ef, "document" if per_document else "chunk")
    except StoreInputError as exc:  # a query of blanks
        raise _fail("search", str(exc).replace("query:", "QUERY:", 1), as_json, 2) from None
    with (
        _interruptible("search", as_json),
        _store_errors("search", location, as_json),
        open_index(location, "search", as_json) as index,
    ):
        try:
            result = index.searcher(model, fill=fill).search(request)
        except IndexEmptyError:
            raise _fail(
                "search",
                f"the index at {index.where} is empty: run `attnswitch run FOLDER` first",
                as_json,
            ) from None
        except AttnswitchError as exc:  # a bad model folder, a query it cannot encode...
            if is_store_error(exc):
                raise  # about the store's file: `_store_errors` words it
            raise _fail("search", str(exc), as_json) from None
        model_shown = index.config.describe()
    steps = result.steps
    timings = search_timings(steps, startup_s, process_age_s())
    results = [h.to_dict() for h in result.hits]
    printing = time.perf_counter()
    if as_json:
        print_json(
            {
                "object": "list",
                "data": results,
                "model": model_shown,
                "query": query,
                "k": k,
                "mode": request.mode.value,
                "group": request.group,
                "index": str(location),
                "filter": None if where is None else {**where.to_dict(), "documents": result.kept},
                "query_engine": {
                    "engine": steps.engine or None,
                    "why": steps.engine_reason or None,
                },
                "timings": timings,
                "coverage_note": result.coverage_note,
            }
        )
    elif result.note is not None:
        rich_console().print(
            result.note + " (" + terminal_text(_filter_text(where)) + ")", markup=False
        )
    else:
        _render_search(query, results, model_shown, request.mode.value)
    if not as_json and result.coverage_note is not None:
        rich_console().print(result.coverage_note, markup=False)
    report_timings(timings, time.perf_counter() - printing, steps)


def _filter_text(where: Any) -> str:
    """A filter as the options that give it."""
    parts = []
    for field, value in where.to_dict().items():  # in `filters.FIELDS` order
        for one in value if isinstance(value, list) else [] if value is None else [value]:
            parts.append(f"{filter_option_name(field)} {one}")
    return " ".join(parts)


def _render_search(query: str, results: list[dict], model: str, mode: str) -> None:
    """A table of `search.Hit.to_dict()`s: rank, score and, in hybrid mode, the score parts
    (cosine similarity and keyword score, each with its rank in its own list)."""
    from rich.table import Table

    from attnswitch.indexing.requests import Mode
    from attnswitch.indexing.search import DENSE_WEIGHT, PHRASE_BONUS, where

    mode = Mode.parse(mode)
    console = rich_console()
    parts_shown = mode is Mode.HYBRID and console.width >= NARROW  # else --json has them
    caption = f"{mode.value} search" + ("" if not mode.needs_vector else f", encoded with {model}")
    if mode is Mode.HYBRID:
        caption += (
            f"; fused: {DENSE_WEIGHT:g} x cosine + {1 - DENSE_WEIGHT:g} x keyword, "
            f"each scaled to 0-1 over its list, +{PHRASE_BONUS:g} for the query's "
            f"words as one phrase (0 to {1 + PHRASE_BONUS:g}); "
            + (
                "cosine: similarity to the query, -1 to 1; keyword: full-text score, "
                "higher is better; - : not among that list's best"
                if parts_shown
                else f"each part's score and rank: --json, or a terminal {NARROW} columns wide"
            )
        )
    t = Table(
        title=f"Search: {terminal_text(query)}",
        caption=terminal_text(caption),
        title_justify="left",
        caption_justify="left",
        show_lines=True,
    )
    t.add_column("#", justify="right")
    score_title = {Mode.HYBRID: "fused", Mode.DENSE: "cosine", Mode.KEYWORD: Mode.KEYWORD.value}
    t.add_column(score_title[mode], justify="right")
    if parts_shown:
        t.add_column("cosine (rank)", justify="right")
        t.add_column("keyword (rank)", justify="right")
    places = [
        f"{where(r['path'], r['location'], r['heading_path'])} #{r['ordinal']}"
        + _also_at(r)
        + _more(r)
        for r in results
    ]
    least, most = source_width(console.width, parts_shown, places)
    t.add_column("source", min_width=least, max_width=most)
    t.add_column("snippet", overflow="fold", ratio=1)
    for r, place in zip(results, places):
        parts = (
            [
                _part(r["dense_similarity"], r["dense_rank"], ".3f"),
                _part(r["keyword_score"], r["keyword_rank"], ".3g"),
            ]
            if parts_shown
            else []
        )
        t.add_row(
            str(r["rank"]),
            f"{r['score']:.4f}" if mode is Mode.HYBRID else f"{r['score']:.3f}",
            *parts,
            PathCell(place),
            highlighted(r["snippet"], r["highlights"]),
        )
    console.print(t)


def _also_at(hit: dict) -> str:
    """ "; also at: b.txt, other/c.txt" for a hit whose document has copies (paths in the
    hit's folder as they are, others with their folder)."""
    places = [
        a["path"] if a["root"] == hit["root"] else f"{a['root']}/{a['path']}"
        for a in hit.get("also_at") or ()
    ]
    return f"; also at: {', '.join(places)}" if places else ""


def _more(hit: dict) -> str:
    """ "; 3 more in this document" for a hit grouped by document with other passages that
    matched ("" otherwise)."""
    n = hit.get("more_in_document") or 0
    return f"; {n} more in this document" if n else ""


def _part(score: float | None, rank: int | None, fmt: str) -> str:
    return "-" if score is None or rank is None else f"{format(score, fmt)} (#{rank})"


# ---- status ----------------------------------------------------------------------------


def status_command(db: StoreOption = None, as_json: JsonOption = False) -> None:
    """What is indexed: documents, chunks, skipped files and why, the last run."""
    location = store_location(db)
    with (
        _store_errors("status", location, as_json),
        open_index(location, "status", as_json) as index,
    ):
        st = index.status()
        config = index.config
        runs = index.runs(limit=20)
        languages = index.languages()
        coverage = index.coverage()
        rules = _rules_of(index, st.roots)
    last = runs[0] if runs else None
    report = {
        "index": st.path,
        "documents": st.documents,
        "chunks": st.chunks,
        "tokens": st.tokens,
        "dim": st.dim,
        "roots": list(st.roots),
        "rules": {root: r.to_dict() for root, r in rules.items()},
        "languages": languages,
        "coverage": {**coverage.to_dict(), "full_pass_eta_s": full_pass_eta_s(coverage, runs)},
        "skipped": st.skipped,
        "skipped_by_reason": st.skipped_by_reason,
        "skipped_files": [
            {"root": r, "source": s, "reason": why} for r, s, why in st.skipped_files
        ],
        "model": None
        if config is None
        else {**json.loads(config.to_json()), "fingerprint": config.fingerprint},
        "last_run": None
        if last is None
        else {
            "id": last.id,
            "status": last.status,
            "root": last.root,
            "started_at": last.started_at,
            "ended_at": last.ended_at,
            "counts": last.counts,
            "summary": last.summary,
        },
    }
    if as_json:
        print_json(report)
    else:
        _render_status(report, config)


def _rules_of(index: Any, roots: Any) -> dict[str, Any]:
    """The file rules stored for each root (`rules.FileRules`: what `run`, `watch` and
    `forget` kept)."""
    from attnswitch.documents.rules import stored_rules

    store = index.writer().store  # only read: no lock taken
    return {root: stored_rules(store, root) for root in roots}


def full_pass_eta_s(coverage: Coverage, runs: list[Any]) -> float | None:
    """Seconds the full pass would take on this machine: the tokens still without a full
    vector at the encoding rate of the most recent run that encoded (None: nothing left,
    or no rate known)."""
    if not coverage.unencoded_tokens:
        return 0.0 if coverage.unencoded == 0 else None
    for run in runs:
        rate = (run.summary or {}).get("tokens_per_s")
        if rate:
            return round(coverage.unencoded_tokens / float(rate), 1)
    return None


def coverage_text(c: dict[str, Any]) -> str:
    """The status table's vectors row: how much has full and quick vectors."""
    text = f"{c['full']:.0%} of chunks with full vectors"
    if c["full"] < 1:
        text += f", {c['quick']:.0%} with quick vectors"
        eta = c.get("full_pass_eta_s")
        text += (
            f"; the full pass (`attnswitch run`) needs about {eta / 60:,.0f} min here"
            if eta
            else "; the full pass (`attnswitch run`) encodes the rest"
        )
    return text


def _rules_text(rules: dict[str, dict[str, Any]]) -> str:
    """The status table's rules row: each folder's rules in one line (`rules.describe`),
    the folder named when there are several."""
    from attnswitch.documents.rules import FileRules, describe

    lines = [(root, describe(FileRules(**kept))) for root, kept in rules.items()]
    if len(lines) == 1:
        return terminal_text(lines[0][1])
    return "\n".join(f"{terminal_text(root)}: {terminal_text(text)}" for root, text in lines) or "-"


def _render_status(r: dict, config: Any) -> None:
    import datetime as dt

    from rich.table import Table

    console = rich_console()
    t = Table(title="attnswitch status", title_justify="left", show_header=False)
    t.add_column(style="bold")
    t.add_column(overflow="fold")
    t.add_row("index", terminal_text(r["index"]))
    t.add_row("folders", "\n".join(terminal_text(root) for root in r["roots"]) or "-")
    t.add_row("rules", _rules_text(r["rules"]))
    t.add_row("documents", f"{r['documents']:,} indexed, {r['skipped']:,} skipped")
    t.add_row("chunks", f"{r['chunks']:,} ({r['tokens']:,} tokens, dimension {r['dim']})")
    t.add_row("vectors", coverage_text(r["coverage"]))
    t.add_row("model", config.describe() if config else "-")
    if config:
        t.add_row(
            "chunking",
            f"{config.chunking}, {config.max_tokens} tokens"
            + (f", overlap {config.overlap}" if config.chunking == "windows" else "")
            + (", heading path embedded" if config.embed_headings else ""),
        )
    run = r["last_run"]
    if run:
        when = dt.datetime.fromtimestamp(run["started_at"]).isoformat(" ", "seconds")
        s = run["summary"]
        line = f"#{run['id']} {run['status']}, started {when}, {terminal_text(run['root'])}"
        if s:
            line += (
                f"\n{s.get('chunks_encoded', 0):,} chunks encoded in "
                f"{s.get('wall_s', 0):.1f} s; {s.get('new', 0)} new, "
                f"{s.get('changed', 0)} changed, {s.get('unchanged', 0)} unchanged, "
                f"{s.get('deleted', 0)} deleted, {s.get('skipped', 0)} skipped"
            )
        t.add_row("last run", line)
    else:
        t.add_row("last run", "-")
    if r["skipped"]:
        t.add_row(
            "skipped",
            terminal_text(
                ", ".join(f"{k} ({n})" for k, n in sorted(r["skipped_by_reason"].items()))
            ),
        )
    console.print(t)
    if r["skipped_files"]:
        render_files(console, "Skipped files", r["skipped_files"], "reason")
