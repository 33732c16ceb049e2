"""The cache of exported models: built once, reused, and rebuilt (never loaded) when an entry
is half-written, corrupt, or from another key."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attnswitch.engines import export


def _builder(calls: list[int]):
    def build(folder: Path) -> None:
        calls.append(1)
        (folder / "model.bin").write_bytes(b"weights" * 100)
        (folder / "model.xml").write_text("<graph/>")

    return build


def test_an_entry_is_built_once_then_reused(cache_dir):
    calls: list[int] = []
    entry = export.Artifacts({"engine": "test", "version": "1"})
    folder, how = entry.ensure(_builder(calls))
    assert how == "built (no cache entry)" and folder.is_relative_to(cache_dir)
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "model.bin", "model.xml"]
    again, how = export.Artifacts({"engine": "test", "version": "1"}).ensure(_builder(calls))
    assert (again, how, len(calls)) == (folder, "cached", 1)


@pytest.mark.parametrize(
    "damage, why",
    [
        (lambda f: (f / "model.bin").write_bytes(b"weights" * 99 + b"garbage"), "corrupt"),
        (lambda f: (f / "model.xml").unlink(), "model.xml is missing"),
        (lambda f: (f / "manifest.json").unlink(), "no manifest (half-written)"),
        (lambda f: (f / "manifest.json").write_text("{not json"), "unreadable manifest"),
    ],
)
def test_a_damaged_entry_is_rebuilt_not_loaded(cache_dir, damage, why):
    calls: list[int] = []
    entry = export.Artifacts({"engine": "test", "version": "1"})
    folder, _ = entry.ensure(_builder(calls))
    damage(folder)
    assert why in entry.problem()
    folder, how = entry.ensure(_builder(calls))
    assert how.startswith("built (") and why in how and len(calls) == 2
    assert entry.problem() is None
    assert (folder / "model.bin").read_bytes() == b"weights" * 100


def test_an_entry_from_another_version_is_rebuilt(cache_dir):
    calls: list[int] = []
    old = export.Artifacts({"engine": "test", "version": "1"})
    folder, _ = old.ensure(_builder(calls))
    new = export.Artifacts({"engine": "test", "version": "2"})
    # another version lives under another name; copying an old entry there is caught by
    # the key inside its manifest
    new.folder.mkdir(parents=True)
    for p in folder.iterdir():
        (new.folder / p.name).write_bytes(p.read_bytes())
    assert new.problem() == "built for another key (versions or model changed)"
    _, how = new.ensure(_builder(calls))
    assert how.startswith("built (built for another key") and len(calls) == 2
    assert json.loads((new.folder / "manifest.json").read_text())["key"]["version"] == "2"


def test_a_failed_build_leaves_nothing_behind(cache_dir):
    def broken(folder: Path) -> None:
        (folder / "partial.onnx").write_bytes(b"half")
        raise RuntimeError("exporter crashed")

    entry = export.Artifacts({"engine": "test", "version": "3"})
    with pytest.raises(RuntimeError, match="exporter crashed"):
        entry.ensure(broken)
    assert not entry.folder.exists()
    assert not [p for p in entry.folder.parent.iterdir() if p.name.startswith(".build-")]


@pytest.mark.parametrize(
    "family, pooling", [("bert", "mean"), ("bert", "cls"), ("roberta", "last")]
)
def test_the_exported_graph_pools_and_normalises_like_the_torch_engine(
    cache_dir, random_model, family, pooling
):
    """The whole sentence-embedding computation in one ONNX graph, checked by ONNX Runtime
    against the torch engine on ragged batches (right padding must not count)."""
    import onnxruntime as ort

    from attnswitch.engines.base import padded
    from attnswitch.engines.model import ModelSpec
    from attnswitch.engines.torch_hf import TorchEncoder

    spec = ModelSpec.load(random_model(family, pooling))
    path = cache_dir / "model.onnx"
    export.export_onnx(spec, path)
    torch_encoder = TorchEncoder(spec, linear="torch")
    texts = [
        "a short one",
        "a somewhat longer text about vectors and their search",
        "mid length text here",
    ]
    ids = torch_encoder.tokenize(texts)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    batch, mask = padded(ids, spec.pad_token_id)
    (got,) = session.run(["embedding"], {"input_ids": batch, "attention_mask": mask})
    want = torch_encoder.encode_ids(ids)
    assert got.shape == (3, spec.dim) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=2e-5)


def test_two_processes_build_an_entry_once(cache_dir):
    """Processes that start on an empty cache together (xdist workers, `serve` beside `run`):
    one builds, the others wait on the entry's file lock and use its build."""
    import os
    import subprocess
    import sys

    log = cache_dir / "builds.log"
    code = f"""
import sys, time
from pathlib import Path
from attnswitch.engines import export

def build(folder):
    with open({str(log)!r}, "a") as f:
        f.write("built\\n")
    time.sleep(1.0)
    (folder / "model.bin").write_bytes(b"weights")

folder, how = export.Artifacts({{"engine": "test", "version": "lock"}}).ensure(build)
print(folder, how.split(" ")[0])
"""
    env = {**os.environ, "ATTNSWITCH_CACHE_DIR": str(cache_dir)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-500:] for _, err in outs]
    answers = sorted(out.split()[1] for out, _ in outs)
    assert answers == ["built", "cached", "cached"]
    assert len({out.split()[0] for out, _ in outs}) == 1
    assert log.read_text() == "built\n"
