"""Plans: selection, reasons, overrides, runtime fallback, strict mode, scopes and counters."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch
from grad_rule import assert_grads_within_rule

import attnswitch as asw
from attnswitch.kernels import arrays, conformance, registry, runtime
from attnswitch.kernels import plan as plan_mod
from attnswitch.kernels.backend import BackendBase, Capabilities
from attnswitch.kernels.backends.reference import BACKEND as REFERENCE
from attnswitch.kernels.contract import validate


def qkv(framework="torch", b=2, sq=9, sk=13, hq=4, hkv=2, d=16, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(b, sq, hq, d, generator=g).to(dtype)
    k = torch.randn(b, sk, hkv, d, generator=g).to(dtype)
    v = torch.randn(b, sk, hkv, d, generator=g).to(dtype)
    if framework == "numpy":
        return tuple(arrays.to_numpy(x) for x in (q, k, v))
    return q, k, v


def close_to_reference(out, q, k, v, **kw):
    ref = REFERENCE.run(q, k, v, validate(q, k, v, **kw))
    return np.allclose(np.asarray(out, np.float64), np.asarray(ref, np.float64), atol=1e-5)


class Raiser(BackendBase):
    """A backend that accepts every CPU torch call and then fails at run time."""

    name = "test-raiser"
    framework = "torch"
    caps = Capabilities(grad=True)

    def __init__(self):
        self.runs = 0

    def run(self, q, k, v, call):
        self.runs += 1
        raise RuntimeError("kernel exploded")


@pytest.fixture
def raiser(monkeypatch):
    """Raiser first in the CPU order. Verification is off: these tests are about failures at
    run time (a backend that raises in its first-use check is quarantined instead: see
    tests/kernels/test_verify.py)."""
    backend = Raiser()
    registry.register(backend)
    monkeypatch.setitem(plan_mod.PRIORITY, "cpu", ("test-raiser",) + plan_mod.PRIORITY["cpu"])
    monkeypatch.setenv("ATTNSWITCH_VERIFY", "off")
    yield backend
    registry.unregister(backend.name)
    asw.configure(strict=False)


def test_plan_names_chosen_fallbacks_and_every_rejection():
    q, k, v = qkv()
    plan = asw.explain(q, k, v, causal=True)
    assert plan.chosen == "torch-sdpa"
    assert "torch-math" in plan.fallbacks and plan.fallbacks[-1] == "reference"
    listed = set(plan.candidates) | {r.backend for r in plan.rejected}
    assert listed == {b.name for b in asw.backends()}
    for r in plan.rejected:
        assert r.reasons, r
    text = str(plan)
    assert re.search(r"chosen\s+torch-sdpa \[[^\]]+\]: fused CPU flash kernel", text), text


@pytest.mark.parametrize(
    "feature, expected",
    [
        (dict(softcap=20.0), "softcap not supported"),
        (dict(return_lse=True), "return_lse not supported"),
    ],
)
def test_sdpa_declines_with_reason_in_explain(feature, expected):
    q, k, v = qkv()
    plan = asw.explain(q, k, v, causal=True, **feature)
    assert plan.chosen != "torch-sdpa"
    assert plan.status("torch-sdpa") == "declined"
    assert any(expected in r for r in plan.reasons("torch-sdpa"))
    assert expected in str(plan)


def test_sdpa_bottom_right_causal_uses_a_mask_not_is_causal():
    q, k, v = qkv(sq=5, sk=13)
    plan = asw.explain(q, k, v, causal=True)
    assert plan.chosen == "torch-sdpa"
    assert plan.details["torch-sdpa"] == "fused CPU flash kernel with a boolean mask"
    out = asw.attention(q, k, v, causal=True)
    assert close_to_reference(out, q, k, v, causal=True)


def test_backend_argument_use_and_environment(monkeypatch):
    q, k, v = qkv()
    assert asw.explain(q, k, v, backend="torch-math").candidates == ("torch-math",)
    with asw.use("reference"):
        plan = asw.explain(q, k, v)
        assert plan.candidates == ("reference",) and plan.source == "use()"
        assert asw.explain(q, k, v, backend="torch-math").chosen == "torch-math"
    monkeypatch.setenv("ATTNSWITCH_BACKEND", "torch-math")
    assert asw.explain(q, k, v).source != "ATTNSWITCH_BACKEND"  # read once per runtime
    runtime.current().reset()  # the one point where the environment is read again
    plan = asw.explain(q, k, v)
    assert plan.chosen == "torch-math" and plan.source == "ATTNSWITCH_BACKEND"
    assert all(r.status == "not requested" for r in plan.rejected)


def test_explicit_backend_that_declines_raises_with_reasons():
    q, k, v = qkv()
    with pytest.raises(asw.NoBackendError) as info:
        asw.attention(q, k, v, softcap=5.0, backend="torch-sdpa")
    assert "softcap not supported" in str(info.value)
    assert info.value.plan.status("torch-sdpa") == "declined"


def test_runtime_failure_falls_back_warns_once_and_counts(raiser):
    q, k, v = qkv()
    before = asw.stats()["fallbacks"].get("test-raiser", 0)
    assert asw.explain(q, k, v).chosen == "test-raiser"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out1 = asw.attention(q, k, v, causal=True)
        out2 = asw.attention(q, k, v, causal=True)
    relevant = [w for w in caught if "test-raiser failed" in str(w.message)]
    assert len(relevant) == 1, [str(w.message) for w in caught]
    assert "falling back to torch-sdpa" in str(relevant[0].message)
    assert raiser.runs == 2
    assert asw.stats()["fallbacks"]["test-raiser"] == before + 2
    assert torch.equal(out1, out2)
    assert close_to_reference(out1, q, k, v, causal=True)


def test_strict_mode_turns_fallback_into_error(raiser):
    q, k, v = qkv()
    asw.configure(strict=True)
    with pytest.raises(asw.BackendFailedError, match="strict mode"):
        asw.attention(q, k, v)


def test_explicit_request_never_falls_back(raiser):
    q, k, v = qkv()
    with pytest.raises(asw.BackendFailedError, match="requested explicitly") as info:
        asw.attention(q, k, v, backend="test-raiser")
    assert isinstance(info.value.__cause__, RuntimeError)


def test_input_errors_are_not_fallbacks(raiser):
    q, k, v = qkv()
    with pytest.raises(asw.AttentionInputError):
        asw.attention(q, k[:, :, :1][:, :, :, :3], v)
    assert raiser.runs == 0


def test_no_backend_error_carries_plan(monkeypatch):
    q, k, v = qkv()
    monkeypatch.setenv("ATTNSWITCH_BACKEND", "torch-sdpa")
    with pytest.raises(asw.NoBackendError) as info:
        asw.attention(q, k, v, return_lse=True)
    assert "return_lse not supported" in str(info.value)


def test_profiler_trace_contains_backend_scope():
    q, k, v = qkv()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        asw.attention(q, k, v, causal=True)
        asw.attention(q, k, v, softcap=10.0)
    names = {e.name for e in prof.events()}
    assert "attnswitch/torch-sdpa" in names
    assert f"attnswitch/{asw.explain(q, k, v, softcap=10.0).chosen}" in names
    # one scope per call of the backend (a first-use check of the plan calls it too)
    scopes = [e for e in prof.events() if e.name == "attnswitch/torch-sdpa"]
    assert scopes and all(
        "aten::scaled_dot_product_attention" in {c.name for c in e.cpu_children} for e in scopes
    )


def test_call_counts_readable_from_python():
    q, k, v = qkv()
    before = asw.stats()["calls"].get("torch-math", 0)
    for _ in range(3):
        asw.attention(q, k, v, backend="torch-math")
    assert asw.stats()["calls"]["torch-math"] == before + 3


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_output_kind_dtype_and_layout_follow_q(framework, dtype):
    q, k, v = qkv(framework, dtype=dtype)
    out = asw.attention(q, k, v, causal=True)
    assert type(out) is type(q)
    assert out.dtype == q.dtype and tuple(out.shape) == tuple(q.shape)


def test_packed_matches_the_float64_oracle():
    """The planner's packed call (unequal q and k lengths, an empty sequence) against the
    float64 oracle by the conformance rule: a mask that leaks across sequences or a
    misaligned diagonal fails here even when the backend's dense path shares the fault."""
    g = torch.Generator().manual_seed(3)
    lens_q, lens_k = [5, 0, 9, 1], [7, 3, 9, 4]
    q = torch.randn(sum(lens_q), 4, 16, generator=g)
    k = torch.randn(sum(lens_k), 2, 16, generator=g)
    v = torch.randn(sum(lens_k), 2, 16, generator=g)
    cu_q, cu_k = (torch.tensor([0, *np.cumsum(n)], dtype=torch.int32) for n in (lens_q, lens_k))
    out = asw.attention(q, k, v, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    err, bound = conformance.judge(
        out,
        dict(
            q=q.numpy(),
            k=k.numpy(),
            v=v.numpy(),
            causal=True,
            cu_seqlens_q=cu_q.numpy(),
            cu_seqlens_k=cu_k.numpy(),
        ),
    )
    assert err <= bound, f"error {err:.3g} > bound {bound:.3g}"


def test_gradients_through_the_plan_match_the_oracle():
    """Gradients of the planned call against float64 autograd by the conformance rule
    (`grad_rule`), not only finite."""
    q, k, v = (x.requires_grad_() for x in qkv())
    plan = asw.explain(q, k, v, causal=True)
    assert "grad" in plan.call.features
    assert plan.status("reference") == "declined"
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(9))
    assert_grads_within_rule([q, k, v], dout, torch.float32, None, causal=True)
