"""flash-attn: its rules, tested on CPU through `declines` with calls described for GPUs."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from attnswitch.attention.arrays import DeviceInfo
from attnswitch.attention.backends.flash_attn import BACKEND
from attnswitch.attention.contract import validate

SM80 = DeviceInfo("cuda", "NVIDIA A100-SXM4-80GB", 0, (8, 0))
SM90 = DeviceInfo("cuda", "NVIDIA H200", 0, (9, 0))
SM75 = DeviceInfo("cuda", "Tesla T4", 0, (7, 5))


def cuda_call(device=SM90, dtype=torch.bfloat16, d=128, sq=64, sk=64, **kw):
    q = torch.randn(2, sq, 8, d).to(dtype)
    k = torch.randn(2, sk, 2, d).to(dtype)
    call = validate(q, k, k, **kw)
    return dataclasses.replace(call, device=device)


@pytest.mark.parametrize("device", [SM80, SM90])
@pytest.mark.parametrize("kw", [
    dict(), dict(causal=True), dict(causal=True, sq=17, sk=300), dict(window=(32, 0)),
    dict(softcap=30.0), dict(return_lse=True),
])
def test_serves_its_native_features(device, kw):
    assert BACKEND.declines(cuda_call(device, **kw)) == []


@pytest.mark.parametrize("call, reason", [
    (lambda: cuda_call(SM75), "compute capability 7.5 < 8.0"),
    (lambda: cuda_call(dtype=torch.float32), "dtype float32 not among float16, bfloat16"),
    (lambda: cuda_call(d=288), "head dim 288 > 256"),
    (lambda: cuda_call(attn_mask=torch.ones(2, 1, 64, 64, dtype=torch.bool)), "attn_mask not supported"),
    (lambda: cuda_call(causal=True, key_padding_mask=torch.ones(2, 64, dtype=torch.bool)),
     "key_padding_mask with causal/window"),
    (lambda: dataclasses.replace(cuda_call(), device=DeviceInfo("cpu", "cpu")), "runs on cuda, not on cpu"),
])
def test_declines_with_reason(call, reason):
    reasons = BACKEND.declines(call())
    assert any(reason in r for r in reasons), reasons


def test_lists_every_reason_at_once():
    reasons = BACKEND.declines(cuda_call(SM75, dtype=torch.float32, d=288))
    assert len(reasons) == 3


def test_key_padding_without_bounds_is_served_by_varlen():
    call = cuda_call(key_padding_mask=torch.ones(2, 64, dtype=torch.bool))
    assert BACKEND.declines(call) == []
    assert BACKEND.detail(call) == "flash_attn_varlen_func over the unpadded keys"


def test_unavailable_here_with_a_reason():
    why = BACKEND.unavailable()
    if torch.cuda.is_available():
        pytest.skip("a GPU is present; availability depends on the flash_attn install")
    assert why is not None and "GPU" in why


@pytest.mark.gpu
@pytest.mark.skipif(BACKEND.unavailable() is not None, reason=f"flash-attn: {BACKEND.unavailable()}")
def test_conformance_on_gpu():
    from attnswitch.attention import conformance

    for case in conformance.cases(quick=True, dtypes=("bfloat16",)):
        result = conformance.check("flash-attn", case, device="cuda")
        assert result.ok, (case.label, result.reasons)


def test_rules_appear_in_explain_even_where_unavailable():
    import attnswitch as asw

    q = torch.randn(1, 8, 2, 288)
    plan = asw.explain(q, q, q, causal=True)
    reasons = plan.reasons("flash-attn")
    assert plan.status("flash-attn") == "unavailable"
    assert "runs on cuda, not on cpu" in reasons and "head dim 288 > 256" in reasons
    assert any("dtype float32" in r for r in reasons)
