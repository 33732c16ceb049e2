"""`torch-flex`: FlexAttention (`torch.nn.attention.flex_attention`) compiled by torch.compile.

Translations into what FlexAttention takes:
- BSHD in, BHSD views for flex, the output viewed back as BSHD (flex lays its output out
  like the query, so the view is contiguous);
- causal, window (bottom-right aligned, `Call.bounds`), `key_padding_mask` and `attn_mask`
  become one `mask_mod` and a `BlockMask` (`create_block_mask`): blocks nothing may attend
  are skipped, which is where flex beats a dense boolean mask;
- packed input runs natively as batch 1 over the concatenated tokens: each token carries its
  sequence id and its aligned diagonal in absolute key positions, and the mask keeps a query
  to its own sequence (zero-length sequences own no rows; a sequence with no keys gives zeros).
  The packed totals are padded up to a bucket (`packed_bucket`: multiples of the 128 block, 4
  buckets per doubling) with rows that attend nothing and that nothing attends, so a pipeline
  whose batches each have another total compiles a few kernels, not one per batch; padding
  blocks are empty in the block mask and cost no compute;
- softcap is a `score_mod`, `c * tanh(s / c)` on the scaled score, before masking;
- GQA: `enable_gqa=True`; lse: `return_aux=AuxRequest(lse=True)` (natural log, float32).

Compiled kernels: one `torch.compile(dynamic=False, fullgraph=True)` wrapper, so dynamo keeps
one kernel per shape (and per mask/softcap constants) and a repeated shape never recompiles.
`dynamic=True` compiles fewer kernels but ran about 4x slower on CPU (B8 S512 H12 D64).
The exception is a decode step (at most `DYNAMIC_KEYS_MAX_Q` queries, no block mask): its key
length is marked dynamic, so a cache growing by one key per step reuses one kernel instead of
compiling each step (2.7 s per step measured on CPU for a softcapped decode, which only flex
serves there); a step still ran as fast as with a static length (1.44 ms, B8 Sk2k H16/4).
Dynamo's recompile limit (8 by default) would silently drop calls past the eighth shape to
flex's unfused eager path; calls here raise the limit to `MAX_KERNELS` and, when it is hit,
forget this wrapper's kernels (and only these) and compile afresh. Block masks that depend only
on the call's geometry (causal, window, packed lengths) are cached (`MAX_BLOCK_MASKS`); masks
that read the caller's tensors are built per call.

Declines. On CPU each was found by running torch 2.13: gradients (flex raises
NotImplementedError for backward on CPU), `return_lse` (inductor's C++ flex kernel raises
NotImplementedError for it), float64 (refused by the C++ kernel); the C++ kernel also needs
AVX2 and a C++ compiler (inductor's own checks). Head dims 1, 4, 8, 59, 80, 256 and lengths that are
not multiples of the 128 block (113 x 203) run fine on CPU. On CUDA/ROCm, from inductor's
source (not run here): head dim < 16 (the Triton kernel's `tl.dot` minimum), and no Triton.
Fully masked query rows come out of flex as zeros (and lse -inf on the eager path).
"""

from __future__ import annotations

import functools
import math
import threading
from typing import Any

from attnswitch.kernels import masks
from attnswitch.kernels.backend import BackendBase, Capabilities, import_reason
from attnswitch.kernels.contract import Call

MAX_KERNELS = 64  # compiled kernels (shapes) kept before they are all dropped and rebuilt
MAX_BLOCK_MASKS = 32  # geometry-only block masks kept
# Calls with at most this many queries and no block mask (decode steps) compile one kernel
# with a dynamic key length, so a growing cache does not compile on every step.
DYNAMIC_KEYS_MAX_Q = 16
BLOCK = 128  # flex's default block size
BUCKETS_PER_DOUBLING = 4  # packed totals are padded by at most 19% (2 ** (1 / 4))
_TRITON_DEVICES = ("cuda", "rocm")
_lock = threading.Lock()  # dynamo's config is process-global: one patched call at a time


