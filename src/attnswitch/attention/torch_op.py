"""`attnswitch::attention`: the attention call as one torch custom op, for `torch.compile`.

Dynamo cannot trace the attnswitch call itself: planning reads caches, environment variables
and context variables, and some backends read masks or `cu_seqlens` on the host, each a graph
break (a 2-layer BERT gave 14). So under `torch.compile`, `attnswitch.attention` calls this
op instead (`entry.attention` checks `torch.compiler.is_compiling()`), and dynamo sees one
opaque node, as FlashAttention's own kernels are registered (`torch.library.custom_op`):

- fake kernel (trace time, on fake tensors): `contract.validate` checks shapes, dtypes and
  options, and the planner must find a backend, so bad input and "no backend" fail when the
  graph is traced; then it returns empty tensors of the output's shape;
- real kernel (run time): the eager `attnswitch.attention`, i.e. validation, the cached
  plan, the chosen backend and its fallbacks, outside any traced region;
- autograd: the backward is a second op, `attnswitch::attention_backward`, which recomputes
  the forward with gradients on and differentiates it, so every backend with a backward
  (`Capabilities.grad`) serves training under `torch.compile`. The lse output is not
  differentiable through the op.

Outside `torch.compile` the op is not used: a custom op's dispatch costs microseconds that an
eager decode step would pay for nothing. `torch.ops.attnswitch.attention` can be called
directly too (arguments as in `attention` below, every one positional).
"""

from __future__ import annotations

from typing import Any

import torch

from attnswitch.attention import plan as plan_mod
from attnswitch.attention.contract import validate

Tensor = torch.Tensor


def attention(
    q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, scale: float | None = None,
    key_padding_mask: Tensor | None = None, attn_mask: Tensor | None = None,
    window: tuple[int, int] | None = None, softcap: float | None = None,
    cu_seqlens_q: Tensor | None = None, cu_seqlens_k: Tensor | None = None,
    max_seqlen_q: int | None = None, max_seqlen_k: int | None = None,
    return_lse: bool = False, backend: str | None = None,
) -> Any:
    """`attnswitch.attention` for torch tensors through the custom op (traceable by dynamo
    without a graph break). Same arguments and result."""
    out, lse = torch.ops.attnswitch.attention(
        q, k, v, key_padding_mask, attn_mask, cu_seqlens_q, cu_seqlens_k, causal,
        _number(scale), None if window is None else list(window), _number(softcap),
        max_seqlen_q, max_seqlen_k, return_lse, backend,
    )
    return (out, lse) if return_lse else out


def _number(x: Any) -> Any:
    """Python ints as floats for the op's `float?` arguments; anything else unchanged, for
    the contract to refuse with its own message."""
    return float(x) if isinstance(x, int) and not isinstance(x, bool) else x


def _options(causal: bool, scale: float | None, window: list[int] | None,
             softcap: float | None, max_seqlen_q: int | None, max_seqlen_k: int | None,
             backend: str | None) -> dict[str, Any]:
    return dict(causal=causal, scale=scale, window=None if window is None else tuple(window),
                softcap=softcap, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                backend=backend)


def fresh(x: Tensor, inputs: tuple[Tensor | None, ...]) -> Tensor:
    """`x` contiguous (the layout the fake kernel promises) and sharing no memory with the
    op's inputs (a custom op's outputs may not alias them)."""
    x = x.contiguous()
    ptr = x.untyped_storage().data_ptr()
    if any(t is not None and t.untyped_storage().data_ptr() == ptr for t in inputs):
        x = x.clone()
    return x


@torch.library.custom_op("attnswitch::attention", mutates_args=())
def _attention(
    q: Tensor, k: Tensor, v: Tensor, key_padding_mask: Tensor | None, attn_mask: Tensor | None,
    cu_seqlens_q: Tensor | None, cu_seqlens_k: Tensor | None, causal: bool,
    scale: float | None, window: list[int] | None, softcap: float | None,
    max_seqlen_q: int | None, max_seqlen_k: int | None, return_lse: bool, backend: str | None,
) -> tuple[Tensor, Tensor]:
    tensors = (q, k, v, key_padding_mask, attn_mask, cu_seqlens_q, cu_seqlens_k)
    result = plan_mod.attention(
        q, k, v, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
        cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, return_lse=return_lse,
        **_options(causal, scale, window, softcap, max_seqlen_q, max_seqlen_k, backend),
    )
    if return_lse:
        out, lse = result
        return fresh(out, tensors), fresh(lse, tensors)
    return fresh(result, tensors), q.new_empty(0, dtype=torch.float32)


