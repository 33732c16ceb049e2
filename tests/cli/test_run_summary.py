"""What `attnswitch run` prints at its end (cli/run_output.py), from real runs: the rows of
the table the command printed against the fields of its summary (as the runs table keeps
it, `status --json`), `run --json`'s object, the lines shown only when they apply, and every
field of `RunSummary` either shown or named in `NOT_SHOWN`, read by name: a field renamed or
removed without the renderer fails here."""

from __future__ import annotations

import dataclasses
import json
import shutil
from typing import Any

import pytest
from cli_testing import CORPUS, FAST, SMALL, invoke

from attnswitch.cli.run_output import NOT_SHOWN, LibraryLogReport, RunReport, render_run
from attnswitch.jobs.summary import RunSummary

FIELDS = [f.name for f in dataclasses.fields(RunSummary)]
TEXTS = SMALL[:2]  # two short pages, read on the run's thread (fast, no worker processes)
ARGS = ("--no-progress", "--read-workers", "0", *FAST)


@dataclasses.dataclass(frozen=True)
class Ran:
    """A real run: the table the command printed, its summary as the runs table keeps it,
    and the `run --json` object of a second run over the same folder."""

    printed: str
    summary: RunSummary
    rerun_json: dict[str, Any]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    base = tmp_path_factory.mktemp("run-summary")
    folder, db = base / "docs", base / "data"
    for source in TEXTS:
        (folder / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CORPUS / source, folder / source)
    (folder / "blob.bin").write_bytes(bytes(range(256)) * 8)  # skipped: binary
    done = invoke("run", str(folder), "--db", str(db), *ARGS)
    assert done.exit_code == 0, done.output
    status = invoke("status", "--db", str(db), "--json")
    assert status.exit_code == 0, status.output
    kept = json.loads(status.stdout)["last_run"]["summary"]
    again = invoke("run", str(folder), "--db", str(db), "--json", *ARGS)
    assert again.exit_code == 0, again.output
    return Ran(done.stdout, RunSummary(**kept), json.loads(again.stdout))


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables rendered here as wide as the command's (`cli_testing.invoke`)."""
    monkeypatch.setenv("COLUMNS", "200")


def rows_of(printed: str) -> dict[str, str]:
    """The run table's rows, name -> text (a cell folded onto the next lines joined with a
    space)."""
    rows: dict[str, str] = {}
    key = None
    for line in printed.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) != 2:
            continue
        if cells[0]:
            key = cells[0]
            rows[key] = cells[1]
        elif key is not None:
            rows[key] += " " + cells[1]
    return rows


def rendered(capsys: pytest.CaptureFixture, summary: Any, startup_s: float = 0.0) -> str:
    capsys.readouterr()
    render_run(RunReport(summary, LibraryLogReport(None, 0), startup_s))
    return capsys.readouterr().out


def test_the_printed_rows_are_the_summarys_fields(ran: Ran) -> None:
    s, rows = ran.summary, rows_of(ran.printed)
    assert ran.printed.startswith(f"attnswitch run: {s.status}")
    assert s.status == "completed" and (s.new, s.skipped, s.indexed) == (2, 1, 2)
    assert rows["folder"] == s.root and rows["index"] == s.db
    assert rows["documents"] == (
        f"{s.indexed:,} indexed in this folder; this run: {s.new} new, {s.changed} changed, "
        f"{s.unchanged} unchanged, {s.deleted} deleted, {s.skipped} skipped"
    )
    assert s.chunks_encoded > 0 and s.chunks_stored == s.chunks_encoded
    assert rows["chunks"] == (
        f"{s.chunks_encoded:,} encoded ({s.chunks_stored:,} stored for this folder)"
    )
    assert rows["searchable"] == (  # a plain run: the quick pass, then the full pass
        f"after {s.searchable_s:,.1f} s (every file read, found by words and meaning); "
        f"full vectors {s.full_pass_s:,.1f} s later (the full pass)"
    )
    assert rows["tokens"] == f"{s.tokens_encoded:,} encoded"
    assert rows["wall time"].startswith(f"{s.wall_s:.1f} s")
    assert rows["throughput"].startswith(f"{s.tokens_per_s:,.0f} tokens/s")
    assert " ".join(rows["engine"].split()).startswith(
        f"{s.engine} on {s.device}, {s.precision}, {s.layout} batches; why: "
    )
    assert rows["model"] == s.model
    assert rows["skipped"] == "binary (1)" == f"binary ({s.skipped_by_reason['binary']})"
    assert "blob.bin" in ran.printed.split("Skipped files", 1)[1]


def test_the_table_rendered_again_from_the_kept_summary_is_the_printed_one(
    ran: Ran, capsys: pytest.CaptureFixture
) -> None:
    printed, again = rows_of(ran.printed), rows_of(rendered(capsys, ran.summary))
    # the same rows but the wall time, which the command follows by its own start-up
    assert {k: v for k, v in printed.items() if k != "wall time"} == {
        k: v for k, v in again.items() if k != "wall time"
    }
    assert printed["wall time"].startswith(again["wall time"].split(":")[0])


