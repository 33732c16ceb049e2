"""Conformance: every backend measured against the float64 oracle by FlashAttention's rule.

Rule: in dtype X, a backend passes a case when
    max|out - ref| <= rtol * max|naive_X - ref| + floor
where `ref` is the float64 `reference` on the same (already rounded) inputs, `naive_X` is
plain matmul-softmax-matmul with every intermediate rounded to X (what a framework computes
in X with float32 accumulation; the matmuls sum their products in order, see
`serial_matmul`), rtol is 2 (3 with softcap) and `floor` is twice the rounding
error X makes around the output's magnitude (FlashAttention 3's `fwd_atol`). The lse, when
the case asks for it, is held to the same rule. Never a bare fixed tolerance.

`check(backend, case)` runs one case; `verdicts.run(...)` runs a grid and records a verdict
per backend fingerprint. `kernels/transformed.py` checks JAX backends under jit and vmap. Every case has a label ("causal-113x203/bfloat16"); the
catalogue (`case_by_label`) is the grid in every dtype plus the special cases, so a verdict
names its cases and is aged case by case when the grid changes (`still_current`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnswitch.kernels import arrays, masks, registry
from attnswitch.kernels.backends.reference import attention_f64
from attnswitch.kernels.contract import Call, validate
from attnswitch.kernels.execute import run_backend


def _np_dtype(name: str) -> np.dtype:
    """The numpy dtype of a case dtype name (bfloat16 is ml_dtypes', imported on first use:
    it takes a second or more to import, and `import attnswitch` must not pay for it)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype({"float16": np.float16, "float32": np.float32, "float64": np.float64}[name])


PASSED, FAILED, DECLINED, UNAVAILABLE, ERROR = "pass", "fail", "declined", "unavailable", "error"
RAN = (PASSED, FAILED, ERROR)  # the statuses of a case that ran (a verdict counts them)
# The kinds of case set: the whole grid, the quick grid, a first-use self-check, any other.
CASE_SET_KINDS = FULL_GRID, QUICK_GRID, FIRST_USE, PARTIAL = "full", "quick", "first-use", "partial"
Tanh = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Case:
    """One conformance case. `packed` lists (len_q, len_k) per sequence for the packed layout;
    `masked_row` makes query 0 of example 0 attend nothing; `magnitude` scales q, k, v."""

    name: str
    dtype: str = "float32"
    batch: int = 2
    seqlen_q: int = 113
    seqlen_k: int = 203
    heads_q: int = 4
    heads_kv: int = 4
    head_dim: int = 64
    causal: bool = False
    window: tuple[int, int] | None = None
    softcap: float | None = None
    key_padding: bool = False
    masked_row: bool = False
    packed: tuple[tuple[int, int], ...] | None = None
    magnitude: float = 1.0
    return_lse: bool = False
    scale: float | None = None

    def with_dtype(self, dtype: str) -> Case:
        return dataclasses.replace(self, dtype=dtype)

    @property
    def label(self) -> str:
        return f"{self.name}/{self.dtype}"


@dataclass(frozen=True)
class CaseResult:
    case: Case
    backend: str
    status: str
    error: float = math.nan
    bound: float = math.nan
    reasons: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status in (PASSED, DECLINED, UNAVAILABLE)


