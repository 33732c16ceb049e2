"""What `attnswitch run` prints at its end (cli/pipeline.py `_render_run`): the wall time
with its parts, and only the lines that apply to this run."""

from __future__ import annotations

import pytest

from attnswitch.cli.pipeline import _render_run


def _summary(**changes) -> dict:
    """A run's summary as `run --json` prints it: 6 documents encoded by onnxruntime."""
    s = {
        "status": "completed",
        "root": "/data/docs",
        "db": "/data/index.sqlite3",
        "indexed": 6,
        "new": 6,
        "changed": 0,
        "unchanged": 0,
        "deleted": 0,
        "skipped": 0,
        "chunks_encoded": 31,
        "chunks_stored": 31,
        "tokens_encoded": 6115,
        "wall_s": 13.9,
        "load_s": 0.2,
        "encode_s": 1.3,
        "measure_s": 12.0,
        "startup_s": 0.4,
        "time_parts": {
            "measure": 12.0,
            "scan": 0.0,
            "read": 0.3,
            "chunk": 0.02,
            "load": 0.2,
            "encode": 1.3,
            "store": 0.01,
            "other": 0.07,
        },
        "tokens_per_s": 4704.0,
        "chunks_per_s": 23.8,
        "engine": "onnxruntime",
        "device": "cpu",
        "precision": "fp32",
        "layout": "padded",
        "engine_reason": "the quickest engine to start here",
        "precision_reason": "float32",
        "model": "all-MiniLM-L6-v2",
        "backends": {},
        "fallbacks": {},
        "peak_rss_mb": 900.0,
        "peak_device_mb": None,
        "memory": {"growing": False, "samples": 0, "reason": "0 samples after warm-up, need 12"},
        "cost": {
            "usd_per_million_tokens": 0.0059,
            "hourly_usd": 0.10,
            "device": "cpu",
            "price_source": "default",
            "reason": None,
        },
        "skipped_by_reason": {},
        "skipped_files": [],
        "notes": [],
        "ray": None,
        "library_log": {"path": None, "messages": 0},
    }
    return {**s, **changes}


def _rows(capsys: pytest.CaptureFixture, summary: dict) -> dict[str, str]:
    _render_run(summary)
    rows: dict[str, str] = {}
    key = None
    for line in capsys.readouterr().out.splitlines():
        cells = [c.strip() for c in line.strip("│").split("│")]
        if len(cells) != 2:
            continue
        if cells[0]:
            key = cells[0]
            rows[key] = cells[1]
        elif key is not None:  # a cell folded onto the next line
            rows[key] += " " + cells[1]
    return rows


def test_the_wall_time_is_shown_with_its_parts(capsys: pytest.CaptureFixture) -> None:
    rows = _rows(capsys, _summary())
    assert rows["wall time"] == (
        "13.9 s (after 0.4 s starting the command): measuring and checking engines 12.0 s, "
        "waiting for files to be read 0.3 s, model load 0.2 s, encoding 1.3 s, other 0.1 s"
    )
    assert rows["throughput"] == "4,704 tokens/s, 23.8 chunks/s while encoding"


def test_lines_that_do_not_apply_to_this_run_are_left_out(capsys: pytest.CaptureFixture) -> None:
    rows = _rows(capsys, _summary())
    # no attention calls (a fused runtime), no price set, no memory samples
    assert not {"attention", "cost", "memory watch"} & set(rows), rows
    nothing = _summary(
        tokens_encoded=0,
        chunks_encoded=0,
        tokens_per_s=None,
        chunks_per_s=None,
        cost={"usd_per_million_tokens": None, "reason": "no tokens encoded"},
    )
    assert "throughput" not in _rows(capsys, nothing)


def test_lines_that_apply_are_shown(capsys: pytest.CaptureFixture) -> None:
    rows = _rows(
        capsys,
        _summary(
            backends={"torch-sdpa": 12},
            memory={"growing": False, "samples": 30, "reason": "flat: +0.1 MiB per call"},
            cost={
                "usd_per_million_tokens": 0.0059,
                "hourly_usd": 0.10,
                "device": "cpu",
                "price_source": "argument",
                "reason": None,
            },
        ),
    )
    assert rows["attention"] == "torch-sdpa (12 calls)"
    assert rows["memory watch"] == "flat: +0.1 MiB per call"
    assert rows["cost"].startswith("$0.0059 per million tokens at $0.10/h")
