"""Every bad input raises AttentionInputError naming the argument, before any kernel runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnswitch as asw
from attnswitch.kernels import masks
from attnswitch.kernels.contract import validate


def qkv(framework="numpy", b=2, sq=5, sk=7, hq=4, hkv=2, d=8, dtype="float32"):
    rng = np.random.default_rng(0)
    arrs = [
        rng.standard_normal(s).astype(dtype)
        for s in ((b, sq, hq, d), (b, sk, hkv, d), (b, sk, hkv, d))
    ]
    if framework == "torch":
        arrs = [torch.from_numpy(a) for a in arrs]
    return arrs


def packed(framework="numpy", lens=(3, 0, 4), hq=4, hkv=2, d=8):
    t = sum(lens)
    rng = np.random.default_rng(1)
    q = rng.standard_normal((t, hq, d)).astype(np.float32)
    k = rng.standard_normal((t, hkv, d)).astype(np.float32)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    if framework == "torch":
        q, k, cu = torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(cu)
    return q, k, k, cu


def _raises(argument, fn, *args, **kwargs):
    with pytest.raises(asw.AttentionInputError) as info:
        fn(*args, **kwargs)
    assert info.value.argument == argument, str(info.value)
    assert str(info.value).startswith(f"{argument}: expected "), str(info.value)
    assert isinstance(info.value, ValueError)
    return str(info.value)


@pytest.fixture(params=["numpy", "torch"])
def framework(request):
    return request.param


def test_wrong_rank(framework):
    q, k, v = qkv(framework)
    msg = _raises("q", asw.attention, q[0], k, v)
    assert "rank 4" in msg
    _raises("k", asw.attention, q, k[0], v)


def test_mismatched_batch_heads_headdim(framework):
    q, k, v = qkv(framework)
    _raises("k", asw.attention, q, k[:1], v[:1])
    _raises("k", asw.attention, q, k[..., :4], v[..., :4])
    _raises("v", asw.attention, q, k, v[:, :, :1])


def test_hq_not_multiple_of_hkv(framework):
    q, k, v = qkv(framework, hq=4, hkv=3)
    msg = _raises("k", asw.attention, q, k, v)
    assert "MQA/GQA" in msg


def test_mixed_array_kinds():
    q, k, v = qkv("numpy")
    _raises("k", asw.attention, q, torch.from_numpy(k), v)
    _raises("q", asw.attention, q.tolist(), k, v)


def test_mixed_dtypes(framework):
    q, k, v = qkv(framework)
    k16 = k.astype(np.float16) if framework == "numpy" else k.half()
    _raises("k", asw.attention, q, k16, v)
    qi = q.astype(np.int32) if framework == "numpy" else q.int()
    _raises("q", asw.attention, qi, k, v)


def test_mixed_devices():
    q, k, v = qkv("torch")
    meta = k.to("meta")
    _raises("k", validate, q, meta, v)


@pytest.mark.parametrize(
    "cu, expected",
    [
        ([0, 5, 3, 7], "non-decreasing"),
        ([1, 3, 3, 7], "first entry of 0"),
        ([0, 3, 3, 6], "last entry equal"),
        ([0, 3, 3, 9], "last entry equal"),
    ],
)
def test_bad_cu_seqlens(framework, cu, expected):
    q, k, v, good = packed(framework)
    bad = np.array(cu, np.int32)
    if framework == "torch":
        bad = torch.from_numpy(bad)
    msg = _raises("cu_seqlens_q", asw.attention, q, k, v, cu_seqlens_q=bad, cu_seqlens_k=good)
    assert expected in msg


def test_cu_seqlens_dtype_and_pairing(framework):
    q, k, v, cu = packed(framework)
    cu64 = cu.astype(np.int64) if framework == "numpy" else cu.long()
    assert "int32" in _raises(
        "cu_seqlens_k", asw.attention, q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu64
    )
    _raises("cu_seqlens_k", asw.attention, q, k, v, cu_seqlens_q=cu)
    _raises("cu_seqlens_k", asw.attention, q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu[:-1])


def test_masks_rejected_with_packed(framework):
    q, k, v, cu = packed(framework)
    mask = np.ones((3, 7), bool) if framework == "numpy" else torch.ones(3, 7, dtype=torch.bool)
    _raises(
        "key_padding_mask",
        asw.attention,
        q,
        k,
        v,
        cu_seqlens_q=cu,
        cu_seqlens_k=cu,
        key_padding_mask=mask,
    )


def test_mask_wrong_shape_or_dtype(framework):
    q, k, v = qkv(framework)
    ones = (
        (lambda s, dt=bool: np.ones(s, dt))
        if framework == "numpy"
        else (lambda s, dt=torch.bool: torch.ones(s, dtype=dt))
    )
    _raises("key_padding_mask", asw.attention, q, k, v, key_padding_mask=ones((2, 5)))
    msg = _raises(
        "key_padding_mask",
        asw.attention,
        q,
        k,
        v,
        key_padding_mask=ones((2, 7), np.float32 if framework == "numpy" else torch.float32),
    )
    assert "bool" in msg
    _raises("attn_mask", asw.attention, q, k, v, attn_mask=ones((2, 3, 5, 7)))
    _raises("attn_mask", asw.attention, q, k, v, attn_mask=ones((1, 2, 4, 5, 7)))
    # broadcastable shapes are accepted
    for shape in ((5, 7), (1, 1, 5, 7), (2, 4, 5, 7), (2, 1, 1, 7)):
        asw.explain(q, k, v, attn_mask=ones(shape))


@pytest.mark.parametrize("window", [(-2, 0), (0, -5), (1,), "ab", (1.5, 2), (True, 0)])
def test_bad_window(window):
    q, k, v = qkv()
    _raises("window", asw.attention, q, k, v, window=window)


@pytest.mark.parametrize(
    "name, value",
    [
        ("softcap", 0.0),
        ("softcap", -1.0),
        ("softcap", float("nan")),
        ("scale", 0.0),
        ("scale", -0.5),
        ("scale", float("inf")),
        ("scale", "1"),
    ],
)
def test_non_positive_softcap_or_scale(name, value):
    q, k, v = qkv()
    _raises(name, asw.attention, q, k, v, **{name: value})


def test_unknown_backend_name():
    q, k, v = qkv()
    msg = _raises("backend", asw.attention, q, k, v, backend="no-such-kernel")
    assert "torch-sdpa" in msg
    with pytest.raises(asw.AttentionInputError):
        with asw.use("no-such-kernel"):
            pass


def test_unknown_backend_from_environment(monkeypatch):
    q, k, v = qkv()
    monkeypatch.setenv("ATTNSWITCH_BACKEND", "nope")
    _raises("ATTNSWITCH_BACKEND", asw.attention, q, k, v)


def test_not_an_array():
    _raises("q", asw.attention, [[1.0]], [[1.0]], [[1.0]])


def test_call_describes_features():
    q, k, v = qkv()
    call = validate(q, k, v, causal=True, window=(3, -1), softcap=5.0, return_lse=True)
    assert call.bounds == (3, 0)
    assert set(call.features) >= {"gqa", "causal", "window", "softcap", "lse"}
    assert call.scale == pytest.approx(1 / np.sqrt(8))
    qp, kp, vp, cu = packed()
    pcall = validate(qp, kp, vp, cu_seqlens_q=cu, cu_seqlens_k=cu)
    assert pcall.layout == "packed" and pcall.seqlens_q == (3, 0, 4) and pcall.seqlen_q == 4


@pytest.mark.parametrize(
    "sq, sk, kw, bounds",
    [
        (1, 64, dict(causal=True), None),  # a decode step sees every key
        (2, 64, dict(causal=True), (-1, 0)),
        (8, 8, dict(window=(7, 7)), None),  # reaches every key from every query
        (8, 8, dict(window=(6, 7)), (6, -1)),
        (8, 8, dict(window=(7, 6)), (-1, 6)),
        (4, 16, dict(causal=True, window=(15, 0)), (-1, 0)),
        (1, 16, dict(causal=True, window=(15, 0)), None),
        (4, 16, dict(causal=True, window=(14, 0)), (14, 0)),
        (0, 16, dict(causal=True), None),
    ],
)
def test_bounds_that_restrict_nothing_are_dropped(sq, sk, kw, bounds):
    q = torch.zeros(1, sq, 2, 8)
    k = torch.zeros(1, sk, 2, 8)
    call = validate(q, k, k, **kw)
    assert call.bounds == bounds
    # what is dropped was unrestrictive: the raw bounds allow every (query, key) pair
    left, right = kw.get("window", (-1, -1))
    if kw.get("causal"):
        right = 0 if right == -1 else min(right, 0)
    raw = masks.position_mask(np.arange, sq, sk, (left, right))
    if bounds is None:
        assert raw is None or raw.all()
    else:
        assert not raw.all()


# ---- max_seqlen_q/k: FlashAttention's host-side maxima ------------------------------------


@pytest.mark.parametrize("value", [-1, 8, 2.5, True, "4"])
def test_bad_max_seqlen(framework, value):
    q, k, v, cu = packed(framework)  # 7 rows, longest sequence 4
    msg = _raises(
        "max_seqlen_q", asw.attention, q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=value
    )
    assert "0 to the packed length 7" in msg


def test_max_seqlen_below_the_longest_sequence_read(framework):
    q, k, v, cu = packed(framework)
    msg = _raises(
        "max_seqlen_k", asw.attention, q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_k=3
    )
    assert "longest sequence of cu_seqlens_k (4)" in msg


def test_max_seqlen_only_for_packed(framework):
    q, k, v = qkv(framework)
    _raises("max_seqlen_q", asw.attention, q, k, v, max_seqlen_q=5)


def test_device_cu_seqlens_with_maxima_are_not_read(monkeypatch):
    """With max_seqlen_q/k a cu_seqlens that is not in host memory is left unread: the call
    carries the maxima and no lengths; without them, or in debug mode, it is read."""
    from attnswitch.kernels import arrays

    q, k, v, cu = packed("torch")
    monkeypatch.setattr(arrays, "on_host", lambda x: False)  # as a CUDA tensor would be
    call = validate(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=5, max_seqlen_k=6)
    assert (call.seqlens_q, call.seqlen_q, call.seqlen_k, call.total_q) == (None, 5, 6, 7)
    assert validate(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu).seqlens_q == (3, 0, 4)
    asw.configure(debug=True)
    try:
        bad = cu.clone()
        bad[1] = 9
        _raises(
            "cu_seqlens_q",
            validate,
            q,
            k,
            v,
            cu_seqlens_q=bad,
            cu_seqlens_k=cu,
            max_seqlen_q=5,
            max_seqlen_k=5,
        )
    finally:
        asw.configure(debug=False)
