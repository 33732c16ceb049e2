"""`torch-sdpa`: `torch.nn.functional.scaled_dot_product_attention`.

Translations into what SDPA takes:
- BSHD in, BHSD views for SDPA, the output viewed back as BSHD (no copy: SDPA allocates its
  output so that this view is contiguous on CPU and CUDA);
- bottom-right causal: `is_causal=True` when Sq == Sk and nothing else masks (the fused fast
  path); otherwise causal and windows become one boolean mask, joined with key padding and
  `attn_mask`;
- key padding on CPU, when each example's allowed keys are one contiguous run (right or
  left padding): the padding is cut away, not masked, since the fused CPU kernel computes
  masked keys anyway. One unmasked call when every example has the same run; else one call
  per example from 128 keys with 1/8 of the keys skipped: 1.07-1.95x faster than the
  masked call in 14 of 15 measurements from 128 keys, 0.96x once (B64 S128 fp32); not
  below 128 keys, where it was 0.79-0.93x;
- packed input with host lengths (`Call.seqlens_q/k`): one SDPA call per sequence, on views
  of the packed rows (no copy in, one concatenation out). On CPU this beat FlexAttention's
  document mask by 1.9-3.4x (docs/results/attention_ops_cpu.md) and, timed side by side,
  one left-padded batch with a key padding mask by 1.7-2.8x: the fused CPU kernel computes
  masked-out padding anyway, and a per-sequence call costs only tens of microseconds, even
  for hundreds of short sequences. Without host lengths (a device `cu_seqlens` passed with
  `max_seqlen_q/k`) the sequences are gathered on device into one left-padded batch
  (`torch_common.run_padded`), so nothing is read on the host;
- GQA: when no mask depends on the query (no causal/window bounds, no `attn_mask`), the
  query heads of a group are folded into query rows of their key/value head
  (`[B, Hkv, group * Sq, D]`), so each key/value block is read once for the whole group
  instead of once per query head: 10x faster for a bf16 decode step on CPU (B8 Hq32/Hkv8
  D128, 4k keys), 1.4-1.9x for a float32 one (B8 Hq16/Hkv4 D64, 2k keys), and never slower in
  the shapes measured; otherwise `enable_gqa=True`.
Declines softcap (SDPA has no logit soft-capping) and `return_lse` (its public API does not
return the log-sum-exp).

On CUDA, `detail` names the SDPA sub-kernel that will run (flash, efficient, cuDNN or math)
from torch's own `can_use_*` checks, with torch's reasons for refusing the faster ones.
"""

from __future__ import annotations

import dataclasses
import warnings
from types import MappingProxyType
from typing import Any

from attnswitch.kernels.backend import BackendBase, Capabilities, import_reason
from attnswitch.kernels.contract import Call

# The fused CPU kernel (`_scaled_dot_product_flash_attention_for_cpu`) already returns zeros
# for rows whose mask is all False; other devices' kernels are zeroed explicitly.
_ZERO_SAFE_DEVICES = ("cpu",)


