"""Conformance: every registered backend against the float64 oracle on the whole case grid,
and deliberately broken backends showing that the rule catches each kind of bug (and lets
the bug pass where it does not change the result, so the rule is not trivially strict)."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from grid_pins import DECLINES_ON_CPU, DECLINES_ON_GPU, declined

from attnswitch.kernels import arrays, conformance, masks, registry
from attnswitch.kernels.backend import BackendBase, Capabilities
from attnswitch.kernels.contract import Call

# Backends unavailable here (CUDA ones on a CPU host; the Pallas kernels off a TPU unless
# interpret mode is on, ATTNSWITCH_PALLAS_INTERPRET=1, since the whole grid interpreted takes
# minutes) are deselected at collection (`backend` marker, tests/conftest.py), with one line
# in the summary. A case a backend declines is not generated when its decline is pinned
# (grid_pins.py); any other decline fails. CUDA-only backends run their pinned grid on the
# GPU in their own tests (this grid runs on CPU arrays).

CASES = conformance.cases()
CASE_BY_LABEL = {c.label: c for c in CASES}


# torch-flex compiles one kernel per shape and mask (about 10 s each on this CPU, cold), so
# by default it runs a subset that still covers every feature it serves; the whole grid runs
# with ATTNSWITCH_FULL_CONFORMANCE=1 (or `attnswitch conformance --backend torch-flex`).
COMPILING_SUBSET = {
    "torch-flex": {
        *(f"{n}/float32" for n in conformance.QUICK),
        "softcap-30/float32",
        "window-64-16/float32",
        "window-causal-48/float32",
        "hdim-59/float32",
        "softcap-30/bfloat16",
        "packed/bfloat16",
        "large-magnitude/float16",
    },
}
FULL = os.environ.get("ATTNSWITCH_FULL_CONFORMANCE", "") not in ("", "0")


def _grid() -> Iterator[Any]:
    for name in registry.names():
        if name in DECLINES_ON_GPU:
            continue
        subset = None if FULL else COMPILING_SUBSET.get(name)
        pinned = DECLINES_ON_CPU.get(name, frozenset())
        for case in CASES:
            if case.label in pinned:
                continue
            marks = [
                pytest.mark.xdist_group(f"conformance-{name}"),  # share compiled kernels
                pytest.mark.backend(name),
            ]
            if subset is not None and case.label not in subset:
                marks.append(
                    pytest.mark.skip(
                        reason=f"{name} compiles per shape: outside the default subset "
                        "(ATTNSWITCH_FULL_CONFORMANCE=1 runs the whole grid)"
                    )
                )
            yield pytest.param(name, case, id=f"{name}-{case.label}", marks=marks)


@pytest.mark.parametrize(("backend", "case"), list(_grid()))
def test_backend_conforms(backend: str, case: conformance.Case) -> None:
    result = conformance.check(backend, case)
    if result.status == conformance.DECLINED and backend not in DECLINES_ON_CPU:
        pytest.skip(
            f"{backend} (a plug-in without pins) declines {case.label}: {'; '.join(result.reasons)}"
        )
    assert result.status == conformance.PASSED, (
        f"{backend} on {case.label}: {result.status}: {'; '.join(result.reasons)}"
    )
    assert result.error <= result.bound


@pytest.mark.parametrize("backend", sorted(DECLINES_ON_CPU))
def test_declines_exactly_the_pinned_cases(backend: str) -> None:
    """What each built-in backend declines on CPU arrays is pinned: serving less (a capability
    regressed) or more (pin it) fails here, whether or not the backend can run on this host."""
    b = registry.get(backend)
    if b.framework != "numpy":
        pytest.importorskip(b.framework)
    assert declined(b, CASES) == DECLINES_ON_CPU[backend]


def test_every_builtin_backend_is_pinned() -> None:
    builtin = {
        b.name
        for b in registry.backends()
        if type(b).__module__.startswith("attnswitch.kernels.backends.")
    }
    assert builtin == set(DECLINES_ON_CPU) | set(DECLINES_ON_GPU)


def test_grid_covers_the_design() -> None:
    """The grid holds the awkward cases docs/architecture.md names, in float32 and bfloat16."""
    labels = set(CASE_BY_LABEL)
    for name in (
        "causal-113x203",
        "causal-203x113",
        "gqa-8-2",
        "mqa-4-1",
        "window-64-16",
        "softcap-30",
        "padding",
        "masked-row",
        "packed",
        "hdim-59",
        "hdim-256",
    ):
        assert {f"{name}/float32", f"{name}/bfloat16"} <= labels
    assert any(c.packed and (0, 0) in c.packed for c in CASES)
    assert any(c.dtype == "float16" and c.magnitude >= 100 for c in CASES)
    assert {c.name for c in conformance.cases(quick=True)} == set(conformance.QUICK)


# ---- the rule can fail -----------------------------------------------------------------

F32_MAX = float(np.finfo(np.float32).max)


def _attend(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    call: Call,
    mask: Any,
    fill: float,
    guard_empty_rows: bool,
) -> np.ndarray:
    """Dense float64 attention whose masked scores become `fill`. Without `guard_empty_rows`
    a row with no key divides 0 by 0 (NaN) when `fill` is -inf."""
    groups = call.heads_q // call.heads_kv
    k, v = np.repeat(k, groups, axis=2), np.repeat(v, groups, axis=2)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) * call.scale
    if call.softcap is not None:
        s = call.softcap * np.tanh(s / call.softcap)
    if mask is not None:
        s = np.where(mask, s, fill)
    m = s.max(axis=-1, keepdims=True)
    if guard_empty_rows:
        m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - m)
        total = p.sum(axis=-1, keepdims=True)
        if guard_empty_rows:
            total = np.where(total == 0, 1.0, total)
        return np.einsum("bhqk,bkhd->bqhd", p / total, v)


def _round_to_tf32(x: np.ndarray) -> np.ndarray:
    """`x` rounded to 10 mantissa bits (TF32's), half away from zero, as float64."""
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


class Broken(BackendBase):
    """A numpy backend with one deliberate bug, named by `bug`:

    ignores-causal: drops `causal` from the mask.
    top-left: aligns causal/window to the top-left corner instead of the bottom-right.
    mean-v: masks with a large finite value (as Pallas TPU kernels do), so a row with no
        allowed key averages V instead of giving zeros.
    nan-rows: no guard for rows with no allowed key (0/0 = NaN).
    bf16-output: computes exactly, then rounds the output to bfloat16 whatever the dtype.
    tf32-inputs: rounds q, k and v to TF32 (10 mantissa bits) first, as a float32 matmul
        silently switched to TF32 does.
    """

    framework = "numpy"
    caps = Capabilities(layouts=("dense",), lse=False, accepts_all_frameworks=True)

    def __init__(self, bug: str = "none"):
        self.bug = bug
        self.name = f"broken-{bug}"

    def _mask(self, call: Call) -> Any:
        kp = None if call.key_padding_mask is None else arrays.to_numpy(call.key_padding_mask)
        am = None if call.attn_mask is None else arrays.to_numpy(call.attn_mask)
        if self.bug == "ignores-causal":
            call = dataclasses.replace(call, causal=False)
        if self.bug == "top-left" and call.bounds is not None:
            left, right = call.bounds
            i, j = np.arange(call.seqlen_q)[:, None], np.arange(call.seqlen_k)[None, :]
            pos = np.ones((call.seqlen_q, call.seqlen_k), dtype=bool)
            if right >= 0:
                pos &= j <= i + right
            if left >= 0:
                pos &= j >= i - left
            no_bounds = dataclasses.replace(call, causal=False, window=None)
            rest = masks.dense_mask(no_bounds, np.arange, kp, am)
            return pos[None, None] if rest is None else pos[None, None] & rest
        return masks.dense_mask(call, np.arange, kp, am)

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        q64, k64, v64 = (arrays.to_numpy(x).astype(np.float64) for x in (q, k, v))
        if self.bug == "tf32-inputs":
            q64, k64, v64 = (_round_to_tf32(x) for x in (q64, k64, v64))
        fill = -0.7 * F32_MAX if self.bug == "mean-v" else -np.inf
        out = _attend(q64, k64, v64, call, self._mask(call), fill, self.bug != "nan-rows")
        if self.bug == "bf16-output":
            out = out.astype(ml_dtypes.bfloat16)
        return arrays.numpy_to(out.astype(arrays.to_numpy(q).dtype), call.framework, like=q)


@pytest.fixture
def broken(request: pytest.FixtureRequest) -> Iterator[str]:
    """Register `Broken(request.param)` for one test; yields its name."""
    backend = Broken(request.param)
    registry.register(backend)
    try:
        yield backend.name
    finally:
        registry.unregister(backend.name)


# (bug, cases it must fail, cases where the bug changes nothing and it must pass)
BUGS = [
    (
        "ignores-causal",
        ["causal-113x203/float32", "causal-self-97/bfloat16", "gqa-8-2/float32"],
        # decode: a single query at the end of its keys, where causal restricts nothing
        [
            "plain-113x203/float32",
            "window-64-16/bfloat16",
            "padding/float32",
            "decode-gqa-1x1000/float32",
        ],
    ),
    (
        "top-left",
        ["causal-113x203/float32", "causal-203x113/bfloat16", "window-64-16/float32"],
        ["causal-self-97/float32", "causal-self-97/bfloat16", "plain-113x203/float32"],
    ),
    (
        "mean-v",
        ["masked-row/float32", "masked-row/bfloat16", "causal-203x113/float32"],
        ["plain-113x203/float32", "padding/bfloat16", "causal-113x203/float32"],
    ),
    (
        "nan-rows",
        ["masked-row/float32", "causal-203x113/bfloat16"],
        ["plain-113x203/float32", "causal-113x203/bfloat16"],
    ),
    (
        "bf16-output",
        ["plain-113x203/float32", "causal-113x203/float32", "hdim-59/float32"],
        ["plain-113x203/bfloat16", "causal-113x203/bfloat16", "masked-row/bfloat16"],
    ),
    (
        "tf32-inputs",  # bfloat16 values are exact in TF32: nothing changes there
        ["plain-113x203/float32", "decode-gqa-1x1000/float32", "long-1023x1024/float32"],
        ["plain-113x203/bfloat16", "decode-gqa-1x1000/bfloat16", "gqa-8-2/bfloat16"],
    ),
]


@pytest.mark.parametrize(
    ("broken", "failing", "passing"),
    [pytest.param(*b, id=b[0]) for b in BUGS],
    indirect=["broken"],
)
def test_rule_catches_bug(broken: str, failing: list[str], passing: list[str]) -> None:
    for label in failing:
        result = conformance.check(broken, CASE_BY_LABEL[label])
        assert result.status == conformance.FAILED, (label, result)
        assert not result.error <= result.bound, (label, result)
        assert any(r.startswith("out: error") for r in result.reasons), (label, result)
    for label in passing:
        result = conformance.check(broken, CASE_BY_LABEL[label])
        assert result.status == conformance.PASSED, (label, result)


def testserial_matmul_sums_in_order_bit_for_bit() -> None:
    """The baseline's matmul is the textbook loop (each product and partial sum rounded to
    float32, k ascending) whatever BLAS numpy has: same bits as scalar float32 arithmetic."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 5, 37)).astype(np.float32)
    b = rng.standard_normal((2, 1, 37, 4)).astype(np.float32)  # broadcast over the head axis
    got = conformance.serial_matmul(a, b)
    assert got.shape == (2, 3, 5, 4) and got.dtype == np.float32
    for idx in np.ndindex(got.shape):
        n, h, i, j = idx
        acc = np.float32(0)
        for kk in range(a.shape[-1]):
            acc = np.float32(acc + np.float32(a[n, h, i, kk] * b[n, 0, kk, j]))
        assert got[idx] == acc, idx
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(got - exact).max() < 1e-4  # and it is a matmul


@pytest.mark.parametrize("broken", ["nan-rows"], indirect=True)
def test_nan_is_an_infinite_error(broken: str) -> None:
    result = conformance.check(broken, CASE_BY_LABEL["masked-row/float32"])
    assert result.status == conformance.FAILED
    assert math.isinf(result.error)


@pytest.mark.parametrize("broken", ["ignores-causal"], indirect=True)
def test_declined_case_is_not_run(broken: str) -> None:
    """A case outside the backend's capabilities is declined with its reasons, not failed."""
    packed = CASE_BY_LABEL["packed/float32"]
    result = conformance.check(broken, packed)
    assert result.status == conformance.DECLINED
    assert "packed layout not supported" in result.reasons
    lse = conformance.check(broken, CASE_BY_LABEL["lse/float32"])
    assert lse.status == conformance.DECLINED
    assert "return_lse not supported" in lse.reasons


def test_wrong_dtype_fails() -> None:
    """An output in another dtype than q's fails even when its values are exact."""

    class Upcasts(Broken):
        def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
            return super().run(q, k, v, call).astype(np.float32)

    backend = Upcasts("upcasts")
    registry.register(backend)
    try:
        exact = conformance.check(backend.name, CASE_BY_LABEL["plain-113x203/float32"])
        upcast = conformance.check(backend.name, CASE_BY_LABEL["plain-113x203/bfloat16"])
    finally:
        registry.unregister(backend.name)
    assert exact.status == conformance.PASSED
    assert upcast.status == conformance.FAILED
    assert "out: expected dtype bfloat16, got float32" in upcast.reasons


# ---- float32 softcap: the kernel's own tanh (docs/architecture.md, "Softcap in float32") --

SOFTCAP_LARGE = conformance.Case(
    "softcap-large", batch=1, seqlen_q=64, seqlen_k=128, head_dim=32, softcap=30.0, magnitude=40.0
)


class TanhOf(Broken):
    """Exact attention except for softcap, computed with `tanh` in float32 (a kernel that
    applies softcap with its framework's tanh, like pallas-splash's)."""

    softcap_tanh = "jax"

    def __init__(self, name: str, tanh: Any):
        super().__init__()
        self.name, self.tanh = name, tanh

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        q64, k64, v64 = (arrays.to_numpy(x).astype(np.float64) for x in (q, k, v))
        s = np.einsum("bqhd,bkhd->bhqk", q64, np.repeat(k64, call.heads_q // call.heads_kv, 2))
        s = (s * call.scale).astype(np.float32)
        c = np.float32(call.softcap)
        s = (c * self.tanh(s / c)).astype(np.float64)
        p = np.exp(s - s.max(-1, keepdims=True))
        out = np.einsum(
            "bhqk,bkhd->bqhd",
            p / p.sum(-1, keepdims=True),
            np.repeat(v64, call.heads_q // call.heads_kv, 2),
        )
        return out.astype(np.float32)


def test_the_kernel_tanh_baseline_covers_xla_tanh_not_a_worse_one() -> None:
    """The deviation for kernels that apply softcap with their framework's tanh
    (pallas-splash's case, tested there) does not excuse any tanh: one off by 64 ulp fails,
    the exact one passes with no note, and bfloat16 is held to the strict rule."""
    pytest.importorskip("jax")

    def coarse(x: np.ndarray) -> np.ndarray:  # tanh rounded to 64 ulp (17 mantissa bits)
        t = np.tanh(x.astype(np.float64)).astype(np.float32)
        return (t.view(np.uint32) & np.uint32(0xFFFFFFC0)).view(np.float32)

    results = {}
    for name, tanh in (("numpy", np.tanh), ("coarse", coarse)):
        backend = TanhOf(f"tanh-{name}", tanh)
        registry.register(backend)
        try:
            results[name] = conformance.check(backend.name, SOFTCAP_LARGE)
        finally:
            registry.unregister(backend.name)
    assert results["numpy"].status == conformance.PASSED and not results["numpy"].reasons
    assert results["coarse"].status == conformance.FAILED, results["coarse"]
    inputs = conformance.make_inputs(dataclasses.replace(SOFTCAP_LARGE, dtype="bfloat16"))
    bf16 = conformance.validate(inputs.pop("q"), inputs.pop("k"), inputs.pop("v"), **inputs)
    assert conformance.kernel_tanh_baseline(TanhOf("x", np.tanh), bf16, "cpu") is None
