"""precision="auto": each native precision measured for speed and checked against float32
(cosine and the built-in retrieval check's top-10), the fastest that passes picked and
recorded; a failing precision declined with its figures; explicit precisions respected."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

import attnswitch.engines as engines
from attnswitch.engines import EncodeInputError, autoprecision, registry
from attnswitch.engines.autoprecision import PrecisionRow
from attnswitch.engines.model import ModelSpec
from attnswitch.engines.registry import Engine
from attnswitch.engines.torch_hf import TorchEncoder
from attnswitch.kernels import cache


@pytest.fixture
def auto(monkeypatch, cache_dir):
    """ "auto" precision really measured: nothing forced by the environment, an empty cache."""
    monkeypatch.delenv(engines.ENV_PRECISION, raising=False)
    monkeypatch.delenv(autoprecision.ENV_AUTO_INT8, raising=False)
    return cache_dir


@pytest.fixture(scope="module")
def small_bert(random_model):
    """A small random-initialised BERT: measuring it takes seconds, not minutes."""
    return random_model("bert", "mean")


def _flags(*names: str) -> frozenset[str]:
    return frozenset(names)


def test_auto_measures_each_native_precision_and_picks_the_fastest_that_passed(
    auto, small_bert, monkeypatch
):
    monkeypatch.setattr(cache, "cpu_flags", lambda: _flags("amx_bf16"))  # bf16 native
    steps: list[tuple[int, int, str]] = []
    plan = engines.explain_precision(small_bert, "torch", progress=lambda *step: steps.append(step))
    assert plan.source == "measured now"
    measured = [r for r in plan.rows if r.status == "measured"]
    assert {r.precision for r in measured} == {"fp32", "bf16"}
    # each step said before it runs, in order, then the end
    total = 1 + 2 + 2 * autoprecision.ROUNDS
    assert [s[2] for s in steps[:2]] == [
        "reference: torch float32 vectors",
        "fp32 on torch: load and parity check",
    ]
    assert [s[0] for s in steps] == list(range(total + 1))
    assert all(s[1] == total for s in steps) and steps[-1][2] == f"picked {plan.chosen}"
    for row in measured:
        assert row.engine == "torch" and len(row.rates) == autoprecision.ROUNDS
        assert row.chunks_per_s == np.median(row.rates)
        assert row.parity == (row.min_cosine >= autoprecision.AUTO_PARITY and row.top10 == 1.0)
    passed = [r for r in measured if r.parity]
    assert passed, plan
    assert plan.chosen == max(passed, key=lambda r: r.chunks_per_s).precision
    assert plan.row(plan.chosen).parity
    int8 = plan.row("int8")
    assert int8.status == "not native" and autoprecision.ENV_AUTO_INT8 in int8.reason
    # recorded: a later call reads it, and the encoder runs the picked precision
    assert (auto / autoprecision.TABLE).is_file()
    again = engines.explain_precision(small_bert, "torch")
    assert again.source.startswith("recorded") and again.chosen == plan.chosen
    encoder = engines.get_engine(small_bert, "torch")
    assert encoder.precision == plan.chosen
    assert str(again).startswith(f"precision plan: {plan.chosen}")


def test_a_single_candidate_is_the_pick_without_a_measurement(auto, small_bert, monkeypatch):
    """On a CPU without native bf16 (int8 not tried by auto), fp32 is the only candidate:
    nothing is timed or checked, and the plan says why."""
    monkeypatch.setattr(cache, "cpu_flags", lambda: _flags("avx2"))
    steps: list[tuple[int, int, str]] = []
    plan = engines.explain_precision(small_bert, "torch", progress=lambda *step: steps.append(step))
    assert plan.chosen == "fp32" and steps == []
    assert plan.row("fp32").status == "only candidate" and not plan.row("fp32").rates
    assert plan.reason().startswith("the only precision this chip runs natively")
    again = engines.explain_precision(small_bert, "torch")
    assert again.source.startswith("recorded") and again.chosen == "fp32"


class _PerturbedEncoder(TorchEncoder):
    """The torch engine, really run, whose bf16 vectors are pushed off by a fixed random
    direction (a precision that loses too much), and whose fp32 batches pay a delay (so the
    broken precision is the faster one and only parity can decline it)."""

    engine = "perturbed"

    def _forward(self, batch, batch_tokens):
        vectors = super()._forward(batch, batch_tokens)
        if self.precision == "fp32":
            time.sleep(0.25)
            return vectors
        noise = np.random.default_rng(len(batch)).standard_normal(vectors.shape)
        return (vectors + 0.3 * noise.astype(np.float32)).astype(np.float32)


class _PerturbedEngine(Engine):
    name = "perturbed"
    requires = ("torch", "transformers")
    precisions = ("fp32", "bf16")

    def detail(self) -> str:
        return "torch engine with perturbed bf16 vectors (a test's planted candidate)"

    def load(self, spec, precision):
        return _PerturbedEncoder(spec, precision)


@pytest.fixture
def perturbed(monkeypatch):
    # bf16 is a native candidate whatever this host's CPU is
    monkeypatch.setattr(cache, "cpu_flags", lambda: _flags("amx_bf16"))
    registry.register(_PerturbedEngine())
    yield "perturbed"
    registry.unregister("perturbed")


def test_a_precision_that_fails_parity_is_declined_with_its_figures(auto, small_bert, perturbed):
    plan = engines.explain_precision(small_bert, perturbed)
    fp32, bf16 = plan.row("fp32"), plan.row("bf16")
    assert bf16.status == "measured" and not bf16.parity
    assert bf16.min_cosine < autoprecision.AUTO_PARITY
    assert bf16.chunks_per_s > fp32.chunks_per_s  # faster, yet not picked
    assert plan.chosen == "fp32" and fp32.parity
    why = plan.why_not()["bf16"]
    assert why.startswith("failed parity on perturbed: min cosine ")
    assert f"< {autoprecision.AUTO_PARITY}" in why
    assert engines.get_engine(small_bert, perturbed).precision == "fp32"


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_an_explicit_precision_is_used_as_given_and_nothing_is_measured(
    auto, small_bert, precision
):
    encoder = engines.get_engine(small_bert, "torch", precision)
    assert encoder.precision == precision
    assert engines.resolve_precision(small_bert, "torch", precision) == precision
    assert not (auto / autoprecision.TABLE).exists()


@pytest.mark.parametrize("forced", ["fp32", "bf16", "int8"])
def test_the_environment_names_what_auto_stands_for(auto, minilm_path, monkeypatch, forced):
    monkeypatch.setenv(engines.ENV_PRECISION, forced)
    plan = engines.explain_precision(minilm_path, "torch")
    assert (plan.chosen, plan.source) == (forced, f"forced by ${engines.ENV_PRECISION}")
    assert engines.resolve_precision(minilm_path) == forced
    assert not (auto / autoprecision.TABLE).exists()


@pytest.mark.parametrize("bad", ["fp16", "FP32", "int4"])
def test_a_bad_precision_is_a_one_line_error(auto, minilm_path, monkeypatch, bad):
    with pytest.raises(
        EncodeInputError,
        match=r"^precision: expected one of auto, fp32, "
        r"bf16, int8, got '",
    ) as err:
        engines.get_engine(minilm_path, "torch", bad)
    assert "\n" not in str(err.value)
    monkeypatch.setenv(engines.ENV_PRECISION, bad)
    with pytest.raises(EncodeInputError, match=r"^\$ATTNSWITCH_PRECISION: expected one of "):
        engines.resolve_precision(minilm_path)


def test_the_pick_is_the_fastest_precision_with_parity_else_fp32():
    rows = [
        PrecisionRow("fp32", "measured", chunks_per_s=10.0, parity=True),
        PrecisionRow("bf16", "measured", chunks_per_s=25.0, parity=True),
        PrecisionRow("int8", "measured", chunks_per_s=40.0, parity=False),
    ]
    assert autoprecision.pick(rows) == "bf16"
    assert (
        autoprecision.pick([PrecisionRow("bf16", "measured", chunks_per_s=25.0, parity=False)])
        == "fp32"
    )
    assert autoprecision.pick([PrecisionRow("bf16", "failed", "RuntimeError: x")]) == "fp32"


@pytest.mark.parametrize(
    ("precision", "flags", "int8_env", "native"),
    [
        ("fp32", (), None, True),
        ("bf16", (), None, False),
        ("bf16", ("avx512_bf16",), None, True),  # AMD EPYC (Zen 4) and Intel Cooper Lake
        ("bf16", ("amx_bf16", "avx512_bf16"), None, True),  # Intel Xeon with AMX
        ("int8", ("amx_int8",), None, False),  # not tried by auto unless asked
        ("int8", ("amx_int8",), "1", True),
        ("int8", ("avx512_vnni",), "1", True),
        ("int8", ("avx2",), "1", False),
    ],
)
def test_native_precisions_follow_the_cpu_flags(monkeypatch, precision, flags, int8_env, native):
    if int8_env is None:
        monkeypatch.delenv(autoprecision.ENV_AUTO_INT8, raising=False)
    else:
        monkeypatch.setenv(autoprecision.ENV_AUTO_INT8, int8_env)
    why = autoprecision.native(precision, "cpu", _flags(*flags))
    assert (why is None) == native, why


def test_the_recorded_table_reproduces_the_pick(auto, small_bert):
    plan = engines.explain_precision(small_bert, "torch")
    entry = json.loads((auto / autoprecision.TABLE).read_text())[plan.key]
    rows = [PrecisionRow(**r) for r in entry["rows"]]
    assert autoprecision.pick(rows) == plan.chosen
    assert plan.key == autoprecision.table_key(ModelSpec.load(small_bert), "torch")
