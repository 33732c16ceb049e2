"""Calls described as if they came from a GPU, so that CUDA backends' decline rules run on a
CPU host: real arrays are validated on the CPU, then the call's device is replaced."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from attnswitch.kernels.arrays import DeviceInfo
from attnswitch.kernels.contract import validate

GPUS = {
    "sm75": DeviceInfo("cuda", "Tesla T4", 0, (7, 5)),
    "sm80": DeviceInfo("cuda", "NVIDIA A100-SXM4-80GB", 0, (8, 0)),
    "sm86": DeviceInfo("cuda", "NVIDIA A10", 0, (8, 6)),
    "sm89": DeviceInfo("cuda", "NVIDIA L4", 0, (8, 9)),
    "sm90": DeviceInfo("cuda", "NVIDIA H200", 0, (9, 0)),
    "sm100": DeviceInfo("cuda", "NVIDIA B200", 0, (10, 0)),
    "sm120": DeviceInfo("cuda", "NVIDIA GeForce RTX 5090", 0, (12, 0)),
    "cpu": DeviceInfo("cpu", "cpu"),
}


def describe_gpu_call(
    gpu="sm90",
    dtype="bfloat16",
    d=128,
    sq=64,
    sk=64,
    hq=8,
    hkv=2,
    packed=None,
    key_padding=False,
    attn_mask=False,
    **kw,
):
    """A validated `Call` placed on `GPUS[gpu]`: dense with B=2, or packed with the sequence
    lengths `packed` (the same for queries and keys). `key_padding`/`attn_mask` add an
    all-True mask of that kind; `kw` are other contract arguments (causal, window, softcap,
    return_lse...)."""
    import torch

    if key_padding:
        kw["key_padding_mask"] = torch.ones(2, sk, dtype=torch.bool)
    if attn_mask:
        kw["attn_mask"] = torch.ones(2, 1, sq, sk, dtype=torch.bool)

    torch_dtype = getattr(torch, dtype)
    if packed is not None:
        cu = torch.tensor([0, *itertools.accumulate(packed)], dtype=torch.int32)
        q = torch.randn(int(cu[-1]), hq, d).to(torch_dtype)
        k = torch.randn(int(cu[-1]), hkv, d).to(torch_dtype)
        kw = dict(kw, cu_seqlens_q=cu, cu_seqlens_k=cu)
    else:
        q = torch.randn(2, sq, hq, d).to(torch_dtype)
        k = torch.randn(2, sk, hkv, d).to(torch_dtype)
    call = validate(q, k, k, **kw)
    return dataclasses.replace(call, device=GPUS[gpu])


@pytest.fixture
def gpu_call():
    """`describe_gpu_call`, for tests of CUDA backends' rules."""
    return describe_gpu_call
