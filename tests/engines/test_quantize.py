"""Static int8: the OpenVINO (NNCF) and ONNX Runtime (quantize_static) models quantised once
with the calibration set, cached with a manifest and reused; int8 vectors keep the built-in
retrieval check's top-10; an int8 candidate that fails its check is declined with figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import attnswitch.engines as engines
from attnswitch.engines import autopick, export, quantize, registry, retrieval_check
from attnswitch.engines.model import ModelSpec
from attnswitch.engines.registry import Engine
from attnswitch.engines.torch_hf import TorchEncoder

# the int8 models are built once per run, in the engines folder all workers share
# (tests/conftest.py), under the build's file lock; test_runtime_engines's int8 cases use the
# same. The group mark is inert with pytest 9.2 and pytest-xdist 3.8 (xdist renames
# `item._nodeid`, pytest reads `item._id`), so these tests may run on two workers at once,
# one waiting on the other's build.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("quantize")]

RUNTIMES = ("openvino", "onnxruntime")


def _module(name: str):
    from attnswitch.engines import onnx_runtime, openvino_runtime

    return {"openvino": openvino_runtime, "onnxruntime": onnx_runtime}[name]


def _needs(name: str) -> None:
    engine = registry.get(name)
    why = engine.unavailable() or "; ".join(engine.declines("cpu", "int8"))
    if why:
        pytest.skip(f"{name} int8 cannot run here: {why}")


@pytest.fixture(scope="module")
def minilm() -> ModelSpec:
    return ModelSpec.load(None)


@pytest.fixture(scope="module")
def built(minilm):
    """Each runtime's int8 folder and how it was had, built once per run (the run's engines
    folder is shared by the tests that do not take `cache_dir`, in every worker)."""
    out = {}
    for name in RUNTIMES:
        if registry.get(name).unavailable() is None and not registry.get(name).declines(
            "cpu", "int8"
        ):
            out[name] = _module(name).artifacts(minilm, "int8")
    return out


def test_calibration_batches_are_padded_length_sorted_real_inputs(minilm):
    batches = quantize.calibration_batches(minilm)
    texts = quantize.calibration_texts(minilm)
    assert sum(len(b["input_ids"]) for b in batches) == len(texts)
    widths = [b["input_ids"].shape[1] for b in batches]
    assert widths == sorted(widths, reverse=True)
    for b in batches:
        assert b["input_ids"].dtype == b["attention_mask"].dtype == np.int64
        assert len(b["input_ids"]) <= quantize.CALIBRATION_BATCH
        assert b["attention_mask"][:, 0].all() and b["attention_mask"].any(axis=0).all()


@pytest.mark.parametrize("name", RUNTIMES)
def test_int8_artifacts_are_cached_with_a_manifest_and_reused(name, minilm, built):
    _needs(name)
    folder, _ = built[name]
    manifest = json.loads((folder / export.MANIFEST).read_text())
    assert manifest["key"]["precision"] == "int8"
    assert manifest["key"]["calibration"] == str(quantize.CALIBRATION_REVISION)
    assert manifest["files"] and all((folder / f).is_file() for f in manifest["files"])
    float_folder, _ = _module(name).artifacts(minilm, "fp32")
    assert folder != float_folder
    again, how = _module(name).artifacts(minilm, "int8")
    assert (again, how) == (folder, "cached")
    if name == "onnxruntime":
        import onnx

        graph = onnx.load(str(folder / "model.onnx")).graph
        weights = {i.name: i for i in graph.initializer}
        dequantised = [n.input[0] for n in graph.node if n.op_type == "DequantizeLinear"]
        matmuls = sum(n.op_type == "MatMul" for n in graph.node)
        # every MatMul's weight stored in int8 (see engines.quantize on the activations)
        assert len(dequantised) == matmuls > 0
        assert all(weights[name].data_type == onnx.TensorProto.INT8 for name in dequantised)
    else:
        xml = (folder / "model.xml").read_text()
        assert "FakeQuantize" in xml or 'element_type="i8"' in xml
        assert manifest["key"]["recipe"] == str(quantize.OPENVINO_RECIPE)


def test_openvino_int8_keeps_the_attention_products_in_float(minilm, built):
    """NNCF quantises the matmuls with weights; each layer's attention scores (Q.K^T) and
    context (P.V) take no FakeQuantize input (the CPU plugin's int8 attention drifted at
    some widths, see engines/quantize.py)."""
    _needs("openvino")
    from attnswitch.engines.openvino_runtime import artifacts, import_openvino

    ov = import_openvino()
    float_model = ov.Core().read_model(str(artifacts(minilm, "fp32")[0] / "model.xml"))
    attention = quantize.attention_matmuls(float_model)
    assert len(attention) == 2 * minilm.config["num_hidden_layers"]
    model = ov.Core().read_model(str(built["openvino"][0] / "model.xml"))
    inputs = {
        op.get_friendly_name(): [
            op.input_value(i).get_node().get_type_name() for i in range(op.get_input_size())
        ]
        for op in model.get_ordered_ops()
        if op.get_type_name() == "MatMul"
    }
    assert set(attention) <= set(inputs)
    assert all("FakeQuantize" not in inputs[name] for name in attention)
    quantised = [name for name, kinds in inputs.items() if "FakeQuantize" in kinds]
    assert len(quantised) == len(inputs) - len(attention) > 0


@pytest.mark.parametrize("name", RUNTIMES)
def test_int8_keeps_the_retrieval_checks_top10(name, built, monkeypatch):
    _needs(name)
    reference = engines.get_engine(None, "torch", "fp32")
    encoder = engines.get_engine(None, name, "int8")
    # read from the compiled model or the graph: what runs, on any CPU (an AMX CPU's bf16
    # hint included)
    assert encoder.precision == "int8" and "weights int8" in encoder.describe()
    texts = [*retrieval_check.PASSAGES, *retrieval_check.QUERIES]
    want, got = reference.encode(texts), encoder.encode(texts)
    n = len(retrieval_check.PASSAGES)
    assert autopick.cosines(got, want).min() >= autopick.PARITY["int8"]
    assert retrieval_check.top10_agreement(want[:n], want[n:], got[:n], got[n:]) == 1.0


class _BrokenInt8Encoder(TorchEncoder):
    """The torch engine, really run, whose "int8" vectors lose a scale per dimension (what a
    quantisation with wrong ranges does): an int8 candidate that must be declined."""

    engine = "broken-int8"

    def __init__(self, spec, precision):
        super().__init__(spec, "fp32")
        self.precision = precision

    def _forward(self, batch, batch_tokens):
        vectors = super()._forward(batch, batch_tokens)
        scale = np.random.default_rng(0).uniform(0.0, 2.0, vectors.shape[1])
        return (vectors * scale).astype(np.float32)


class _BrokenInt8Engine(Engine):
    name = "broken-int8"
    requires = ("torch", "transformers")
    precisions = ("int8",)

    def detail(self) -> str:
        return "torch engine with damaged int8 vectors (a test's planted candidate)"

    def load(self, spec, precision):
        return _BrokenInt8Encoder(spec, precision)


def test_an_int8_candidate_that_fails_is_declined_with_its_figures(
    cache_dir, monkeypatch, random_model
):
    monkeypatch.delenv(engines.ENV_ENGINE, raising=False)
    for name in RUNTIMES:  # only the planted candidate is measured
        monkeypatch.setattr(registry.get(name), "precisions", ("fp32",))
    registry.register(_BrokenInt8Engine())
    try:
        plan = engines.explain_engine(random_model("bert", "mean"), "auto", "int8")
    finally:
        registry.unregister("broken-int8")
    assert plan.chosen is None
    why = plan.why_not()["broken-int8"]
    assert why.startswith("failed parity: min cosine ")
    assert f"< {autopick.PARITY['int8']}" in why and "same top-10 on" in why


def test_nncf_is_imported_with_its_telemetry_off():
    """In a process of its own: under pytest NNCF turns its telemetry off by itself."""
    pytest.importorskip("nncf")
    code = (
        "import os; from attnswitch.engines import quantize; quantize.import_nncf(); "
        "from nncf.telemetry import wrapper; "
        "print(isinstance(wrapper.telemetry, wrapper.NNCFTelemetryStub), "
        "os.environ.get('NNCF_CI'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "NNCF_CI"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "None"]
