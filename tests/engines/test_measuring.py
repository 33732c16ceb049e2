"""A first use that says what it measures and about how long (engines/measuring.py), the
choice without a measurement for a job too small to repay one and the engine a query is
encoded with (engines/light.py), and the run's decision between them (jobs/choose.py),
on a small random model."""

from __future__ import annotations

import pytest

import attnswitch.engines as engines
from attnswitch.engines import autopick, light, measuring, registry, runtime
from attnswitch.engines.autopick import EnginePlan, EngineRow
from attnswitch.engines.model import ModelSpec
from attnswitch.jobs import choose
from attnswitch.jobs.options import EncodeOptions
from attnswitch.kernels import cache


@pytest.fixture
def auto(monkeypatch, cache_dir):
    """Nothing forced by the environment, an empty cache, a CPU without native bf16."""
    for name in (engines.ENV_ENGINE, engines.ENV_PRECISION, light.ENV_QUERY_ENGINE):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(cache, "cpu_flags", lambda: frozenset({"avx2"}))
    return cache_dir


@pytest.fixture(scope="module")
def small_bert(random_model):
    return random_model("bert", "mean")


@pytest.fixture
def torch_only(monkeypatch):
    """Only the torch engine is registered: a measurement of it takes seconds."""
    torch = registry.get("torch")
    monkeypatch.setattr(registry, "engines", lambda: [torch])
    return torch


def _engines_here(small_bert) -> tuple[str, ...]:
    return measuring._likely_candidates(ModelSpec.load(small_bert), "fp32")


def test_what_a_first_use_would_measure_and_about_how_long(auto, small_bert, monkeypatch):
    spec = ModelSpec.load(small_bert)
    able = _engines_here(small_bert)
    ahead = engines.measurement_ahead(small_bert, "auto", "auto")
    # one native precision: only the engines are measured, in fp32
    assert ahead.precisions == () and dict(ahead.engines) == {"fp32": able}
    assert ahead.steps == (
        "reference",
        *["parity"] * len(able),
        *["round"] * (autopick.ROUNDS * len(able)),
    )
    assert ahead.seconds == sum(measuring.STEP_S[k] for k in ahead.steps)
    assert ahead.gain == measuring.GAIN_ENGINES
    assert ahead.purpose().startswith(f"which engine encodes fastest ({', '.join(sorted(able))})")
    # bf16 native too: both precisions are timed, each with its engine plan
    monkeypatch.setattr(cache, "cpu_flags", lambda: frozenset({"amx_bf16"}))
    both = engines.measurement_ahead(small_bert, "auto", "auto")
    assert both.precisions == ("fp32", "bf16") and both.gain == measuring.GAIN_PRECISIONS
    assert set(both.engines) == {"fp32", "bf16"} and both.seconds > ahead.seconds
    # a named engine measures the precisions only; given ones measure nothing
    named = engines.measurement_ahead(small_bert, "torch", "auto")
    assert named.engines == {} and named.steps[0] == "reference"
    assert engines.measurement_ahead(small_bert, "torch", "fp32") is None
    monkeypatch.setenv(engines.ENV_ENGINE, "torch")
    monkeypatch.setenv(engines.ENV_PRECISION, "fp32")
    assert engines.measurement_ahead(small_bert, "auto", "auto") is not None  # read once
    runtime.current().reset(encoders=False)
    assert engines.measurement_ahead(small_bert, "auto", "auto") is None
    del spec


def test_a_recorded_plan_leaves_nothing_to_measure(auto, small_bert, torch_only):
    assert engines.measurement_ahead(small_bert, "auto", "auto") is not None
    engines.explain_engine(small_bert, "auto", "auto")
    assert engines.measurement_ahead(small_bert, "auto", "auto") is None


def test_paced_progress_counts_estimated_seconds_of_finished_steps():
    reports: list[tuple[float, float, str]] = []
    paced = measuring.Paced(25.0, lambda *r: reports.append(r))
    paced(0, 4, "reference: torch float32 vectors")
    paced(1, 4, "torch: load and parity check")
    paced(2, 4, "torch: timing round 1 of 3")
    paced(4, 4, "picked torch")  # an end: no step of its own
    paced.end("picked torch, fp32")  # the bar full, whatever the estimate said
    assert [r[0] for r in reports] == [0.0, 10.0, 16.0, 17.5, 25.0]
    assert reports[0][1] == 25.0 and reports[-1] == (25.0, 25.0, "picked torch, fp32")


def test_the_default_without_a_measurement_is_float32_on_the_quickest_engine(auto, small_bert):
    engine, precision, why_engine, why_precision = engines.unmeasured_choice(small_bert)
    spec = ModelSpec.load(small_bert)
    assert engine == light.quickest(spec, "fp32") and precision == "fp32"
    quick = [n for n in light.QUICK_START if registry.get(n).unavailable() is None]
    assert engine == quick[0]
    assert why_engine == "the quickest engine to start here"
    assert why_precision == "float32, the reference"
    # a recorded pick wins over the default
    subject = autopick.table_subject(spec, "fp32", registry.engines())
    rows = [EngineRow("torch", "measured", chunks_per_s=30.0, min_cosine=1.0, parity=True)]
    autopick._write(subject, EnginePlan("fp32", None, [], rows, "test"))
    assert engines.unmeasured_choice(small_bert)[0] == "torch"
    assert engines.unmeasured_choice(small_bert, "jax", "auto")[:2] == ("jax", "fp32")


