"""The engine registry: built-ins, plug-ins through the entry-point group, and every reason
an engine cannot serve."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from attnswitch.engines import EncodeInputError, registry
from attnswitch.engines.model import ModelSpec


class _Needs(registry.Engine):
    """An engine declaring needs this host cannot meet (no loading ever happens)."""

    name = "needs-test"
    requires = ("attnswitch_no_such_module",)
    extra = "imaginary"
    devices = ("tpu",)
    precisions = ("fp32",)

    def detail(self) -> str:
        return "declares needs"

    def load(self, spec, precision):
        raise AssertionError("an unavailable engine must never be loaded")


@pytest.fixture
def registered():
    added = []

    def add(engine: registry.Engine) -> registry.Engine:
        registry.register(engine)
        added.append(engine.name)
        return engine

    yield add
    for name in added:
        registry.unregister(name)


def test_builtin_engines_in_fixed_order():
    assert registry.names()[:4] == ["torch", "jax", "openvino", "onnxruntime"]


@pytest.mark.parametrize("name", ["torch", "jax", "openvino", "onnxruntime"])
def test_builtin_engines_are_available_here_and_say_what_they_run(name):
    engine = registry.get(name)
    assert engine.unavailable() is None
    assert engine.detail()
    assert all(v != "?" for v in engine.versions().values()), engine.versions()


def test_unavailable_names_the_missing_module_and_the_extra(registered):
    engine = registered(_Needs())
    why = engine.unavailable()
    assert "attnswitch_no_such_module" in why and "attnswitch[imaginary]" in why


def test_declines_lists_every_reason(registered, minilm_path):
    engine = registered(_Needs())
    reasons = engine.declines("cpu", "bf16", ModelSpec.load(minilm_path))
    assert reasons == ["runs on tpu, not cpu", "computes fp32, not bf16"]


@pytest.mark.parametrize(
    "name, precision, expected",
    [
        ("onnxruntime", "bf16", "computes fp32/int8, not bf16"),
        ("torch", "int8", "computes fp32/bf16, not int8"),
        ("jax", "int8", "computes fp32/bf16, not int8"),
    ],
)
def test_precisions_an_engine_does_not_compute_are_declined(name, precision, expected):
    assert registry.get(name).declines("cpu", precision) == [expected]


def test_jax_declines_a_model_type_it_does_not_implement(tmp_path, minilm_path):
    import json
    import shutil

    folder = tmp_path / "gpt"
    shutil.copytree(minilm_path, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "gpt2"}))
    reasons = registry.get("jax").declines("cpu", "fp32", ModelSpec.load(folder))
    assert reasons == ["serves model types bert, roberta, xlm-roberta, camembert, not 'gpt2'"]
    assert registry.get("torch").declines("cpu", "fp32", ModelSpec.load(folder)) == []


def test_an_unknown_engine_is_named_with_the_known_ones():
    with pytest.raises(
        EncodeInputError,
        match=r"engine: expected one of auto, torch, jax, "
        r"openvino, onnxruntime.*got 'tpu'",
    ):
        registry.get("tpu")


def test_a_name_is_registered_once(registered):
    registered(_Needs())
    with pytest.raises(ValueError, match="already registered"):
        registry.register(_Needs())


def test_plugins_register_through_the_entry_point_group(tmp_path, monkeypatch):
    """A real installed distribution (a dist-info folder on sys.path) naming an engine."""
    (tmp_path / "asw_plugin_engine.py").write_text(
        textwrap.dedent("""
        from attnswitch.engines.registry import Engine

        class PluginEngine(Engine):
            name = "plugin-test"
            def detail(self):
                return "a plug-in"
            def load(self, spec, precision):
                raise NotImplementedError
    """)
    )
    info = tmp_path / "asw_plugin_engine-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: asw-plugin-engine\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[attnswitch.engines]\nplugin-test = asw_plugin_engine:PluginEngine\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.reset()
    try:
        assert "plugin-test" in registry.names()
        assert registry.get("plugin-test").detail() == "a plug-in"
    finally:
        sys.modules.pop("asw_plugin_engine", None)
        registry.reset()  # rediscover without the plug-in


def test_a_broken_plugin_warns_and_is_skipped(tmp_path, monkeypatch):
    info = tmp_path / "asw_broken-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: asw-broken\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[attnswitch.engines]\nbroken = asw_no_such_plugin_module:Engine\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.reset()
    try:
        with pytest.warns(UserWarning, match="engine entry point 'broken' failed to load"):
            names = registry.names()
        assert "broken" not in names and "torch" in names
    finally:
        registry.reset()


def test_importing_the_engines_imports_no_runtime(tmp_path):
    import subprocess

    code = (
        "import sys, attnswitch.engines as e; e.registry.engines(); "
        "print(sorted(m for m in ('torch', 'jax', 'openvino', 'onnxruntime') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent,
    )
    assert out.stdout.strip() == "[]"


def test_a_host_without_a_gpu_driver_is_told_apart_without_importing_torch(tmp_path):
    """Importing torch to learn that there is no GPU costs seconds of every cold start."""
    import os
    import subprocess

    if any(os.path.exists(node) for node in registry.GPU_DEVICE_NODES):
        pytest.skip("this host has a GPU driver: torch is asked")
    code = (
        "import sys; from attnswitch.engines import registry; "
        "print(registry.host_device(), 'torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.split() == ["cpu", "False"]
