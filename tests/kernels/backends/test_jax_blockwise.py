"""jax-blockwise: the online softmax across many blocks, linear memory, traced packed input.

tests/kernels/test_conformance.py runs the whole grid on the registered backend, whose
512-row blocks hold most grid cases in one block. Here the grid cases that meet the block
logic run with small blocks (32 queries x 48 keys), so each crosses query and key block
boundaries: the online rescaling, the block skipping of causal/window/packed calls and the
padding of last blocks all take part.
"""

from __future__ import annotations

from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attnswitch as asw
from attnswitch.kernels import conformance, registry
from attnswitch.kernels.backends.jax_blockwise import BACKEND, JaxBlockwise

SMALL = "jax-blockwise-small-blocks"


@pytest.fixture(scope="module")
def small_blocks() -> Iterator[str]:
    backend = JaxBlockwise(block_q=32, block_k=48)
    backend.name = SMALL
    registry.register(backend)
    try:
        yield SMALL
    finally:
        registry.unregister(SMALL)


# Cases whose features meet the block logic (alignment, skipping, segments, masks, empty
# rows, padding of last blocks); scale and head dims 32-256 do not touch it and bfloat16 runs
# the same code, so those run on the registered backend in test_conformance.py only.
BLOCK_CASES = (
    "plain-113x203",
    "causal-113x203",
    "causal-203x113",
    "causal-self-97",
    "window-64-16",
    "window-causal-48",
    "softcap-30",
    "gqa-8-2",
    "mqa-4-1",
    "padding",
    "masked-row",
    "lse",
    "packed",
    "packed-unequal",
    "packed-lse",
    "packed-window",
    "hdim-59",
    "large-magnitude",
    "long-1023x1024",
)
BFLOAT16_CASES = ("causal-203x113", "gqa-8-2", "packed-lse")


def _cases() -> list[conformance.Case]:
    return [
        c
        for c in conformance.cases()
        if c.name in BLOCK_CASES and (c.dtype != "bfloat16" or c.name in BFLOAT16_CASES)
    ]


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c.label)
def test_conforms_across_blocks(small_blocks: str, case: conformance.Case) -> None:
    result = conformance.check(small_blocks, case)
    assert result.status == conformance.PASSED, f"{case.label}: {'; '.join(result.reasons)}"


def test_serves_every_contract_feature() -> None:
    rng = np.random.default_rng(0)
    q = jnp.asarray(rng.standard_normal((2, 6, 4, 8)), jnp.bfloat16)
    k = jnp.asarray(rng.standard_normal((2, 9, 2, 8)), jnp.bfloat16)
    plan = asw.explain(
        q,
        k,
        k,
        causal=True,
        window=(4, -1),
        softcap=20.0,
        return_lse=True,
        key_padding_mask=jnp.ones((2, 9), bool),
        attn_mask=jnp.ones((6, 9), bool),
    )
    assert "jax-blockwise" in plan.candidates
    assert BACKEND.declines(plan.call) == []


def test_rows_without_keys_give_zeros_and_minus_inf_lse() -> None:
    rng = np.random.default_rng(1)
    q = jnp.asarray(rng.standard_normal((1, 7, 2, 8)), jnp.float32)
    k = jnp.asarray(rng.standard_normal((1, 4, 2, 8)), jnp.float32)
    out, lse = asw.attention(q, k, k, causal=True, return_lse=True, backend="jax-blockwise")
    assert not np.asarray(out[0, :3]).any() and np.isneginf(np.asarray(lse[0, :, :3])).all()
    assert np.isfinite(np.asarray(lse[0, :, 3:])).all()
    no_keys = asw.attention(q, k[:, :0], k[:, :0], return_lse=True, backend="jax-blockwise")
    assert not np.asarray(no_keys[0]).any() and np.isneginf(np.asarray(no_keys[1])).all()
    assert no_keys[1].shape == (1, 2, 7) and no_keys[1].dtype == jnp.float32


def test_traced_cu_seqlens_under_jit_match_eager(small_blocks: str) -> None:
    rng = np.random.default_rng(2)
    q = jnp.asarray(rng.standard_normal((100, 2, 16)), jnp.float32)
    k = jnp.asarray(rng.standard_normal((130, 1, 16)), jnp.float32)
    cu_q = jnp.asarray([0, 40, 40, 100], jnp.int32)
    cu_k = jnp.asarray([0, 50, 71, 130], jnp.int32)
    kw = dict(causal=True, window=(20, -1), softcap=10.0, return_lse=True, backend=small_blocks)
    eager = asw.attention(q, k, k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, **kw)

    @jax.jit
    def traced(q, k, cu_q, cu_k):
        return asw.attention(q, k, k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, **kw)

    for got, want in zip(traced(q, k, cu_q, cu_k), eager):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)
    # Other lengths through the same compiled program give other (correct) results.
    cu_q2 = jnp.asarray([0, 10, 60, 100], jnp.int32)
    again = traced(q, k, cu_q2, cu_k)[0]
    fresh = asw.attention(q, k, k, cu_seqlens_q=cu_q2, cu_seqlens_k=cu_k, **kw)[0]
    np.testing.assert_allclose(np.asarray(again), np.asarray(fresh), rtol=1e-6, atol=1e-6)
    assert not np.allclose(np.asarray(again), np.asarray(eager[0]))


def _temp_bytes(seqlen: int, backend: str) -> int:
    """Scratch memory XLA plans for one call (compiled, not run)."""
    x = jax.ShapeDtypeStruct((1, seqlen, 4, 32), jnp.float32)
    fn = jax.jit(lambda q, k, v: asw.attention(q, k, v, causal=True, backend=backend))
    return fn.lower(x, x, x).compile().memory_analysis().temp_size_in_bytes


def test_memory_grows_linearly_with_sequence_length() -> None:
    sizes = [_temp_bytes(s, "jax-blockwise") for s in (2048, 4096, 8192)]
    assert sizes[2] - sizes[1] <= 2.5 * (sizes[1] - sizes[0])  # linear: doubling steps
    dense_scores = 8192 * 8192 * 4 * 4
    assert sizes[2] < dense_scores / 20
    # The dense XLA path on the same call does need the quadratic score matrix.
    assert _temp_bytes(2048, "jax-xla") >= 2048 * 2048 * 4 * 4


def test_block_sizes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="blocks: expected positive sizes"):
        JaxBlockwise(block_q=0)


def test_detail_names_the_block() -> None:
    x = jnp.zeros((1, 4096, 8, 64), jnp.float32)
    plan = asw.explain(x, x, x, backend="jax-blockwise")
    assert plan.details["jax-blockwise"] == "blocks 512x512: one float32 score block of 8 MiB"