# The grid (docs/architecture.md, "Conformance"): odd and unequal lengths, head dims 32..256
# and an odd one, GQA, causal with Sq != Sk both ways, windows, softcap, padding, packed with
# a zero-length sequence, a fully masked row, large-magnitude float16. Each runs in every dtype of DTYPES
# except where the case names its own.
GRID: tuple[Case, ...] = (
    Case("plain-113x203"),
    Case("self-128", seqlen_q=128, seqlen_k=128),
    Case("causal-113x203", causal=True),
    Case("causal-203x113", seqlen_q=203, seqlen_k=113, causal=True),
    Case("causal-self-97", seqlen_q=97, seqlen_k=97, causal=True),
    Case("window-64-16", window=(64, 16)),
    Case("window-causal-48", window=(48, -1), causal=True),
    Case("softcap-30", softcap=30.0, magnitude=3.0),
    Case("gqa-8-2", heads_q=8, heads_kv=2, causal=True),
    Case("decode-gqa-1x1000", seqlen_q=1, seqlen_k=1000, heads_q=8, heads_kv=2, causal=True),
    Case(
        "decode-window-padding",
        seqlen_q=1,
        seqlen_k=301,
        heads_q=4,
        heads_kv=4,
        window=(128, 0),
        key_padding=True,
    ),
    Case("mqa-4-1", heads_q=4, heads_kv=1),
    Case("padding", key_padding=True),
    Case("masked-row", masked_row=True),
    Case("lse", return_lse=True, causal=True),
    Case("scale-0.3", scale=0.3),
    Case("packed", packed=((37, 37), (0, 0), (91, 91), (1, 1)), causal=True),
    Case("packed-unequal", packed=((13, 40), (50, 20), (0, 7), (30, 0))),
    Case("packed-lse", packed=((13, 40), (50, 20), (0, 7), (30, 0)), causal=True, return_lse=True),
    Case("packed-window", packed=((60, 60), (45, 80)), window=(16, 4)),
    *(Case(f"hdim-{d}", head_dim=d, seqlen_q=67, seqlen_k=131) for d in (32, 80, 128, 256, 59)),
)
DTYPES = ("float32", "bfloat16")
SPECIAL: tuple[Case, ...] = (
    Case("large-magnitude", dtype="float16", magnitude=100.0, batch=1, seqlen_q=65, seqlen_k=97),
    Case("plain-fp16", dtype="float16"),
    Case(
        "long-1023x1024", batch=1, seqlen_q=1023, seqlen_k=1024, heads_q=2, heads_kv=2, causal=True
    ),
)
QUICK = (
    "plain-113x203",
    "causal-203x113",
    "gqa-8-2",
    "decode-gqa-1x1000",
    "padding",
    "masked-row",
    "packed",
    "lse",
)


# Bump when the rule or its baseline changes: it is part of every verdict's subject
# (`verdicts.subject`), so a change requalifies every backend.
# 2: float32 products summed in order (`serial_matmul`); decode cases in the grid.
# 3: verdicts name the case set they ran (`case_set_id`); grid changes age verdicts per case.
RULE_REVISION = 3
ALL_DTYPES = ("float16", "bfloat16", "float32", "float64")


def cases(*, quick: bool = False, dtypes: Sequence[str] = DTYPES) -> list[Case]:
    """The conformance grid: GRID in each of `dtypes`, then the cases with their own dtype."""
    grid = [c for c in GRID if not quick or c.name in QUICK]
    out = [c.with_dtype(d) for d in dtypes for c in grid]
    if not quick:
        out.extend(SPECIAL)
    return out


def _seed(case: Case) -> int:
    return int.from_bytes(hashlib.sha256(case.label.encode()).digest()[:4], "little")


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """Round float values to `dtype` and back to float64 (emulates storing in `dtype`)."""
    return x.astype(_np_dtype(dtype)).astype(np.float64)


def make_inputs(case: Case) -> dict[str, Any]:
    """Deterministic numpy inputs for a case: q, k, v in the case dtype, and masks/cu_seqlens."""
    rng = np.random.default_rng(_seed(case))
    dt = _np_dtype(case.dtype)
    if case.packed is not None:
        tq = sum(n for n, _ in case.packed)
        tk = sum(n for _, n in case.packed)
        shape_q, shape_k = (tq, case.heads_q, case.head_dim), (tk, case.heads_kv, case.head_dim)
    else:
        shape_q = (case.batch, case.seqlen_q, case.heads_q, case.head_dim)
        shape_k = (case.batch, case.seqlen_k, case.heads_kv, case.head_dim)
    q, k, v = (
        (rng.standard_normal(s) * case.magnitude).astype(dt) for s in (shape_q, shape_k, shape_k)
    )
    kwargs: dict[str, Any] = dict(
        causal=case.causal,
        window=case.window,
        softcap=case.softcap,
        return_lse=case.return_lse,
        scale=case.scale,
    )
    if case.packed is not None:
        cu = lambda lens: np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)  # noqa: E731
        kwargs["cu_seqlens_q"] = cu([n for n, _ in case.packed])
        kwargs["cu_seqlens_k"] = cu([n for _, n in case.packed])
    else:
        if case.key_padding:
            lengths = rng.integers(1, case.seqlen_k + 1, size=case.batch)
            lengths[0] = case.seqlen_k
            kwargs["key_padding_mask"] = np.arange(case.seqlen_k)[None, :] < lengths[:, None]
        if case.masked_row:
            am = np.ones((case.batch, 1, case.seqlen_q, case.seqlen_k), dtype=bool)
            am[0, 0, 0, :] = False
            kwargs["attn_mask"] = am
    return {"q": q, "k": k, "v": v, **kwargs}


