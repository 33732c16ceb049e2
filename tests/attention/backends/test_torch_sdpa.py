"""torch-sdpa: what it translates, what it declines, and what plans say about it."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import attnswitch as asw
from attnswitch.attention import conformance
from attnswitch.attention.arrays import DeviceInfo
from attnswitch.attention.backends.torch_sdpa import BACKEND, _folds_groups, _uses_is_causal
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


# -- packed input: one SDPA call per sequence ----------------------------------------------

AWKWARD_PACKED = {
    "many-short": dict(packed=tuple((n, n) for n in (1, 2, 3, 5, 8, 13, 21, 34))),
    "unequal-gqa-causal": dict(packed=((13, 40), (0, 0), (50, 20), (0, 7), (30, 0), (64, 64)),
                               heads_q=8, heads_kv=2, causal=True),
    "window-sq-gt-sk": dict(packed=((70, 30), (30, 70), (1, 128)), window=(8, 2)),
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", sorted(AWKWARD_PACKED))
def test_packed_calls_meet_the_conformance_rule(name, dtype):
    case = conformance.Case(f"sdpa-{name}", dtype=dtype, **AWKWARD_PACKED[name])
    result = conformance.check("torch-sdpa", case, force=True)
    assert result.status == conformance.PASSED, (result.error, result.bound, result.reasons)


def test_packed_detail_says_one_call_per_sequence():
    q = torch.randn(10, 4, 16)
    cu = torch.tensor([0, 3, 3, 10], dtype=torch.int32)
    plan = asw.explain(q, q, q, cu_seqlens_q=cu, cu_seqlens_k=cu, backend="torch-sdpa")
    assert plan.details["torch-sdpa"] == "fused CPU flash kernel, one call per sequence (3)"


def test_packed_gradients_match_torch_math():
    torch.manual_seed(0)
    cu = torch.tensor([0, 5, 5, 17, 20], dtype=torch.int32)
    grads = {}
    for name in ("torch-sdpa", "torch-math"):
        q, k, v = (torch.randn(20, 4, 16, dtype=torch.float32,
                               generator=torch.Generator().manual_seed(i)).requires_grad_()
                   for i in range(3))
        out = asw.attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, causal=True, backend=name)
        out.square().sum().backward()
        grads[name] = (q.grad, k.grad, v.grad)
    for got, want in zip(grads["torch-sdpa"], grads["torch-math"]):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


# -- GQA: query heads folded into rows of their key/value head -----------------------------

FOLDED = {
    "decode-step": dict(seqlen_q=1, seqlen_k=300, heads_q=8, heads_kv=2, causal=True),
    "mqa-key-padding": dict(heads_q=6, heads_kv=1, key_padding=True),
    "gqa-masked-row": dict(heads_q=8, heads_kv=2, key_padding=True, masked_row=True),
    "gqa-no-queries": dict(seqlen_q=0, heads_q=8, heads_kv=2),
    "gqa-packed": dict(packed=((1, 40), (0, 5), (17, 17)), heads_q=8, heads_kv=4),
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", sorted(FOLDED))
def test_folded_gqa_meets_the_conformance_rule(name, dtype):
    case = conformance.Case(f"sdpa-fold-{name}", dtype=dtype, **FOLDED[name])
    result = conformance.check("torch-sdpa", case, force=True)
    assert result.status == conformance.PASSED, (result.error, result.bound, result.reasons)


@pytest.mark.parametrize("sq, hkv, dtype, kw, folds", [
    (1, 2, torch.bfloat16, dict(causal=True), True),  # a decode step: causal restricts nothing
    (1, 2, torch.float16, {}, True),
    (1, 2, torch.float32, dict(causal=True), True),
    (8, 2, torch.bfloat16, dict(causal=True), False),  # each row sees other keys
    (8, 2, torch.bfloat16, dict(key_padding_mask=torch.ones(2, 8, dtype=torch.bool)), True),
    (8, 2, torch.bfloat16, dict(attn_mask=torch.ones(8, 8, dtype=torch.bool)), False),
    (8, 4, torch.bfloat16, {}, False),  # not GQA
])
def test_which_calls_fold_their_groups(sq, hkv, dtype, kw, folds):
    q = torch.randn(2, sq, 4, 16, dtype=dtype)
    k = torch.randn(2, 8, hkv, 16, dtype=dtype)
    assert _folds_groups(validate(q, k, k, **kw)) == folds
