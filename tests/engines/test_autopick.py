"""engine="auto": measured on first use, recorded, reproducible from the record, parity
enforced, overridable, and falling back when the picked engine fails at run time."""

from __future__ import annotations

import json

import numpy as np
import pytest
from engine_testing import check_rule, pooled_eager, pooled_reference

import attnswitch.engines as engines
from attnswitch.engines import EncodeInputError, autopick, registry, runtime
from attnswitch.engines.autopick import EnginePlan, EngineRow
from attnswitch.engines.model import ModelSpec
from attnswitch.engines.torch_hf import TorchEncoder


@pytest.fixture
def auto(monkeypatch, cache_dir):
    """ "auto" really measured: no engine forced by the environment, an empty cache."""
    monkeypatch.delenv(engines.ENV_ENGINE, raising=False)
    return cache_dir


@pytest.fixture(scope="module")
def small_bert(random_model):
    return random_model("bert", "mean")


def _measured(rows: list[EngineRow]) -> list[EngineRow]:
    return [r for r in rows if r.status == "measured"]


def test_first_use_measures_every_engine_and_records_the_table(auto, small_bert):
    plan = engines.explain_engine(small_bert, "auto", "fp32")
    assert plan.source == "measured now"
    measured = _measured(plan.rows)
    assert {r.engine for r in measured} == {"torch", "jax", "openvino", "onnxruntime"}
    for row in measured:  # the product's parity rule, as recorded
        assert row.parity and row.min_cosine >= autopick.PARITY["fp32"], row
        assert len(row.rates) == autopick.ROUNDS and row.chunks_per_s == np.median(row.rates)
    assert plan.chosen == max(measured, key=lambda r: r.chunks_per_s).engine
    assert set(plan.fallbacks) == {r.engine for r in measured} - {plan.chosen}
    assert (auto / autopick.TABLE).is_file()
    again = engines.explain_engine(small_bert, "auto", "fp32")
    assert again.source.startswith("recorded") and again.chosen == plan.chosen
    assert str(again).startswith(f"engine plan (fp32): {plan.chosen}")


def test_a_plan_measured_again_says_what_made_the_recorded_one_stale(auto, small_bert, monkeypatch):
    """An upgrade (here the plan's revision) gives a new key: the recorded plan is not
    used, the engines are measured again, and the new plan names what changed."""
    first = engines.explain_engine(small_bert, "auto", "fp32")
    assert first.stale is None
    monkeypatch.setattr(autopick, "REVISION", autopick.REVISION + 1)
    again = engines.explain_engine(small_bert, "auto", "fp32")
    assert again.source == "measured now" and again.key != first.key
    assert again.stale == f"stale: revision: {autopick.REVISION - 1} -> {autopick.REVISION}"
    assert again.to_dict()["stale"] == again.stale


def test_the_pick_is_reproducible_from_the_recorded_table(auto, small_bert):
    plan = engines.explain_engine(small_bert, "auto", "fp32")
    entry = json.loads((auto / autopick.TABLE).read_text())[plan.key]
    chosen, fallbacks = autopick.pick([EngineRow(**r) for r in entry["rows"]])
    assert (chosen, fallbacks) == (plan.chosen, plan.fallbacks)
    assert entry["machine"] == autopick.machine()


def test_a_recorded_table_decides_without_measuring(auto, small_bert):
    spec = ModelSpec.load(small_bert)
    subject = autopick.table_subject(spec, "fp32", registry.engines())
    rows = [
        EngineRow("torch", "measured", chunks_per_s=10.0, min_cosine=1.0, parity=True),
        EngineRow("onnxruntime", "measured", chunks_per_s=30.0, min_cosine=1.0, parity=True),
    ]
    autopick._write(subject, EnginePlan("fp32", None, [], rows, "test"))
    plan = engines.explain_engine(small_bert, "auto", "fp32")
    assert plan.source.startswith("recorded")
    assert (plan.chosen, plan.fallbacks) == ("onnxruntime", ["torch"])
    assert engines.get_engine(small_bert, "auto", "fp32").engine == "onnxruntime"


def test_the_fastest_engine_without_parity_is_not_picked():
    rows = [
        EngineRow("fast-wrong", "measured", chunks_per_s=100.0, min_cosine=0.99, parity=False),
        EngineRow("slow-right", "measured", chunks_per_s=10.0, min_cosine=1.0, parity=True),
        EngineRow("mid-right", "measured", chunks_per_s=20.0, min_cosine=1.0, parity=True),
        EngineRow("absent", "unavailable", "not installed: x"),
        EngineRow("broken", "failed", "RuntimeError: boom"),
    ]
    assert autopick.pick(rows) == ("mid-right", ["slow-right"])
    why = EnginePlan("fp32", "mid-right", ["slow-right"], rows, "test").why_not()
    assert why["fast-wrong"] == "failed parity: min cosine 0.990000 < 0.9999"
    assert why["slow-right"] == "slower: 10.0 chunks/s, 0.50x the pick"
    assert why["absent"] == "unavailable: not installed: x"
    assert why["broken"] == "failed: RuntimeError: boom"


