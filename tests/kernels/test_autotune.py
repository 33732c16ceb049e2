"""The autotune table orders a call's candidates while the attention runtime's `autotune`
setting is on (the default); `ATTNSWITCH_AUTOTUNE=0` turns it off. The setting is read once
into the runtime, like the others, and plans are keyed on it."""

from __future__ import annotations

import numpy as np
import pytest

import attnswitch as asw
from attnswitch.kernels import autotune, runtime
from attnswitch.kernels.contract import validate


def _inputs(seqlen_k: int = 9) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 7, 2, 16)).astype(np.float32)
    k = rng.standard_normal((1, seqlen_k, 2, 16)).astype(np.float32)
    return q, k, k.copy()


@pytest.fixture
def tuned(cache_dir) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs whose bucket has a measured order that puts the reference first (the fixed
    priority puts it last)."""
    q, k, v = _inputs()
    autotune.record({autotune.bucket(validate(q, k, v)): ["reference"]})
    return q, k, v


def test_a_measured_order_leads_the_plan(tuned) -> None:
    plan = asw.explain(*tuned)
    assert (plan.source, plan.chosen) == ("autotune", "reference")


def test_the_setting_turns_the_table_off_and_plans_are_keyed_on_it(
    tuned, fresh_runtime: runtime.Runtime
) -> None:
    assert asw.explain(*tuned).source == "autotune"
    # a view shares the plan cache: the key must tell the two settings apart
    with runtime.using(fresh_runtime.view(autotune=False)):
        plan = asw.explain(*tuned)
    assert plan.source.startswith("priority:") and plan.chosen != "reference"
    assert asw.explain(*tuned).source == "autotune"


def test_the_environment_is_read_once_and_after_reset(
    tuned, fresh_runtime: runtime.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = _inputs(seqlen_k=40)  # another bucket, measured too, not planned yet
    autotune.record({autotune.bucket(validate(*other)): ["reference"]})
    monkeypatch.setenv("ATTNSWITCH_AUTOTUNE", "0")
    assert asw.explain(*tuned).source.startswith("priority:")
    monkeypatch.setenv("ATTNSWITCH_AUTOTUNE", "1")
    assert asw.explain(*other).source.startswith("priority:")  # not read per call
    fresh_runtime.reset()
    assert asw.explain(*tuned).source == asw.explain(*other).source == "autotune"
