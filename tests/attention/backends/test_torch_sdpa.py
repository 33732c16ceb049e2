"""torch-sdpa: what it translates, what it declines, and what plans say about it."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import attnswitch as asw
from attnswitch.attention.arrays import DeviceInfo
from attnswitch.attention.backends.torch_sdpa import BACKEND, _uses_is_causal
from attnswitch.attention.contract import validate


def call_for(sq=8, sk=8, **kw):
    q = torch.randn(2, sq, 4, 16)
    k = torch.randn(2, sk, 2, 16)
    return validate(q, k, k, **kw)


@pytest.mark.parametrize("kw, reason", [
    (dict(softcap=3.0), "softcap not supported"),
    (dict(return_lse=True), "return_lse not supported"),
])
def test_declines_with_every_reason(kw, reason):
    assert reason in BACKEND.declines(call_for(**kw))


def test_declines_float64_and_lists_all_reasons_together():
    q = torch.randn(1, 4, 2, 8, dtype=torch.float64)
    reasons = BACKEND.declines(validate(q, q, q, softcap=2.0, return_lse=True))
    assert len(reasons) == 3
    assert any("float64" in r for r in reasons)


def test_is_causal_fast_path_only_when_it_means_bottom_right():
    assert _uses_is_causal(call_for(8, 8, causal=True))
    assert not _uses_is_causal(call_for(8, 12, causal=True))
    assert not _uses_is_causal(call_for(8, 8, causal=True, window=(4, 0)))
    kp = torch.ones(2, 8, dtype=torch.bool)
    assert not _uses_is_causal(call_for(8, 8, causal=True, key_padding_mask=kp))


def test_detail_on_cpu_names_the_fused_kernel():
    assert BACKEND.detail(call_for(causal=True)) == "fused CPU flash kernel"
    assert "boolean mask" in BACKEND.detail(call_for(8, 12, causal=True))


def test_cuda_calls_are_planned_by_declared_rules():
    cuda = dataclasses.replace(call_for(), device=DeviceInfo("cuda", "NVIDIA H100", 0, (9, 0)))
    assert BACKEND.declines(cuda) == []
    tpu = dataclasses.replace(call_for(), device=DeviceInfo("tpu", "TPU v5 lite", 0))
    assert any("not on tpu" in r for r in BACKEND.declines(tpu))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (CUDA)")
def test_detail_names_the_cuda_subkernel():
    q = torch.randn(2, 128, 8, 64, device="cuda", dtype=torch.bfloat16)
    plan = asw.explain(q, q, q, causal=True)
    assert plan.details["torch-sdpa"].startswith("SDPA sub-kernel ")


def test_fully_masked_query_rows_are_zero():
    q = torch.randn(1, 6, 2, 8)
    k = torch.randn(1, 4, 2, 8)
    out = asw.attention(q, k, k, causal=True, backend="torch-sdpa")  # rows 0-1 see no key
    assert torch.count_nonzero(out[:, :2]) == 0
    assert torch.isfinite(out).all() and torch.count_nonzero(out[:, 2:]) > 0