class TorchFlex(BackendBase):
    name = "torch-flex"
    framework = "torch"
    caps = Capabilities(
        device_kinds=("cpu", *_TRITON_DEVICES),
        dtypes=("float16", "bfloat16", "float32"),
        grad=True,
    )
    libraries = ("torch",)
    slow_first_call = "first call compiles (about 25 s on CPU)"

    def _probe(self) -> str | None:
        if why := import_reason("torch", "torch"):
            return why
        import torch

        try:
            from torch.nn.attention.flex_attention import (  # noqa: F401
                create_block_mask,
                flex_attention,
            )
        except ImportError as exc:
            return f"torch {torch.__version__} has no FlexAttention ({exc})"
        return None

    def extra_declines(self, call: Call) -> list[str]:
        reasons = []
        if call.packed and call.seqlens_q is None:
            reasons.append(
                "packed without host lengths: the document block mask is built from them"
            )
        if call.device.kind == "cpu":
            if call.requires_grad:
                reasons.append("gradients: FlexAttention has no backward on CPU")
            if call.return_lse:
                reasons.append(
                    "return_lse: the compiled CPU flex kernel cannot return lse in this torch"
                )
            if why := _cpu_kernel_missing():
                reasons.append(why)
        elif call.device.kind in _TRITON_DEVICES:
            if call.head_dim < 16:
                reasons.append(f"head dim {call.head_dim} < 16 (the Triton flex kernel's minimum)")
            if why := _triton_missing():
                reasons.append(why)
        return reasons

    def detail(self, call: Call) -> str | None:
        kernel = "C++" if call.device.kind == "cpu" else "Triton"
        first = "seconds; tens of seconds for a process's first on CPU"
        if call.has_mask:
            mask = "block mask built per call from the caller's masks"
        elif call.packed or call.bounds is not None:
            mask = "block mask cached"
        else:
            mask = "no block mask"
        return (
            f"compiled flex {kernel} kernel, the first call of a shape compiles ({first}); {mask}"
        )

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        import torch

        if not call.requires_grad:
            # flex refuses inputs that require grad on CPU even under no_grad
            q, k, v = q.detach(), k.detach(), v.detach()
        if call.packed:
            rows_q = q.shape[0]
            q = _pad_rows(q, packed_bucket(q.shape[0]))
            k, v = (_pad_rows(x, packed_bucket(k.shape[0])) for x in (k, v))
            qh, kh, vh = (x.transpose(0, 1).unsqueeze(0) for x in (q, k, v))
        else:
            qh, kh, vh = (x.contiguous().transpose(1, 2) for x in (q, k, v))
        if 0 in (qh.shape[0], qh.shape[2], kh.shape[2]):
            out = torch.zeros_like(qh)
            lse = torch.full(qh.shape[:3], -torch.inf, dtype=torch.float32, device=q.device)
        else:
            score_mod = _softcap_mod(call.softcap) if call.softcap is not None else None
            block_mask = _block_mask(call, q.device)
            if block_mask is None and qh.shape[2] <= DYNAMIC_KEYS_MAX_Q and kh.shape[2] > 1:
                for x in (kh, vh):
                    torch._dynamo.mark_dynamic(x, 2)
            out, lse = _flex(qh, kh, vh, score_mod, block_mask, call)
        if not call.packed:
            out = out.transpose(1, 2)
            return (out, lse.float()) if call.return_lse else out
        out = out[0].transpose(0, 1)[:rows_q]
        return (out, lse[0, :, :rows_q].float()) if call.return_lse else out


# ---- kernels ---------------------------------------------------------------------------


def packed_bucket(total: int) -> int:
    """The length a packed total of `total` rows is padded to: the smallest multiple of
    `BLOCK` at or above `total` on the grid `BLOCK * 2 ** (i / BUCKETS_PER_DOUBLING)`."""
    if total <= BLOCK:
        return BLOCK
    step = math.ceil(BUCKETS_PER_DOUBLING * math.log2(total / BLOCK) - 1e-9)
    return BLOCK * math.ceil(2 ** (step / BUCKETS_PER_DOUBLING) - 1e-9)


def _pad_rows(x: Any, rows: int) -> Any:
    """`x [T, H, D]` with zero rows appended up to `rows`, contiguous."""
    import torch.nn.functional as F

    return F.pad(x, (0, 0, 0, 0, 0, rows - x.shape[0])) if rows > x.shape[0] else x.contiguous()