class _LostDevice(TorchEncoder):
    engine = "flaky"

    def _forward(self, batch, batch_tokens):
        raise RuntimeError("device lost")


class _Flaky(registry.Engine):
    name = "flaky"
    requires = ("torch",)

    def detail(self) -> str:
        return "fails at run time"

    def load(self, spec, precision):
        return _LostDevice(spec, precision)


@pytest.fixture
def flaky():
    registry.register(_Flaky())
    yield
    registry.unregister("flaky")


def test_a_failing_engine_falls_back_along_the_plan(auto, small_bert, flaky):
    from attnswitch.observe.metrics import ENGINE_FALLBACKS

    spec = ModelSpec.load(small_bert)
    subject = autopick.table_subject(spec, "fp32", registry.engines())
    rows = [
        EngineRow("flaky", "measured", chunks_per_s=99.0, min_cosine=1.0, parity=True),
        EngineRow("torch", "measured", chunks_per_s=10.0, min_cosine=1.0, parity=True),
    ]
    autopick._write(subject, EnginePlan("fp32", None, [], rows, "test"))
    counter = ENGINE_FALLBACKS.labels(engine="flaky", to="torch")
    before = counter._value.get()
    encoder = engines.get_engine(small_bert, "auto", "fp32")
    texts = ["one text", "and another one"]
    with pytest.warns(RuntimeWarning, match="engine 'flaky' failed .*device lost.*'torch'"):
        got = encoder.encode(texts)
    assert counter._value.get() == before + 1
    # torch's float32 vectors: within the conformance rule of the float64 oracle
    batch = encoder.tokenize(texts)
    check_rule(
        got, pooled_eager(small_bert, batch, "mean"), pooled_reference(small_bert, batch, "mean")
    )
    assert encoder.engine == "torch"
    with pytest.raises(EncodeInputError, match=r"texts\[0\]"):  # bad input never falls back
        encoder.encode([""])


@pytest.mark.parametrize("via", ["argument", "environment"])
def test_a_named_engine_overrides_auto(auto, small_bert, monkeypatch, via):
    if via == "environment":
        monkeypatch.setenv(engines.ENV_ENGINE, "onnxruntime")
        plan, encoder = (engines.explain_engine(small_bert), engines.get_engine(small_bert))
        assert plan.source == "forced by $ATTNSWITCH_ENGINE"
    else:
        plan, encoder = (
            engines.explain_engine(small_bert, "onnxruntime"),
            engines.get_engine(small_bert, "onnxruntime"),
        )
        assert plan.source == "forced by argument"
    assert plan.chosen == encoder.engine == "onnxruntime"
    # nothing was calibrated: the table holds only the named engine's parity check
    assert [k[:7] for k in autopick.read_table()] == ["parity-"]


def test_a_named_engine_that_cannot_serve_says_why(auto, monkeypatch):
    with pytest.raises(
        EncodeInputError,
        match=r"engine: expected an engine that can serve "
        r"bf16 here, got 'onnxruntime' \(computes",
    ):
        engines.encode(["text"], engine="onnxruntime", precision="bf16")
    monkeypatch.setenv(engines.ENV_ENGINE, "tpu-please")
    with pytest.raises(
        EncodeInputError,
        match=r"\$ATTNSWITCH_ENGINE: expected one of auto, "
        r"torch.*got 'tpu-please'",
    ):
        engines.encode(["text"])


class _Skewed(TorchEncoder):
    """Vectors turned a little, standing in for a runtime whose upgrade changed answers."""

    engine = "skewed"

    def _forward(self, batch, batch_tokens):
        out = super()._forward(batch, batch_tokens)
        out[:, 0] += 0.05
        return out / np.linalg.norm(out, axis=1, keepdims=True)


class _SkewedEngine(registry.Engine):
    name = "skewed"
    requires = ("torch",)

    def detail(self) -> str:
        return "changed answers"

    def load(self, spec, precision):
        return _Skewed(spec, precision)


def test_a_named_engine_is_checked_for_parity_on_first_use(auto, small_bert):
    registry.register(_SkewedEngine())
    try:
        with pytest.warns(
            RuntimeWarning,
            match=r"engine 'skewed' \(fp32\) failed its parity "
            r"check: min cosine 0\.9\d+ to torch float32",
        ):
            engines.get_engine(small_bert, "skewed", "fp32")
        table = json.loads((auto / autopick.TABLE).read_text())
        [entry] = [v for k, v in table.items() if k.startswith("parity-")]
        assert entry["rows"][0]["engine"] == "skewed" and entry["rows"][0]["parity"] is False
    finally:
        registry.unregister("skewed")


