"""Gradients by the conformance rule (docs/architecture.md, "Conformance"): a backend's
input gradients in a low precision against float64 autograd through torch-math, allowed
twice the error of the same naive math (torch-math) in that precision, plus its rounding
floor. Never a bare fixed tolerance: the order in which a kernel sums (threads, tiles)
changes float32 gradients by more than any fixed bound tight enough to catch a bug."""

from __future__ import annotations

from typing import Any

import torch

import attnswitch as asw


def input_grads(
    base: list[torch.Tensor], dout: torch.Tensor, dtype: torch.dtype, backend: str, **kw: Any
) -> list[torch.Tensor]:
    """d(sum(out * dout))/d(q, k, v) through `backend`, from `base` = [q, k, v] cast to
    `dtype`, as float64. Each call differentiates fresh copies: gradients of one call never
    accumulate into another's."""
    leaves = [x.detach().to(dtype, copy=True).requires_grad_() for x in base]
    asw.attention(*leaves, backend=backend, **kw).backward(dout.to(dtype))
    return [x.grad.double() for x in leaves]


def assert_grads_within_rule(
    base: list[torch.Tensor], dout: torch.Tensor, dtype: torch.dtype, backend: str, **kw: Any
) -> None:
    """`backend`'s gradients in `dtype` are within the rule for each of q, k and v. `base`
    and `dout` should be exact in `dtype` (e.g. made in it), so that float64 is exact on
    the same values."""
    want = input_grads(base, dout, torch.float64, "torch-math", **kw)
    naive = input_grads(base, dout, dtype, "torch-math", **kw)
    got = input_grads(base, dout, dtype, backend, **kw)
    for name, g, n, w in zip("qkv", got, naive, want, strict=True):
        r = w.to(dtype)
        floor = 2 * (r + 0.3 - 0.3 - r).abs().max().item()
        err, naive_err = (g - w).abs().max().item(), (n - w).abs().max().item()
        assert err <= 2 * naive_err + floor, (
            f"d{name}: error {err:.3g} > 2 x {naive_err:.3g} + {floor:.3g}"
        )
