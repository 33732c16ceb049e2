"""flash-attn: its rules, tested on CPU through `declines` with calls described for GPUs
(`gpu_call` in conftest.py). The dispatch it shares with flash-attn-3 is tested in
tests/kernels/test_flash_common.py."""

from __future__ import annotations

import pytest
import torch
from grid_pins import DECLINES_ON_GPU, GPUS, declined, gpu_generation, gpu_grid, must_serve

from attnswitch.kernels.backends.flash_attn import BACKEND


@pytest.mark.parametrize("gpu", ["sm80", "sm86", "sm90", "sm100"])
@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(causal=True),
        dict(causal=True, sq=17, sk=300),
        dict(window=(32, 0)),
        dict(softcap=30.0),
        dict(return_lse=True),
        dict(d=59),
        dict(packed=(5, 0, 9)),
    ],
    ids=str,
)
def test_serves_its_native_features(gpu_call, gpu, kw):
    assert BACKEND.declines(gpu_call(gpu, **kw)) == []


@pytest.mark.parametrize(
    "kw, reason",
    [
        (dict(gpu="sm75"), "compute capability 7.5 < 8.0"),
        (dict(dtype="float32"), "dtype float32 not among float16, bfloat16"),
        (dict(d=288), "head dim 288 > 256"),
        (dict(attn_mask=True), "attn_mask not supported"),
        (dict(causal=True, key_padding=True), "key_padding_mask with causal/window"),
        (dict(gpu="cpu"), "runs on cuda, not on cpu"),
    ],
    ids=str,
)
def test_declines_with_reason(gpu_call, kw, reason):
    reasons = BACKEND.declines(gpu_call(**kw))
    assert any(reason in r for r in reasons), reasons


def test_lists_every_reason_at_once(gpu_call):
    reasons = BACKEND.declines(gpu_call("sm75", dtype="float32", d=288))
    assert len(reasons) == 3


def test_key_padding_without_bounds_is_served_by_varlen(gpu_call):
    call = gpu_call(key_padding=True)
    assert BACKEND.declines(call) == []
    assert BACKEND.detail(call) == "flash_attn_varlen_func over the unpadded keys"


def test_unavailable_here_with_a_reason():
    why = BACKEND.unavailable()
    if torch.cuda.is_available():
        pytest.skip("a GPU is present; availability depends on the flash_attn install")
    assert why is not None and "GPU" in why


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_declines_exactly_the_pinned_cases(gpu):
    assert declined(BACKEND, gpu_grid(), GPUS[gpu]) == DECLINES_ON_GPU["flash-attn"][gpu]


@pytest.mark.gpu
@pytest.mark.backend("flash-attn")
def test_conformance_on_gpu():
    """Every quick case it is pinned to serve on this GPU passes; a decline or an error fails."""
    from attnswitch.kernels import conformance

    cases = must_serve(
        "flash-attn", gpu_generation(), conformance.cases(quick=True, dtypes=("bfloat16",))
    )
    results = [conformance.check("flash-attn", case, device="cuda") for case in cases]
    assert results, "no case ran"
    assert [
        (r.case.label, r.status, r.reasons) for r in results if r.status != conformance.PASSED
    ] == []


def test_rules_appear_in_explain_even_where_unavailable():
    import attnswitch as asw

    q = torch.randn(1, 8, 2, 288)
    plan = asw.explain(q, q, q, causal=True)
    reasons = plan.reasons("flash-attn")
    assert plan.status("flash-attn") == "unavailable"
    assert "runs on cuda, not on cpu" in reasons and "head dim 288 > 256" in reasons
    assert any("dtype float32" in r for r in reasons)