@functools.cache
def _compiled() -> tuple[Any, Any]:
    """The flex call and its compiled form. Its own function (not `flex_attention` itself), so
    its dynamo cache holds only this backend's kernels and can be reset without touching any
    other compiled code of the process."""
    import torch
    from torch.nn.attention import flex_attention as fa

    aux_request = getattr(fa, "AuxRequest", None)

    def flex_forward(q, k, v, score_mod, block_mask, scale, enable_gqa, return_lse):
        if not return_lse:
            out = fa.flex_attention(
                q,
                k,
                v,
                score_mod=score_mod,
                block_mask=block_mask,
                scale=scale,
                enable_gqa=enable_gqa,
            )
            return out, None
        if aux_request is None:  # older torch: the deprecated `return_lse` flag
            return fa.flex_attention(
                q,
                k,
                v,
                score_mod=score_mod,
                block_mask=block_mask,
                scale=scale,
                enable_gqa=enable_gqa,
                return_lse=True,
            )
        out, aux = fa.flex_attention(
            q,
            k,
            v,
            score_mod=score_mod,
            block_mask=block_mask,
            scale=scale,
            enable_gqa=enable_gqa,
            return_aux=aux_request(lse=True),
        )
        return out, aux.lse

    return flex_forward, torch.compile(flex_forward, dynamic=False, fullgraph=True)


def _flex(q: Any, k: Any, v: Any, score_mod: Any, block_mask: Any, call: Call) -> tuple[Any, Any]:
    """Run the compiled flex call on BHSD tensors; (out, lse or None)."""
    import torch
    from torch._dynamo.exc import FailOnRecompileLimitHit

    forward, compiled = _compiled()
    args = (q, k, v, score_mod, block_mask, call.scale, call.gqa, call.return_lse)
    with (
        _lock,
        torch._dynamo.config.patch(
            recompile_limit=MAX_KERNELS, accumulated_recompile_limit=max(MAX_KERNELS, 256)
        ),
    ):
        try:
            return compiled(*args)
        except FailOnRecompileLimitHit:
            torch._dynamo.reset_code(forward.__code__)
            return compiled(*args)


@functools.lru_cache(maxsize=16)
def _softcap_mod(cap: float) -> Any:
    """`score_mod` for softcapping; one function per cap, so compiled kernels are reused."""
    import torch

    def softcap(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)

    return softcap


# ---- block masks -----------------------------------------------------------------------


def _diagonal_mods(diag: Any, bounds: tuple[int, int] | None) -> list[Any]:
    """Mask mods keeping key kv within `bounds` of the aligned diagonal `diag(q_idx)`."""
    if bounds is None or bounds == (-1, -1):
        return []
    return [lambda b, h, q_idx, kv_idx: masks.bounds_mask(diag(q_idx), kv_idx, bounds)]


def _block_mask(call: Call, device: Any) -> Any:
    """The call's BlockMask, or None when nothing masks."""
    bounds = call.bounds
    if call.packed:
        return _packed_mask(
            str(device),
            call.seqlens_q,
            call.seqlens_k,
            bounds,
            packed_bucket(sum(call.seqlens_q)),
            packed_bucket(sum(call.seqlens_k)),
        )
    if not call.has_mask:
        if bounds is None:
            return None
        return _dense_bounds_mask(str(device), call.seqlen_q, call.seqlen_k, bounds)
    return _dense_tensor_mask(call, device, bounds)


def _create(
    mods: list[Any], batch: int | None, heads: int | None, sq: int, sk: int, device: Any
) -> Any:
    from torch.nn.attention.flex_attention import and_masks, create_block_mask

    mod = mods[0] if len(mods) == 1 else and_masks(*mods)
    return create_block_mask(mod, batch, heads, sq, sk, device=device)


@functools.lru_cache(maxsize=MAX_BLOCK_MASKS)
def _dense_bounds_mask(device: str, sq: int, sk: int, bounds: tuple[int, int]) -> Any:
    offset = masks.diagonal_offset(sq, sk)
    return _create(_diagonal_mods(lambda q_idx: q_idx + offset, bounds), None, None, sq, sk, device)