def _naive_low_precision(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    call: Call,
    mask: Any,
    dtype: str,
    tanh: Tanh = np.tanh,
):
    """Plain attention computed the way a framework computes it in `dtype`: float32
    arithmetic and accumulation, every intermediate stored in `dtype` (FlashAttention's
    `attention_ref(upcast=False)`: q is scaled first). `tanh` (float32 -> float32) computes
    softcap. Returns float64 (out, lse)."""
    f32 = np.float32
    r = lambda x: round_to(x, dtype).astype(f32)  # noqa: E731
    groups = call.heads_q // call.heads_kv
    k = np.repeat(k, groups, axis=2).astype(f32)
    v = np.repeat(v, groups, axis=2).astype(f32)
    qs = r(q.astype(f32) * f32(call.scale))
    s = r(serial_matmul(qs.transpose(0, 2, 1, 3), k.transpose(0, 2, 3, 1)))
    if call.softcap is not None:
        c = f32(call.softcap)
        s = r(c * tanh(s / c))
    if mask is not None:
        s = np.where(mask, s, f32(-np.inf))
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, f32(0))
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True, dtype=f32)
    with np.errstate(divide="ignore"):
        lse = (np.log(total) + m)[..., 0]
    p = r(e / np.where(total == 0, f32(1), total))
    out = r(serial_matmul(p, v.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3))
    return out.astype(np.float64), lse.astype(np.float64)


