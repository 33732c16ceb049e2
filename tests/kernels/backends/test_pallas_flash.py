"""pallas-flash, run in Pallas (TPU) interpret mode on CPU: conformance on a subset of the
grid that covers every feature it serves, the features it declines, and its translations
(causal alignment by shifting, repeated key/value heads, head-dim padding, mask as bias)."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import attnswitch as asw  # noqa: E402
from attnswitch.kernels import conformance, pallas_common  # noqa: E402
from attnswitch.kernels.backends.pallas_flash import BACKEND, KERNEL_MODULE  # noqa: E402
from attnswitch.kernels.contract import validate  # noqa: E402

NAME = "pallas-flash"
# Every feature it serves in float32 and bfloat16 (head dim 64 is the grid's default); the
# other head dims in float32. TPU interpret mode compiles each shape anew: this is what
# fits the time budget.
FEATURES = (
    "causal-113x203",
    "causal-203x113",
    "gqa-8-2",
    "padding",
    "masked-row",
    "lse",
    "packed",
    "packed-lse",
    "decode-gqa-1x1000",
)
HEAD_DIMS = ("hdim-32", "hdim-80", "hdim-128", "hdim-256", "hdim-59")
DECLINED = {
    "window-64-16": "the kernel has causal only",
    "window-causal-48": "the kernel has causal only",
    "packed-window": "the kernel has causal only",
    "decode-window-padding": "the kernel has causal only",
    "softcap-30": "softcap not supported",
    "plain-fp16": "dtype float16 not among bfloat16, float32",
}
CASES = [
    c
    for c in conformance.cases()
    if c.name in FEATURES or (c.name in HEAD_DIMS and c.dtype == "float32")
]
EXTRA = [
    # Sq > Sk: keys shifted right by 290 masked columns, whole query blocks without a key
    conformance.Case(
        "no-key-blocks-300x10",
        batch=1,
        seqlen_q=300,
        seqlen_k=10,
        heads_q=2,
        heads_kv=2,
        causal=True,
        return_lse=True,
    ),
    # Sq < Sk: queries shifted down by 299 rows; MQA heads repeated 4x
    conformance.Case("decode-1x300", seqlen_q=1, seqlen_k=300, heads_q=4, heads_kv=1, causal=True),
    # head dim above 128 and not a multiple of it: zero-padded to 256
    conformance.Case(
        "hdim-192", batch=1, seqlen_q=67, seqlen_k=131, heads_q=2, heads_kv=2, head_dim=192
    ),
    # the mask bias is added before sm_scale: a scale above 1 must not break masking
    conformance.Case(
        "masked-row-scale-4",
        batch=1,
        seqlen_q=40,
        seqlen_k=70,
        masked_row=True,
        scale=4.0,
        magnitude=0.3,
        return_lse=True,
    ),
]


@pytest.fixture(autouse=True)
def interpret_mode():
    with pallas_common.interpret(True):
        yield


@pytest.mark.parametrize("case", CASES + EXTRA, ids=lambda c: c.label)
def test_conforms_in_interpret_mode(case):
    result = conformance.check(NAME, case)
    assert result.status == conformance.PASSED, result.reasons


@pytest.mark.parametrize(
    "case", [c for c in conformance.cases() if c.name in DECLINED], ids=lambda c: c.label
)
def test_declines_what_the_kernel_lacks_with_a_reason(case):
    result = conformance.check(NAME, case)
    assert result.status == conformance.DECLINED
    assert any(DECLINED[case.name] in r for r in result.reasons), result.reasons


def test_subset_leaves_out_only_cases_other_cases_cover():
    """If the grid gains a case, this names it: decide whether the subset needs it."""
    served = {c.name for c in conformance.GRID} - set(DECLINED)
    assert served - {c.name for c in CASES} == {
        "plain-113x203",
        "self-128",
        "causal-self-97",  # in every other case
        "mqa-4-1",  # gqa-8-2, decode-1x300: repeated key/value heads
        "scale-0.3",  # every case: the default scale 1/sqrt(D) is not the kernel's 1.0
        "packed-unequal",  # packed-lse: the same packing, with causal and lse
    }
    assert {c.dtype for c in CASES} == {"float32", "bfloat16"}


def _call(sq, sk, **kw):
    q = jnp.zeros((2, sq, 8, 64), jnp.bfloat16)
    k = jnp.zeros((2, sk, 2, 64), jnp.bfloat16)
    return validate(q, k, k, **kw)


def test_causal_is_served_both_ways_but_windows_are_not():
    assert BACKEND.declines(_call(1, 300, causal=True)) == []
    assert BACKEND.declines(_call(300, 1, causal=True)) == []
    assert BACKEND.declines(_call(8, 8, window=(-1, 0))) == []  # causal spelled as a window
    assert BACKEND.declines(_call(8, 8, causal=True, window=(-1, -1))) == []
    assert len(BACKEND.declines(_call(8, 8, causal=True, window=(4, 0)))) == 1


def test_detail_names_the_translations():
    detail = BACKEND.detail(_call(2, 300, causal=True))
    assert "causal aligned by shifting queries 298 rows" in detail
    assert "key/value heads repeated 4x" in detail and "384x384" in detail
    assert "shifting keys 290 columns" in BACKEND.detail(_call(300, 10, causal=True))
    assert "shifting" not in BACKEND.detail(_call(300, 10))  # no causal: nothing to align
    assert "shifting" not in BACKEND.detail(_call(1, 300, causal=True))  # sees every key


def test_lse_is_declined_when_the_kernel_module_has_no_residuals_entry(monkeypatch):
    """JAX's Pallas kernels are moving to tokamax; this JAX has the private entry, a later one
    may not: the decline must then say so instead of failing at run time."""
    import importlib

    fa = importlib.import_module(KERNEL_MODULE)
    assert BACKEND.declines(_call(8, 8, return_lse=True)) == []
    monkeypatch.delattr(fa, "_flash_attention")
    reasons = BACKEND.declines(_call(8, 8, return_lse=True))
    assert reasons and "_flash_attention" in reasons[0]
    assert BACKEND.declines(_call(8, 8)) == []


def test_traced_attn_mask_is_served_as_a_bias():
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.standard_normal((1, 24, 2, 32)), jnp.float32) for _ in range(3))
    am = jnp.asarray(rng.random((1, 2, 24, 24)) < 0.5).at[0, 1, 5].set(False)
    eager = asw.attention(q, k, v, attn_mask=am, backend=NAME)
    jitted = jax.jit(lambda q, k, v, am: asw.attention(q, k, v, attn_mask=am, backend=NAME))(
        q, k, v, am
    )
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(jitted))
    assert not np.asarray(eager)[0, 5, 1].any() and np.asarray(eager)[0, 5, 0].any()
    for h in range(2):  # a per-head mask gives each head what that head's mask alone gives
        alone = asw.attention(q, k, v, attn_mask=am[:, h : h + 1], backend=NAME)
        np.testing.assert_array_equal(np.asarray(eager)[:, :, h], np.asarray(alone)[:, :, h])


def test_no_keys_give_zeros_and_minus_inf():
    q = jnp.ones((2, 5, 4, 32))
    k = jnp.ones((2, 0, 2, 32))
    out, lse = asw.attention(q, k, k, causal=True, return_lse=True, backend=NAME)
    assert not np.asarray(out).any() and np.all(np.asarray(lse) == -np.inf)
