"""The `attnswitch` command line: ten commands (and `attnswitch --version`), which
`attnswitch --help` lists in two groups (`PANELS`): the document job first (run, search,
status, watch, forget, serve, mcp), then the engines and the attention kernels (engines,
doctor, conformance).

    attnswitch conformance [--backend NAME ...] [--quick] [--device auto|cpu|cuda|gpu|tpu] [--json]
    attnswitch doctor [--no-timing] [--json]
    attnswitch engines [--precision auto|fp32|bf16|int8] [--no-measure] [--json]
    attnswitch run PATH [--db DIR] [--engine auto|NAME] [--precision auto|fp32|bf16|int8] [--ray]
                   [--json]
    attnswitch search "QUERY" [-k 5] [--mode hybrid|dense|keyword] [--db DIR] [--json]
    attnswitch status [--db DIR] [--json]
    attnswitch watch FOLDER [--db DIR] [--debounce-ms 1600] [--json]
    attnswitch forget PATH [--db DIR] [--json]
    attnswitch serve [--host 127.0.0.1] [--port 8000] [--db DIR] [--api-key-file FILE] ...
    attnswitch mcp [--db DIR] [--allow-index ROOT ...] [--http [--host H] [--port P] ...]

The first three live here; `run` in `cli/pipeline.py`, `search` and `status` in
`cli/search_command.py`, `watch` and `forget` in `cli/sync.py`, `serve` in `cli/serve.py`,
`mcp` in `cli/mcp.py`, and the option types they share in `cli/options.py`. One small
function per command; each imports what it needs (torch, jax, the attention modules, the pipeline)
inside, so `attnswitch --help` imports neither torch nor jax. This package is the top
layer: nothing below it imports typer (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import math
from collections import Counter
from types import MappingProxyType
from typing import Annotated, Any

try:
    import typer
except ModuleNotFoundError as exc:  # a core install: the command line is the pipeline extra's
    raise SystemExit(
        "attnswitch: the command line needs the pipeline extra: pip install 'attnswitch[pipeline]'"
    ) from exc

from attnswitch.cli.options import JsonOption
from attnswitch.cli.output import print_json, rich_console
from attnswitch.doctor import TIMING_REPEATS, TIMING_SHAPE, default_device

# What `attnswitch --help` says first: the document job, then what is underneath.
ABOUT = (
    "attnswitch: a search engine for your documents, on your machine. "
    "'run FOLDER' indexes a folder (text, Office, PDF, mail, scans and images by OCR, "
    "source files); 'search QUERY' finds its passages by words and meaning; 'watch "
    "FOLDER' keeps the index current.\n\n"
    "Underneath: one attention contract, the native kernel of each chip behind it, "
    "verified against a float64 oracle (the second group of commands)."
)
# `attnswitch --help`'s groups of commands, in this order, each in this order: the
# document job first, then the attention kernels and the engines that encode.
PANELS = MappingProxyType(
    {
        "Index and search documents": (
            "run",
            "search",
            "status",
            "watch",
            "forget",
            "unforget",
            "serve",
            "mcp",
        ),
        "Engines and attention kernels": ("engines", "doctor", "conformance"),
    }
)
# `run` in `attnswitch --help`'s list (`attnswitch run --help` names every format).
RUN_SHORT_HELP = (
    "Index a folder: read its documents (text, Office, PDF, mail, scans and images by OCR, "
    "source files, ...), chunk, embed and store them."
)

app = typer.Typer(
    name="attnswitch",
    help=ABOUT,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from attnswitch._version import __version__

        typer.echo(f"attnswitch {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print attnswitch's version and exit.",
        ),
    ] = False,
) -> None:
    """Options of the `attnswitch` command itself (before the command's name)."""


# ---- shared helpers ----------------------------------------------------------------------


def _fmt(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.3g}"


def _check_names(names: list[str]) -> None:
    from attnswitch.kernels import registry

    known = registry.names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise typer.BadParameter(
            f"expected registered backend names ({', '.join(known)}), got {', '.join(unknown)}",
            param_hint="--backend",
        )


# ---- conformance -------------------------------------------------------------------------


@app.command()
def conformance(
    backend: Annotated[
        list[str] | None,
        typer.Option(
            "--backend",
            "-b",
            help="Backend to check (repeatable). Default: every available one.",
        ),
    ] = None,
    quick: Annotated[bool, typer.Option(help="Run the short grid only.")] = False,
    device: Annotated[
        str,
        typer.Option(
            help="Where the arrays live: auto (each framework's default device), cpu, cuda, "
            "cuda:N (torch), gpu, tpu (jax).",
        ),
    ] = "auto",
    show_declined: Annotated[
        bool,
        typer.Option(
            help="List declined cases one per row instead of a count per backend.",
        ),
    ] = False,
    record: Annotated[
        bool,
        typer.Option(
            help="Store a verdict per backend fingerprint (this quarantines or requalifies it).",
        ),
    ] = True,
    as_json: JsonOption = False,
) -> None:
    """Check backends against the float64 oracle and record their verdicts.

    A verdict names the cases it ran. Only a full run (no --quick) clears a full-grid failure;
    it also reruns the cases of any standing first-use failure.

    Exits 1 when any case fails or errors, or when a requested backend cannot run here.
    """
    from attnswitch.kernels import conformance as conf
    from attnswitch.kernels import registry

    names = list(dict.fromkeys(backend or []))
    _check_names(names)
    explicit = bool(names)
    names = names or registry.names()
    cases = conf.cases(quick=quick)
    reports = [_conformance_backend(name, cases, device, record, quick) for name in names]

    if as_json:
        print_json(reports)
    else:
        _render_conformance(reports, show_declined)
    failed = any(r["failed"] or r["errors"] for r in reports)
    missing = explicit and any(r["unavailable"] for r in reports)
    raise typer.Exit(1 if failed or missing else 0)


def _requalifying_cases(backend: Any, device: Any, cases: list[Any]) -> list[Any]:
    """Cases outside `cases` that a standing failure of `backend` ran (e.g. float16 cases of a
    first-use check): a full run includes them, since only a pass of every case a failure ran
    clears it (see kernels/verdicts.py)."""
    from attnswitch.kernels import conformance as conf
    from attnswitch.kernels import verdicts

    have = {c.label for c in cases}
    extra = sorted(verdicts.standing(backend, device).failed_run - have)
    return [c for label in extra if (c := conf.case_by_label(label)) is not None]


def _conformance_backend(
    name: str, cases: list[Any], device: str, record: bool, quick: bool = False
) -> dict:
    """Run the grid on one backend; a report dict with every result and the verdict. A full
    run adds the cases of standing failures outside the grid (`_requalifying_cases`)."""
    from attnswitch.kernels import conformance as conf
    from attnswitch.kernels import registry, verdicts

    b = registry.get(name)
    report: dict[str, Any] = {
        "backend": name,
        "framework": b.framework,
        "device": None,
        "unavailable": None,
        "verdict": None,
        "recorded": False,
        "passed": 0,
        "failed": 0,
        "errors": 0,
        "declined": 0,
        "results": [],
    }
    if (why := b.unavailable()) is not None:
        report["unavailable"] = why
        return report
    try:
        where = default_device(b.framework) if device == "auto" else device
        report["device"] = conf.device_info(name, where).label
    except Exception as exc:  # e.g. --device tpu for a torch backend
        report["unavailable"] = f"cannot place arrays on {device}: {type(exc).__name__}: {exc}"
        return report
    if not quick:
        cases = cases + _requalifying_cases(b, conf.device_info(name, where), cases)
    with rich_console(stderr=True).status(f"conformance: {name} ({len(cases)} cases on {where})"):
        results = verdicts.run([name], cases, device=where, store=record)
    counts = Counter(r.status for r in results)
    report.update(
        passed=counts[conf.PASSED],
        failed=counts[conf.FAILED],
        errors=counts[conf.ERROR],
        declined=counts[conf.DECLINED],
    )
    if counts[conf.PASSED] + counts[conf.FAILED] + counts[conf.ERROR]:
        report["verdict"] = "pass" if not (counts[conf.FAILED] or counts[conf.ERROR]) else "fail"
        report["recorded"] = record
    report["results"] = [
        {
            "case": r.case.label,
            "status": r.status,
            "error": r.error,
            "bound": r.bound,
            "reasons": list(r.reasons),
        }
        for r in results
    ]
    return report


_STYLE = MappingProxyType(
    {"pass": "green", "fail": "bold red", "error": "bold red", "declined": "dim"}
)


def _render_conformance(reports: list[dict], show_declined: bool) -> None:
    from rich.table import Table

    console = rich_console()
    table = Table(title="Conformance against the float64 oracle", title_justify="left")
    for col, kw in (
        ("backend", {}),
        ("case", {}),
        ("error", {"justify": "right"}),
        ("bound", {"justify": "right"}),
        ("result", {}),
        ("note", {"overflow": "fold", "ratio": 1}),
    ):
        table.add_column(col, **kw)
    for rep in reports:
        for r in rep["results"]:
            if r["status"] == "declined" and not show_declined:
                continue
            style = _STYLE.get(r["status"], "")
            table.add_row(
                rep["backend"],
                r["case"],
                _fmt(r["error"]),
                _fmt(r["bound"]),
                f"[{style}]{r['status']}[/]" if style else r["status"],
                "; ".join(r["reasons"]),
            )
    if table.row_count:
        console.print(table)

    summary = Table(title="Verdicts", title_justify="left")
    for col in ("backend", "device", "passed", "failed", "errors", "declined", "verdict"):
        summary.add_column(col)
    summary.add_column("note", overflow="fold", ratio=1)
    for rep in reports:
        verdict = rep["verdict"] or ("unavailable" if rep["unavailable"] else "none")
        style = _STYLE.get(verdict, "dim")
        summary.add_row(
            rep["backend"],
            rep["device"] or "-",
            str(rep["passed"]),
            str(rep["failed"]),
            str(rep["errors"]),
            str(rep["declined"]),
            f"[{style}]{verdict}[/]",
            rep["unavailable"] or _summary_note(rep, show_declined),
        )
    console.print(summary)


def _summary_note(rep: dict, show_declined: bool) -> str:
    """Whether the verdict was stored, and the reasons a backend declined cases, each with
    how many cases it covered."""
    notes = []
    if rep["verdict"] is None:
        notes.append("declined every case: no verdict recorded")
    elif not rep["recorded"]:
        notes.append("not recorded (--no-record)")
    if rep["declined"] and not show_declined:
        reasons = Counter(
            reason for r in rep["results"] if r["status"] == "declined" for reason in r["reasons"]
        )
        notes.append("declined: " + "; ".join(f"{why} ({n})" for why, n in reasons.most_common()))
    return "; ".join(notes)


# ---- doctor ------------------------------------------------------------------------------


@app.command()
def doctor(
    timing: Annotated[
        bool,
        typer.Option(
            help="Time each available backend on a reference shape "
            f"(B, S, H, D = {TIMING_SHAPE}, float32).",
        ),
    ] = True,
    timing_all: Annotated[
        bool,
        typer.Option(
            help="Also time backends whose first call compiles for long.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """What runs here: backends, verdicts, timings, the planner's choices, versions."""
    from attnswitch.doctor import doctor_report

    report = doctor_report(timing, timing_all)
    if as_json:
        print_json(report)
    else:
        _render_doctor(report)


def _render_engines(console: Any, engines: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title="Engines", title_justify="left")
    for col in ("engine", "available", "auto", "detail"):
        table.add_column(col, overflow="fold")
    for e in engines["status"]:
        table.add_row(
            e["name"],
            "yes" if e["available"] else f"no: {e['reason']}",
            _cell(e["auto"]),
            e["detail"],
        )
    console.print(table)
    precision = engines.get("precision")
    if precision is None:
        console.print(
            "No precision plan recorded on this machine yet: `attnswitch engines` "
            "measures one (and `attnswitch run` does on first use)."
        )
    elif "error" in precision:
        console.print(f"precision plan: {precision['error']}")
    else:
        _render_precision_plan(console, precision)
    for precision, plan in engines["plans"].items():
        if "error" in plan:
            console.print(f"engine plan ({precision}): {plan['error']}")
        else:
            _render_plan(console, plan)
    if not engines["plans"]:
        console.print(
            "No engine plan recorded on this machine yet: `attnswitch engines` "
            "measures one (and `attnswitch run` does on first use)."
        )


@app.command("engines")
def engines_command(
    precision: Annotated[
        str,
        typer.Option(help="auto (the measured pick: its plan is shown first), fp32, bf16 or int8."),
    ] = "auto",
    model: Annotated[
        str | None,
        typer.Option(help="Model folder. Default: all-MiniLM-L6-v2.", show_default=False),
    ] = None,
    engine: Annotated[str, typer.Option(help="auto, or an engine's name.")] = "auto",
    measure: Annotated[
        bool, typer.Option(help="Measure when nothing is recorded for this machine.")
    ] = True,
    as_json: JsonOption = False,
) -> None:
    """Which engine encodes here, and why each other one does not.

    For "auto": the plan recorded for this machine, measured first when there is none
    (--no-measure: only what is recorded). For an engine named: that engine, forced.
    With precision "auto", the precision plan (which precision, and why not the others)
    comes first."""
    from attnswitch.engines import (
        EncodeInputError,
        ModelError,
        explain_engine,
        explain_precision,
    )

    try:
        precision_plan = None
        if precision == "auto":
            precision_plan = explain_precision(model, engine, measure=measure)
        plan = (
            None
            if precision == "auto" and precision_plan is None
            else explain_engine(
                model,
                engine,
                precision if precision_plan is None else precision_plan.chosen,
                measure=measure,
            )
        )
    except (EncodeInputError, ModelError) as exc:
        typer.echo(f"attnswitch engines: {exc}", err=True)
        if as_json:
            print_json({"error": str(exc)})
        raise typer.Exit(1) from None
    if plan is None:
        message = (
            f"nothing recorded for {precision} on this machine: run `attnswitch "
            f"engines --precision {precision}` to measure"
        )
        if as_json:
            print_json({"plan": None, "reason": message})
        else:
            typer.echo(message)
        return
    if as_json:
        print_json(
            {
                **plan.to_dict(),
                "precision_plan": None if precision_plan is None else precision_plan.to_dict(),
            }
        )
    else:
        if precision_plan is not None:
            _render_precision_plan(rich_console(), precision_plan.to_dict())
        _render_plan(rich_console(), plan.to_dict())


def _render_precision_plan(console: Any, plan: dict) -> None:
    """A table of a `PrecisionPlan.to_dict()`."""
    from rich.table import Table

    from attnswitch.engines.autoprecision import AUTO_PARITY

    table = Table(
        title=f"Precision plan: {plan['chosen']}",
        title_justify="left",
        caption=_plan_caption(plan),
        caption_justify="left",
    )
    for col, kw in (
        ("precision", {}),
        ("engine", {}),
        ("chunks/s", {"justify": "right"}),
        ("min cosine", {"justify": "right"}),
        ("top-10", {"justify": "right"}),
        ("parity", {}),
        ("why not / what it ran", {"overflow": "fold"}),
    ):
        table.add_column(col, **kw)
    for row in plan["rows"]:
        rate = "-" if row["chunks_per_s"] is None else f"{row['chunks_per_s']:.1f}"
        cos = "-" if row["min_cosine"] is None else f"{row['min_cosine']:.6f}"
        top = "-" if row["top10"] is None else f"{row['top10']:.0%}"
        parity = (
            "-"
            if row["parity"] is None
            else f"{'yes' if row['parity'] else '[bold red]no[/]'} (>= {AUTO_PARITY}, same top-10)"
        )
        name = row["precision"] + (
            " [green](pick)[/]" if row["precision"] == plan["chosen"] else ""
        )
        note = plan["why_not"].get(row["precision"], "")
        table.add_row(
            name,
            row["engine"] or "-",
            rate,
            cos,
            top,
            parity,
            "; ".join(x for x in (note, row["detail"]) if x),
        )
    console.print(table)


def _plan_caption(plan: dict) -> str:
    """A plan's reason, and what changed since the plan it replaced (`stale`), if any."""
    stale = plan.get("stale")
    return plan["reason"] + (f"\nmeasured again, the recorded plan being {stale}" if stale else "")


def _render_plan(console: Any, plan: dict) -> None:
    """A table of an `EnginePlan.to_dict()`."""
    from rich.table import Table

    from attnswitch.engines.autopick import PARITY

    table = Table(
        title=f"Engine plan ({plan['precision']}): {plan['chosen']}",
        title_justify="left",
        caption=_plan_caption(plan),
        caption_justify="left",
    )
    for col, kw in (
        ("engine", {}),
        ("chunks/s", {"justify": "right"}),
        ("min cosine", {"justify": "right"}),
        ("parity", {}),
        ("why not / what it ran", {"overflow": "fold"}),
    ):
        table.add_column(col, **kw)
    why_not = plan["why_not"]
    for row in plan["rows"]:
        rate = "-" if row["chunks_per_s"] is None else f"{row['chunks_per_s']:.1f}"
        cos = "-" if row["min_cosine"] is None else f"{row['min_cosine']:.6f}"
        parity = (
            "-"
            if row["parity"] is None
            else f"{'yes' if row['parity'] else '[bold red]no[/]'} (>= {PARITY[plan['precision']]})"
        )
        name = row["engine"] + (" [green](pick)[/]" if row["engine"] == plan["chosen"] else "")
        note = why_not.get(row["engine"], "")
        table.add_row(name, rate, cos, parity, "; ".join(x for x in (note, row["detail"]) if x))
    if plan["fallbacks"]:
        table.caption += f"; fallbacks: {', '.join(plan['fallbacks'])}"
    console.print(table)


def _cell(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    return str(x)


# ---- doctor rendering --------------------------------------------------------------------


def _render_doctor(report: dict) -> None:
    from rich.table import Table

    console = rich_console()
    versions = Table(title="Versions", title_justify="left")
    for lib in report["versions"]:
        versions.add_column(lib)
    versions.add_row(*report["versions"].values())
    console.print(versions)

    table = Table(title="Backends", title_justify="left")
    for col, kw in (
        ("backend", {}),
        ("framework", {}),
        ("available", {"overflow": "fold"}),
        ("device", {}),
        ("verification", {"overflow": "fold", "ratio": 1}),
        ("median ms", {"justify": "right"}),
        ("note", {"overflow": "fold"}),
    ):
        table.add_column(col, **kw)
    shape = "x".join(map(str, TIMING_SHAPE))
    for r in report["backends"]:
        verdict = r["verdict"] or "-"
        style = {"pass": "green", "fail": "bold red"}.get(verdict, "dim")
        summary = r["verification"]["summary"] if r["verification"] else "-"
        table.add_row(
            r["backend"],
            r["framework"],
            "yes" if r["available"] and not r["why"] else f"no: {r['why']}",
            r["device"] or "-",
            f"[{style}]{summary}[/]",
            "-" if r["median_ms"] is None else f"{r['median_ms']:.2f}",
            r["timing_note"] or "",
        )
    table.caption = (
        f"verification policy: {report['verify']} (ATTNSWITCH_VERIFY); median ms: up "
        f"to {TIMING_REPEATS} calls on B,S,H,D = {shape} float32, after a warm-up"
    )
    console.print(table)

    plans = Table(
        title="Planner's choice for common calls (chosen, and what ordered it)",
        title_justify="left",
    )
    plans.add_column("call")
    frameworks = list(dict.fromkeys(fw for r in report["plans"] for fw in r["plans"]))
    for fw in frameworks:
        plans.add_column(f"{fw} input")
    for r in report["plans"]:
        cells = []
        for fw in frameworks:
            p = r["plans"].get(fw, {})
            cells.append(p.get("error") or f"{p.get('chosen') or 'none'} ({p.get('source')})")
        plans.add_row(r["call"], *cells)
    console.print(plans)

    _render_engines(console, report["engines"])


def _register_commands() -> None:
    """The main job's and the service's commands live beside their code; their modules
    import heavy libraries only inside the commands, so `--help` stays fast. Every
    command's help is its docstring reflowed (`help_text`)."""
    from attnswitch.cli.mcp import mcp_command
    from attnswitch.cli.pipeline import run_command
    from attnswitch.cli.search_command import search_command, status_command
    from attnswitch.cli.serve import serve_command
    from attnswitch.cli.sync import forget_command, unforget_command, watch_command

    app.command("run", short_help=RUN_SHORT_HELP)(run_command)
    app.command("search")(search_command)
    app.command("status")(status_command)
    app.command("forget")(forget_command)
    app.command("unforget")(unforget_command)
    app.command("watch")(watch_command)
    app.command("serve")(serve_command)
    app.command("mcp")(mcp_command)
    for command in app.registered_commands:
        if command.help is None and command.callback is not None:
            command.help = help_text(command.callback.__doc__ or "")
    _group_commands()


def _group_commands() -> None:
    """Put the commands in `PANELS`' groups and order (a command not named there keeps
    its place after them, in typer's default group)."""
    order = {
        name: (i, j) for i, names in enumerate(PANELS.values()) for j, name in enumerate(names)
    }
    panel = {name: title for title, names in PANELS.items() for name in names}

    def name_of(command: Any) -> str:
        return command.name or command.callback.__name__.replace("_", "-")

    app.registered_commands.sort(key=lambda c: order.get(name_of(c), (len(PANELS), 0)))
    for command in app.registered_commands:
        command.rich_help_panel = panel.get(name_of(command), command.rich_help_panel)


def help_text(doc: str) -> str:
    """A docstring as a command's --help: each paragraph on one line, for the terminal to
    wrap at its own width (typer's rich help keeps a docstring's line breaks, so lines cut
    at 90 columns in the source broke in two at 80); lines of an indented block (a usage
    example) are kept as they are. What follows a line holding only \\f is for readers of
    the code, not for --help (click's rule)."""
    import inspect

    paragraphs = []
    for block in inspect.cleandoc(doc).partition("\f")[0].strip().split("\n\n"):
        lines = block.splitlines()
        if any(line.startswith(" ") for line in lines):
            paragraphs.append("\b\n" + block)  # click's mark: do not rewrap
        else:
            paragraphs.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(paragraphs)


_register_commands()
