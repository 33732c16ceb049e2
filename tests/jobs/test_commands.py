"""The `run`, `search` and `status` commands: the real CLI in subprocesses (killed with
SIGKILL mid-run, then resumed, and compared with a clean run) and in-process through typer's
CliRunner (sharing the loaded model)."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnswitch.cli.pipeline import app
from attnswitch.indexing.store import DB_NAME, SQLiteStore
from attnswitch.jobs.run import RunOptions, run
from vector_rule import assert_within_rule, oracle

FAST = ["--max-tokens", "32", "--overlap", "4", "--chunks-per-call", "8"]
# The stored text is what the encoder read (no heading path before it), for tests that
# encode it again to check the stored vectors.
PLAIN = [*FAST, "--no-embed-headings"]


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "attnswitch.cli.pipeline", *args]


def invoke(*args: str):
    # A wide terminal, so that rich's tables fold no path the assertions look for.
    return CliRunner(env={"COLUMNS": "200"}).invoke(app(), list(args), catch_exceptions=False)


def chunk_rows(db: Path) -> list[tuple[str, int, str]]:
    """(source, ordinal, text) of every stored chunk, read-only (the writer may be live)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute(
            "SELECT d.source, c.ordinal, c.text FROM chunks c JOIN documents d"
            " ON d.id = c.doc_id ORDER BY d.source, c.ordinal"
        ).fetchall()
    except sqlite3.OperationalError:  # the schema is not created yet
        return []
    finally:
        conn.close()


def chunk_texts(db: Path) -> list:
    """Every stored chunk row (source, ordinal, text)."""
    with SQLiteStore(db) as store:
        ids, _ = store.vectors()
        return list(store.chunks(ids).values())


def vectors_by_chunk(db: Path, root: Path) -> dict[tuple[str, int], np.ndarray]:
    with SQLiteStore(db) as store:
        ids, matrix = store.vectors()
        rows = store.chunks(ids)
    return {(rows[int(i)].source, rows[int(i)].ordinal): matrix[r] for r, i in enumerate(ids)}


