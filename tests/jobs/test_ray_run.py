"""The pipeline on Ray (`run_on_ray`, `attnswitch run --ray`), on a real local Ray cluster
with the real model and real documents: the corpus gives the single-process run's documents,
chunks and vectors; encoder actors land on the nodes whose resources they ask for and the
summary reports per node kind; a killed actor is restarted and no chunk is lost or doubled;
indexed documents are never scheduled again; the single-process path never imports Ray."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnswitch.documents.chunk import chunk_document
from attnswitch.documents.ingest import ingest
from attnswitch.indexing.config import chunk_tokenizer
from attnswitch.indexing.store import DB_NAME, SQLiteStore
from attnswitch.jobs.run import RunOptions, run

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
pytestmark = pytest.mark.xdist_group("ray")  # one Ray cluster per test process, one user

# The stored text is what the encoder read (no heading path before it): the tests encode
# it again to check the stored vectors.
OPTIONS = RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=8, embed_headings=False)
# the CLI twin of OPTIONS: a run killed under one and resumed under the other must agree
FAST = ["--max-tokens", "32", "--overlap", "4", "--chunks-per-call", "8", "--no-embed-headings"]


def ray_options(**kw):
    from attnswitch.jobs.ray_run import RayOptions

    return RayOptions(**{"startup_timeout_s": 300, "stall_timeout_s": 300, **kw})


def rows(store: SQLiteStore) -> dict[tuple[str, int], tuple[str, np.ndarray]]:
    """(source, ordinal) -> (chunk text, stored vector) for every chunk of the store."""
    ids, matrix = store.vectors()
    chunks = store.chunks(ids)
    out = {}
    for r, i in enumerate(ids):
        c = chunks[int(i)]
        assert (c.source, c.ordinal) not in out, f"duplicate chunk {c.source} #{c.ordinal}"
        out[(c.source, c.ordinal)] = (c.text, matrix[r])
    return out


def _wait_until(ok, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, "the cluster did not settle"
        time.sleep(0.2)


def chunker_output(root: Path, encoder, options: RunOptions) -> dict[tuple[str, int], str]:
    tok = chunk_tokenizer(encoder.spec)
    return {
        (d.source, c.ordinal): c.text
        for d in ingest(root)
        if d.ok
        for c in chunk_document(
            d.text,
            d.blocks,
            tok,
            chunking=options.chunk.chunking,
            max_tokens=options.chunk.max_tokens,
            overlap=options.chunk.overlap,
            embed_headings=options.chunk.embed_headings,
        )
    }


@pytest.mark.slow
def test_the_corpus_on_ray_matches_a_single_process_run(ray_cluster, tmp_path: Path) -> None:
    import shutil

    import torch

    from attnswitch.engines import onednn
    from attnswitch.jobs.ray_run import run_on_ray

    corpus = tmp_path / "corpus"  # Markdown and text: 15 documents of the corpus
    for part in ("rust", "go"):
        shutil.copytree(CORPUS / part, corpus / part)
    for name in (
        "appetite.rst.txt",
        "interpreter.rst.txt",
        "venv.rst.txt",
        "whatnow.rst.txt",
        "floatingpoint.rst.txt",
    ):
        (corpus / "python-tutorial").mkdir(exist_ok=True)
        shutil.copy2(CORPUS / "python-tutorial" / name, corpus / "python-tutorial" / name)
    # both runs in the CPU's fast precision: bf16 where it packs bfloat16 linears (about
    # twice fp32's speed there), fp32 where bfloat16 is emulated (several times slower)
    native_bf16 = onednn.unavailable(torch.bfloat16) is None
    options = RunOptions.of(precision="bf16" if native_bf16 else "fp32")
    with SQLiteStore(tmp_path / "single" / DB_NAME) as store:
        single = run(corpus, store, options)
        want = rows(store)
    with SQLiteStore(tmp_path / "ray" / DB_NAME) as store:
        on_ray = run_on_ray(corpus, store, options, ray_options())
        got = rows(store)
        again = run_on_ray(corpus, store, options, ray_options())
    assert on_ray.status == "completed" and on_ray.config == single.config
    assert (on_ray.new, on_ray.indexed, on_ray.skipped) == (
        single.new,
        single.indexed,
        single.skipped,
    )

    def by_source(items):  # Ray delivers documents in the order they are ready
        return sorted(items, key=lambda f: sorted(f.items()))

    assert by_source(on_ray.skipped_files) == by_source(single.skipped_files)
    assert by_source(on_ray.notes) == by_source(single.notes)
    assert got.keys() == want.keys()  # the same documents, the same chunks in order
    assert all(got[k][0] == want[k][0] for k in want)
    cosines = np.array([float(got[k][1] @ want[k][1]) for k in want])  # stored normalised
    assert cosines.min() >= 0.9999, f"{int((cosines < 0.9999).sum())} chunks below 0.9999"
    assert on_ray.chunks_encoded == single.chunks_encoded == len(want)
    assert on_ray.tokens_encoded == single.tokens_encoded
    # The default pools on one node of 2 CPUs: one actor per core (one torch thread each).
    assert on_ray.ray["pools"] == [
        {"kind": "cpu", "actors": 2, "num_cpus": 0.75, "num_gpus": 0.0, "resources": {}}
    ]
    assert {a["threads"] for a in on_ray.ray["actors"]} == {1}
    cpu = on_ray.ray["kinds"]["cpu"]
    assert (cpu["actors"], cpu["chunks"], cpu["tokens"]) == (2, len(want), single.tokens_encoded)
    assert cpu["engines"] == ["torch"] and cpu["devices"] == ["cpu"] and cpu["backends"]
    assert on_ray.backends == cpu["backends"] and on_ray.tokens_per_s > 0
    assert all(a["chunks"] > 0 for a in on_ray.ray["actors"])  # both took work
    # Resumed: nothing is read again, nothing scheduled, no actor started.
    assert (again.chunks_encoded, again.unchanged, again.new) == (0, single.new, 0)
    assert again.ray["kinds"] == {} and again.ray["start_s"] == 0


def test_indexed_documents_are_not_scheduled_again(
    ray_cluster, docs: Path, tmp_path: Path, encoder
) -> None:
    from attnswitch.jobs.ray_run import run_on_ray

    with SQLiteStore(tmp_path / "db") as store:
        first = run(docs, store, OPTIONS, get_encoder=lambda: encoder)
        before = rows(store)
        # New mtimes, same bytes: read and hashed on Ray, found unchanged, not chunked
        # nor encoded; then one document really changes.
        for path in docs.rglob("*.html"):
            os.utime(path, ns=(1, 1))
        same = run_on_ray(docs, store, OPTIONS, ray_options())
        assert (same.unchanged, same.chunks_encoded, same.ray["kinds"]) == (4, 0, {})
        assert rows(store).keys() == before.keys()
        (docs / "postgresql" / "tutorial-update.html").write_text(
            "<html><body><p>Rewritten: UPDATE changes rows.</p></body></html>"
        )
        (docs / "new.md").write_text("# New\n\nA note about vacuum and analyze.\n")
        (docs / "postgresql" / "tutorial-conclusion.html").unlink()
        changed = run_on_ray(docs, store, OPTIONS, ray_options())
        after = rows(store)
    assert (changed.new, changed.changed, changed.deleted, changed.unchanged) == (1, 1, 1, 2)
    assert changed.chunks_encoded == changed.ray["kinds"]["cpu"]["chunks"] == 2
    assert after[("postgresql/tutorial-update.html", 0)][0] == "Rewritten: UPDATE changes rows."
    assert not any(s == "postgresql/tutorial-conclusion.html" for s, _ in after)
    for key, (text, vector) in before.items():  # the untouched documents: not re-encoded
        if key[0] in ("postgresql/tutorial-start.html", "postgresql/tutorial-advanced.html"):
            assert after[key][0] == text and np.array_equal(after[key][1], vector)
    assert first.chunks_stored == len(before) and changed.chunks_stored == len(after)


def test_encoder_actors_land_where_their_resources_are(
    ray_cluster, more_docs: Path, tmp_path: Path, encoder
) -> None:
    import ray

    from attnswitch.jobs.ray_run import run_on_ray

    # No GPU or TPU here: one node declares a GPU, another Ray's "TPU" resource. An actor
    # placed there finds no such device and must say it encoded on the CPU.
    gpu = ray_cluster.add_node(num_cpus=1, num_gpus=1, object_store_memory=150 * 2**20)
    tpu = ray_cluster.add_node(num_cpus=1, resources={"TPU": 1}, object_store_memory=150 * 2**20)
    try:
        ray_cluster.wait_for_nodes(timeout=120)
        assert ray.cluster_resources().get("TPU") == 1
        with SQLiteStore(tmp_path / "db") as store:
            summary = run_on_ray(
                more_docs, store, OPTIONS, ray_options(cpu_actors=1, gpu_actors=1, tpu_actors=1)
            )
            got = rows(store)
    finally:
        ray_cluster.remove_node(tpu)
        ray_cluster.remove_node(gpu)
        _wait_until(
            lambda: (
                not ray.cluster_resources().get("GPU") and not ray.cluster_resources().get("TPU")
            )
        )
    node_of = {"gpu": gpu.node_id, "tpu": tpu.node_id, "cpu": ray_cluster.head_node.node_id}
    actors = summary.ray["actors"]
    assert sorted(a["kind"] for a in actors) == ["cpu", "gpu", "tpu"]
    for a in actors:
        assert a["nodes"] == [node_of[a["kind"]]], a
    kinds = summary.ray["kinds"]
    assert set(kinds) == {"gpu", "tpu", "cpu"}
    assert sum(k["chunks"] for k in kinds.values()) == summary.chunks_encoded == len(got)
    assert sum(k["tokens"] for k in kinds.values()) == summary.tokens_encoded
    for kind, k in kinds.items():
        assert (k["actors"], k["nodes"]) == (1, 1)
        assert k["engines"] == ["torch"] and k["devices"] == ["cpu"]  # honestly: no CUDA
        assert k["chunks"] == 0 or (k["tokens_per_s"] > 0 and k["backends"])
        assert (k["note"] is None) == (kind == "cpu")
    assert {(s, o): t for (s, o), (t, _) in got.items()} == chunker_output(
        more_docs, encoder, OPTIONS
    )
    text = [t for t, _ in got.values()]
    np.testing.assert_allclose(
        np.stack([v for _, v in got.values()]),  # stored in float16
        encoder.encode(text),
        rtol=2.0**-11,
        atol=2e-5,
    )


def test_a_killed_encoder_actor_loses_no_chunk(
    ray_cluster, more_docs: Path, tmp_path: Path, encoder
) -> None:
    import ray

    from attnswitch.jobs.ray_run import run_on_ray

    killed: list[str] = []

    def kill_once(progress) -> None:
        # After the first document is written, with batches still queued on the actor.
        if progress.chunks and not killed:
            names = [n for n in ray.util.list_named_actors() if n.startswith("attnswitch-encoder-")]
            for name in names:
                try:
                    handle = ray.get_actor(name)
                except ValueError:  # an actor of an earlier run, gone
                    continue
                ray.kill(handle, no_restart=False)
                killed.append(name)

    with SQLiteStore(tmp_path / "db") as store:
        summary = run_on_ray(
            more_docs, store, OPTIONS, ray_options(cpu_actors=1), on_progress=kill_once
        )
        got = rows(store)
        n_chunks = store.status().chunks
    assert len(killed) == 1
    assert summary.status == "completed" and summary.failed == 0
    (actor,) = summary.ray["actors"]
    assert actor["processes"] == 2  # restarted by Ray, and it encoded after the kill
    assert summary.ray["kinds"]["cpu"]["restarts"] == 1
    want = chunker_output(more_docs, encoder, OPTIONS)
    assert {k: t for k, (t, _) in got.items()} == want  # none missing
    assert n_chunks == len(want) == summary.chunks_stored == summary.chunks_encoded
    np.testing.assert_allclose(
        np.stack([v for _, v in got.values()]),  # stored in float16
        encoder.encode([t for t, _ in got.values()]),
        rtol=2.0**-11,
        atol=2e-5,
    )


def test_cli_run_ray_json_joins_the_running_cluster(
    ray_cluster, docs: Path, tmp_path: Path
) -> None:
    env = dict(os.environ, RAY_ADDRESS=ray_cluster.address)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnswitch.cli.pipeline",
            "run",
            str(docs),
            "--db",
            str(tmp_path / "db"),
            "--ray",
            "--json",
            *FAST,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)  # stdout holds the JSON and nothing else
    assert summary["status"] == "completed" and summary["new"] == 4
    assert summary["ray"]["address"] == ray_cluster.address
    assert summary["ray"]["kinds"]["cpu"]["chunks"] == summary["chunks_encoded"] > 0
    with SQLiteStore(tmp_path / "db" / DB_NAME) as store:
        assert store.status().chunks == summary["chunks_stored"]


def test_cli_run_ray_renders_the_node_kinds_and_refuses_clearly(
    ray_cluster, docs: Path, tmp_path: Path
) -> None:
    from attnswitch.cli.pipeline import app

    def invoke(*args: str):
        return CliRunner(env={"COLUMNS": "200"}).invoke(app(), list(args), catch_exceptions=False)

    db = str(tmp_path / "db")
    result = invoke("run", str(docs), "--db", db, "--ray", "--no-progress", *FAST)
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    for shown in (
        "completed",
        "Encoders per node kind",
        "torch-sdpa",
        "Ray connect",
        "actors' start",
        "node(s) at",
    ):
        assert shown in out, shown
    result = invoke(
        "run",
        str(docs),
        "--db",
        db,
        "--ray",
        "--ray-cpu-actors",
        "2",
        "--ray-cpus-per-actor",
        "1",
        "--json",
    )
    assert result.exit_code == 1
    assert "expected at most 1 CPU actors" in json.loads(result.stdout)["error"]
    bad = tmp_path / "bad"
    result = invoke("run", str(docs), "--db", str(bad), "--ray-address", "127.0.0.1:1", "--json")
    assert result.exit_code == 1
    assert "expected a Ray cluster at 127.0.0.1:1" in json.loads(result.stdout)["error"]
    assert not bad.exists()  # refused before a store is made


def test_without_ray_the_cli_names_the_extra(docs: Path, tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"  # as if Ray were not installed
        "from attnswitch.cli.pipeline import app\n"
        f"sys.argv = ['attnswitch', 'run', {str(docs)!r}, '--db', "
        f"{str(tmp_path / 'db')!r}, '--ray', '--json']\n"
        "app()()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, result.stderr
    assert "pip install 'attnswitch[ray]'" in json.loads(result.stdout)["error"]
    assert not (tmp_path / "db").exists()  # refused before a store is made


def test_the_single_process_path_never_imports_ray(docs: Path, tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from attnswitch.cli import app\n"
        f"sys.argv = ['attnswitch', 'run', {str(docs)!r}, '--db', "
        f"{str(tmp_path / 'db')!r}, '--json', {', '.join(map(repr, FAST))}]\n"
        "try:\n    app()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "loaded = sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.'))\n"
        "print('RAY-MODULES', loaded, file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["chunks_encoded"] > 0  # it did run
    assert "RAY-MODULES []" in result.stderr


def test_bad_ray_options_are_refused() -> None:
    from attnswitch.jobs.ray_run import RayOptions

    for kw, match in (
        ({"cpus_per_actor": 0}, "cpus_per_actor"),
        ({"in_flight": 0}, "in_flight"),
        ({"gpu_actors": -1}, "gpu_actors"),
    ):
        with pytest.raises(ValueError, match=match):
            RayOptions(**kw)
    assert dataclasses.replace(RayOptions(), cpu_actors=2).cpu_actors == 2


def pg_rows(url: str) -> list[tuple[str, int, str]]:
    """(source, ordinal, text) of every chunk committed to the PostgreSQL store at `url`."""
    import psycopg

    with psycopg.connect(url) as conn:
        try:
            return conn.execute(
                "SELECT d.source, c.ordinal, c.text FROM chunks c JOIN "
                "documents d ON d.id = c.doc_id ORDER BY d.source, c.ordinal"
            ).fetchall()
        except psycopg.errors.UndefinedTable:  # the schema is not created yet
            return []


@pytest.mark.slow
def test_actors_write_to_postgres_and_a_killed_driver_resumes(
    ray_cluster, more_docs: Path, pg_url: str, encoder
) -> None:
    """`run --ray --db postgresql://...`: the actors write (the driver's store refuses to),
    the driver is killed with SIGKILL mid-run, and the next run finishes it: each document
    whole, every chunk once, the chunker's chunks exactly."""
    import signal

    from attnswitch.indexing.store_postgres import PostgresStore
    from attnswitch.jobs.ray_run import run_on_ray

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attnswitch.cli.pipeline",
            "run",
            str(more_docs),
            "--db",
            pg_url,
            "--ray-address",
            ray_cluster.address,
            "--json",
            *FAST,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline and not pg_rows(pg_url):
        time.sleep(0.05)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read()}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    _wait_until(ray_cluster_idle, timeout=120)  # the killed job's actors are gone
    at_kill = pg_rows(pg_url)

    class DriverMustNotWrite(PostgresStore):
        def write_document(self, *args, **kwargs):
            raise AssertionError("the driver wrote a document: the actors should")

    with DriverMustNotWrite(pg_url) as store:
        resumed = run_on_ray(more_docs, store, OPTIONS, ray_options())
        statuses = [r.status for r in store.runs()]
    final = pg_rows(pg_url)
    want = chunker_output(more_docs, encoder, OPTIONS)
    assert resumed.status == "completed" and statuses == ["completed", "interrupted"]
    assert {(s, o): t for s, o, t in final} == want and len(final) == len(want)  # no doubles
    assert 0 < len(at_kill) < len(final) and set(at_kill) <= set(final)
    assert resumed.chunks_encoded == len(final) - len(at_kill)
    assert resumed.ray["kinds"]["cpu"]["chunks"] == resumed.chunks_encoded


def ray_cluster_idle() -> bool:
    import ray

    return ray.available_resources().get("CPU", 0) >= ray.cluster_resources().get("CPU", 0)
