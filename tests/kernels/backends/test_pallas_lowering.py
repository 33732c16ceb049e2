"""TPU lowering checks for the Pallas backends, run from a CPU host.

Each call is described for a TPU, then traced and lowered for the TPU platform
(`jax.jit(f).trace(...).lower(lowering_platforms=("tpu",))`), which emits the Mosaic
`tpu_custom_call`s. That catches tracing, shape and block-size errors in CI without a TPU;
it does not run Mosaic's compiler, so VMEM limits and Mosaic layout errors show only on a
TPU. What a backend cannot serve must be declined before anything is lowered.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from attnswitch.kernels import registry  # noqa: E402
from attnswitch.kernels.arrays import DeviceInfo  # noqa: E402
from attnswitch.kernels.contract import validate  # noqa: E402

TPU = DeviceInfo("tpu", "TPU v5 lite", 0)
PALLAS = ("pallas-flash", "pallas-splash")


def _cu(lens):
    return jnp.asarray(np.concatenate([[0], np.cumsum(lens)]).astype(np.int32))


# name: (batch, Sq, Sk, Hq, Hkv, D, dtype, keyword arguments of the call)
SHAPES = {
    "plain-113x203": (2, 113, 203, 4, 4, 64, "bfloat16", {}),
    "causal-1023x1024": (1, 1023, 1024, 2, 2, 128, "bfloat16", dict(causal=True)),
    "causal-203x113-gqa-lse": (
        1,
        203,
        113,
        8,
        2,
        80,
        "float32",
        dict(causal=True, return_lse=True),
    ),
    "decode-1x4096-mqa": (4, 1, 4096, 8, 1, 128, "bfloat16", dict(causal=True)),
    "causal-4096-blocks-512": (1, 4096, 4096, 4, 4, 128, "bfloat16", dict(causal=True)),
    "hdim-192": (1, 256, 256, 2, 1, 192, "bfloat16", {}),
    "hdim-59-key-padding": (2, 67, 131, 2, 2, 59, "float32", dict(key_padding=True)),
    "hdim-256-attn-mask": (2, 67, 131, 2, 2, 256, "bfloat16", dict(attn_mask=True, causal=True)),
    "packed-causal": (
        None,
        ((37, 37), (0, 0), (91, 91), (1, 1)),
        None,
        4,
        2,
        64,
        "bfloat16",
        dict(causal=True),
    ),
    "packed-unequal-lse": (
        None,
        ((13, 40), (50, 20), (0, 7), (30, 0)),
        None,
        4,
        4,
        64,
        "float32",
        dict(return_lse=True),
    ),
    "window-64-16": (2, 113, 203, 4, 4, 64, "bfloat16", dict(window=(64, 16))),
    "softcap-30": (2, 113, 203, 4, 4, 64, "bfloat16", dict(softcap=30.0)),
}
# (backend, shape) pairs declined, with the reason they must give
DECLINED = {
    ("pallas-flash", "window-64-16"): "the kernel has causal only",
    ("pallas-flash", "softcap-30"): "softcap not supported",
}


def tpu_call(b, sq, sk, hq, hkv, d, dtype, kw):
    """Concrete (small) arrays to validate the call on this host, then the call described
    as a TPU call."""
    kw = dict(kw)
    if b is None:  # packed: sq holds the (len_q, len_k) pairs
        pairs = sq
        q = jnp.zeros((sum(a for a, _ in pairs), hq, d), dtype)
        k = jnp.zeros((sum(c for _, c in pairs), hkv, d), dtype)
        kw.update(cu_seqlens_q=_cu([a for a, _ in pairs]), cu_seqlens_k=_cu([c for _, c in pairs]))
    else:
        q = jnp.zeros((b, sq, hq, d), dtype)
        k = jnp.zeros((b, sk, hkv, d), dtype)
        if kw.pop("key_padding", False):
            lengths = jnp.arange(sk - b + 1, sk + 1)  # one key fewer per example
            kw["key_padding_mask"] = jnp.arange(sk)[None, :] < lengths[:, None]
        if kw.pop("attn_mask", False):
            every_third_key_off = (jnp.arange(sk) % 3 != 0)[None, None, None, :]
            first_example = (jnp.arange(b) == 0)[:, None, None, None]
            kw["attn_mask"] = every_third_key_off | first_example  # varies over the batch
    call = validate(q, k, k, **kw)
    return q, k, dataclasses.replace(call, device=TPU)


def lower_for_tpu(backend, q, k, call) -> str:
    spec = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype)  # noqa: E731
    traced = jax.jit(lambda q, k, v: backend.run(q, k, v, call)).trace(spec(q), spec(k), spec(k))
    return traced.lower(lowering_platforms=("tpu",)).as_text()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", PALLAS)
def test_lowers_for_tpu_or_declines_first(name, shape):
    backend = registry.get(name)
    q, k, call = tpu_call(*SHAPES[shape])
    reasons = backend.declines(call)
    if (name, shape) in DECLINED:
        assert any(DECLINED[name, shape] in r for r in reasons), reasons
        return
    assert reasons == []
    text = lower_for_tpu(backend, q, k, call)
    assert "tpu_custom_call" in text
    assert "interpret" not in text  # native on a TPU, whatever the interpret switch says


@pytest.mark.parametrize("name", PALLAS)
def test_float16_is_declined_before_lowering(name):
    q, k, call = tpu_call(1, 128, 128, 2, 2, 64, "float16", {})
    assert "dtype float16 not among bfloat16, float32" in registry.get(name).declines(call)


def test_the_raw_kernels_reject_what_the_adapters_frame():
    """The check can fail: the kernels themselves refuse the unpadded 113x203 shape that the
    adapters above lower after padding it to whole blocks."""
    from jax.experimental.pallas.ops.tpu import flash_attention as fa
    from jax.experimental.pallas.ops.tpu import splash_attention as sa

    q = jax.ShapeDtypeStruct((1, 2, 113, 64), jnp.bfloat16)
    k = jax.ShapeDtypeStruct((1, 2, 203, 64), jnp.bfloat16)
    with pytest.raises(ValueError, match="block_q=128 should be smaller or equal to q_seq_len=113"):
        jax.jit(fa.flash_attention).trace(q, k, k).lower(lowering_platforms=("tpu",))
    with pytest.raises(ValueError, match="should divide"):
        sa.make_splash_mha(
            sa.MultiHeadMask([sa.CausalMask((113, 203))] * 2), head_shards=1, q_seq_shards=1
        )


GRAD_SHAPES = (
    "plain-113x203",
    "causal-1023x1024",
    "hdim-192",
    "hdim-59-key-padding",
    "packed-causal",
    "window-64-16",
    "softcap-30",
    "decode-1x4096-mqa",
)


@pytest.mark.parametrize("shape", GRAD_SHAPES)
@pytest.mark.parametrize("name", PALLAS)
def test_backward_lowers_for_tpu(name, shape):
    """Differentiating the call lowers the kernel's backward (dK/dV and dQ kernels) for the
    TPU too: three Mosaic calls where the forward has one."""
    backend = registry.get(name)
    q, k, call = tpu_call(*SHAPES[shape])
    if backend.declines(call):
        assert (name, shape) in DECLINED
        return
    spec = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype)  # noqa: E731

    def loss(q, k, v):
        return backend.run(q, k, v, call).astype(jnp.float32).sum()

    traced = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).trace(spec(q), spec(k), spec(k))
    text = traced.lower(lowering_platforms=("tpu",)).as_text()
    assert text.count("tpu_custom_call") >= 3, text.count("tpu_custom_call")
    assert "interpret" not in text


@pytest.mark.parametrize("name", PALLAS)
def test_vmap_and_traced_cu_seqlens_lower_for_tpu(name):
    """Natively nothing folds a vmapped call: the kernels' `pallas_call`s batch and Mosaic
    lowers the extra grid dimension (JAX's TPU interpreter cannot: there pallas-flash folds
    the axis, `pallas_common.fold_vmap`). A packed call with traced cu_seqlens lowers as one
    stream with segment ids computed on the device."""
    backend = registry.get(name)
    spec = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype)  # noqa: E731
    q, k, call = tpu_call(*SHAPES["causal-203x113-gqa-lse"])
    batched = (
        jax.ShapeDtypeStruct((3, *q.shape), q.dtype),
        jax.ShapeDtypeStruct((3, *k.shape), k.dtype),
    )
    fn = jax.vmap(lambda q, k, v: backend.run(q, k, v, dataclasses.replace(call, traced=True)))
    text = (
        jax.jit(fn)
        .trace(batched[0], batched[1], batched[1])
        .lower(lowering_platforms=("tpu",))
        .as_text()
    )
    assert "tpu_custom_call" in text and "interpret" not in text

    q = jnp.zeros((96, 4, 64), jnp.bfloat16)
    cu_q, cu_k = _cu([64, 32]), _cu([32, 64])

    def packed(q, cu_q, cu_k):
        traced = validate(q, q, q, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
        traced = dataclasses.replace(traced, device=TPU)
        assert traced.seqlens_q is None and backend.declines(traced) == []
        return backend.run(q, q, q, traced)

    text = (
        jax.jit(packed)
        .trace(spec(q), spec(cu_q), spec(cu_k))
        .lower(lowering_platforms=("tpu",))
        .as_text()
    )
    assert "tpu_custom_call" in text and "interpret" not in text