def test_resume_after_kill_9_matches_a_clean_run(more_docs: Path, tmp_path: Path, encoder) -> None:
    db = tmp_path / "killed"
    proc = subprocess.Popen(
        cli("run", str(more_docs), "--db", str(db), "--json", *PLAIN),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        if (db / DB_NAME).exists() and chunk_rows(db / DB_NAME):
            break
        time.sleep(0.01)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read()}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    at_kill = chunk_rows(db / DB_NAME)
    encoded_at_kill = len(vectors_by_chunk(db / DB_NAME, more_docs))  # the full pass's

    resumed = subprocess.run(
        cli("run", str(more_docs), "--db", str(db), "--json", *PLAIN),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    again = subprocess.run(
        cli("run", str(more_docs), "--db", str(db), "--json", *PLAIN),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    unchanged = json.loads(again.stdout)

    clean_db = tmp_path / "clean"
    with SQLiteStore(clean_db / DB_NAME) as store:
        clean = run(
            more_docs,
            store,
            RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=8, embed_headings=False),
            get_encoder=lambda: encoder,
        )
    final = chunk_rows(db / DB_NAME)
    assert final == chunk_rows(clean_db / DB_NAME)  # same documents, same chunk texts
    assert len(set((s, o) for s, o, _ in final)) == len(final)  # no duplicates
    assert 0 < len(at_kill) < len(final)  # killed mid-run
    assert set(at_kill) <= set(final)
    assert summary["status"] == "completed"
    assert summary["chunks_encoded"] == len(final) - encoded_at_kill
    assert summary["chunks_stored"] == clean.chunks_stored == len(final)
    assert (unchanged["chunks_encoded"], unchanged["unchanged"]) == (0, clean.new)
    with SQLiteStore(db / DB_NAME) as store:
        assert [r.status for r in store.runs()] == ["completed", "completed", "interrupted"]
    got, want = (
        vectors_by_chunk(db / DB_NAME, more_docs),
        vectors_by_chunk(clean_db / DB_NAME, more_docs),
    )
    assert got.keys() == want.keys()
    keys = sorted(want)
    texts = {(c.source, c.ordinal): c.text for c in chunk_texts(clean_db / DB_NAME)}
    ref, naive = oracle(encoder.spec.path, [texts[k] for k in keys])
    assert_within_rule(np.stack([got[k] for k in keys]), ref, naive, "resumed", stored=True)
    assert_within_rule(np.stack([want[k] for k in keys]), ref, naive, "clean", stored=True)


def test_run_summary_status_and_search(docs: Path, tmp_path: Path, encoder) -> None:
    (docs / "empty.txt").write_bytes(b"")
    (docs / "binary.txt").write_bytes(bytes(range(256)) * 8)
    (docs / "corrupt.pdf").write_bytes(b"%PDF-1.4 not really")
    (docs / "huge.txt").write_text("word " * 30_000)
    (docs / "latin1.txt").write_bytes("Crème brûlée, déjà vu, garçon.\n".encode("cp1252"))
    (docs / "gone.md").symlink_to(docs / "deleted-target.md")
    db = str(tmp_path / "db")
    result = invoke(
        "run",
        str(docs),
        "--db",
        db,
        "--max-mb",
        "0.1",
        "--hourly-usd",
        "2.5",
        "--no-progress",
        *FAST,
    )
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    for shown in (
        "completed",
        "skipped",
        "empty: 0 bytes",
        "binary",
        "corrupt PDF",
        "too large",
        "unreadable: cannot stat",
        "gone.md",
        "cp1252",
        " calls)",
        "per million tokens at $2.50/h",
        "peak memory",
        "tokens/s",
    ):
        assert shown in out, shown

    status = json.loads(invoke("status", "--db", db, "--json").output)
    assert (status["documents"], status["skipped"]) == (5, 5)
    assert {f["source"]: f["reason"].split(":")[0] for f in status["skipped_files"]} == {
        "empty.txt": "empty",
        "binary.txt": "binary",
        "corrupt.pdf": "corrupt PDF",
        "huge.txt": "too large",
        "gone.md": "unreadable",
    }
    assert status["last_run"]["status"] == "completed"
    assert status["model"]["precision"] == "fp32" and status["model"]["max_tokens"] == 32
    text = " ".join(invoke("status", "--db", db).output.split())
    assert "5 indexed, 5 skipped" in text and "huge.txt" in text

    found = json.loads(
        invoke(
            "search",
            "change the values of existing rows",
            "-k",
            "3",
            "--mode",
            "dense",
            "--db",
            db,
            "--json",
        ).output
    )
    ranks = found["data"]
    assert found["mode"] == "dense"
    assert [r["rank"] for r in ranks] == [1, 2, 3]
    assert ranks[0]["source"] == "postgresql/tutorial-update.html"
    assert ranks[0]["score"] >= ranks[1]["score"] >= ranks[2]["score"]
    expected = encoder.encode(["change the values of existing rows"])[0]
    with SQLiteStore(Path(db) / DB_NAME) as store:
        matrix = store.vectors()[1]
    best = float(np.max(matrix @ expected))
    assert ranks[0]["score"] == pytest.approx(best, abs=1e-5)
    table = " ".join(
        invoke("search", "change the values of existing rows", "--db", db).output.split()
    )
    assert "tutorial-update.html" in table and "hybrid search" in table
    for mode in ("hybrid", "keyword"):
        found = json.loads(
            invoke(
                "search",
                "UPDATE weather SET temp_hi",
                "-k",
                "3",
                "--mode",
                mode,
                "--db",
                db,
                "--json",
            ).output
        )
        assert found["mode"] == mode
        assert found["data"][0]["source"] == "postgresql/tutorial-update.html"


def test_search_and_status_refuse_clearly(docs: Path, tmp_path: Path, encoder) -> None:
    missing = tmp_path / "nothing-here"
    for args in (("search", "rows"), ("status",)):
        result = invoke(*args, "--db", str(missing), "--json")
        assert result.exit_code == 1
        assert "no index at" in json.loads(result.stdout)["error"]
        assert not missing.exists()  # refusing never creates a store
    empty = tmp_path / "empty-index"
    (empty_docs := tmp_path / "no-text").mkdir()
    (empty_docs / "blank.txt").write_bytes(b"")
    assert invoke("run", str(empty_docs), "--db", str(empty), "--json").exit_code == 0
    result = invoke("search", "rows", "--db", str(empty))
    assert result.exit_code == 1 and "is empty" in result.output

    db = str(tmp_path / "db")
    assert invoke("run", str(docs), "--db", db, "--json", *FAST).exit_code == 0
    other = tmp_path / "other-model"
    other.mkdir()
    for f in encoder.spec.path.iterdir():
        if f.is_file():
            (other / f.name).symlink_to(f)
    (other / "1_Pooling").symlink_to(encoder.spec.path / "1_Pooling")
    (other / "config.json").unlink()
    (other / "config.json").write_text(
        (encoder.spec.path / "config.json")
        .read_text()
        .replace('"hidden_act"', '"note": 1, "hidden_act"')
    )
    result = invoke("search", "rows", "--db", db, "--model", str(other), "--json")
    assert result.exit_code == 1
    assert "expected the index's model" in json.loads(result.stdout)["error"]
    result = invoke("run", str(docs), "--db", db, "--model", str(other), "--json")
    assert result.exit_code == 1 and "use another --db" in result.stdout
    result = invoke("run", str(tmp_path / "no-such-folder"), "--db", str(tmp_path / "db2"))
    assert result.exit_code == 1 and "expected a folder" in result.output
    assert not (tmp_path / "db2").exists()
    result = invoke("run", str(docs), "--db", db, "--precision", "fp8", "--json")
    assert result.exit_code == 2 and "'fp8' is not one of" in result.output


FRESH_CLI = """
import json, sys
from attnswitch.cli import app
try:
    app(["search", "rows", "--mode", "keyword", "--db", sys.argv[1], "--json"])
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps(sorted(m for m in sys.argv[2].split(",") if m in sys.modules)))
"""


def test_a_keyword_search_imports_no_model_framework(
    docs: Path, tmp_path: Path, encoder, model_frameworks: tuple[str, ...]
) -> None:
    """A cold `attnswitch search` opens the store and searches without torch, transformers
    or jax (only encoding a query needs the model); checked in a fresh process."""
    db = str(tmp_path / "db")
    assert invoke("run", str(docs), "--db", db, "--json", *FAST).exit_code == 0
    out = subprocess.run(
        [sys.executable, "-c", FRESH_CLI, db, ",".join(model_frameworks)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    result = json.loads("\n".join(out[:-1]))
    assert result["mode"] == "keyword" and result["timings"]["encode_s"] < 1e-3
    assert json.loads(out[-1]) == []


FRESH_SEARCH = """
import json, sys
from attnswitch.cli import app
try:
    app(["search", "how do I update rows", "--db", sys.argv[1], "--json"])
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps(sorted(m for m in sys.argv[2].split(",") if m in sys.modules)))
"""
TIMINGS = ("import_s", "tokenizer_s", "load_s", "encode_s", "search_s", "total_s")


@pytest.mark.parametrize("engine", ["openvino", "onnxruntime"])
def test_a_cold_search_loads_only_the_engine_of_the_index(
    docs: Path, tmp_path: Path, engine: str, model_frameworks: tuple[str, ...]
) -> None:
    """An index built with a fused CPU runtime (the pick of `auto` on most CPUs) is searched
    by a fresh process that loads that engine only: the parity verdict recorded when the
    index was built is read, so neither torch nor transformers nor jax is imported; and
    `timings` says what each step took."""
    from attnswitch.engines import registry

    why = registry.get(engine).unavailable()
    if why:
        pytest.skip(f"{engine}: {why}")
    db = str(tmp_path / "db")
    assert invoke("run", str(docs), "--db", db, "--engine", engine, "--json", *FAST).exit_code == 0
    out = subprocess.run(
        [sys.executable, "-c", FRESH_SEARCH, db, ",".join(model_frameworks)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    result = json.loads("\n".join(out[:-1]))
    assert json.loads(out[-1]) == [engine]
    assert result["model"].endswith(f"{engine} engine, fp32")
    assert result["data"]
    timings = result["timings"]
    assert tuple(timings) == TIMINGS
    assert all(timings[k] >= 0 for k in TIMINGS)
    assert timings["import_s"] > 0 and timings["tokenizer_s"] > 0 and timings["load_s"] > 0
    assert timings["encode_s"] > 0
    steps = sum(timings[k] for k in TIMINGS[:-1])
    assert steps <= timings["total_s"] + 0.02  # the process-age clock ticks in 10 ms


def test_a_cold_search_of_a_torch_index_loads_no_torch(
    docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_frameworks: tuple[str, ...]
) -> None:
    """An index built by torch is queried by onnxruntime once onnxruntime's parity with
    torch float32 is recorded and its model built here (here: by a run with it): a fresh
    process imports neither torch nor transformers, says which engine encoded the query,
    and ranks the chunks as the index's own engine does."""
    from attnswitch.engines import light, registry, runtime

    why = registry.get("onnxruntime").unavailable()
    if why:
        pytest.skip(f"onnxruntime: {why}")
    db = str(tmp_path / "db")
    assert invoke("run", str(docs), "--db", db, "--engine", "torch", "--json", *FAST).exit_code == 0
    assert (
        invoke(
            "run",
            str(docs),
            "--db",
            str(tmp_path / "ort"),
            "--engine",
            "onnxruntime",
            "--json",
            *FAST,
        ).exit_code
        == 0
    )  # checks it against torch, builds it
    monkeypatch.delenv(light.ENV_QUERY_ENGINE, raising=False)
    out = subprocess.run(
        [sys.executable, "-c", FRESH_SEARCH, db, ",".join(model_frameworks)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    result = json.loads("\n".join(out[:-1]))
    assert json.loads(out[-1]) == ["onnxruntime"]
    assert result["model"].endswith("torch engine, fp32")  # the index's, as built
    assert result["query_engine"]["engine"] == "onnxruntime"
    assert result["query_engine"]["why"].startswith("quicker to start than torch")
    monkeypatch.setenv(light.ENV_QUERY_ENGINE, "index")
    runtime.current().reset(encoders=False)  # the environment is read again
    own = json.loads(invoke("search", "how do I update rows", "--db", db, "--json").stdout)
    assert own["query_engine"]["engine"] == "torch"
    assert [h["chunk_id"] for h in own["data"]] == [h["chunk_id"] for h in result["data"]]


def test_a_keyword_search_reports_no_model_steps(docs: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    assert invoke("run", str(docs), "--db", db, "--json", *FAST).exit_code == 0
    timings = json.loads(
        invoke("search", "rows", "--mode", "keyword", "--db", db, "--json").stdout
    )["timings"]
    assert tuple(timings) == TIMINGS
    assert timings["tokenizer_s"] == timings["load_s"] == timings["encode_s"] == 0.0
    assert timings["search_s"] > 0


@pytest.mark.slow
def test_a_first_run_piped_to_a_log_says_what_it_does(docs: Path, tmp_path: Path) -> None:
    """The first run on a machine (an empty cache) of a folder too small to repay measuring
    the engines says so, and checks the engine it keeps (the quickest to start) against
    torch once: without a terminal in plain lines, with the steps, then the run's stages; a
    library's complaint about a broken PDF goes to the log file, not to stderr; and no
    warning (OpenVINO's telemetry forking after JAX was imported) reaches the user. The
    summary counts the check's seconds as measuring."""
    from attnswitch.engines import ModelSpec, light

    corpus = Path(__file__).resolve().parents[2] / "examples" / "corpus"
    pdf = (corpus / "sqlite" / "copyright-release.pdf").read_bytes()
    (docs / "cut-short.pdf").write_bytes(pdf[: len(pdf) // 2])
    cache = tmp_path / "empty-cache"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ATTNSWITCH_ENGINE", "ATTNSWITCH_PRECISION")
    }
    env["ATTNSWITCH_CACHE_DIR"] = str(cache)
    env["COLUMNS"] = "200"  # the summary's rows on one line each: no phrase cut by wrapping
    quick = light.quickest(ModelSpec.load(None), "fp32")
    db = str(tmp_path / "db")
    command = [sys.executable, "-m", "attnswitch.cli", "run", str(docs), "--db", db, *FAST]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr
    lines = first.stderr.splitlines()
    assert all(line.startswith("attnswitch run: ") for line in lines), lines
    assert "\x1b[" not in first.stderr
    assert lines[0].startswith(
        "attnswitch run: not measuring engines for this job (this job is about "
    )
    if quick != "torch":  # the reference needs no check
        assert lines[1].startswith(
            f"attnswitch run: checking {quick} (fp32) against torch float32, once on this machine"
        )
        assert any(f"measuring: {quick}: load and parity check" in line for line in lines)
        assert "measuring and checking engines" in first.stdout
    # the quick pass's last line, then the full pass's
    shown = "\n".join(lines)
    assert any(line.startswith("attnswitch run: done: files 5/5 done, 5 read") for line in lines), (
        shown
    )
    assert re.match(r"attnswitch run: done: full vectors (\d+)/\1 ", lines[-1]), shown
    for noise in ("Traceback", "Warning", "fork", "EOF marker"):
        assert noise not in first.stderr + first.stdout
    assert "library log" in first.stdout and "corrupt PDF" in first.stdout
    assert "EOF marker not found" in (cache / "run.log").read_text()
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "checking" not in again.stderr
    assert "measuring: " not in again.stderr
    assert again.stderr.splitlines()[-1].startswith("attnswitch run: done: files 5/5")


@pytest.mark.slow
def test_run_indexes_every_format_and_status_says_what_was_skipped(tmp_path: Path, encoder) -> None:
    """A folder of every format the readers take (the reader fixtures: files written by
    pandoc, LibreOffice and the standard library), run with OCR off: each document is
    indexed and searchable, the encrypted ones and the image that needs OCR are listed by
    `status` with their reasons."""
    fixtures = Path(__file__).resolve().parents[1] / "documents" / "readers" / "fixtures"
    folder = tmp_path / "shared-drive"
    folder.mkdir()
    for path in fixtures.iterdir():
        if path.suffix not in (".tif", ".jpg", ".mbox") and path.name != "mixed.pdf":
            (folder / path.name).write_bytes(path.read_bytes())
    db = str(tmp_path / "db")
    result = invoke(
        "run",
        str(folder),
        "--db",
        db,
        "--no-ocr",
        "--no-progress",
        "--max-tokens",
        "128",
        "--overlap",
        "0",
        "--chunks-per-call",
        "32",
    )
    assert result.exit_code == 0, result.output
    status = json.loads(invoke("status", "--db", db, "--json").output)
    assert {f["source"]: f["reason"] for f in status["skipped_files"]} == {
        "anyhow-drm.epub": "encrypted: epub: DRM-encrypted (1 of its content documents, "
        "such as EPUB/text/ch001.xhtml)",
        "anyhow-encrypted.docx": "encrypted: docx: password-protected (an encrypted Office file)",
        "scan.pdf": "needs OCR: page 1: no text layer, and OCR is off",
        "scan.png": "needs OCR: PNG image: OCR is off",
    }
    assert status["documents"] == 16  # docx x2, pptx, xlsx, odt, odp, ods, epub, rtf, ipynb,
    # csv, tsv, eml, doc, xls, ppt
    for query, source in (
        ("JSON primitive type numeric NaN", "json-types."),
        ("anyhow::Error trait object", "anyhow."),
    ):
        found = json.loads(
            invoke("search", query, "-k", "13", "--mode", "keyword", "--db", db, "--json").output
        )["data"]
        assert sum(r["source"].startswith(source) for r in found) >= 4, found


@pytest.mark.slow
def test_a_run_on_a_full_disk_stops_with_one_line_and_the_next_one_finishes(tmp_path: Path) -> None:
    """Disk full during `run` (issue 29), made by a file-size limit (RLIMIT_FSIZE, with
    SIGXFSZ ignored so that writes fail as on a full disk): the run stops with one line
    that names the disk and says to free space and run again, no document is half-written,
    and the next run, with the space back, finishes the index."""
    import resource

    corpus = Path(__file__).resolve().parents[2] / "examples" / "corpus" / "postgresql"
    docs = tmp_path / "docs"
    docs.mkdir()
    for page in sorted(corpus.glob("tutorial-*.html")):
        (docs / page.name).write_bytes(page.read_bytes())
    data = tmp_path / "data"
    limit = 256 * 1024  # bytes a file may reach: the index outgrows it after a few pages

    def full_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    args = [
        sys.executable,
        "-m",
        "attnswitch.cli",
        "run",
        str(docs),
        "--db",
        str(data),
        "--no-progress",
        *FAST,
    ]
    full = subprocess.run(
        args, preexec_fn=full_disk, capture_output=True, text=True, env=env, timeout=600
    )
    assert full.returncode == 1, full.stderr
    lines = full.stderr.strip().splitlines()
    assert len(lines) == 1, full.stderr
    assert lines[0].startswith(f"attnswitch run: {data / DB_NAME}: could not be written")
    assert "the disk mounted at " in lines[0] and "free space there, then run again" in lines[0]
    with SQLiteStore(data) as store:
        stored = store.sources(docs)
        assert len(stored) < len(list(docs.iterdir()))  # stopped in the middle
        for source in stored:  # each document whole: its row's chunks all there
            assert store.lookup(docs, source).n_chunks == len(store.document_chunks(docs, source))
    again = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    with SQLiteStore(data) as store:
        assert store.root_counts(docs)[0] == len(list(docs.iterdir()))
        assert store.runs()[0].status == "completed"
