"""torch-sdpa: what it translates, what it declines, and what plans say about it."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest
import torch
from grad_rule import assert_grads_within_rule, input_grads

import attnswitch as asw
from attnswitch.kernels import conformance
from attnswitch.kernels.arrays import DeviceInfo
from attnswitch.kernels.backends.torch_sdpa import (
    BACKEND,
    CUT_MIN_KEYS,
    CUT_MIN_SKIPPED,
    _cut_keys,
    _folds_groups,
    _key_runs,
    _may_cut_keys,
    _uses_is_causal,
)
from attnswitch.kernels.contract import validate


def call_for(sq=8, sk=8, **kw):
    q = torch.randn(2, sq, 4, 16)
    k = torch.randn(2, sk, 2, 16)
    return validate(q, k, k, **kw)


@pytest.mark.parametrize(
    "kw, reason",
    [
        (dict(softcap=3.0), "softcap not supported"),
        (dict(return_lse=True), "return_lse not supported"),
    ],
)
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
    "unequal-gqa-causal": dict(
        packed=((13, 40), (0, 0), (50, 20), (0, 7), (30, 0), (64, 64)),
        heads_q=8,
        heads_kv=2,
        causal=True,
    ),
    "window-sq-gt-sk": dict(packed=((70, 30), (30, 70), (1, 128)), window=(8, 2)),
}


def test_packed_detail_says_one_call_per_sequence():
    q = torch.randn(10, 4, 16)
    cu = torch.tensor([0, 3, 3, 10], dtype=torch.int32)
    plan = asw.explain(q, q, q, cu_seqlens_q=cu, cu_seqlens_k=cu, backend="torch-sdpa")
    assert plan.details["torch-sdpa"] == "fused CPU flash kernel, one call per sequence (3)"


def sdpa_grads_within_the_rule(q_shape, kv_shape, **kw):
    """Gradients of `sum(out * dout)` wrt q, k, v through torch-sdpa in float32, against
    float64 autograd, by the conformance rule (`grad_rule`; seeded inputs)."""
    gen = torch.Generator().manual_seed(0)
    base = [torch.randn(shape, generator=gen) for shape in (q_shape, kv_shape, kv_shape)]
    dout = torch.randn(q_shape, generator=gen)
    assert_grads_within_rule(base, dout, torch.float32, "torch-sdpa", **kw)


def test_packed_gradients_are_within_the_rule():
    cu = torch.tensor([0, 5, 5, 17, 20], dtype=torch.int32)
    sdpa_grads_within_the_rule(
        (20, 4, 16), (20, 4, 16), cu_seqlens_q=cu, cu_seqlens_k=cu, causal=True
    )


# -- GQA: query heads folded into rows of their key/value head -----------------------------

FOLDED = {
    "decode-step": dict(seqlen_q=1, seqlen_k=300, heads_q=8, heads_kv=2, causal=True),
    "mqa-key-padding": dict(heads_q=6, heads_kv=1, key_padding=True),
    "gqa-masked-row": dict(heads_q=8, heads_kv=2, key_padding=True, masked_row=True),
    "gqa-no-queries": dict(seqlen_q=0, heads_q=8, heads_kv=2),
    "gqa-packed": dict(packed=((1, 40), (0, 5), (17, 17)), heads_q=8, heads_kv=4),
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(
    "name, kw",
    [
        *((f"packed-{n}", kw) for n, kw in sorted(AWKWARD_PACKED.items())),
        *((f"fold-{n}", kw) for n, kw in sorted(FOLDED.items())),
    ],
)
def test_awkward_calls_meet_the_conformance_rule(name, kw, dtype):
    """Packed calls (one SDPA call per sequence) and folded GQA groups."""
    case = conformance.Case(f"sdpa-{name}", dtype=dtype, **kw)
    result = conformance.check("torch-sdpa", case, force=True)
    assert result.status == conformance.PASSED, (result.error, result.bound, result.reasons)


@pytest.mark.parametrize(
    "sq, hkv, dtype, kw, folds",
    [
        (1, 2, torch.bfloat16, dict(causal=True), True),  # a decode step: causal restricts nothing
        (1, 2, torch.float16, {}, True),
        (1, 2, torch.float32, dict(causal=True), True),
        (8, 2, torch.bfloat16, dict(causal=True), False),  # each row sees other keys
        (8, 2, torch.bfloat16, dict(key_padding_mask=torch.ones(2, 8, dtype=torch.bool)), True),
        (8, 2, torch.bfloat16, dict(attn_mask=torch.ones(8, 8, dtype=torch.bool)), False),
        (8, 4, torch.bfloat16, {}, False),  # not GQA
    ],
)
def test_which_calls_fold_their_groups(sq, hkv, dtype, kw, folds):
    q = torch.randn(2, sq, 4, 16, dtype=dtype)
    k = torch.randn(2, 8, hkv, 16, dtype=dtype)
    assert _folds_groups(validate(q, k, k, **kw)) == folds


# -- key padding cut away instead of masked (CPU) --------------------------------------------


def _runs_mask(runs: list[tuple[int, int]], sk: int) -> np.ndarray:
    pos = np.arange(sk)
    return np.stack([(pos >= s) & (pos < e) for s, e in runs])


CUT = {  # (runs of allowed keys per example, Sk, Hq, Hkv)
    "right-padding": ([(0, 300), (0, 171), (0, 64)], 300, 4, 4),
    "left-padding": ([(90, 300), (0, 300), (250, 300)], 300, 4, 4),
    "one-shared-run": ([(20, 250)] * 3, 300, 4, 4),
    "an-example-without-keys": ([(0, 300), (0, 0), (0, 130)], 300, 4, 4),
    "no-keys-anywhere": ([(0, 0)] * 3, 300, 4, 4),
    "gqa-folded-too": ([(0, 300), (0, 40), (7, 200)], 300, 8, 2),
    "short-keys-stay-masked": ([(0, 100), (0, 30), (0, 77)], 100, 4, 4),
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", sorted(CUT))
def test_cut_key_padding_meets_the_conformance_rule(name, dtype):
    runs, sk, hq, hkv = CUT[name]
    rng = np.random.default_rng(len(name))
    np_dtype = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}[dtype]
    shapes = {
        "q": (len(runs), 37, hq, 64),
        "k": (len(runs), sk, hkv, 64),
        "v": (len(runs), sk, hkv, 64),
    }
    inputs = {
        n: rng.standard_normal(s).astype(np.float32).astype(np_dtype) for n, s in shapes.items()
    }
    inputs["key_padding_mask"] = _runs_mask(runs, sk)
    q, k, v = (
        torch.from_numpy(inputs[n].astype(np.float32)).to(getattr(torch, dtype)) for n in "qkv"
    )
    mask = torch.from_numpy(inputs["key_padding_mask"])
    out = asw.attention(q, k, v, key_padding_mask=mask, backend="torch-sdpa")
    error, bound = conformance.judge(out.float().numpy(), inputs)
    assert error <= bound, (error, bound)
    if any(s == e for s, e in runs):  # an example that attends nothing gives zeros
        for b in (i for i, (s, e) in enumerate(runs) if s == e):
            assert not out[b].any()


@pytest.mark.parametrize(
    "runs, expected",
    [
        ([(0, 8), (0, 3)], [(0, 8), (0, 3)]),
        ([(5, 8), (0, 0)], [(5, 8), (0, 0)]),
        ([(2, 6)], [(2, 6)]),
    ],
)
def test_key_runs_reads_one_run_per_example(runs, expected):
    assert _key_runs(torch.from_numpy(_runs_mask(runs, 8))) == expected


def test_key_runs_refuses_a_mask_with_holes():
    mask = torch.tensor([[True, False, True, True], [True, True, True, True]])
    assert _key_runs(mask) is None


def test_cut_keys_takes_one_call_per_example_only_when_worth_it():
    """Which kernel shapes reach SDPA: the per-example path from CUT_MIN_KEYS keys with
    CUT_MIN_SKIPPED of them skipped, one unmasked call for a shared run, else the mask."""
    seen = []

    def dense(q, k, v, call):
        seen.append((q.shape[0], k.shape[1], call.key_padding))
        return q.new_zeros((*q.shape[:-1], v.shape[-1]))

    def shapes(runs, sk):
        seen.clear()
        q = torch.zeros(len(runs), 4, 2, 8)
        k = torch.zeros(len(runs), sk, 2, 8)
        mask = torch.from_numpy(_runs_mask(runs, sk))
        call = validate(q, k, k, key_padding_mask=mask)
        _cut_keys(dense, q, k, k, call, _key_runs(mask))
        return list(seen)

    sk = CUT_MIN_KEYS + 72
    assert shapes([(0, sk), (0, 100)], sk) == [(1, sk, False), (1, 100, False)]
    assert shapes([(10, 150), (10, 150)], sk) == [(2, 140, False)]
    few = int(CUT_MIN_SKIPPED * 2 * sk) - 1  # keys skipped, just under the share
    assert shapes([(0, sk), (0, sk - few)], sk) == [(2, sk, True)]
    short = CUT_MIN_KEYS - 1
    assert shapes([(0, short), (0, 10)], short) == [(2, short, True)]


def test_cut_keys_is_cpu_only_and_not_with_other_masks():
    kp = torch.ones(2, 8, dtype=torch.bool)
    assert _may_cut_keys(call_for(key_padding_mask=kp))
    assert not _may_cut_keys(call_for(key_padding_mask=kp, causal=True))
    assert not _may_cut_keys(
        call_for(key_padding_mask=kp, attn_mask=torch.ones(8, 8, dtype=torch.bool))
    )
    cuda = dataclasses.replace(
        call_for(key_padding_mask=kp), device=DeviceInfo("cuda", "GPU", 0, (9, 0))
    )
    assert not _may_cut_keys(cuda)
    assert "cut away" in BACKEND.detail(call_for(key_padding_mask=kp))


def test_cut_key_padding_gradients_are_within_the_rule():
    """Cutting padded keys away keeps float32 gradients within the rule, against the worse
    of the plain math and the same SDPA kernel given the padding as a mask (not cut). In
    float32 the rule's ratio is summation-order noise around 1-2 for any fused kernel: on an
    AVX2-only CPU the uncut kernel itself measured 2.2x the plain math's error on some seeds,
    so the plain math alone is no baseline for what the cut changes."""
    kp = torch.from_numpy(_runs_mask([(0, 200), (60, 200), (0, 0)], 200))
    gen = torch.Generator().manual_seed(0)
    base = [
        torch.randn(shape, generator=gen)
        for shape in ((3, 9, 2, 16), (3, 200, 2, 16), (3, 200, 2, 16))
    ]
    dout = torch.randn((3, 9, 2, 16), generator=gen)
    as_mask = dict(attn_mask=kp[:, None, None, :].expand(3, 2, 9, 200).clone())
    want = input_grads(base, dout, torch.float64, "torch-math", key_padding_mask=kp)
    naive = input_grads(base, dout, torch.float32, "torch-math", key_padding_mask=kp)
    uncut = input_grads(base, dout, torch.float32, "torch-sdpa", **as_mask)
    got = input_grads(base, dout, torch.float32, "torch-sdpa", key_padding_mask=kp)
    for name, g, n, u, w in zip("qkv", got, naive, uncut, want, strict=True):
        floor = 2 * (w.float() + 0.3 - 0.3 - w.float()).abs().max().item()
        base_err = max((n - w).abs().max().item(), (u - w).abs().max().item())
        err = (g - w).abs().max().item()
        assert err <= 2 * base_err + floor, f"d{name}: error {err:.3g} > 2 x {base_err:.3g}"
        assert not g[2].any(), f"d{name}: the example with no key must get zero gradients"
