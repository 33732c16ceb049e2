"""The engines runtime (`engines/runtime.py`): the engine environment variables are read
once, at first use and again after `reset()`; the loaded encoders are its cache.

tests/conftest.py resets the process's engines runtime before each test (settings only),
so each test starts by reading the environment it set."""

from __future__ import annotations

import pytest

import attnswitch.engines as engines
from attnswitch.engines import autoprecision, light, runtime


def test_the_environment_is_read_at_first_use_and_after_reset(minilm_path, monkeypatch):
    monkeypatch.setenv(engines.ENV_PRECISION, "bf16")
    monkeypatch.setenv(engines.ENV_ENGINE, "torch")
    monkeypatch.setenv(light.ENV_QUERY_ENGINE, "index")
    monkeypatch.setenv(autoprecision.ENV_AUTO_INT8, "1")
    assert engines.resolve_precision() == "bf16"
    assert engines.explain_engine(minilm_path, "auto", "fp32").chosen == "torch"
    assert engines.query_engine(minilm_path, "torch", "fp32")[0] == "torch"
    assert autoprecision.auto_int8()
    # changed after first use: not read per call
    monkeypatch.setenv(engines.ENV_PRECISION, "int8")
    monkeypatch.setenv(engines.ENV_ENGINE, "onnxruntime")
    monkeypatch.setenv(light.ENV_QUERY_ENGINE, "jax")
    monkeypatch.setenv(autoprecision.ENV_AUTO_INT8, "0")
    assert engines.resolve_precision() == "bf16"
    assert engines.explain_engine(minilm_path, "auto", "fp32").chosen == "torch"
    assert engines.query_engine(minilm_path, "torch", "fp32")[0] == "torch"
    assert autoprecision.auto_int8()
    runtime.current().reset(encoders=False)
    assert engines.resolve_precision() == "int8"
    plan = engines.explain_engine(minilm_path, "auto", "fp32")
    assert (plan.chosen, plan.source) == ("onnxruntime", f"forced by ${engines.ENV_ENGINE}")
    assert engines.query_engine(minilm_path, "torch", "fp32") == (
        "jax",
        f"${light.ENV_QUERY_ENGINE}=jax",
    )
    assert not autoprecision.auto_int8()


def test_settings_as_the_environment_states_them():
    env = {
        "ATTNSWITCH_ENGINE": " onnxruntime ",
        "ATTNSWITCH_PRECISION": "",
        "ATTNSWITCH_AUTO_INT8": "yes",
    }
    assert runtime.Settings.from_environment(env) == runtime.Settings(
        engine="onnxruntime", precision=None, query_engine=None, auto_int8=True
    )
    assert runtime.Settings.from_environment({}) == runtime.Settings()
    assert not runtime.Settings.from_environment({"ATTNSWITCH_AUTO_INT8": "2"}).auto_int8


def test_configure_wins_over_the_environment_until_reset(monkeypatch):
    monkeypatch.setenv(engines.ENV_PRECISION, "bf16")
    rt = runtime.current()
    rt.configure(precision="int8")
    assert engines.resolve_precision() == "int8"
    rt.reset(encoders=False)
    assert engines.resolve_precision() == "bf16"


def test_the_runtime_keeps_the_loaded_encoders_until_reset(random_model, monkeypatch):
    small = random_model("bert", "mean")
    with runtime.fresh() as rt:
        encoder = engines.get_engine(small, "torch", "fp32")
        assert list(rt.encoders.values()) == [encoder]
        assert engines.get_engine(small, "torch", "fp32") is encoder
        with runtime.using(rt.view(precision="bf16")) as view:  # shares the encoders
            assert view.settings.precision == "bf16"
            assert engines.get_engine(small, "torch", "fp32") is encoder
        rt.reset(encoders=False)
        assert engines.get_engine(small, "torch", "fp32") is encoder
        rt.reset()
        assert rt.encoders == {}
        again = engines.get_engine(small, "torch", "fp32")
        assert again is not encoder
    assert runtime.current() is not rt and encoder not in runtime.current().encoders.values()


@pytest.mark.parametrize("bad", ["fp16", "int4"])
def test_a_bad_value_is_an_error_naming_the_variable_where_it_is_used(monkeypatch, bad):
    monkeypatch.setenv(engines.ENV_PRECISION, bad)
    assert runtime.settings().precision == bad  # kept as written
    with pytest.raises(engines.EncodeInputError, match=r"^\$ATTNSWITCH_PRECISION: expected "):
        engines.resolve_precision()
