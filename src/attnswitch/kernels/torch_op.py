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
- autograd (FlashAttention's interface): the forward saves q, k, v and what it returned,
  `out` and `lse`; the backward is a second op, `attnswitch::attention_backward`, which
  computes the gradients from them with the contract's backward formula in torch ops
  (`kernels/torch_backward.py`) instead of running the forward again. No backend exposes
  a backward kernel of its own through attnswitch, so this formula serves every backend.
  When the call did not ask for lse, the forward returns none (torch-sdpa on CPU has none
  to give) and the backward forms it from the logits it computes anyway. lse is
  differentiable through the op.

The op's schema is derived from `AttentionOptions` (`kernels/options.py`): q, k, v, then
every option in field order; `options.to_op` and `options.from_op` convert.

Outside `torch.compile` the op is not used: a custom op's dispatch costs microseconds that an
eager decode step would pay for nothing. `torch.ops.attnswitch.attention` can be called
directly too (arguments as in `attention` below, every one positional).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from attnswitch.kernels import options as opts
from attnswitch.kernels import plan as plan_mod
from attnswitch.kernels.contract import describe
from attnswitch.kernels.options import AttentionOptions, keyword_form
from attnswitch.kernels.torch_backward import attention_backward

Tensor = torch.Tensor


def run(q: Tensor, k: Tensor, v: Tensor, options: AttentionOptions) -> Any:
    """`attnswitch.attention` for torch tensors through the custom op (traceable by dynamo
    without a graph break). Same arguments and result; `attention` is the keyword form."""
    out, lse = torch.ops.attnswitch.attention(q, k, v, *opts.to_op(options))
    return (out, lse) if options.return_lse else out


attention = keyword_form(run, "attention")


def fresh(x: Tensor, inputs: tuple[Tensor | None, ...]) -> Tensor:
    """`x` contiguous (the layout the fake kernel promises) and sharing no memory with the
    op's inputs (a custom op's outputs may not alias them)."""
    x = x.contiguous()
    ptr = x.untyped_storage().data_ptr()
    if any(t is not None and t.untyped_storage().data_ptr() == ptr for t in inputs):
        x = x.clone()
    return x


def _forward(q: Tensor, k: Tensor, v: Tensor, *values: Any) -> tuple[Tensor, Tensor]:
    options = opts.from_op(values)
    inputs = (q, k, v, *(getattr(options, n) for n in opts.TENSORS))
    result = plan_mod.run(q, k, v, options)
    if options.return_lse:
        out, lse = result
        return fresh(out, inputs), fresh(lse, inputs)
    return fresh(result, inputs), q.new_empty(0, dtype=torch.float32)


def _forward_fake(q: Tensor, k: Tensor, v: Tensor, *values: Any) -> tuple[Tensor, Tensor]:
    """Trace time: validate and plan (bad input and "no backend" fail here), then empty
    outputs of the right shapes."""
    options = opts.from_op(values)
    call = describe(q, k, v, options)
    plan = plan_mod.plan_for(call, options.backend)
    if not plan.candidates:
        raise plan_mod.NoBackendError(plan)
    out = q.new_empty((*q.shape[:-1], v.shape[-1]))
    if not options.return_lse:
        return out, q.new_empty(0, dtype=torch.float32)
    lse_shape = (q.shape[1], q.shape[0]) if call.packed else (q.shape[0], q.shape[2], q.shape[1])
    return out, q.new_empty(lse_shape, dtype=torch.float32)


_attention = torch.library.custom_op(
    "attnswitch::attention",
    _forward,
    mutates_args=(),
    schema=opts.op_schema(tuple(f"Tensor {n}" for n in opts.ARRAYS), "(Tensor, Tensor)"),
)
_attention.register_fake(_forward_fake)


def _backward_kernel(
    grad_out: Tensor,
    grad_lse: Tensor | None,
    out: Tensor,
    lse: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *values: Any,
) -> tuple[Tensor, ...]:
    """Gradients of q, k, v from the forward's `out` and `lse` (`torch_backward`)."""
    options = dataclasses.replace(opts.from_op(values), return_lse=False)
    call = describe(q, k, v, options)
    has = lambda x: x is not None and x.numel() > 0  # noqa: E731
    return attention_backward(
        call, q, k, v, out, lse if has(lse) else None, grad_out, grad_lse if has(grad_lse) else None
    )


def _backward_fake(grad_out, grad_lse, out, lse, q, k, v, *values):
    return tuple(x.new_empty(x.shape) for x in (q, k, v))


_attention_backward = torch.library.custom_op(
    "attnswitch::attention_backward",
    _backward_kernel,
    mutates_args=(),
    schema=opts.op_schema(
        (
            "Tensor grad_out",
            "Tensor? grad_lse",
            "Tensor out",
            "Tensor lse",
            "Tensor q",
            "Tensor k",
            "Tensor v",
        ),
        "(Tensor, Tensor, Tensor)",
    ),
)
_attention_backward.register_fake(_backward_fake)


def _setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    """Save q, k, v, the forward's outputs and the option tensors (by name: `options.TENSORS`);
    the other options ride on `ctx`."""
    q, k, v, *values = inputs
    options = opts.from_op(tuple(values))
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, *(getattr(options, n) for n in opts.TENSORS))
    ctx.options = dataclasses.replace(options, **dict.fromkeys(opts.TENSORS))
    ctx.set_materialize_grads(False)


def _backward(ctx: Any, grad_out: Tensor | None, grad_lse: Tensor | None) -> tuple:
    nones = (None,) * len(opts.NAMES)
    if grad_out is None and grad_lse is None:
        return (None, None, None, *nones)
    q, k, v, out, lse, *tensors = ctx.saved_tensors
    options = dataclasses.replace(ctx.options, **dict(zip(opts.TENSORS, tensors)))
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    dq, dk, dv = torch.ops.attnswitch.attention_backward(
        grad_out, grad_lse, out, lse, q, k, v, *opts.to_op(options)
    )
    return (dq, dk, dv, *nones)


_attention.register_autograd(_backward, setup_context=_setup_context)