def serial_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`a [..., M, K] @ b [..., K, N]` in float32, each output summed over k = 0..K-1 in order
    (every product and every partial sum rounded to float32): the textbook loop, which is
    what a GEMM's per-element FMA chain over K does (cuBLAS, under FlashAttention's own
    reference) and what torch's single-row CPU matmul does.

    Hand-written because BLAS is not one order: OpenBLAS (numpy's) sums a single row with
    many partial sums and blocks K for several rows, 2-4x more accurately than a plain loop
    at K = 2048, and MKL or Accelerate sum differently again. That made the baseline depend
    on how numpy was built, and tighter than the plain computation itself: torch-math missed
    it on 37 of 88 single-query float32 calls. One order, bit-for-bit the same everywhere."""
    at = np.ascontiguousarray(np.moveaxis(a, -1, 0), dtype=np.float32)  # [K, ..., M]
    bt = np.ascontiguousarray(np.moveaxis(b, -2, 0), dtype=np.float32)  # [K, ..., N]
    shape = (*np.broadcast_shapes(at.shape[1:-1], bt.shape[1:-1]), a.shape[-2], b.shape[-1])
    out = np.zeros(shape, np.float32)
    term = np.empty(shape, np.float32)
    for ak, bk in zip(at, bt):
        np.multiply(ak[..., :, None], bk[..., None, :], out=term)
        out += term
    return out


def kernel_tanh_baseline(b: Any, call: Call, device: str) -> tuple[str, str] | None:
    """(framework, device) whose float32 tanh the naive baseline uses for backend `b` on
    `call`, or None for numpy's (the rule's own).

    The stated deviation of the rule (docs/architecture.md, "Softcap in float32"): a kernel
    that computes softcap with its framework's tanh, which attnswitch cannot replace
    (`softcap_tanh` on the backend: pallas-splash's `attn_logits_soft_cap`), is held in
    float32 to a baseline that computes tanh the same way on the same device, as
    FlashAttention's baseline runs in the kernel's framework on the kernel's device. XLA:CPU's
    float32 tanh is off by up to 4.6 ulp, numpy's by 1.4."""
    framework = getattr(b, "softcap_tanh", None)
    if framework is None or call.softcap is None or call.dtype != "float32":
        return None
    return framework, device


def tanh_of(kernel_tanh: tuple[str, str] | None) -> Tanh:
    """The baseline's float32 tanh: numpy's, or as `kernel_tanh` = (framework, device)
    computes it (numpy in and out)."""
    if kernel_tanh is None:
        return np.tanh
    framework, device = kernel_tanh
    if framework != "jax":
        raise ValueError(f"softcap_tanh: expected 'jax', got {framework!r}")
    import jax
    import jax.numpy as jnp

    tanh = jax.jit(jnp.tanh)
    return lambda x: np.asarray(tanh(to_device(np.asarray(x, np.float32), "jax", device)))


def expected_outputs(
    inputs: dict[str, Any], call: Call, tanh: Tanh = np.tanh
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ref_out, ref_lse, naive_out, naive_lse) in float64, packed calls sequence by sequence;
    the naive baseline's softcap uses `tanh`."""
    q, k, v = (inputs[n].astype(np.float64) for n in ("q", "k", "v"))
    if not call.packed:
        mask = masks.dense_mask(
            call, np.arange, inputs.get("key_padding_mask"), inputs.get("attn_mask")
        )
        ref = attention_f64(q, k, v, call, mask)
        naive = _naive_low_precision(q, k, v, call, mask, call.dtype, tanh)
        return (*ref, *naive)
    outs = [
        np.zeros_like(q),
        np.full((call.heads_q, q.shape[0]), -np.inf),
        np.zeros_like(q),
        np.full((call.heads_q, q.shape[0]), -np.inf),
    ]
    sq = sk = 0
    for len_q, len_k in zip(call.seqlens_q, call.seqlens_k):
        rq, rk = slice(sq, sq + len_q), slice(sk, sk + len_k)
        sq, sk = sq + len_q, sk + len_k
        if len_q == 0 or len_k == 0:
            continue
        sub = call.sequence(len_q, len_k)
        mask = masks.dense_mask(sub, np.arange)
        ro, rl = attention_f64(q[None, rq], k[None, rk], v[None, rk], sub, mask)
        no, nl = _naive_low_precision(
            q[None, rq], k[None, rk], v[None, rk], sub, mask, call.dtype, tanh
        )
        outs[0][rq], outs[1][:, rq], outs[2][rq], outs[3][:, rq] = ro[0], rl[0], no[0], nl[0]
    return tuple(outs)


@functools.lru_cache(maxsize=64)
def expected_for(case: Case, kernel_tanh: tuple[str, str] | None = None) -> tuple[np.ndarray, ...]:
    """`_expected` on the case's own inputs (a function of the case alone), computed once per
    process and shared by every backend checked on the case. The arrays are read-only.
    `kernel_tanh` (framework, device): the baseline's softcap uses that tanh
    (`kernel_tanh_baseline`)."""
    inputs = make_inputs(case)
    args = dict(inputs)
    q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
    expected = expected_outputs(inputs, validate(q, k, v, **args), tanh_of(kernel_tanh))
    for a in expected:
        a.setflags(write=False)
    return expected


def _max_err(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| where -inf matches -inf; NaN or a mismatched infinity is an infinite error."""
    if np.isnan(a).any():
        return math.inf
    both_inf = np.isinf(a) & np.isinf(b) & (np.sign(a) == np.sign(b))
    with np.errstate(invalid="ignore"):
        diff = np.where(both_inf, 0.0, np.abs(a - b))
    return float(np.nan_to_num(diff, nan=math.inf, posinf=math.inf).max(initial=0.0))


def _floor(ref: np.ndarray, dtype: str) -> float:
    finite = np.where(np.isfinite(ref), ref, 0.0)
    r = round_to(finite, dtype)
    return 2.0 * float(np.abs(round_to(round_to(r + 0.3, dtype) - 0.3, dtype) - r).max(initial=0.0))


def _rtol(call: Call) -> float:
    return 3.0 if call.softcap is not None else 2.0


def _error_and_bound(
    got: np.ndarray, ref: np.ndarray, naive: np.ndarray, call: Call
) -> tuple[float, float]:
    return _max_err(got, ref), _rtol(call) * _max_err(naive, ref) + _floor(ref, call.dtype)


def judge(out: Any, inputs: dict[str, Any]) -> tuple[float, float]:
    """(error, bound) by the rule for `out`, an attention output for `inputs` (numpy `q`,
    `k`, `v` and the call's keyword arguments, as `make_inputs` returns them): for inputs no
    `Case` describes, such as hand-made masks. The output passes when error <= bound."""
    args = dict(inputs)
    q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
    call = validate(q, k, v, **args)
    ref_out, _, naive_out, _ = expected_outputs(inputs, call)
    return _error_and_bound(arrays.to_numpy(out).astype(np.float64), ref_out, naive_out, call)


def to_device(x: Any, framework: str, device: str) -> Any:
    """numpy `x` as an array of `framework` on `device` (cpu, cuda, cuda:N; jax: cpu, gpu,
    tpu, gpu:N, tpu:N)."""
    if x is None or framework == "numpy":
        return x
    out = arrays.numpy_to(x, framework)
    if device == "cpu":
        return out
    if framework == "torch":
        return out.to(device)
    import jax

    return jax.device_put(out, jax.devices(device)[0])


def check(backend: str, case: Case, *, device: str = "cpu", force: bool = False) -> CaseResult:
    """Run one case on one backend (arrays of the backend's framework on `device`) and judge
    it. `force` runs a backend even when its `unavailable()` says no (e.g. Pallas kernels in
    interpret mode on CPU, whose backends expose that through their own switch)."""
    b = registry.get(backend)
    if b is None:
        raise ValueError(f"backend: expected a registered name, got {backend!r}")
    if not force and (why := b.unavailable()) is not None:
        return CaseResult(case, backend, UNAVAILABLE, reasons=(why,))
    inputs = make_inputs(case)
    fw = (
        "numpy"
        if getattr(getattr(b, "caps", None), "accepts_all_frameworks", False)
        else b.framework
    )
    args = {
        n: to_device(x, fw, device) if isinstance(x, np.ndarray) else x for n, x in inputs.items()
    }
    q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
    call = validate(q, k, v, **args)
    reasons = b.declines(call)
    if reasons:
        return CaseResult(case, backend, DECLINED, reasons=tuple(reasons))
    try:
        result = run_backend(backend, q, k, v, call)
    except Exception as exc:  # a crash is a verdict, not an abort of the whole grid
        return CaseResult(case, backend, ERROR, reasons=(f"{type(exc).__name__}: {exc}",))
    out, lse = result if case.return_lse else (result, None)
    kernel_tanh = kernel_tanh_baseline(b, call, device)
    strict = None if kernel_tanh is None else expected_for(case)
    return judge_case(case, b, call, out, lse, expected_for(case, kernel_tanh), strict)


def judge_case(
    case: Case,
    b: Any,
    call: Call,
    out: Any,
    lse: Any,
    expected: tuple[np.ndarray, ...],
    strict: tuple[np.ndarray, ...] | None = None,
) -> CaseResult:
    """The rule applied to backend `b`'s `out` (and `lse`) on `call`, given `_expected`.
    `strict`: the expectation with numpy's tanh when `expected` uses the kernel's
    (`kernel_tanh_baseline`); a pass that only the kernel's tanh allows says so."""
    backend = b.name
    ref_out, ref_lse, naive_out, naive_lse = expected
    rtol = _rtol(call)
    got = arrays.to_numpy(out).astype(np.float64)
    error, bound = _error_and_bound(got, ref_out, naive_out, call)
    reasons_out: list[str] = []
    notes: list[str] = []
    if strict is not None:
        strict_bound = _error_and_bound(got, ref_out, strict[2], call)[1]
        if error > strict_bound:
            notes.append(
                f"out: error {error:.3g} > the bound with numpy's tanh {strict_bound:.3g}; "
                f"judged against a baseline with {b.softcap_tanh}'s float32 tanh on this "
                f"device (bound {bound:.3g}), as the kernel computes softcap"
            )
    if tuple(got.shape) != tuple(ref_out.shape):
        reasons_out.append(f"out: expected shape {ref_out.shape}, got {got.shape}")
    if arrays.dtype_name(out) != case.dtype:
        reasons_out.append(f"out: expected dtype {case.dtype}, got {arrays.dtype_name(out)}")
    if lse is not None:
        got_lse = arrays.to_numpy(lse).astype(np.float64)
        lse_error = _max_err(got_lse, ref_lse)
        lse_bound = rtol * _max_err(naive_lse, ref_lse) + _floor(ref_lse, "float32") + 1e-6
        if lse_error > lse_bound:
            reasons_out.append(f"lse: error {lse_error:.3g} > bound {lse_bound:.3g}")
        if arrays.dtype_name(lse) != "float32":
            reasons_out.append(f"lse: expected dtype float32, got {arrays.dtype_name(lse)}")
    if not error <= bound:
        reasons_out.append(f"out: error {error:.3g} > bound {bound:.3g}")
    return CaseResult(
        case, backend, FAILED if reasons_out else PASSED, error, bound, (*reasons_out, *notes)
    )


def device_info(backend: str, device: str) -> arrays.DeviceInfo:
    """The DeviceInfo a call on `device` reports, so verdicts match what plans look up."""
    b = registry.get(backend)
    probe = to_device(np.zeros((1,), np.float32), b.framework, device)
    return arrays.device_of(probe, b.framework)


# ---- case sets: what a verdict ran, and which call features its cases cover --------------


def catalogue_token() -> tuple:
    """Changes whenever GRID, DTYPES or SPECIAL is rebound (caches of derived facts key on it)."""
    return (id(GRID), len(GRID), id(SPECIAL), len(SPECIAL), DTYPES)


@functools.cache
def _catalogue(token: tuple) -> dict[str, Case]:
    out = {c.with_dtype(d).label: c.with_dtype(d) for c in GRID for d in ALL_DTYPES}
    out.update((c.label, c) for c in SPECIAL)
    return out


def catalogue() -> dict[str, Case]:
    """Every nameable case by label: the grid cases in every dtype, and the special cases."""
    return _catalogue(catalogue_token())


def case_by_label(label: str) -> Case | None:
    return catalogue().get(label)


@functools.cache
def _full_grid_labels(token: tuple) -> frozenset[str]:
    return frozenset(c.label for c in cases())


def full_grid_labels() -> frozenset[str]:
    """Labels of the full grid (`cases()`)."""
    return _full_grid_labels(catalogue_token())


def case_set_kind(run: Sequence[Case]) -> str:
    """ "full" when `run` holds the whole grid, "quick" when exactly the quick grid, else
    "partial"."""
    labels = {c.label for c in run}
    if labels >= full_grid_labels():
        return FULL_GRID
    if labels == {c.label for c in cases(quick=True)}:
        return QUICK_GRID
    return PARTIAL


def _digest(run: Iterable[Case]) -> str:
    return hashlib.sha256(repr(sorted(map(repr, run))).encode()).hexdigest()[:12]


def case_set_id(kind: str, run: Sequence[Case]) -> str:
    """The fingerprint's name for the cases run: kind and a digest of the cases themselves,
    e.g. `first-use-1f0c9a2b7d3e`."""
    return f"{kind}-{_digest(run)}"


def still_current(labels: Sequence[str], case_set: str) -> bool:
    """Whether a verdict that ran `labels` under `case_set` still stands for today's cases:
    every label names a case of the catalogue, unchanged."""
    found = [case_by_label(label) for label in labels]
    if any(c is None for c in found):
        return False
    return case_set.rsplit("-", 1)[-1] == _digest(found)  # type: ignore[arg-type]


# Call features a verdict can vouch for: dtype, layout, each contract feature, decode steps
# (one query), causal or window bounds on a diagonal that does not start at key 0 (query and
# key lengths differ: where bottom-right and top-left alignment part), and the head dims the
# grid has cases for.
def case_features(case: Case) -> frozenset[str]:
    """The call features this case exercises (see `call_features`)."""
    feats = {
        f"dtype:{case.dtype}",
        f"layout:{'packed' if case.packed else 'dense'}",
        f"head_dim:{case.head_dim}",
    }
    if case.causal:
        feats.add("causal")
    if case.window is not None:
        feats.add("window")
    if case.softcap is not None:
        feats.add("softcap")
    if case.key_padding:
        feats.add("key_padding_mask")
    if case.masked_row:
        feats.add("attn_mask")
    if case.heads_q != case.heads_kv:
        feats.add("gqa")
    if case.return_lse:
        feats.add("lse")
    if case.packed is None and case.seqlen_q == 1:
        feats.add("decode")
    unequal = (
        any(a != b for a, b in case.packed)
        if case.packed is not None
        else case.seqlen_q != case.seqlen_k
    )
    if (case.causal or case.window is not None) and unequal:
        feats.add("diagonal-offset")
    return frozenset(feats)


@functools.cache
def _head_dims(token: tuple) -> frozenset[int]:
    return frozenset(c.head_dim for c in catalogue().values())


def call_features(call: Call) -> frozenset[str]:
    """The features of a call that verification must cover: its dtype and layout, each
    contract feature it uses (causal, window, softcap, masks, GQA, lse), "decode" for a
    single query, "diagonal-offset" for causal or window bounds with query and key lengths
    that differ, and its head dim where the grid has a case of that head dim. Gradients are
    not among them: conformance checks the forward pass."""
    feats = {f"dtype:{call.dtype}", f"layout:{call.layout}"}
    feats.update(f for f in call.features if f not in ("packed", "grad"))
    if not call.packed and call.seqlen_q == 1:
        feats.add("decode")
    if call.causal or call.window is not None:
        if call.packed:  # traced: lengths unknown, so assume they differ
            unequal = call.seqlens_q is None or call.seqlens_q != call.seqlens_k
        else:
            unequal = call.seqlen_q != call.seqlen_k
        if unequal:
            feats.add("diagonal-offset")
    if call.head_dim in _head_dims(catalogue_token()):
        feats.add(f"head_dim:{call.head_dim}")
    return frozenset(feats)
