"""jax arrays through the contract: the shared jax helpers, validation and planning under
jax tracing, numpy planned onto jax backends, and torch and jax backends agreeing."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attnswitch as asw
from attnswitch.kernels import arrays, conformance, jax_common, masks, registry
from attnswitch.kernels.contract import validate

JAX_BACKENDS = ("jax-xla", "jax-blockwise")


def test_segment_ids_skip_empty_sequences() -> None:
    cu = jnp.asarray([0, 2, 2, 5, 6], jnp.int32)
    assert jax_common.segment_ids(cu, 6).tolist() == [0, 0, 2, 2, 2, 3]


@pytest.mark.parametrize(
    "features",
    [
        dict(causal=True),
        dict(window=(2, 1)),
        dict(causal=True, window=(1, -1)),
        {},
    ],
    ids=str,
)
def test_packed_mask_is_each_sequences_dense_mask(features) -> None:
    lens_q, lens_k = [3, 0, 4, 2], [5, 2, 2, 0]
    cu = lambda lens: np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)  # noqa: E731
    q = jnp.zeros((sum(lens_q), 1, 4))
    k = jnp.zeros((sum(lens_k), 1, 4))
    call = validate(
        q,
        k,
        k,
        cu_seqlens_q=jnp.asarray(cu(lens_q)),
        cu_seqlens_k=jnp.asarray(cu(lens_k)),
        **features,
    )
    got = np.asarray(
        jax_common.packed_mask(call, call.cu_seqlens_q, call.cu_seqlens_k, q.shape[0], k.shape[0])
    )
    want = np.zeros_like(got)
    for s, (n_q, n_k) in enumerate(zip(lens_q, lens_k)):
        sub = masks.dense_mask(call.sequence(n_q, n_k), np.arange)
        block = np.ones((n_q, n_k), bool) if sub is None else sub[0, 0]
        want[cu(lens_q)[s] : cu(lens_q)[s + 1], cu(lens_k)[s] : cu(lens_k)[s + 1]] = block
    np.testing.assert_array_equal(got, want)


def test_zero_empty_rows() -> None:
    out = jnp.ones((1, 3, 2, 4))
    lse = jnp.zeros((1, 2, 3))
    mask = jnp.asarray([True, False, True])[None, None, :, None]  # [1, 1, Sq, 1]
    out, lse = jax_common.zero_empty_rows(out, lse, mask)
    assert np.asarray(out[0, :, :, 0]).tolist() == [[1, 1], [0, 0], [1, 1]]
    assert np.isneginf(np.asarray(lse[0, :, 1])).all() and not np.asarray(lse[0, :, 0]).any()


def test_compiled_once_per_static_configuration() -> None:
    q = jnp.ones((7, 2, 8), jnp.float32)
    before = jax_common._compiled.cache_info()
    for cu in ([0, 3, 7], [0, 5, 7], [0, 0, 7]):  # other lengths, same static call
        cu = jnp.asarray(cu, jnp.int32)
        asw.attention(q, q, q, cu_seqlens_q=cu, cu_seqlens_k=cu, backend="jax-blockwise")
    after = jax_common._compiled.cache_info()
    assert after.misses - before.misses == 1 and after.hits - before.hits == 2


# ---- the contract under jax tracing --------------------------------------------------


def test_validate_under_jit_keeps_static_checks_and_skips_traced_values() -> None:
    seen = {}

    @jax.jit
    def f(q, cu):
        seen["call"] = call = validate(q, q, q, cu_seqlens_q=cu, cu_seqlens_k=cu, causal=True)
        seen["reference"] = registry.get("reference").declines(call)
        return q

    f(jnp.ones((6, 2, 8)), jnp.asarray([0, 2, 6], jnp.int32))
    call = seen["call"]
    assert call.traced and call.framework == "jax" and call.device == arrays.CPU
    assert (call.batch, call.seqlen_q, call.seqlen_k, call.seqlens_q) == (2, 6, 6, None)
    assert any("jax tracers" in r for r in seen["reference"])

    with pytest.raises(asw.AttentionInputError, match="cu_seqlens_q: expected dtype int32"):
        jax.jit(lambda q, cu: validate(q, q, q, cu_seqlens_q=cu, cu_seqlens_k=cu))(
            jnp.ones((6, 2, 8)), jnp.asarray([0, 2, 6], jnp.int16)
        )
    with pytest.raises(asw.AttentionInputError, match="cu_seqlens_q: expected a last entry"):
        validate(
            jnp.ones((6, 2, 8)),
            jnp.ones((6, 2, 8)),
            jnp.ones((6, 2, 8)),
            cu_seqlens_q=jnp.asarray([0, 2, 5], jnp.int32),
            cu_seqlens_k=jnp.asarray([0, 2, 6], jnp.int32),
        )  # concrete: values checked


def test_concrete_arrays_are_not_traced() -> None:
    x = jnp.ones((1, 4, 2, 8))
    assert not validate(x, x, x).traced
    assert not arrays.is_traced(x) and not arrays.is_traced(np.ones(3))


@pytest.mark.parametrize("backend", [None, *JAX_BACKENDS])
def test_attention_under_jit_returns_a_jax_array(backend) -> None:
    rng = np.random.default_rng(0)
    q = jnp.asarray(rng.standard_normal((2, 5, 4, 8)), jnp.float32)
    k = jnp.asarray(rng.standard_normal((2, 7, 2, 8)), jnp.float32)
    kp = jnp.asarray(rng.random((2, 7)) > 0.3)
    fn = jax.jit(
        lambda q, k, kp: asw.attention(q, k, k, causal=True, key_padding_mask=kp, backend=backend)
    )
    out = fn(q, k, kp)
    assert isinstance(out, jax.Array) and out.shape == q.shape and out.dtype == q.dtype
    assert out.devices() == q.devices()
    eager = asw.attention(q, k, k, causal=True, key_padding_mask=kp, backend=backend)
    np.testing.assert_allclose(np.asarray(out), np.asarray(eager), rtol=1e-6, atol=1e-6)


def test_plan_under_jit_picks_a_jax_backend() -> None:
    plans = []

    @jax.jit
    def f(q):
        plans.append(asw.explain(q, q, q, causal=True))
        return q

    f(jnp.ones((1, 4, 2, 8)))
    plan = plans[0]
    assert plan.chosen in JAX_BACKENDS
    assert plan.status("reference") == "declined"


@pytest.mark.parametrize("backend", JAX_BACKENDS)
def test_numpy_input_on_a_jax_backend_returns_numpy(backend) -> None:
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 6, 2, 8)).astype(np.float32)
    out, lse = asw.attention(q, q, q, causal=True, return_lse=True, backend=backend)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == q.shape
    assert isinstance(lse, np.ndarray) and lse.shape == (1, 2, 6)


# ---- torch and jax backends on one call ----------------------------------------------

CROSS = conformance.Case(
    "cross-framework",
    dtype="bfloat16",
    batch=2,
    seqlen_q=37,
    seqlen_k=53,
    heads_q=4,
    heads_kv=2,
    head_dim=24,
    causal=True,
    key_padding=True,
)


def _run(backend: str, framework: str, inputs: dict) -> np.ndarray:
    conv = {
        n: arrays.numpy_to(x, framework) if isinstance(x, np.ndarray) else x
        for n, x in inputs.items()
    }
    q, k, v = conv.pop("q"), conv.pop("k"), conv.pop("v")
    out = asw.attention(q, k, v, backend=backend, **conv)
    assert arrays.framework_of(out) == framework
    return arrays.to_numpy(out).astype(np.float64)


@pytest.mark.parametrize("jax_backend", JAX_BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_torch_and_jax_backends_agree_with_the_reference(jax_backend: str, dtype: str) -> None:
    torch_backend = "torch-math" if registry.get("torch-math") is not None else "reference"
    case = dataclasses.replace(CROSS, dtype=dtype)
    verdicts = {name: conformance.check(name, case) for name in (torch_backend, jax_backend)}
    for name, result in verdicts.items():
        assert result.status == conformance.PASSED, (name, result.reasons)
    inputs = conformance.make_inputs(case)
    torch_out = _run(torch_backend, "torch", inputs)
    jax_out = _run(jax_backend, "jax", inputs)
    # Each is within its bound of the float64 reference, so they are within both of each other.
    gap = float(np.abs(torch_out - jax_out).max())
    assert gap <= verdicts[torch_backend].bound + verdicts[jax_backend].bound


def test_accurate_tanh_is_within_one_and_a_half_ulp() -> None:
    """float32 tanh for softcap: within 1.5 ulp of float64 over |x| in [1e-30, 30], where
    XLA's own `jnp.tanh` is off by more than 4 on CPU (so the check can fail); exact at the
    edges, odd, and with finite gradients (both branches are evaluated)."""
    grid = np.linspace(-30, 30, 600_001, dtype=np.float32)
    tiny = np.float32(10) ** np.linspace(-30, 1.5, 50_001, dtype=np.float32)
    x = np.concatenate([grid, tiny, -tiny]).astype(np.float32)
    exact = np.tanh(x.astype(np.float64))
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)

    def worst(fn) -> float:
        return float((np.abs(np.asarray(jax.jit(fn)(x), np.float64) - exact) / ulp).max())

    assert worst(jax_common.accurate_tanh) <= 1.5
    if jax.devices()[0].platform == "cpu":
        assert worst(jnp.tanh) > 3.0
    edges = jnp.asarray([0.0, 9.1, 50.0, np.inf, -np.inf, 1e-30], jnp.float32)
    assert np.asarray(jax_common.accurate_tanh(edges)).tolist() == [
        0.0,
        1.0,
        1.0,
        1.0,
        -1.0,
        np.float32(1e-30),
    ]
    np.testing.assert_array_equal(
        np.asarray(jax_common.accurate_tanh(-x[:1000])),
        -np.asarray(jax_common.accurate_tanh(x[:1000])),
    )
    grads = jax.grad(lambda v: jax_common.accurate_tanh(v).sum())(
        jnp.asarray([0.0, 0.2, 0.5, 5.0, 1e30, -1e30], jnp.float32)
    )
    np.testing.assert_allclose(
        np.asarray(grads)[:4], 1 - np.tanh([0.0, 0.2, 0.5, 5.0]) ** 2, rtol=0, atol=1e-7
    )  # float32 working precision of a value <= 1
    assert np.asarray(grads)[4:].tolist() == [0.0, 0.0]