def test_a_named_engine_that_keeps_parity_passes_quietly(auto, small_bert, recwarn):
    engines.get_engine(small_bert, "onnxruntime", "fp32")
    assert not [w for w in recwarn if "parity" in str(w.message)]
    table = json.loads((auto / autopick.TABLE).read_text())
    [entry] = [v for k, v in table.items() if k.startswith("parity-")]
    assert entry["rows"][0]["parity"] is True
    assert entry["rows"][0]["min_cosine"] >= autopick.PARITY["fp32"]  # the product's rule


FRESH_ENGINE = """
import json, sys
import attnswitch.engines as engines
encoder = engines.get_engine(sys.argv[1], sys.argv[2], "fp32")
print(json.dumps({"engine": encoder.engine,
                  "heavy": sorted(m for m in ("torch", "transformers", "jax") if m in sys.modules)}))
"""


def _fresh_engine(model, name: str) -> dict:
    """`get_engine(model, name)` in a new process (the test's cache directory): the engine
    it loaded and which heavy frameworks it imported. The engine's export is built here
    first (this process may hold an encoder loaded under another test's cache directory)."""
    import subprocess
    import sys

    from attnswitch.engines import onnx_runtime

    assert name == "onnxruntime"
    onnx_runtime.artifacts(ModelSpec.load(model), "fp32")

    out = subprocess.run(
        [sys.executable, "-c", FRESH_ENGINE, str(model), name],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.splitlines()[-1])


def test_a_measured_plan_is_read_without_loading_the_reference(auto, small_bert):
    """A process that uses an engine of the recorded plan by name (as a search uses the
    engine its index was built with) reads its parity from the plan: it loads neither torch
    nor another engine, and records no parity check of its own."""
    plan = engines.explain_engine(small_bert, "auto", "fp32")
    assert plan.source == "measured now"
    row = next(r for r in plan.rows if r.engine == "onnxruntime")
    assert row.parity
    assert _fresh_engine(small_bert, "onnxruntime") == {"engine": "onnxruntime", "heavy": []}
    assert not [k for k in autopick.read_table() if k.startswith("parity-")]


def test_a_recorded_parity_check_is_read_without_loading_the_reference(auto, small_bert):
    """A named engine is checked against torch once; later processes read the verdict."""
    engines.get_engine(small_bert, "onnxruntime", "fp32")  # checks, builds the export
    assert [k[:7] for k in autopick.read_table()] == ["parity-"]
    assert _fresh_engine(small_bert, "onnxruntime") == {"engine": "onnxruntime", "heavy": []}


def test_a_measurement_reports_its_steps_and_keeps_only_the_pick_loaded(auto, small_bert):
    steps = []
    before = set(runtime.current().encoders)
    plan = engines.explain_engine(
        small_bert, "auto", "fp32", progress=lambda *step: steps.append(step)
    )
    able = [r for r in plan.rows if r.status == "measured"]
    total = autopick.measure_steps(len(able))
    assert steps[0] == (0, total, "reference: torch float32 vectors")
    assert steps[-1] == (total, total, f"picked {plan.chosen}")
    assert [d for d, _, _ in steps] == list(range(total + 1))
    assert {t for _, t, _ in steps} == {total}
    assert {w.split(":")[0] for _, _, w in steps[1:-1]} == {r.engine for r in able}
    path = str(small_bert.resolve())
    # The pick stays loaded and no loser does; the pick may have been loaded already by an
    # earlier test of this module's model.
    pick = (path, plan.chosen, "fp32")
    assert pick in runtime.current().encoders
    assert {k for k in set(runtime.current().encoders) - before if k[0] == path} <= {pick}
    again = []
    engines.explain_engine(small_bert, "auto", "fp32", progress=lambda *s: again.append(s))
    assert again == []  # recorded: nothing measured, nothing reported


@pytest.mark.parametrize("revision", ["CALIBRATION_REVISION", "OPENVINO_RECIPE"])
def test_an_int8_model_built_anew_is_measured_and_checked_anew(small_bert, monkeypatch, revision):
    """The engine plan's key and a parity verdict's key for int8 change with the calibration
    set's and the recipe's revisions (a recorded int8 verdict was about the old model);
    the float precisions' keys do not move with them (their plans stay recorded)."""
    from attnswitch.engines import quantize

    spec = ModelSpec.load(small_bert)
    engine = registry.get("openvino")

    def keys(precision: str) -> tuple[str, str]:
        return (
            autopick.table_key(spec, precision, registry.engines()),
            autopick._parity_key(spec, engine, precision),
        )

    before = {p: keys(p) for p in ("fp32", "bf16", "int8")}
    monkeypatch.setattr(quantize, revision, getattr(quantize, revision) + 1)
    after = {p: keys(p) for p in ("fp32", "bf16", "int8")}
    assert after["int8"][0] != before["int8"][0] and after["int8"][1] != before["int8"][1]
    assert after["fp32"] == before["fp32"] and after["bf16"] == before["bf16"]
