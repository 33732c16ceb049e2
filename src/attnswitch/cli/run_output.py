"""What `attnswitch run` prints at its end: `RunReport`, the run's `jobs.summary.RunSummary`
with what the command adds (the library log, the seconds it took to start), and
`render_run`, its table, read from the summary's fields by name (a field renamed in
`RunSummary` fails here, and in tests/cli/test_run_summary.py, not in a user's terminal).

`RunReport.to_dict()` is `run --json`'s object: the summary's `to_dict()`, then
`library_log` and `startup_s`. The table shows the lines that apply to the run (throughput
when tokens were encoded, attention calls, a price the user set, the memory watch once it
sampled, Ray's pools, fallbacks, skips, the library log); `NOT_SHOWN` names the summary's
fields it leaves to `--json`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from attnswitch.cli.cells import PathCell
from attnswitch.cli.files_table import render_files
from attnswitch.cli.output import rich_console, terminal_text

if TYPE_CHECKING:
    from attnswitch.jobs.summary import RunSummary

# the fields of `RunSummary` the table leaves out (the JSON has them): the run's number,
# the files listed, the failures (counted in `skipped`), the config's fingerprint, the
# measuring's seconds (a part of the wall time), the reuse counts (`watch` prints them) and
# the unchanged files whose recorded permissions were brought up to date
NOT_SHOWN = frozenset(
    {
        "run_id",
        "files",
        "failed",
        "config",
        "measure_s",
        "chunks_reused",
        "copied",
        "moved",
        "permissions_changed",
    }
)

# the rows that hold a path, wrapped only after a `/` (`cells.PathCell`)
PATH_ROWS = frozenset({"folder", "index"})

# what each part of a run's wall time (`RunSummary.time_parts`) is called in its summary
_PART_NAMES = MappingProxyType(
    {
        "measure": "measuring and checking engines",
        "scan": "listing the folder",
        "read": "waiting for files to be read",
        "chunk": "chunking",
        "load": "model load",
        "encode": "encoding",
        "store": "writing the index",
        "other": "other",
    }
)


@dataclass(frozen=True)
class LibraryLogReport:
    """What libraries logged during the run (`observe.liblog`): `messages` lines, in the
    file `path` (None when there were none)."""

    path: str | None
    messages: int


@dataclass(frozen=True)
class RunReport:
    """A run's summary and what the command adds: the library log, and `startup_s`, the
    seconds the command took to start before the run (`observe.startup.process_age_s`)."""

    summary: RunSummary
    library_log: LibraryLogReport
    startup_s: float

    def to_dict(self) -> dict[str, Any]:
        """`run --json`'s object."""
        return {
            **self.summary.to_dict(),
            "library_log": {"path": self.library_log.path, "messages": self.library_log.messages},
            "startup_s": self.startup_s,
        }


def num(x: float | None, fmt: str = ",.0f") -> str:
    return "-" if x is None else format(x, fmt)


def chunks_text(s: RunSummary) -> str:
    """The chunks row: encoded and stored, and the two passes' figures when there are any
    (docs/architecture.md, "Two passes")."""
    text = f"{s.chunks_encoded:,} encoded ({s.chunks_stored:,} stored for this folder)"
    if s.chunks_quick and not s.full_pass_s:
        text += f"; {s.chunks_quick:,} stored with quick vectors only (the quick pass)"
    if s.chunks_filled > s.chunks_quick:
        text += f"; {s.chunks_filled - s.chunks_quick:,} of them stored by an earlier quick pass"
    if s.chunks_unencoded:
        text += (
            f"; {s.chunks_unencoded:,} in the index still without a full vector "
            "(searchable; `attnswitch run` without --quick encodes them)"
        )
    return text


def passes_text(s: RunSummary) -> str:
    """When the folder became searchable (the quick pass's end) and how long the full pass
    took after it."""
    text = f"after {s.searchable_s:,.1f} s (every file read, found by words and meaning)"
    if s.full_pass_s:
        text += f"; full vectors {s.full_pass_s:,.1f} s later (the full pass)"
    return text