@_attention.register_fake
def _attention_fake(
    q, k, v, key_padding_mask, attn_mask, cu_seqlens_q, cu_seqlens_k, causal, scale, window,
    softcap, max_seqlen_q, max_seqlen_k, return_lse, backend,
):
    options = _options(causal, scale, window, softcap, max_seqlen_q, max_seqlen_k, backend)
    backend = options.pop("backend")
    call = validate(
        q, k, v, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
        cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, return_lse=return_lse, **options,
    )
    plan = plan_mod.plan_for(call, backend)
    if not plan.candidates:
        raise plan_mod.NoBackendError(plan)
    out = q.new_empty((*q.shape[:-1], v.shape[-1]))
    if not return_lse:
        return out, q.new_empty(0, dtype=torch.float32)
    lse_shape = (q.shape[1], q.shape[0]) if call.packed else (q.shape[0], q.shape[2], q.shape[1])
    return out, q.new_empty(lse_shape, dtype=torch.float32)


@torch.library.custom_op("attnswitch::attention_backward", mutates_args=())
def _attention_backward(
    grad_out: Tensor, q: Tensor, k: Tensor, v: Tensor, key_padding_mask: Tensor | None,
    attn_mask: Tensor | None, cu_seqlens_q: Tensor | None, cu_seqlens_k: Tensor | None,
    causal: bool, scale: float | None, window: list[int] | None, softcap: float | None,
    max_seqlen_q: int | None, max_seqlen_k: int | None, backend: str | None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Gradients of q, k, v: the forward recomputed with autograd on (the planner then picks
    a backend with a backward), differentiated against `grad_out`."""
    with autograd_on():
        leaves = tuple(x.detach().requires_grad_() for x in (q, k, v))
        out = plan_mod.attention(
            *leaves, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
            cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
            **_options(causal, scale, window, softcap, max_seqlen_q, max_seqlen_k, backend),
        )
        grads = torch.autograd.grad(out, leaves, grad_out)
    return tuple(g.contiguous() for g in grads)


def autograd_on() -> Any:
    """Autograd back on inside an op's kernel: the dispatcher runs a custom op's kernel with
    the autograd keys excluded, so `enable_grad` alone would record nothing."""
    import contextlib

    C = torch._C
    exclude = C._dispatch_tls_local_exclude_set()
    for key in (C.DispatchKey.AutogradFunctionality, C.DispatchKey.ADInplaceOrView):
        exclude = exclude.remove(key)
    stack = contextlib.ExitStack()
    stack.enter_context(C._ForceDispatchKeyGuard(C._dispatch_tls_local_include_set(), exclude))
    stack.enter_context(torch.enable_grad())
    return stack


@_attention_backward.register_fake
def _attention_backward_fake(grad_out, q, k, v, *rest):
    return tuple(x.new_empty(x.shape) for x in (q, k, v))


def _setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    q, k, v, kpm, am, cu_q, cu_k, *options = inputs
    ctx.save_for_backward(q, k, v, kpm, am, cu_q, cu_k)
    ctx.options = options[:-2] + options[-1:]  # without return_lse
    ctx.set_materialize_grads(False)


def _backward(ctx: Any, grad_out: Tensor | None, grad_lse: Tensor | None) -> tuple:
    if grad_lse is not None:
        raise NotImplementedError(
            "attnswitch::attention: lse is not differentiable through the custom op")
    nones = (None,) * 12
    if grad_out is None:
        return (None, None, None, *nones)
    dq, dk, dv = torch.ops.attnswitch.attention_backward(
        grad_out, *ctx.saved_tensors, *ctx.options)
    return (dq, dk, dv, *nones)


_attention.register_autograd(_backward, setup_context=_setup_context)
