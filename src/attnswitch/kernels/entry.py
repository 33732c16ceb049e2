"""The front door, `attnswitch.attention`: the eager plan (`kernels/plan.py`), or under
`torch.compile` the torch custom op (`kernels/torch_op.py`) whose kernel is that plan."""

from __future__ import annotations

import sys
from typing import Any

from attnswitch.kernels import plan
from attnswitch.kernels.options import AttentionOptions, keyword_form


def _attention(q: Any, k: Any, v: Any, options: AttentionOptions) -> Any:
    """Scaled dot-product attention, `softmax(scale * q @ k^T, masked) @ v`, served by the
    native kernel of the device the arrays are on (see `explain` for which one, and why).

    Arrays: `torch.Tensor`, `jax.Array` or `numpy.ndarray`, q, k and v of one kind; the output
    has q's kind, device, dtype and layout. float16, bfloat16, float32 (float64 on backends
    that declare it, e.g. the float64 `reference`). numpy input runs on the best CPU backend
    of any installed framework.

    Shapes, dense (BSHD, FlashAttention's and `jax.nn.dot_product_attention`'s layout):
        q            [B, Sq, Hq, D]
        k, v         [B, Sk, Hkv, D]      Hq % Hkv == 0: query head h reads kv head
                                          h // (Hq // Hkv) (MQA, GQA)
        out          [B, Sq, Hq, D]
        lse          [B, Hq, Sq]          float32, natural log (with return_lse=True)
    Packed (variable length): q [Tq, Hq, D], k and v [Tk, Hkv, D], int32 `cu_seqlens_q` and
    `cu_seqlens_k` of shape [N + 1] (0 first, non-decreasing, Tq and Tk last); sequence i
    owns rows `cu[i]:cu[i + 1]`, zero-length sequences allowed; lse is [Hq, Tq].
    `max_seqlen_q/k` are FlashAttention's host-side maxima: with them, device `cu_seqlens` are
    not read on the host.

    Options:
        scale        default 1 / sqrt(D)
        causal       bottom-right aligned (FlashAttention >= 2.1): query i attends key j iff
                     j <= i + (Sk - Sq). With Sq = 3, Sk = 5 (x: may attend):
                                 key 0 1 2 3 4
                         query 0     x x x . .
                         query 1     x x x x .
                         query 2     x x x x x
                     and with Sq = 5, Sk = 3 the first two queries see no key:
                                 key 0 1 2
                         query 0     . . .
                         query 1     . . .
                         query 2     x . .
                         query 3     x x .
                         query 4     x x x
        window       (left, right): query i attends key j iff
                     i + (Sk - Sq) - left <= j <= i + (Sk - Sq) + right; -1 is unbounded on
                     that side. causal is window=(-1, 0); together they intersect.
        softcap      c: logits become c * tanh(logits / c) after scaling, before masking.
        key_padding_mask   bool [B, Sk], True = the key may be attended.
        attn_mask    bool, broadcastable to [B, Hq, Sq, Sk], True = may attend.
    All masks intersect. A query row with no key it may attend returns zeros (lse -inf),
    never NaN.

    backend: run this backend (a registered name) or raise with its reasons; no fallback.
    Without it the plan's first candidate runs and, on a runtime failure of the backend,
    the next one (warned once, counted).

    Raises `AttentionInputError` (a ValueError naming the argument, what was expected and
    what came) before any kernel runs, and `NoBackendError`, carrying the full plan, when no
    backend can serve. Under `torch.compile` the call is one opaque custom op,
    `attnswitch::attention` (no graph break): validation runs at trace time on fake tensors,
    planning and the kernel at run time. The keyword options are the fields of
    `attnswitch.kernels.options.AttentionOptions`, from which this signature is derived.
    """
    if _torch_compiling(q):
        from attnswitch.kernels import torch_op

        return torch_op.run(q, k, v, options)
    return plan.run(q, k, v, options)


# The keyword form is the public function; its signature is derived from AttentionOptions.
attention = keyword_form(_attention, "attention")


def _torch_compiling(q: Any) -> bool:
    """Whether torch.compile (dynamo) is tracing this call on torch tensors; False without
    torch imported."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(q, torch.Tensor) and torch.compiler.is_compiling()