def _dense_tensor_mask(call: Call, device: Any, bounds: tuple[int, int] | None) -> Any:
    """Built per call: the mask reads the caller's key_padding_mask / attn_mask tensors."""
    offset = masks.diagonal_offset(call.seqlen_q, call.seqlen_k)
    mods = _diagonal_mods(lambda q_idx: q_idx + offset, bounds)
    batch = heads = None
    if call.key_padding_mask is not None:
        kp = call.key_padding_mask
        mods.append(lambda b, h, q_idx, kv_idx: kp[b, kv_idx])
        batch = call.batch
    if call.attn_mask is not None:
        am = call.attn_mask
        am = am.reshape((1,) * (4 - am.ndim) + tuple(am.shape))
        if am.shape[0] > 1:
            batch = call.batch
        if am.shape[1] > 1:
            heads = call.heads_q
        full = am.expand(call.batch, call.heads_q, call.seqlen_q, call.seqlen_k)
        mods.append(lambda b, h, q_idx, kv_idx: full[b, h, q_idx, kv_idx])
    return _create(mods, batch, heads, call.seqlen_q, call.seqlen_k, device)


@functools.lru_cache(maxsize=MAX_BLOCK_MASKS)
def _packed_mask(
    device: str,
    lens_q: tuple[int, ...],
    lens_k: tuple[int, ...],
    bounds: tuple[int, int] | None,
    rows_q: int,
    rows_k: int,
) -> Any:
    """Packed sequences as one batch of `rows_q` queries and `rows_k` keys (padding rows
    after the sequences): query t of sequence i attends key u iff u is in sequence i and
    within `bounds` of t's diagonal, `t + (cu_k[i+1] - cu_q[i+1])` in absolute key positions
    (= the sequence's own bottom-right alignment). Padding queries (sequence -1) and keys
    (sequence -2) match nothing."""
    import numpy as np
    import torch

    nq, nk = np.asarray(lens_q, np.int64), np.asarray(lens_k, np.int64)
    ids = np.arange(len(lens_q))

    def padded(values: np.ndarray, rows: int, fill: int) -> np.ndarray:
        return np.concatenate([values, np.full(rows - len(values), fill, np.int64)])

    shift = np.repeat(masks.diagonal_offset(np.cumsum(nq), np.cumsum(nk)), nq)
    to = functools.partial(torch.as_tensor, device=device)
    doc_q = to(padded(np.repeat(ids, nq), rows_q, -1))
    doc_k = to(padded(np.repeat(ids, nk), rows_k, -2))
    diag_q = to(padded(np.arange(int(nq.sum())) + shift, rows_q, 0))
    mods = [lambda b, h, q_idx, kv_idx: doc_q[q_idx] == doc_k[kv_idx]]
    mods += _diagonal_mods(lambda q_idx: diag_q[q_idx], bounds)
    return _create(mods, None, None, rows_q, rows_k, device)


# ---- environment checks ----------------------------------------------------------------


@functools.cache
def _cpu_kernel_missing() -> str | None:
    """Why inductor's C++ flex kernel cannot be built here, or None. Checked without importing
    inductor (seconds), by inductor's own rules: AVX2, and the compiler `$CXX` or g++."""
    import os
    import shutil

    import torch

    if not torch.cpu._is_avx2_supported() or os.getenv("ATEN_CPU_CAPABILITY") == "default":
        return "the compiled CPU flex kernel needs AVX2"
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        return f"torch.compile on CPU needs a C++ compiler ({cxx} not found)"
    return unlinkable_torch_path(os.path.dirname(torch.__file__))


def unlinkable_torch_path(torch_dir: str) -> str | None:
    """Why inductor cannot link its C++ kernels against the torch in `torch_dir`, or None:
    it passes torch's library folder to the linker unquoted, so a path with whitespace is
    split and the link fails (torch 2.13: "cannot find -ltorch")."""
    if any(ch.isspace() for ch in torch_dir):
        return (
            f"the compiled CPU flex kernel cannot be linked: torch is installed under a "
            f"path with whitespace ({torch_dir!r}), which inductor splits"
        )
    return None


@functools.cache
def _triton_missing() -> str | None:
    from torch.utils._triton import has_triton

    return None if has_triton() else "Triton is not installed (the GPU flex kernel is Triton)"


BACKEND = TorchFlex()