def run_rows(report: RunReport) -> list[tuple[str, str]]:
    """The run table's rows, (name, text), the memory watch's text with its markup."""
    s = report.summary
    docs = (
        f"{s.indexed:,} indexed in this folder; this run: {s.new} new, "
        f"{s.changed} changed, {s.unchanged} unchanged, {s.deleted} deleted, "
        f"{s.skipped} skipped"
    )
    rows = [
        ("folder", s.root),
        ("index", s.db),
        ("documents", docs),
        ("chunks", chunks_text(s)),
        ("tokens", f"{s.tokens_encoded:,} encoded"),
        ("wall time", time_text(report)),
    ]
    if s.searchable_s is not None:
        rows.insert(4, ("searchable", passes_text(s)))
    if s.tokens_encoded:
        rows.append(
            (
                "throughput",
                f"{num(s.tokens_per_s)} tokens/s, "
                f"{num(s.chunks_per_s, ',.1f')} chunks/s while encoding",
            )
        )
    rows += [
        (
            "engine",
            f"{s.engine} on {s.device or 'no device (nothing encoded)'}, "
            f"{s.precision}, {s.layout} batches; why: {s.engine_reason}",
        ),
        ("precision", f"{s.precision}; why: {s.precision_reason or 'asked for'}"),
        ("model", s.model),
    ]
    if s.backends:  # the torch engine's attention calls; fused runtimes make none
        rows.append(("attention", ", ".join(f"{b} ({n:,} calls)" for b, n in s.backends.items())))
    rows.append(
        (
            "peak memory",
            f"{s.peak_rss_mb:,.0f} MiB RSS"
            + (f", {s.peak_device_mb:,.0f} MiB on the device" if s.peak_device_mb else ""),
        )
    )
    if s.memory.get("samples") or s.memory["growing"]:
        rows.append(
            (
                "memory watch",
                ("[bold red]GROWING[/]: " if s.memory["growing"] else "")
                + terminal_text(s.memory["reason"]),
            )
        )
    if s.cost.get("price_source") not in (None, "default"):  # a price the user set
        rows.append(("cost", cost_text(s.cost)))
    if s.ray:
        r = s.ray
        rows.append(
            (
                "ray",
                f"{r['nodes']} node(s) at {r['address']}; Ray connect "
                f"{r['connect_s']:.1f} s, actors' start {r['start_s']:.1f} s"
                + (
                    f"; {r['requeued_batches']} batch(es) moved off lost actors"
                    if r["requeued_batches"]
                    else ""
                ),
            )
        )
    if s.fallbacks:
        rows.append(("fallbacks", ", ".join(f"{b} ({n})" for b, n in s.fallbacks.items())))
    if s.skipped:
        rows.append(
            ("skipped", ", ".join(f"{r} ({n})" for r, n in sorted(s.skipped_by_reason.items())))
        )
    log = report.library_log
    if log.messages:
        rows.append(("library log", f"{log.messages} message(s) from libraries in {log.path}"))
    return rows


def render_run(report: RunReport) -> None:
    """Print the run's table, then Ray's pools, the skipped files and those handled with a
    note (each when there are any)."""
    from rich.table import Table

    s = report.summary
    console = rich_console()
    t = Table(title=f"attnswitch run: {s.status}", title_justify="left", show_header=False)
    t.add_column(style="bold")
    t.add_column()
    for key, value in run_rows(report):  # the memory watch's markup is ours, its reason escaped
        if key in PATH_ROWS:
            t.add_row(key, PathCell(value))
        else:
            t.add_row(key, value if key == "memory watch" else terminal_text(value))
    console.print(t)
    if s.ray:
        render_kinds(console, s.ray["kinds"])
    if s.skipped_files:
        render_files(console, "Skipped files", s.skipped_files, "reason")
    if s.notes:
        render_files(console, "Handled with a note", s.notes, "note")


def time_text(report: RunReport) -> str:
    """The run's wall time, the seconds the command took to start before it, and the
    wall time's parts that took a tenth of a second or more (they add up to it: `other` is
    the rest; a summary without parts: the model load and the encoding)."""
    s = report.summary
    names = {**_PART_NAMES, **({"load": "Ray connect and actors' start"} if s.ray else {})}
    parts = s.time_parts or {"load": s.load_s, "encode": s.encode_s}
    shown = [f"{names.get(k, k)} {v:.1f} s" for k, v in parts.items() if round(v, 1) > 0]
    start = f" (after {report.startup_s:.1f} s starting the command)" if report.startup_s else ""
    return f"{s.wall_s:.1f} s{start}" + (f": {', '.join(shown)}" if shown else "")


def render_kinds(console: Any, kinds: dict[str, dict[str, Any]]) -> None:
    """The Ray run's encoder pools, one row per node kind (`ray_run`'s summary `kinds`)."""
    from rich.table import Table

    t = Table(title="Encoders per node kind", title_justify="left")
    for name in (
        "kind",
        "actors",
        "nodes",
        "chunks",
        "tokens",
        "tokens/s",
        "engine",
        "device",
        "attention",
        "restarts",
    ):
        t.add_column(
            name,
            justify="right"
            if name in ("actors", "nodes", "chunks", "tokens", "tokens/s", "restarts")
            else "left",
        )
    for kind, k in kinds.items():
        t.add_row(
            kind,
            str(k["actors"]),
            str(k["nodes"]),
            f"{k['chunks']:,}",
            f"{k['tokens']:,}",
            num(k["tokens_per_s"]),
            ", ".join(k["engines"]),
            ", ".join(k["devices"]),
            ", ".join(f"{b} ({n:,})" for b, n in k["backends"].items()) or "-",
            str(k["restarts"]),
        )
    console.print(t)
    for kind, k in kinds.items():
        if k.get("note"):
            console.print(f"{kind}: {k['note']}")


def cost_text(c: dict[str, Any]) -> str:
    """The summary's `cost`, in words."""
    if c.get("usd_per_million_tokens") is None:
        return f"- ({c.get('reason')})"
    return (
        f"${c['usd_per_million_tokens']:.4f} per million tokens at "
        f"${c['hourly_usd']:.2f}/h ({c['device']}, price from {c['price_source']})"
    )
