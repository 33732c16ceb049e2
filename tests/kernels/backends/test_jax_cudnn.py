"""jax-cudnn: unavailable without a CUDA GPU; its decline rules (jax 0.10's cuDNN path) checked
on hand-built calls for the GPUs it targets; conformance where a GPU exists."""

from __future__ import annotations

import dataclasses
import math

import pytest
from grid_pins import DECLINES_ON_GPU, GPUS, declined, gpu_generation, gpu_grid, must_serve

from attnswitch.kernels import conformance
from attnswitch.kernels.arrays import DeviceInfo
from attnswitch.kernels.backends.jax_cudnn import BACKEND, native_bounds
from attnswitch.kernels.contract import Call

H100 = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", 0, (9, 0))
A100 = DeviceInfo("cuda", "NVIDIA A100-SXM4-80GB", 0, (8, 0))
T4 = DeviceInfo("cuda", "Tesla T4", 0, (7, 5))
GB300 = DeviceInfo("cuda", "NVIDIA GB300", 0, (10, 3))


def call(
    device: DeviceInfo = H100,
    *,
    dtype: str = "bfloat16",
    head_dim: int = 128,
    seqlen_q: int = 256,
    seqlen_k: int = 256,
    **features,
) -> Call:
    return Call(
        framework="jax",
        device=device,
        dtype=dtype,
        layout="dense",
        batch=2,
        seqlen_q=seqlen_q,
        seqlen_k=seqlen_k,
        heads_q=8,
        heads_kv=2,
        head_dim=head_dim,
        scale=1 / math.sqrt(head_dim),
        **features,
    )


def test_unavailable_without_a_cuda_gpu() -> None:
    import jax

    if any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("a GPU is visible to jax")
    why = BACKEND.unavailable()
    assert why is not None and "no CUDA GPU" in why


@pytest.mark.parametrize(
    "features",
    [
        {},
        dict(causal=True),
        dict(causal=True, window=(64, 0)),
        dict(window=(8, 8)),
        dict(key_padding=True),
        dict(attn_mask_shape=(2, 1, 256, 256)),
    ],
    ids=str,
)
def test_serves_dense_half_precision_on_hopper(features) -> None:
    assert BACKEND.declines(call(**features)) == []
    assert BACKEND.declines(call(dtype="float16", head_dim=256, **features)) == []


@pytest.mark.parametrize(
    ("device", "head_dim", "served"),
    [
        (H100, 256, True),
        (H100, 264, False),
        (H100, 72, True),
        (H100, 60, False),
        (A100, 128, True),
        (A100, 256, False),
        (A100, 8, True),
        (A100, 100, False),
    ],
)
def test_head_dim_rule_follows_the_compute_capability(device, head_dim, served) -> None:
    reasons = BACKEND.declines(call(device, head_dim=head_dim))
    assert (reasons == []) == served, reasons
    if not served:
        limit = 256 if device.capability >= (9, 0) else 128
        assert reasons == [
            f"head dim {head_dim}: expected a multiple of 8 up to {limit} on compute "
            f"capability {device.capability[0]}.{device.capability[1]}"
        ]


def test_declines_everything_it_cannot_honour_with_every_reason() -> None:
    reasons = BACKEND.declines(
        call(T4, dtype="float32", head_dim=60, softcap=30.0, return_lse=True)
    )
    assert "dtype float32 not among float16, bfloat16" in reasons
    assert "softcap not supported" in reasons
    assert "compute capability 7.5 < 8.0 (cuDNN flash attention)" in reasons
    assert any(r.startswith("return_lse: jax returns cuDNN's lse cast to float32") for r in reasons)
    assert len(reasons) == 4


def test_declines_packed_and_other_devices() -> None:
    packed = dataclasses.replace(
        call(), layout="packed", seqlens_q=(100, 156), seqlens_k=(100, 156)
    )
    assert any("packed layout" in r for r in BACKEND.declines(packed))
    for device in (
        DeviceInfo("cpu", "cpu"),
        DeviceInfo("tpu", "TPU v5 lite", 0),
        DeviceInfo("rocm", "AMD Instinct MI300X", 0, (9, 4)),
    ):
        assert f"runs on cuda, not on {device.kind}" in BACKEND.declines(call(device))
    no_cap = DeviceInfo("cuda", "NVIDIA H100", 0, None)
    assert "compute capability unknown" in BACKEND.declines(call(no_cap))


def test_capability_10_3_needs_cudnn_9_11() -> None:
    from attnswitch.kernels.backends.jax_cudnn import cudnn_version

    reasons = BACKEND.declines(call(GB300))
    if (cudnn_version() or 0) >= 91100:
        assert reasons == []
    else:
        assert reasons == ["compute capability 10.3 needs cuDNN >= 9.11"]


@pytest.mark.parametrize(
    ("features", "sq", "sk", "expected"),
    [
        ({}, 256, 256, (False, None)),
        (dict(window=(-1, -1)), 256, 256, (False, None)),
        (dict(causal=True), 256, 256, (True, None)),
        (dict(causal=True, window=(16, -1)), 256, 256, (True, (16, 0))),
        (dict(window=(16, 0)), 256, 256, (True, (16, 0))),
        (dict(causal=True), 128, 256, None),  # bottom-right != cuDNN's top-left
        (dict(window=(16, 4)), 256, 256, None),  # cuDNN windows are left-only
        (dict(window=(-1, 4)), 256, 256, None),
    ],
)
def test_native_masking_only_where_it_equals_the_contract(features, sq, sk, expected) -> None:
    c = call(seqlen_q=sq, seqlen_k=sk, **features)
    assert native_bounds(c) == expected
    assert ("explicit mask" in BACKEND.detail(c)) == (expected is None)


def test_versions_name_jax_and_jaxlib() -> None:
    assert set(BACKEND.versions()) == {"jax", "jaxlib"}


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_declines_exactly_the_pinned_cases(gpu: str) -> None:
    assert declined(BACKEND, gpu_grid(), GPUS[gpu]) == DECLINES_ON_GPU["jax-cudnn"][gpu]


@pytest.mark.gpu
@pytest.mark.backend("jax-cudnn")
def test_conforms_on_gpu() -> None:
    """Every bfloat16 grid case it is pinned to serve on this GPU passes (head dim 256 only
    from Hopper on); a decline or an error fails."""
    cases = must_serve("jax-cudnn", gpu_generation("jax"), gpu_grid())
    results = [conformance.check("jax-cudnn", case, device="gpu") for case in cases]
    assert results, "no case ran"
    assert [
        (r.case.label, r.status, r.reasons) for r in results if r.status != conformance.PASSED
    ] == []
