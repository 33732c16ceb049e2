"""flash-attn-3: its rules, tested on CPU through `declines` with calls described for GPUs
(`gpu_call` in conftest.py), including the rules a build's switches add; real runs against
the float64 reference on a GPU where FlashAttention 3 is installed. The dispatch it shares
with flash-attn is tested in tests/kernels/test_flash_common.py."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from grad_rule import assert_grads_within_rule
from grid_pins import DECLINES_ON_GPU, GPUS, declined, gpu_generation, gpu_grid, must_serve

import attnswitch as asw
from attnswitch.kernels.backends.flash_attn3 import BACKEND, FlashAttn3
from attnswitch.kernels.contract import AttentionInputError, validate

NAME = "flash-attn-3"
# A complete build, whatever is installed here, for the rules of the library itself.
FULL = FlashAttn3(build_flags={})


@pytest.mark.parametrize("gpu", ["sm80", "sm86", "sm89", "sm90"])
@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(dtype="float16"),
        dict(causal=True),
        dict(causal=True, sq=17, sk=300),
        dict(window=(32, 0)),
        dict(causal=True, window=(48, -1)),
        dict(softcap=30.0),
        dict(return_lse=True),
        dict(hkv=1),
        dict(d=256),
        dict(d=32),
        dict(d=59),
        dict(packed=(5, 0, 9)),
        dict(packed=(5, 0, 9), causal=True, return_lse=True),
        dict(key_padding=True),
    ],
    ids=str,
)
def test_serves_its_native_features(gpu_call, gpu, kw):
    assert FULL.declines(gpu_call(gpu, **kw)) == []


@pytest.mark.parametrize(
    "kw, reason",
    [
        (dict(gpu="sm75"), "compute capability 7.5 < 8.0"),
        (
            dict(gpu="sm100"),
            "compute capability 10.0: FlashAttention 3 has kernels for sm8x and sm90",
        ),
        (
            dict(gpu="sm120"),
            "compute capability 12.0: FlashAttention 3 has kernels for sm8x and sm90",
        ),
        (dict(dtype="float32"), "dtype float32 not among float16, bfloat16"),
        (dict(d=288), "head dim 288 > 256"),
        (dict(d=264), "head dim 264 > 256"),
        (dict(attn_mask=True), "attn_mask not supported"),
        (dict(causal=True, key_padding=True), "key_padding_mask with causal/window"),
        (dict(window=(8, 8), key_padding=True), "key_padding_mask with causal/window"),
        (dict(gpu="cpu"), "runs on cuda, not on cpu"),
    ],
    ids=str,
)
def test_declines_with_reason(gpu_call, kw, reason):
    reasons = FULL.declines(gpu_call(**kw))
    assert any(reason in r for r in reasons), reasons


def test_lists_every_reason_at_once(gpu_call):
    reasons = FULL.declines(gpu_call("sm100", dtype="float32", d=288, attn_mask=True))
    assert len(reasons) == 4, reasons


@pytest.mark.parametrize(
    "flag, kw, reason",
    [
        ("FLASHATTENTION_DISABLE_SM8x", dict(gpu="sm80"), "this build has no sm8x kernels"),
        ("FLASHATTENTION_DISABLE_SM8x", dict(gpu="sm86"), "this build has no sm8x kernels"),
        ("FLASHATTENTION_DISABLE_FP16", dict(dtype="float16"), "float16: this build was compiled"),
        ("FLASHATTENTION_DISABLE_SOFTCAP", dict(softcap=30.0), "softcap: this build"),
        ("FLASHATTENTION_DISABLE_LOCAL", dict(window=(32, 0)), "window: this build"),
        ("FLASHATTENTION_DISABLE_LOCAL", dict(causal=True, window=(16, 4)), "window: this build"),
        (
            "FLASHATTENTION_DISABLE_VARLEN",
            dict(packed=(5, 9)),
            "varlen (packed layout, key_padding",
        ),
        (
            "FLASHATTENTION_DISABLE_VARLEN",
            dict(key_padding=True),
            "varlen (packed layout, key_padding",
        ),
        (
            "FLASHATTENTION_DISABLE_HDIM256",
            dict(d=200),
            "head dim 200 > 192, the largest this build",
        ),
    ],
    ids=str,
)
def test_a_builds_switches_become_reasons(gpu_call, flag, kw, reason):
    call = gpu_call(**kw)
    assert FULL.declines(call) == []
    reasons = FlashAttn3(build_flags={flag: True}).declines(call)
    assert any(reason in r for r in reasons), reasons


@pytest.mark.parametrize(
    "flag, kw",
    [
        ("FLASHATTENTION_DISABLE_SM8x", dict(gpu="sm90")),  # Hopper keeps its own kernels
        ("FLASHATTENTION_DISABLE_LOCAL", dict(causal=True)),  # causal is not a local window
        ("FLASHATTENTION_DISABLE_FP16", dict(dtype="bfloat16")),
        ("FLASHATTENTION_DISABLE_HDIM256", dict(d=192)),
        ("FLASHATTENTION_DISABLE_BACKWARD", dict()),  # inference needs no backward
    ],
    ids=str,
)
def test_a_switch_leaves_what_it_does_not_concern(gpu_call, flag, kw):
    assert FlashAttn3(build_flags={flag: True}).declines(gpu_call(**kw)) == []


def test_a_build_without_backward_declines_gradients(gpu_call):
    call = dataclasses.replace(gpu_call(), requires_grad=True)
    assert FULL.declines(call) == []
    reasons = FlashAttn3(build_flags={"FLASHATTENTION_DISABLE_BACKWARD": True}).declines(call)
    assert any("backward (inputs require grad): this build" in r for r in reasons), reasons


def test_odd_head_dims_are_padded_to_a_multiple_of_8(gpu_call):
    assert BACKEND.detail(gpu_call(d=59)) == "flash_attn_func, head dim 59 padded to 64"
    assert BACKEND.detail(gpu_call(d=64)) == "flash_attn_func"
    assert BACKEND.detail(gpu_call(packed=(3, 4), d=100)) == (
        "flash_attn_varlen_func, head dim 100 padded to 104"
    )


def test_fp8_never_reaches_it():
    """FA3's FP8 (e4m3, with descale factors) is outside the contract's dtypes: validation
    refuses it before any backend, so flash-attn-3 needs no rule for it."""
    q = torch.randn(1, 8, 2, 64).to(torch.float8_e4m3fn)
    with pytest.raises(AttentionInputError, match="q: expected a dtype among"):
        validate(q, q, q)


def test_unavailable_here_with_a_reason():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present; availability depends on the flash_attn_3 install")
    why = BACKEND.unavailable()
    assert why is not None and why.startswith("needs an NVIDIA GPU with CUDA"), why
    import importlib.util

    if importlib.util.find_spec("flash_attn_interface") is None:
        assert "flash_attn_interface is not installed" in why


def test_rules_appear_in_explain_even_where_unavailable():
    q = torch.randn(1, 8, 2, 288)
    plan = asw.explain(q, q, q, causal=True, attn_mask=torch.ones(8, 8, dtype=torch.bool))
    reasons = plan.reasons(NAME)
    assert plan.status(NAME) == "unavailable"
    assert reasons[0] == BACKEND.unavailable()
    for reason in ("runs on cuda, not on cpu", "head dim 288 > 256", "attn_mask not supported"):
        assert reason in reasons, reasons
    assert any("dtype float32" in r for r in reasons)
    line = next(x for x in str(plan).splitlines() if f" {NAME}: " in x)
    assert line.split()[0] == "unavailable" and "head dim 288 > 256" in line, line


def test_planner_order_on_cuda(gpu_call):
    """FA3 leads on Hopper; on Ampere and Ada the mature FA2 goes first, FA3 after it."""
    from attnswitch.kernels import plan as plan_mod

    order_h, source_h = plan_mod._order(gpu_call("sm90"))
    order_a, source_a = plan_mod._order(gpu_call("sm80"))
    assert order_h.index(NAME) < order_h.index("flash-attn") and source_h == "priority:cuda"
    assert order_a.index("flash-attn") < order_a.index(NAME) and source_a == "priority:cuda-sm8x"


# ---- on a GPU with FlashAttention 3 ---------------------------------------------------

needs_fa3 = pytest.mark.backend(NAME)
# The quick grid plus what this backend adds or translates: odd and large head dims (padding),
# windows, softcap, MQA, packed with unequal lengths and the lse.
GPU_CASES = (
    "hdim-59",
    "hdim-80",
    "hdim-256",
    "window-64-16",
    "window-causal-48",
    "softcap-30",
    "mqa-4-1",
    "packed-unequal",
    "packed-lse",
    "packed-window",
)


@pytest.mark.gpu
@needs_fa3
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_conformance_on_gpu(dtype):
    from attnswitch.kernels import conformance

    grid = conformance.cases(quick=True, dtypes=("bfloat16",))
    grid += [c.with_dtype("bfloat16") for c in conformance.GRID if c.name in GPU_CASES]
    cases = [c.with_dtype(dtype) for c in must_serve(NAME, gpu_generation(), grid)]
    results = [conformance.check(NAME, case, device="cuda") for case in cases]
    assert results, "no case ran"
    assert [
        (r.case.label, r.status, r.reasons) for r in results if r.status != conformance.PASSED
    ] == []


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_declines_exactly_the_pinned_cases(gpu):
    """For a complete build (the installed one may lack switches)."""
    assert declined(FULL, gpu_grid(), GPUS[gpu]) == DECLINES_ON_GPU[NAME][gpu]


@pytest.mark.gpu
@needs_fa3
@pytest.mark.parametrize(
    "kw", [dict(causal=True), dict(softcap=20.0, window=(40, 8)), dict(d=59)], ids=str
)
def test_gradients_on_gpu(kw):
    """Backward against float64 autograd, by the rule: the error of FA3's gradients is at most
    twice that of the same naive math in bfloat16, plus a rounding floor."""
    kw = dict(kw)
    d = kw.pop("d", 64)
    gen = torch.Generator(device="cuda").manual_seed(0)
    # Every run starts from the same bfloat16 values; the float64 one is exact on them.
    base = [torch.randn(2, 113, h, d, device="cuda", generator=gen).bfloat16() for h in (8, 2, 2)]
    dout = torch.randn(2, 113, 8, d, device="cuda", generator=gen).bfloat16()
    assert_grads_within_rule(base, dout, torch.bfloat16, NAME, **kw)