class TorchSDPA(BackendBase):
    name = "torch-sdpa"
    framework = "torch"
    caps = Capabilities(
        device_kinds=("cpu", "cuda", "rocm", "mps", "xpu"),
        dtypes=("float16", "bfloat16", "float32"),
        softcap=False,
        lse=False,
        grad=True,
    )
    libraries = ("torch",)

    def _probe(self) -> str | None:
        if why := import_reason("torch", "torch"):
            return why
        import torch

        if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
            return f"torch {torch.__version__} has no scaled_dot_product_attention"
        return None

    def detail(self, call: Call) -> str | None:
        if call.packed:
            longest = call.sequence(call.seqlen_q, call.seqlen_k)
            text = self.detail(longest)
            return text and f"{text}, one call per sequence ({call.batch})"
        if call.device.kind == "cpu":
            if _uses_is_causal(call) or not call.has_mask and call.bounds is None:
                return "fused CPU flash kernel"
            if _may_cut_keys(call):
                return (
                    "fused CPU flash kernel; key padding that leaves each example one run "
                    "of keys is cut away, not masked"
                )
            return "fused CPU flash kernel with a boolean mask"
        if call.device.kind == "cuda":
            return _cuda_subkernel(call)
        return None

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        from attnswitch.kernels import arrays, torch_common

        if call.packed:
            if call.seqlens_q is None:  # lengths on device only: never read them here
                return torch_common.run_padded(self._dense, q, k, v, call)
            return _per_sequence(self._dense, q, k, v, call)
        if (
            _may_cut_keys(call)
            and arrays.on_host(call.key_padding_mask)
            and (runs := _key_runs(call.key_padding_mask)) is not None
        ):
            return _cut_keys(self._dense, q, k, v, call, runs)
        return self._dense(q, k, v, call)

    @staticmethod
    def _dense(q: Any, k: Any, v: Any, call: Call) -> Any:
        import torch.nn.functional as F

        from attnswitch.kernels import torch_common

        qh, kh, vh = (x.transpose(1, 2) for x in (q, k, v))
        fold = _folds_groups(call)
        if fold:
            qh = _fold_groups(q, call.heads_kv)
        if _uses_is_causal(call):
            mask, is_causal = None, True
        else:
            mask, is_causal = torch_common.dense_mask(call, q.device), False
        out = F.scaled_dot_product_attention(
            qh,
            kh,
            vh,
            attn_mask=mask,
            is_causal=is_causal,
            scale=call.scale,
            enable_gqa=call.gqa and not fold,
        )
        out = _unfold_groups(out, call.seqlen_q, call.heads_q) if fold else out.transpose(1, 2)
        if mask is not None and call.device.kind not in _ZERO_SAFE_DEVICES:
            rows = mask.any(dim=-1).expand(call.batch, call.heads_q, call.seqlen_q)
            out = out * rows.transpose(1, 2).unsqueeze(-1).to(out.dtype)
        return out


def _per_sequence(dense: Any, q: Any, k: Any, v: Any, call: Call) -> Any:
    """A packed call `q [Tq, Hq, D]`, `k/v [Tk, Hkv, D]` served by `dense` once per sequence
    (batch-1 BSHD views); sequences without keys give zeros, zero-length ones no rows."""
    import torch

    row = (q.shape[1], v.shape[2])  # [Hq, D]
    parts = []
    a = c = 0
    for len_q, len_k in zip(call.seqlens_q, call.seqlens_k):
        b, d = a + len_q, c + len_k
        if len_q and not len_k:
            parts.append(q.new_zeros((len_q, *row)))
        elif len_q:
            sub = call.sequence(len_q, len_k)
            parts.append(dense(q[None, a:b], k[None, c:d], v[None, c:d], sub)[0])
        a, c = b, d
    if not parts:
        return q.new_zeros((q.shape[0], *row))
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _may_cut_keys(call: Call) -> bool:
    """Whether key padding may be served by cutting keys: a dense CPU call (reading the mask
    costs no device sync) whose only mask is the key padding."""
    return (
        call.device.kind == "cpu"
        and call.key_padding
        and not call.packed
        and call.bounds is None
        and call.attn_mask_shape is None
    )


def _key_runs(key_padding_mask: Any) -> list[tuple[int, int]] | None:
    """Per example, the run `[start, end)` of keys a `[B, Sk]` mask allows ((0, 0): none),
    when every example's allowed keys are one contiguous run (right or left padding); else
    None."""
    import torch

    m = key_padding_mask
    lengths = m.sum(-1)
    starts = torch.where(lengths > 0, m.to(torch.int8).argmax(-1), 0)
    pos = torch.arange(m.shape[-1], device=m.device)
    run = (pos >= starts[:, None]) & (pos < (starts + lengths)[:, None])
    if not torch.equal(run, m):
        return None
    return list(zip(starts.tolist(), (starts + lengths).tolist()))


# Cutting keys per example pays when the keys skipped outweigh one SDPA call per example.
# Measured on CPU (B x S with random lengths, 14-48% padding, H 4-16, D 64-128): 1.07-1.95x
# faster from 128 keys up but for one 0.96x; 0.79-0.93x at 64 keys, where per-call costs
# dominate.
CUT_MIN_KEYS = 128
CUT_MIN_SKIPPED = 1 / 8  # share of the batch's keys