@pytest.mark.parametrize(
    ("job_bytes", "worth"), [(30_000, False), (2_700_000, False), (40_000_000, True)]
)
def test_a_job_measures_only_when_it_repays_the_measurement(job_bytes, worth):
    """About 50 s of measuring on 2 cores that may speed encoding up 1.3x: 6 small files
    (30 kB) and examples/corpus (2.7 MB, 524k tokens, 2.5 minutes of encoding) do not
    repay it; a 40 MB folder does."""
    got, words = choose.worth_measuring(job_bytes, 52.0, measuring.GAIN_ENGINES, 2)
    assert got is worth
    assert words.startswith("this job is about ") and "of measuring" in words
    assert choose.worth_measuring(job_bytes, 52.0, 1.0, 2)[0] is False  # nothing to gain


def _run_choice(small_bert, job_bytes: int) -> tuple[choose.Choice, list[str], list]:
    said: list[str] = []
    steps: list[tuple[float, float, str]] = []
    choice = choose.choose(
        EncodeOptions(model=str(small_bert)),
        lambda: job_bytes,
        lambda *step: steps.append(step),
        said.append,
    )
    return choice, said, steps


def test_a_small_job_keeps_the_default_says_so_and_checks_it_once(auto, small_bert, torch_only):
    choice, said, steps = _run_choice(small_bert, 10_000)
    assert (choice.engine, choice.precision, choice.load_as) == ("torch", "fp32", "torch")
    assert said[0].startswith("not measuring engines for this job (this job is about 2k tokens")
    assert "not measured: this job is about 2k tokens" in choice.engine_reason
    assert steps == [] and not choice.measured  # torch fp32 is the reference: no check
    assert not (auto / autopick.TABLE).exists()


def test_a_default_that_is_not_the_reference_is_checked_once(auto, small_bert):
    spec = ModelSpec.load(small_bert)
    quick = light.quickest(spec, "fp32")
    if quick == "torch":
        pytest.skip("no engine quicker to start than torch is installed")
    choice, said, steps = _run_choice(small_bert, 10_000)
    assert choice.engine == quick and choice.measured
    assert said[1].startswith(f"checking {quick} (fp32) against torch float32, once")
    assert [s[2] for s in steps] == [
        f"{quick}: load and parity check",
        "reference: torch float32 vectors",
        f"{quick} checked",
    ]
    assert autopick.known_parity(spec, registry.get(quick), "fp32").parity
    again = _run_choice(small_bert, 10_000)
    assert not again[0].measured and again[2] == []  # recorded: not checked again


def test_a_large_job_measures_first_and_says_what_for(auto, small_bert, torch_only):
    choice, said, steps = _run_choice(small_bert, 10**12)
    assert said[0].startswith(
        "measuring which engine encodes fastest (torch) with the same "
        "answers as torch float32, once on this machine"
    )
    assert choice.measured and (choice.engine, choice.load_as) == ("torch", "auto")
    done = [s[0] for s in steps]
    assert done == sorted(done) and steps[-1][0] == steps[-1][1]  # ends complete
    assert steps[-1][2] == "picked torch, fp32"
    assert (auto / autopick.TABLE).is_file()
    again, said_again, _ = _run_choice(small_bert, 10**12)
    assert not again.measured and said_again == []


def _record_parity(spec: ModelSpec, name: str, precision: str, parity: bool) -> None:
    engine = registry.get(name)
    row = EngineRow(
        name,
        "measured",
        min_cosine=1.0 if parity else 0.9,
        parity=parity,
        top10=1.0 if parity else 0.5,
    )
    autopick._write(
        autopick._parity_subject(spec, engine, precision),
        EnginePlan(precision, name, [], [row], "parity check"),
        autopick.PARITY_PREFIX,
    )


def test_a_query_is_encoded_by_the_quickest_engine_with_the_same_answers(
    auto, small_bert, monkeypatch
):
    ort = registry.get("onnxruntime")
    if ort.unavailable() is not None:
        pytest.skip(f"onnxruntime: {ort.unavailable()}")
    spec = ModelSpec.load(small_bert)
    # nothing recorded, nothing built: the index's own engine
    assert engines.query_engine(small_bert, "torch", "fp32") == ("torch", "the index's engine")
    _record_parity(spec, "onnxruntime", "fp32", True)
    assert engines.query_engine(small_bert, "torch", "fp32")[0] == "torch"  # not built
    ort.load(spec, "fp32")  # builds its model
    name, why = engines.query_engine(small_bert, "torch", "fp32")
    assert name == "onnxruntime" and why.startswith(
        "quicker to start than torch, with the same answers (min cosine 1.000000"
    )
    # its own index, bf16 vectors, a failed parity, or the override: no swap
    assert engines.query_engine(small_bert, "onnxruntime", "fp32")[0] == "onnxruntime"
    assert engines.query_engine(small_bert, "torch", "bf16")[0] == "torch"
    monkeypatch.setenv(light.ENV_QUERY_ENGINE, "index")
    runtime.current().reset(encoders=False)
    assert engines.query_engine(small_bert, "torch", "fp32")[0] == "torch"
    monkeypatch.delenv(light.ENV_QUERY_ENGINE)
    runtime.current().reset(encoders=False)
    _record_parity(spec, "onnxruntime", "fp32", False)
    assert engines.query_engine(small_bert, "torch", "fp32")[0] == "torch"
