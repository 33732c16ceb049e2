"""pallas_common: the interpret switch, the frame geometry, the masked-row finder, and
gradients through both Pallas backends (`interpreted` in interpret mode), and calls under
jax.jit and jax.vmap (the repros of issue 16)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import attnswitch as asw  # noqa: E402
from attnswitch.kernels import (  # noqa: E402
    conformance,
    masks,
    pallas_common,  # noqa: E402
    registry,
    runtime,
)
from attnswitch.kernels.contract import validate  # noqa: E402

PALLAS = ("pallas-flash", "pallas-splash")
no_tpu = pytest.mark.skipif(pallas_common.tpu_present(), reason="checks the behaviour off a TPU")


@no_tpu
@pytest.mark.parametrize("name", PALLAS)
def test_interpret_switch_decides_availability_off_a_tpu(name, monkeypatch):
    backend = registry.get(name)
    monkeypatch.delenv(pallas_common.INTERPRET_ENV, raising=False)
    with pallas_common.interpret(False):
        assert backend.unavailable() == pallas_common.NO_TPU
        assert backend.unavailable().startswith(
            "needs a TPU; runs here only in Pallas interpret mode for tests"
        )
    with pallas_common.interpret(True):
        assert backend.unavailable() is None
    monkeypatch.setenv(pallas_common.INTERPRET_ENV, "1")
    runtime.current().reset()  # the environment is read when a runtime starts
    assert pallas_common.interpret_enabled()
    assert backend.unavailable() is None
    monkeypatch.setenv(pallas_common.INTERPRET_ENV, "0")
    assert backend.unavailable() is None  # read once per runtime, not per call
    runtime.current().reset()
    assert backend.unavailable() == pallas_common.NO_TPU


@no_tpu
def test_plans_say_why_not_and_force_still_runs_the_kernel_interpreted():
    q = np.zeros((1, 8, 2, 16), np.float32)
    with pallas_common.interpret(False):
        plan = asw.explain(q, q, q)
        for name in PALLAS:
            assert plan.status(name) == "unavailable"
            assert plan.reasons(name) == [pallas_common.NO_TPU]
        case = conformance.Case(
            "forced", batch=1, seqlen_q=20, seqlen_k=30, heads_q=2, heads_kv=2, causal=True
        )
        assert conformance.check("pallas-splash", case).status == conformance.UNAVAILABLE
        assert conformance.check("pallas-splash", case, force=True).status == conformance.PASSED


@no_tpu
def test_switch_keeps_the_plans_of_each_mode_apart():
    """Plans are cached per settings: a plan made with interpret mode off is not reused
    inside `interpret(True)`, nor the other way round."""
    q = np.zeros((1, 8, 2, 16), np.float32)
    for enabled in (False, True, False):
        with pallas_common.interpret(enabled):
            status = asw.explain(q, q, q).status("pallas-splash")
        assert (status == "unavailable") != enabled, (enabled, status)


@pytest.mark.parametrize(
    "module",
    [
        "jax.experimental.pallas.ops.tpu.flash_attention",
        "jax.experimental.pallas.ops.tpu.splash_attention",
    ],
)
def test_kernel_modules_exist_in_this_jax(module):
    assert pallas_common.kernel_import_reason(module) is None


def test_missing_kernel_module_is_a_reason_naming_the_jax_version():
    reason = pallas_common.kernel_import_reason("jax.experimental.pallas.ops.tpu.no_such_kernel")
    assert "not importable" in reason and jax.__version__ in reason and "tokamax" in reason


def call_for(sq, sk, *, b=2, packed=None, **kw):
    if packed is not None:
        cu = lambda lens: np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)  # noqa: E731
        q = jnp.zeros((sum(a for a, _ in packed), 4, 16))
        k = jnp.zeros((sum(c for _, c in packed), 2, 16))
        return validate(
            q,
            k,
            k,
            cu_seqlens_q=jnp.asarray(cu([a for a, _ in packed])),
            cu_seqlens_k=jnp.asarray(cu([c for _, c in packed])),
            **kw,
        )
    k = jnp.zeros((b, sk, 2, 16))
    return validate(jnp.zeros((b, sq, 4, 16)), k, k, **kw)


@pytest.mark.parametrize("sq, sk", [(2, 300), (113, 203), (203, 113), (128, 128), (300, 10)])
@pytest.mark.parametrize("top_left", [False, True])
def test_frame_blocks_and_diagonal(sq, sk, top_left):
    frame = pallas_common.plan_frame(call_for(sq, sk, causal=True), top_left=top_left)
    for length, block in ((frame.len_q, frame.block_q), (frame.len_k, frame.block_k)):
        assert length % 128 == 0 and block % 128 == 0 and length % block == 0
    assert frame.len_q >= frame.front_q + sq and frame.len_k >= frame.front_k + sk
    # Real query i sits at row front_q + i and is aligned with real key i + sk - sq.
    assert frame.offset == (0 if top_left else sk - sq)
    assert frame.segmented == (frame.front_k > 0 or frame.len_k != sk)


@pytest.mark.parametrize("top_left", [False, True])
def test_a_decode_step_needs_no_causal_frame(top_left):
    """Causal with one query restricts nothing (`Call.bounds` is None): no rows shifted."""
    frame = pallas_common.plan_frame(call_for(1, 300, causal=True), top_left=top_left)
    assert (frame.front_q, frame.front_k, frame.len_q, frame.len_k) == (0, 0, 128, 384)


def test_packed_layouts():
    same = pallas_common.plan_frame(call_for(0, 0, packed=((5, 5), (0, 0), (9, 9))), top_left=True)
    assert (same.layout, same.batch, same.seqlen_q, same.offset) == ("stream", 1, 14, 0)
    assert same.segmented
    unequal = pallas_common.plan_frame(call_for(0, 0, packed=((5, 9), (7, 2))), top_left=False)
    assert (unequal.layout, unequal.batch, unequal.seqlen_q, unequal.seqlen_k) == (
        "padded",
        2,
        7,
        9,
    )


GEOMETRIES = [
    dict(sq=7, sk=5, causal=True),
    dict(sq=5, sk=9, causal=True),
    dict(sq=6, sk=6, window=(1, 0)),
    dict(sq=4, sk=12, window=(0, 0)),
    dict(sq=9, sk=4, window=(2, 1), causal=True),
    dict(sq=5, sk=8),
]


@pytest.mark.parametrize(
    "geometry, padded_keys", list(itertools.product(GEOMETRIES, [False, True]))
)
def test_row_has_key_matches_the_dense_mask(geometry, padded_keys):
    rng = np.random.default_rng(0)
    geometry = dict(geometry)
    sq, sk = geometry.pop("sq"), geometry.pop("sk")
    kp = rng.random((3, sk)) < 0.4 if padded_keys else None
    kp_jax = None if kp is None else jnp.asarray(kp)
    call = call_for(sq, sk, b=3, key_padding_mask=kp_jax, **geometry)
    frame = pallas_common.plan_frame(call, top_left=True)
    got = pallas_common.row_has_key(frame, kp_jax, None)
    dense = masks.dense_mask(call, np.arange, kp)
    want = (
        np.ones((1, 1, sq), bool)
        if dense is None
        else np.broadcast_to(dense, (3, 1, sq, sk)).any(-1)
    )
    if got is None:
        assert want.all()
    else:
        np.testing.assert_array_equal(np.broadcast_to(np.asarray(got), want.shape), want)


def test_row_has_key_with_a_per_head_attn_mask():
    rng = np.random.default_rng(1)
    am = rng.random((2, 4, 6, 9)) < 0.15
    am[0, 1, 3] = False
    call = call_for(6, 9, causal=True, attn_mask=jnp.asarray(am))
    frame = pallas_common.plan_frame(call, top_left=False)
    got = np.asarray(pallas_common.row_has_key(frame, None, jnp.asarray(am)))
    want = masks.dense_mask(call, np.arange, None, am).any(-1)
    np.testing.assert_array_equal(got, want)
    assert not got[0, 1, 3]


# -- gradients: the kernels' own VJPs, in interpret mode (`interpreted`) ----------------------

HDIM_192 = conformance.Case(
    "hdim-192", batch=1, seqlen_q=67, seqlen_k=131, heads_q=2, heads_kv=2, head_dim=192
)  # pallas-flash zero-pads it to 256
GRAD_CASES = {  # float32 cases of each backend's own features
    "pallas-flash": (
        "causal-113x203",
        "causal-203x113",
        "gqa-8-2",
        "padding",
        "packed",
        "masked-row",
        HDIM_192,
    ),
    "pallas-splash": (
        "causal-113x203",
        "window-64-16",
        "softcap-30",
        "mqa-4-1",
        "padding",
        "packed-window",
        "masked-row",
    ),
}
GRID_BY_NAME = {c.name: c for c in conformance.GRID}


def _input_grads(backend: str, case: conformance.Case) -> tuple[np.ndarray, ...]:
    """(dq, dk, dv) in float64 of `sum(out * w)` through `backend` on `case`'s inputs as jax
    arrays; `w` is fixed random weights, so that no symmetry of the loss hides a wrong
    gradient. Masks and cu_seqlens stay concrete."""
    inputs = conformance.make_inputs(case)
    args = {
        n: conformance.to_device(x, "jax", "cpu") if isinstance(x, np.ndarray) else x
        for n, x in inputs.items()
    }
    q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
    w = jnp.asarray(
        np.random.default_rng(1).standard_normal((*q.shape[:-1], v.shape[-1])), jnp.float32
    )

    def loss(q, k, v):
        return (asw.attention(q, k, v, backend=backend, **args).astype(jnp.float32) * w).sum()

    return tuple(np.asarray(g, np.float64) for g in jax.grad(loss, argnums=(0, 1, 2))(q, k, v))


@pytest.mark.parametrize(
    "name, case",
    [
        pytest.param(name, GRID_BY_NAME.get(c, c), id=f"{name}-{getattr(c, 'name', c)}")
        for name, cs in GRAD_CASES.items()
        for c in cs
    ],
)
def test_gradients_match_jax_blockwise(name, case):
    """Max error relative to the largest gradient (elementwise ratios of float32 sums near
    zero say nothing): measured 2e-7 to 2e-6; a 1% scale error fails it."""
    with pallas_common.interpret(True):
        got = _input_grads(name, case)
    want = _input_grads("jax-blockwise", case)
    for d, g, w in zip("qkv", got, want):
        assert np.abs(g - w).max() <= 1e-5 * np.abs(w).max(), f"d{d}"


@pytest.mark.parametrize("name", PALLAS)
def test_lse_under_differentiation_is_a_clear_error(name):
    case = conformance.Case("lse-grad", batch=1, seqlen_q=40, seqlen_k=70, return_lse=True)
    with (
        pallas_common.interpret(True),
        pytest.raises(
            asw.BackendFailedError,
            match="return_lse: expected a call that is not differentiated, got one under jax "
            "differentiation",
        ),
    ):
        _input_grads(name, case)


# -- under jax.jit and jax.vmap ------------------------------------------------------------


def _judged(out, q, k, v, **kw):
    """Assert `out` passes the conformance rule for these (jax) inputs; returns the float64
    reference lse."""
    inputs = {
        n: np.asarray(x) if isinstance(x, jax.Array) else x
        for n, x in dict(q=q, k=k, v=v, **kw).items()
    }
    error, bound = conformance.judge(out, inputs)
    assert error <= bound, (error, bound)
    args = dict(inputs)
    _, lse = asw.attention(
        args.pop("q"), args.pop("k"), args.pop("v"), backend="reference", return_lse=True, **args
    )
    return lse


def _assert_lse(got, want):
    """lse in float32 against the float64 reference: a few ulp of its magnitude."""
    got = np.asarray(got, np.float64)
    assert np.array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-6)


@pytest.mark.parametrize("name", PALLAS)
def test_packed_call_with_traced_cu_seqlens_is_served_as_one_stream(name):
    """Issue 16, repro 1: under jax.jit, with traced cu_seqlens, planning read per-sequence
    lengths that only the device has (TypeError inside the backend's detail). Without
    causal or a window the segments alone decide: the call is served, a sequence without
    keys included (zeros, lse -inf)."""
    q = jax.random.normal(jax.random.PRNGKey(0), (96, 4, 32))
    cu_q = jnp.array([0, 64, 96], jnp.int32)
    with pallas_common.interpret(True):
        for cu_k in (jnp.array([0, 32, 96], jnp.int32), jnp.array([0, 0, 96], jnp.int32)):

            def f(q, cq, ck):
                return asw.attention(
                    q, q, q, cu_seqlens_q=cq, cu_seqlens_k=ck, backend=name, return_lse=True
                )

            out, lse = jax.jit(f)(q, cu_q, cu_k)
            _assert_lse(lse, _judged(out, q, q, q, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k))
        # the exact repro: no backend=, so every backend is planned (and detail() asked)
        jitted = jax.jit(lambda q, cq, ck: asw.attention(q, q, q, cu_seqlens_q=cq, cu_seqlens_k=ck))
        _judged(jitted(q, cu_q, cu_k), q, q, q, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)

        def plan(q, cq, ck):
            plans.append(asw.explain(q, q, q, cu_seqlens_q=cq, cu_seqlens_k=ck, causal=True))
            plans.append(asw.explain(q, q, q, cu_seqlens_q=cq, cu_seqlens_k=ck))
            return q

        plans: list = []
        jax.make_jaxpr(plan)(q, cu_q, cu_k)
    causal, plain = plans
    assert "the kernel's one diagonal needs each sequence's lengths on the host" in "; ".join(
        causal.reasons(name)
    )
    assert name in plain.candidates
    assert (
        "frame stream of traced cu_seqlens (segment ids on the device) 128x128"
        in (plain.details[name])
    )


@pytest.mark.parametrize("name", PALLAS)
def test_vmap_is_served(name):
    """Issue 16, repro 2: pallas-flash under jax.vmap accepted the call, then JAX's TPU
    interpreter raised (safe_zip: a batched pallas_call's grid has a dimension more than its
    dimension semantics). The vmapped axis is folded into the batch axis, forward, lse and
    backward; vmap over jit too."""
    x = jax.random.normal(jax.random.PRNGKey(1), (2, 1, 128, 4, 32))
    with pallas_common.interpret(True):
        out = jax.vmap(lambda a: asw.attention(a, a, a, backend=name))(x)  # the exact repro
        f = lambda a: asw.attention(a, a, a, causal=True, return_lse=True, backend=name)  # noqa: E731
        got, got_lse = jax.vmap(jax.jit(f))(x)

        def loss(a):
            return (asw.attention(a, a, a, causal=True, backend=name) * a).sum()

        grads = jax.vmap(jax.grad(loss))(x)
        for i in range(2):
            a = x[i]
            _judged(out[i], a, a, a)
            _assert_lse(got_lse[i], _judged(got[i], a, a, a, causal=True))
            want = np.asarray(jax.grad(loss)(a))  # one example, no vmap
            assert np.abs(np.asarray(grads[i]) - want).max() <= 1e-5 * np.abs(want).max()