def _cut_keys(dense: Any, q: Any, k: Any, v: Any, call: Call, runs: list[tuple[int, int]]) -> Any:
    """A key-padded dense call with its padding cut away instead of masked: one unmasked
    call on the shared run when every example has the same one, else (when worth it, see
    CUT_MIN_*) one call per example on its own run; otherwise the masked call."""
    import torch

    unmasked = dataclasses.replace(call, key_padding=False, key_padding_mask=None)
    (start, end), *rest = runs
    if all(r == (start, end) for r in rest):
        if start == end:
            return q.new_zeros((*q.shape[:-1], v.shape[-1]))
        sub = dataclasses.replace(unmasked, seqlen_k=end - start)
        return dense(q, k[:, start:end], v[:, start:end], sub)
    skipped = sum(call.seqlen_k - (e - s) for s, e in runs)
    if call.seqlen_k < CUT_MIN_KEYS or skipped < CUT_MIN_SKIPPED * call.batch * call.seqlen_k:
        return dense(q, k, v, call)
    parts = []
    for b, (s, e) in enumerate(runs):
        if s == e:
            parts.append(q.new_zeros((1, *q.shape[1:-1], v.shape[-1])))
        else:
            sub = dataclasses.replace(unmasked, batch=1, seqlen_k=e - s)
            parts.append(dense(q[b : b + 1], k[b : b + 1, s:e], v[b : b + 1, s:e], sub))
    return torch.cat(parts)


def _folds_groups(call: Call) -> bool:
    """Whether GQA query heads are folded into query rows: no mask row depends on the
    query's head or position."""
    return call.gqa and call.bounds is None and call.attn_mask_shape is None


def _fold_groups(q: Any, heads_kv: int) -> Any:
    """`q [B, Sq, Hq, D]` -> `[B, Hkv, group * Sq, D]`, query head h in group h // group."""
    b, sq, hq, d = q.shape
    group = hq // heads_kv
    return (
        q.reshape(b, sq, heads_kv, group, d)
        .permute(0, 2, 3, 1, 4)
        .reshape(b, heads_kv, group * sq, d)
    )


def _unfold_groups(out: Any, seqlen_q: int, heads_q: int) -> Any:
    """The inverse layout for the output: `[B, Hkv, group * Sq, D]` -> `[B, Sq, Hq, D]`."""
    b, hkv, _, d = out.shape
    return (
        out.reshape(b, hkv, heads_q // hkv, seqlen_q, d)
        .permute(0, 3, 1, 2, 4)
        .reshape(b, seqlen_q, heads_q, d)
    )


def _uses_is_causal(call: Call) -> bool:
    """SDPA's own causal flag is top-left; it equals the contract only when Sq == Sk."""
    return (
        call.causal
        and call.window is None
        and not call.has_mask
        and call.seqlen_q == call.seqlen_k
        and not call.packed
    )


_CHECKS = MappingProxyType(
    {
        "FLASH_ATTENTION": ("flash", "can_use_flash_attention"),
        "EFFICIENT_ATTENTION": ("efficient", "can_use_efficient_attention"),
        "CUDNN_ATTENTION": ("cudnn", "can_use_cudnn_attention"),
    }
)


def _cuda_subkernel(call: Call) -> str:
    """Which SDPA sub-kernel torch will pick for this call (torch's own choice function), and
    torch's reasons for refusing the ones it prefers to it."""
    import torch
    from torch.nn.attention import SDPBackend

    dtype = getattr(torch, call.dtype)
    dev = torch.device("cuda", call.device.index or 0)
    q = torch.empty(
        (call.batch, call.heads_q, call.seqlen_q, call.head_dim), dtype=dtype, device=dev
    )
    k = torch.empty(
        (call.batch, call.heads_kv, call.seqlen_k, call.head_dim), dtype=dtype, device=dev
    )
    is_causal = _uses_is_causal(call)
    mask = None
    if not is_causal and (call.has_mask or call.bounds is not None or call.packed):
        mask = torch.ones((1, 1, call.seqlen_q, call.seqlen_k), dtype=torch.bool, device=dev)
    chosen = SDPBackend(
        torch._fused_sdp_choice(q, k, k, mask, 0.0, is_causal, call.scale, call.gqa)
    )
    params = torch.backends.cuda.SDPAParams(q, k, k, mask, 0.0, is_causal, call.gqa)
    refusals = []
    for index in torch._C._get_sdp_priority_order():
        backend = SDPBackend(index)
        if backend == chosen or backend.name not in _CHECKS:
            break
        label, check = _CHECKS[backend.name]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            getattr(torch.backends.cuda, check)(params, True)
        why = "; ".join(str(w.message).strip() for w in caught) or "refused"
        refusals.append(f"{label}: {why}")
    name = _CHECKS.get(chosen.name, (chosen.name.lower(),))[0]
    return f"SDPA sub-kernel {name}" + (f" (refused: {' | '.join(refusals)})" if refusals else "")


BACKEND = TorchSDPA()
