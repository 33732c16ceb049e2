"""jax-xla: what it declines (and nothing else), masked rows, lse, and running under jax.jit.

The whole conformance grid runs for every backend in tests/kernels/test_conformance.py;
here: that it declines exactly the cases it cannot honour, and the API's traps it fixes up.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attnswitch as asw
from attnswitch.kernels import conformance
from attnswitch.kernels.arrays import DeviceInfo
from attnswitch.kernels.backends.jax_xla import BACKEND
from attnswitch.kernels.contract import validate

NAME = "jax-xla"


def expected_declines(case: conformance.Case) -> bool:
    return (
        case.softcap is not None
        or (case.return_lse and case.dtype != "float32")
        or case.dtype == "float16"  # on CPU
    )


def _call(case: conformance.Case):
    inputs = conformance.make_inputs(case)
    q, k, v = (jnp.asarray(inputs.pop(n)) for n in "qkv")
    args = {n: jnp.asarray(x) if isinstance(x, np.ndarray) else x for n, x in inputs.items()}
    return validate(q, k, v, **args)


@pytest.mark.parametrize("case", conformance.cases(), ids=lambda c: c.label)
def test_declines_exactly_what_it_cannot_honour(case: conformance.Case) -> None:
    reasons = BACKEND.declines(_call(case))
    assert bool(reasons) == expected_declines(case), reasons


def test_decline_reasons_name_the_api_limits() -> None:
    case = conformance.Case("x", dtype="bfloat16", softcap=5.0, return_lse=True)
    reasons = BACKEND.declines(_call(case))
    assert "softcap not supported" in reasons
    assert any("lse rounded to bfloat16" in r for r in reasons)
    gpu = dataclasses.replace(
        _call(conformance.Case("y", dtype="float16")),
        device=DeviceInfo("cuda", "NVIDIA H100", 0, (9, 0)),
    )
    assert BACKEND.declines(gpu) == []  # float16 is fine where XLA takes F16_F16_F32


def test_fully_masked_rows_are_zero_not_mean_of_v() -> None:
    """The API masks with a finite value: without the fix-up a row with no key gives mean(V)."""
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.standard_normal((2, 5, 2, 8)), jnp.float32) for _ in range(3))
    kp = jnp.asarray([[True] * 5, [False] * 5])
    out, lse = asw.attention(q, k, v, key_padding_mask=kp, return_lse=True, backend=NAME)
    assert isinstance(out, jax.Array)
    assert not np.asarray(out[1]).any() and np.isneginf(np.asarray(lse[1])).all()
    assert np.abs(np.asarray(out[0])).sum() > 0 and np.isfinite(np.asarray(lse[0])).all()


def test_causal_is_bottom_right_when_sq_exceeds_sk() -> None:
    q = jnp.ones((1, 6, 1, 4), jnp.float32)
    k = jnp.ones((1, 4, 1, 4), jnp.float32)
    v = jnp.arange(4, dtype=jnp.float32).reshape(1, 4, 1, 1) * jnp.ones((1, 4, 1, 4))
    out = np.asarray(asw.attention(q, k, v, causal=True, backend=NAME))
    # query i sees keys j <= i - 2: rows 0-1 see none, row 2 sees key 0, row 5 all four.
    assert not out[0, :2].any()
    np.testing.assert_allclose(out[0, 2:, 0, 0], [0.0, 0.5, 1.0, 1.5], rtol=1e-6)


def test_under_jit_dense_matches_eager() -> None:
    rng = np.random.default_rng(1)
    q = jnp.asarray(rng.standard_normal((2, 7, 4, 16)), jnp.float32)
    k = jnp.asarray(rng.standard_normal((2, 9, 2, 16)), jnp.float32)
    eager = asw.attention(q, k, k, causal=True, window=(3, -1), backend=NAME)
    jitted = jax.jit(lambda q, k: asw.attention(q, k, k, causal=True, window=(3, -1)))(q, k)
    assert isinstance(jitted, jax.Array)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=1e-6, atol=1e-6)


def test_under_jit_packed_with_traced_cu_seqlens() -> None:
    rng = np.random.default_rng(2)
    q = jnp.asarray(rng.standard_normal((9, 2, 8)), jnp.float32)
    k = jnp.asarray(rng.standard_normal((12, 2, 8)), jnp.float32)
    cu_q = jnp.asarray([0, 4, 4, 9], jnp.int32)
    cu_k = jnp.asarray([0, 5, 7, 12], jnp.int32)
    eager = asw.attention(q, k, k, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, backend=NAME)
    jitted = jax.jit(
        lambda q, k, cq, ck: asw.attention(
            q, k, k, causal=True, cu_seqlens_q=cq, cu_seqlens_k=ck, backend=NAME
        )
    )(q, k, cu_q, cu_k)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=1e-6, atol=1e-6)
    for (q0, q1), (k0, k1) in (((0, 4), (0, 5)), ((4, 9), (7, 12))):  # sequence by sequence
        dense = asw.attention(
            q[None, q0:q1], k[None, k0:k1], k[None, k0:k1], causal=True, backend=NAME
        )
        np.testing.assert_allclose(
            np.asarray(eager[q0:q1]), np.asarray(dense[0]), rtol=1e-6, atol=1e-6
        )