def test_run_json_is_the_summary_then_what_the_command_adds(ran: Ran) -> None:
    got = ran.rerun_json
    assert list(got) == [*FIELDS, "library_log", "startup_s", "rules"]
    summary = RunSummary(**{k: got[k] for k in FIELDS})
    report = RunReport(summary, LibraryLogReport(**got["library_log"]), got["startup_s"])
    assert json.loads(json.dumps(report.to_dict())) == {
        k: v for k, v in got.items() if k != "rules"
    }
    assert got["rules"]["rules_changed"] is False  # a rerun with the same (default) rules
    assert (summary.new, summary.unchanged, summary.chunks_encoded) == (0, 2, 0)


class Reading:
    """A summary that records which of its fields are read."""

    def __init__(self, summary: RunSummary) -> None:
        self._summary = summary
        self.read: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.read.add(name)
        return getattr(self._summary, name)


def every_line(s: RunSummary) -> list[RunSummary]:
    """`s` and variants that take each conditional line of the table (attention calls,
    fallbacks, the memory watch, a price set, Ray, a summary without time parts)."""
    ray = {
        "address": "10.0.0.1:6379",
        "nodes": 2,
        "connect_s": 1.2,
        "start_s": 4.6,
        "requeued_batches": 1,
        "kinds": {
            "gpu": {
                "actors": 2,
                "nodes": 2,
                "chunks": 10,
                "tokens": 200,
                "tokens_per_s": 1000.0,
                "engines": ["torch"],
                "devices": ["cuda"],
                "backends": {"flash": 4},
                "restarts": 0,
                "note": None,
            }
        },
    }
    return [
        s,
        dataclasses.replace(
            s,
            backends={"torch-sdpa": 12},
            fallbacks={"flash": 1},
            memory={"growing": True, "samples": 30, "reason": "+5 MiB per call"},
            cost={
                "usd_per_million_tokens": 0.0059,
                "hourly_usd": 0.1,
                "device": "cpu",
                "price_source": "argument",
                "reason": None,
            },
            notes=[{"source": "a.txt", "note": "not UTF-8"}],
        ),
        dataclasses.replace(s, ray=ray, time_parts={}),
    ]


def test_every_field_is_shown_or_named_not_shown(ran: Ran, capsys: pytest.CaptureFixture) -> None:
    read: set[str] = set()
    for summary in every_line(ran.summary):
        reading = Reading(summary)
        rendered(capsys, reading)
        read |= reading.read
    assert read <= set(FIELDS), read - set(FIELDS)
    assert not read & NOT_SHOWN, read & NOT_SHOWN
    assert read | NOT_SHOWN == set(FIELDS), set(FIELDS) - read - NOT_SHOWN


def test_the_wall_time_is_shown_with_its_parts(ran: Ran, capsys: pytest.CaptureFixture) -> None:
    parts = {"measure": 12.0, "scan": 0.0, "read": 0.3, "chunk": 0.02, "load": 0.2}
    parts |= {"encode": 1.3, "store": 0.01, "other": 0.07}
    s = dataclasses.replace(ran.summary, wall_s=13.9, time_parts=parts)
    assert rows_of(rendered(capsys, s, startup_s=0.4))["wall time"] == (
        "13.9 s (after 0.4 s starting the command): measuring and checking engines 12.0 s, "
        "waiting for files to be read 0.3 s, model load 0.2 s, encoding 1.3 s, other 0.1 s"
    )
    older = dataclasses.replace(s, time_parts={}, load_s=0.2, encode_s=1.3)  # no parts kept
    assert rows_of(rendered(capsys, older))["wall time"] == (
        "13.9 s: model load 0.2 s, encoding 1.3 s"
    )


def test_lines_that_do_not_apply_to_this_run_are_left_out(
    ran: Ran, capsys: pytest.CaptureFixture
) -> None:
    quiet = dataclasses.replace(
        ran.summary,
        backends={},  # a fused runtime makes no attention calls
        memory={"growing": False, "samples": 0, "reason": "0 samples after warm-up, need 12"},
        cost={**ran.summary.cost, "price_source": "default"},
    )
    rows = rows_of(rendered(capsys, quiet))
    assert not {"attention", "cost", "memory watch", "ray", "fallbacks"} & set(rows), rows
    nothing = dataclasses.replace(
        quiet, tokens_encoded=0, chunks_encoded=0, tokens_per_s=None, chunks_per_s=None
    )
    assert "throughput" not in rows_of(rendered(capsys, nothing))


def test_lines_that_apply_are_shown(ran: Ran, capsys: pytest.CaptureFixture) -> None:
    _, busy, on_ray = every_line(ran.summary)
    out = rendered(capsys, busy)
    rows = rows_of(out)
    assert rows["attention"] == "torch-sdpa (12 calls)"
    assert rows["fallbacks"] == "flash (1)"
    assert rows["memory watch"] == "GROWING: +5 MiB per call"
    assert rows["cost"] == "$0.0059 per million tokens at $0.10/h (cpu, price from argument)"
    assert "Handled with a note" in out and "not UTF-8" in out
    out = rendered(capsys, on_ray)
    assert rows_of(out)["ray"] == (
        "2 node(s) at 10.0.0.1:6379; Ray connect 1.2 s, actors' start 4.6 s; "
        "1 batch(es) moved off lost actors"
    )
    assert "Encoders per node kind" in out and "flash (4)" in out
