"""The dispatch the FlashAttention backends share (`flash_common.run`), run on CPU.

The FlashAttention kernels need a GPU, so the library functions are stood in for by
functions with their calling convention (`window_size=(-1, -1)` for none, `softcap=0` for
none, `return_attn_probs`, varlen's positional `cu_seqlens`/`max_seqlen`, lse `+inf` on
rows without keys as FlashAttention 2 gives, and FA3's multiple-of-8 head dim check) that
compute through `torch-math`. What is tested is everything attnswitch adds around the
kernels: the key padding gather, head-dim padding, lse layouts and the `+inf` mapping.
"""

from __future__ import annotations

import pytest
import torch

import attnswitch as asw
from attnswitch.kernels import flash_common
from attnswitch.kernels.contract import validate


class StandIn:
    """`flash_attn_func` / `flash_attn_varlen_func` of a library whose kernels need head dims
    that are a multiple of `multiple`, computed by torch-math. Records which one ran."""

    def __init__(self, multiple: int = 1):
        self.multiple, self.ran = multiple, []

    def _attend(self, q, k, v, window_size, softcap, return_attn_probs, **kw):
        assert q.shape[-1] % self.multiple == 0, f"head dim {q.shape[-1]} reached the kernel"
        window = None if tuple(window_size) == (-1, -1) else tuple(window_size)
        result = asw.attention(
            q,
            k,
            v,
            window=window,
            softcap=softcap or None,
            return_lse=return_attn_probs,
            backend="torch-math",
            **kw,
        )
        if not return_attn_probs:
            return result
        out, lse = result
        return out, lse.masked_fill(torch.isneginf(lse), float("inf")), None

    def dense(self, q, k, v, *, softmax_scale, causal, window_size, softcap, return_attn_probs):
        self.ran.append("dense")
        return self._attend(
            q, k, v, window_size, softcap, return_attn_probs, scale=softmax_scale, causal=causal
        )

    def varlen(
        self,
        q,
        k,
        v,
        cu_q,
        cu_k,
        max_q,
        max_k,
        *,
        softmax_scale,
        causal,
        window_size,
        softcap,
        return_attn_probs,
    ):
        self.ran.append("varlen")
        assert cu_q.dtype == cu_k.dtype == torch.int32
        assert max_q >= int(cu_q.diff().max()) and max_k >= int(cu_k.diff().max())
        return self._attend(
            q,
            k,
            v,
            window_size,
            softcap,
            return_attn_probs,
            scale=softmax_scale,
            causal=causal,
            cu_seqlens_q=cu_q,
            cu_seqlens_k=cu_k,
        )


def _inputs(d, sq=7, sk=11, hq=4, hkv=2, batch=3, requires_grad=False):
    gen = torch.Generator().manual_seed(d * 100 + sq)
    shapes = ((sq, hq), (sk, hkv), (sk, hkv))
    q, k, v = (torch.randn(batch, s, h, d, generator=gen) for s, h in shapes)
    return [x.requires_grad_(requires_grad) for x in (q, k, v)]


def _kept_keys():
    mask = torch.ones(3, 11, dtype=torch.bool)
    mask[0, :4] = False  # left padding
    mask[1, 2:9:3] = False  # holes
    mask[2] = False  # no key at all: zeros, lse -inf
    return mask


CASES = [
    pytest.param(dict(), id="plain"),
    pytest.param(dict(causal=True), id="causal"),
    pytest.param(dict(causal=True, window=(3, -1)), id="causal-window"),
    pytest.param(dict(window=(2, 1), softcap=5.0), id="window-softcap"),
    pytest.param(dict(key_padding_mask=_kept_keys()), id="key-padding"),
    pytest.param(dict(key_padding_mask=_kept_keys(), softcap=5.0), id="key-padding-softcap"),
]


@pytest.mark.parametrize("multiple, d", [(1, 16), (1, 13), (8, 16), (8, 13), (8, 59)])
@pytest.mark.parametrize("kw", CASES)
def test_dense_and_key_padding_match_the_contract(kw, multiple, d):
    q, k, v = _inputs(d)
    kernels = StandIn(multiple)
    call = validate(q, k, v, return_lse=True, **kw)
    out, lse = flash_common.run(
        kernels.dense, kernels.varlen, q, k, v, call, head_dim_multiple=multiple
    )
    want_out, want_lse = asw.attention(q, k, v, return_lse=True, backend="torch-math", **kw)
    assert kernels.ran == ["varlen" if "key_padding_mask" in kw else "dense"]
    assert out.shape == q.shape and lse.shape == (3, 4, 7)
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(lse, want_lse)
    if "key_padding_mask" in kw:
        assert torch.isneginf(lse[2]).all() and (out[2] == 0).all()
    no_lse = flash_common.run(
        kernels.dense, kernels.varlen, q, k, v, validate(q, k, v, **kw), head_dim_multiple=multiple
    )
    torch.testing.assert_close(no_lse, want_out)


@pytest.mark.parametrize("multiple, d", [(1, 16), (8, 13)])
@pytest.mark.parametrize("kw", [dict(), dict(causal=True), dict(window=(4, 2))], ids=str)
def test_packed_matches_the_contract(kw, multiple, d):
    lens_q, lens_k = [3, 0, 5, 2], [4, 2, 0, 6]
    cu_q, cu_k = (
        torch.tensor([0, *torch.tensor(n).cumsum(0).tolist()], dtype=torch.int32)
        for n in (lens_q, lens_k)
    )
    gen = torch.Generator().manual_seed(d)
    q = torch.randn(sum(lens_q), 4, d, generator=gen)
    k, v = (torch.randn(sum(lens_k), 2, d, generator=gen) for _ in range(2))
    args = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, return_lse=True, **kw)
    kernels = StandIn(multiple)
    out, lse = flash_common.run(
        kernels.dense,
        kernels.varlen,
        q,
        k,
        v,
        validate(q, k, v, **args),
        head_dim_multiple=multiple,
    )
    want_out, want_lse = asw.attention(q, k, v, backend="torch-math", **args)
    assert kernels.ran == ["varlen"] and lse.shape == (4, 10)
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(lse, want_lse)
    assert torch.isneginf(lse[:, 3:8]).all()  # the third sequence: 5 queries, no keys


def test_gradients_flow_through_padding_and_the_gather():
    kw = dict(key_padding_mask=_kept_keys()[:2], softcap=5.0)
    grads = []
    for through_flash in (True, False):
        q, k, v = _inputs(13, batch=2, requires_grad=True)
        if through_flash:
            kernels = StandIn(8)
            out = flash_common.run(
                kernels.dense, kernels.varlen, q, k, v, validate(q, k, v, **kw), head_dim_multiple=8
            )
        else:
            out = asw.attention(q, k, v, backend="torch-math", **kw)
        out.square().sum().backward()
        grads.append((q.grad, k.grad, v.grad))
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want)


def test_key_padding_with_causal_or_window_is_the_declined_case():
    q, k, v = _inputs(16)
    mask = _kept_keys()
    assert flash_common.key_padding_declines(validate(q, k, v, key_padding_mask=mask)) == []
    for kw in (dict(causal=True), dict(window=(2, 2))):
        call = validate(q, k, v, key_padding_mask=mask, **kw)
        assert flash_common.key_padding_declines(call) != []
