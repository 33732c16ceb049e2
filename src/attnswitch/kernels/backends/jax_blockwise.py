"""`jax-blockwise`: attnswitch's portable memory-efficient attention in plain JAX/XLA ops.

For long documents on any XLA device where no native kernel fits. Every contract feature:
causal and windows (bottom-right), softcap, key padding, attn_mask, GQA/MQA, packed input,
lse; float16, bfloat16 and float32.

Algorithm (online softmax: Rabe & Staats 2021, FlashAttention): queries are cut into blocks of
`block_q` rows (`lax.map`); for each query block, keys and values are scanned in blocks of
`block_k` (`lax.scan`) carrying, per query row, the running maximum m, the running sum l and
the unnormalised output acc (all float32):

    s   = scale * q_blk @ k_blk^T      (softcap: c * tanh(s / c)), masked entries -inf
    m'  = max(m, rowmax(s));  p = exp(s - m');  a = exp(m - m')
    l'  = a * l + rowsum(p);  acc' = a * acc + p @ v_blk

then out = acc / l and lse = m + log(l). A row that never saw an allowed key keeps l = 0:
its output is 0 and its lse -inf. Peak memory is the inputs and output plus one
`[B, Hq, block_q, block_k]` score block: linear in the sequence length.

Masks are made per block from per-row facts, never as a dense matrix:
- causal/window: `masks.bounds_mask` on each query's aligned key position (bottom-right
  diagonal) and the key block's positions;
- packed: the call runs as one batch row; segment ids and per-sequence diagonals come from
  cu_seqlens on device (`jax_common`), so traced cu_seqlens under `jax.jit` work;
- key_padding_mask is sliced per key block; attn_mask per query and key block along the axes
  it does not broadcast (a full `[B, Hq, Sq, Sk]` attn_mask is itself quadratic: the
  caller's choice).
Key blocks that the bounds or the segments exclude entirely are skipped (`lax.cond`), so
causal attention costs about half of full attention.

Precision: scores and accumulators are float32. float32 inputs use HIGHEST matmul precision
(so TPUs do not round them to bfloat16) and an accurate tanh for softcap
(`jax_common.accurate_tanh`: with XLA's own, float32 softcap missed the conformance rule;
docs/architecture.md, "Softcap in float32"). p is cast to the value dtype for the p @ v
matmul, as FlashAttention does. The program is compiled once per static configuration
(shapes, options, block sizes) and cached.
"""

from __future__ import annotations

from typing import Any

from attnswitch.kernels.backend import BackendBase, Capabilities, import_reason
from attnswitch.kernels.contract import Call

BLOCK_Q = 512
BLOCK_K = 512


class JaxBlockwise(BackendBase):
    name = "jax-blockwise"
    framework = "jax"
    caps = Capabilities(device_kinds=("cpu", "cuda", "rocm", "tpu"))
    libraries = ("jax", "jaxlib")

    def __init__(self, block_q: int = BLOCK_Q, block_k: int = BLOCK_K):
        if block_q < 1 or block_k < 1:
            raise ValueError(f"blocks: expected positive sizes, got {block_q=} {block_k=}")
        self.block_q, self.block_k = block_q, block_k

    def _probe(self) -> str | None:
        return import_reason("jax", "jax")

    def detail(self, call: Call) -> str | None:
        bq, bk = min(self.block_q, call.seqlen_q), min(self.block_k, call.seqlen_k)
        batch = 1 if call.packed else call.batch
        block = batch * call.heads_q * bq * bk * 4
        return f"blocks {bq}x{bk}: one float32 score block of {block / 2**20:.3g} MiB"

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        from attnswitch.kernels import jax_common

        if 0 in q.shape[:-2] or 0 in k.shape[:-2]:
            return jax_common.empty_result(q, call)
        return jax_common.run_jitted(attend, q, k, v, call, self.block_q, self.block_k)


def attend(q: Any, k: Any, v: Any, call: Call, block_q: int, block_k: int) -> Any:
    """The contract, blockwise (traceable). Dense q `[B, Sq, Hq, D]` or packed `[Tq, Hq, D]`."""
    import jax.numpy as jnp

    from attnswitch.kernels import jax_common, masks

    if call.packed:
        seg_q, diag = jax_common.packed_positions(call.cu_seqlens_q, call.cu_seqlens_k, q.shape[0])
        seg_k = jax_common.segment_ids(call.cu_seqlens_k, k.shape[0])
        q, k, v = q[None], k[None], v[None]
    else:
        seg_q = seg_k = None
        diag = jnp.arange(q.shape[1], dtype=jnp.int32) + masks.diagonal_offset(
            q.shape[1], k.shape[1]
        )
    out, lse = _blockwise(
        q, k, v, call, diag, seg_q, seg_k, call.key_padding_mask, call.attn_mask, block_q, block_k
    )
    if call.packed:
        out, lse = out[0], lse[0]
    return (out, lse) if call.return_lse else out


def _blockwise(
    q: Any,
    k: Any,
    v: Any,
    call: Call,
    diag: Any,
    seg_q: Any,
    seg_k: Any,
    kp: Any,
    am: Any,
    block_q: int,
    block_k: int,
) -> tuple[Any, Any]:
    """q `[B, Sq, Hq, D]`, k/v `[B, Sk, Hkv, D]`; diag int32 `[Sq]` (aligned key position per
    query); seg_q `[Sq]`/seg_k `[Sk]` segment ids or None; kp bool `[B, Sk]` or None; am bool
    broadcastable to `[B, Hq, Sq, Sk]` or None. Returns out `[B, Sq, Hq, D]` in q's dtype
    and lse float32 `[B, Hq, Sq]`."""
    import jax.numpy as jnp
    from jax import lax

    from attnswitch.kernels import jax_common, masks

    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    bq, bk = min(block_q, sq), min(block_k, sk)
    nq, nk = -(-sq // bq), -(-sk // bk)
    pad_q, pad_k = nq * bq - sq, nk * bk - sk
    f32 = jnp.float32
    precision = lax.Precision.HIGHEST if q.dtype == f32 else None
    bounds = call.bounds if call.bounds != (-1, -1) else None

    def split(x: Any, axis: int, n: int, size: int) -> Any:
        """Cut `axis` (already padded to n * size) into blocks and move the block index first."""
        x = x.reshape(x.shape[:axis] + (n, size) + x.shape[axis + 1 :])
        return jnp.moveaxis(x, axis, 0)

    def pad(x: Any, axis: int, amount: int, **kw: Any) -> Any:
        if amount == 0:
            return x
        widths = [(0, 0)] * x.ndim
        widths[axis] = (0, amount)
        return jnp.pad(x, widths, **kw)

    # Head-major blocks, so each block product is one batched matmul over (B, Hkv) with the
    # G query heads sharing a key/value head stacked as extra rows.
    q_heads = jnp.transpose(pad(q, 1, pad_q).reshape(b, nq * bq, hkv, g, d), (0, 2, 3, 1, 4))
    q_blocks = split(q_heads, 3, nq, bq)  # [nq, B, Hkv, G, bq, D]
    k_blocks, v_blocks = (  # [nk, B, Hkv, bk, D]
        split(jnp.transpose(pad(x, 1, pad_k), (0, 2, 1, 3)), 2, nk, bk) for x in (k, v)
    )
    diag_blocks = split(pad(diag, 0, pad_q, mode="edge"), 0, nq, bq)
    seg_q_blocks = None if seg_q is None else split(pad(seg_q, 0, pad_q, mode="edge"), 0, nq, bq)
    seg_k_blocks = None if seg_k is None else split(pad(seg_k, 0, pad_k, mode="edge"), 0, nk, bk)

    # Keys: padding mask and the keys added to fill the last block, as one [B', Sk] validity.
    if kp is None and pad_k:
        kp = jnp.ones((1, sk), bool)
    kv_valid = None if kp is None else split(pad(kp, 1, pad_k, constant_values=False), 1, nk, bk)

    # attn_mask as [B', Hkv', G', Sq', Sk'] with its non-broadcast Sq cut into query blocks.
    am_q_blocks = am_const = None
    am_k_sliced = False
    if am is not None:
        am = am.reshape((1,) * (4 - am.ndim) + tuple(am.shape))
        ab, ah, aq, ak = am.shape
        am = am.reshape((ab, hkv, g, aq, ak) if ah == hq else (ab, 1, 1, aq, ak))
        if ak == sk and ak > 1:
            am = pad(am, 4, pad_k, constant_values=False)
            am_k_sliced = True
        if aq == sq and aq > 1:
            am_q_blocks = split(pad(am, 3, pad_q, constant_values=False), 3, nq, bq)
        else:
            am_const = am

    skipping = bounds is not None or seg_q is not None
    if seg_k_blocks is not None:
        seg_k_range = (seg_k_blocks.min(axis=1), seg_k_blocks.max(axis=1))
    else:
        seg_k_range = None

    def q_step(xs: Any) -> tuple[Any, Any]:
        q_blk, diag_blk, seg_q_blk, am_blk = xs
        am_blk = am_const if am_blk is None else am_blk

        def kv_step(carry: Any, ys: Any) -> tuple[Any, None]:
            j, k_blk, v_blk, valid_blk, seg_k_blk, seg_k_lo, seg_k_hi = ys

            def compute(carry: Any) -> Any:
                m, row_sum, acc = carry
                s = jnp.einsum(
                    "bhgqd,bhkd->bhgqk",
                    q_blk,
                    k_blk,
                    precision=precision,
                    preferred_element_type=f32,
                ) * f32(call.scale)
                if call.softcap is not None:
                    s = jax_common.softcap(s, call.softcap, accurate=q.dtype == f32)
                allowed = None
                key_pos = j * bk + jnp.arange(bk, dtype=jnp.int32)
                for part in (
                    masks.bounds_mask(diag_blk[:, None], key_pos[None, :], bounds),
                    None if seg_q_blk is None else seg_q_blk[:, None] == seg_k_blk[None, :],
                    None if valid_blk is None else valid_blk[:, None, None, None, :],
                    None
                    if am_blk is None
                    else (
                        lax.dynamic_slice_in_dim(am_blk, j * bk, bk, axis=4)
                        if am_k_sliced
                        else am_blk
                    ),
                ):
                    if part is not None:
                        allowed = part if allowed is None else allowed & part
                if allowed is not None:
                    s = jnp.where(allowed, s, -jnp.inf)
                m_new = jnp.maximum(m, s.max(axis=-1))
                m_use = jnp.where(m_new == -jnp.inf, f32(0), m_new)
                p = jnp.exp(s - m_use[..., None])
                alpha = jnp.exp(m - m_use)
                row_sum = alpha * row_sum + p.sum(axis=-1)
                pv = jnp.einsum(
                    "bhgqk,bhkd->bhgqd",
                    p.astype(v_blk.dtype),
                    v_blk,
                    precision=precision,
                    preferred_element_type=f32,
                )
                return m_new, row_sum, alpha[..., None] * acc + pv

            if not skipping:
                return compute(carry), None
            live = jnp.bool_(True)
            # the block [j * bk, j * bk + bk - 1] meets the keys some query row allows
            lowest, _ = masks.key_range(diag_blk.min(), bounds)
            _, highest = masks.key_range(diag_blk.max(), bounds)
            if highest is not None:
                live &= j * bk <= highest
            if lowest is not None:
                live &= j * bk + bk - 1 >= lowest
            if seg_q_blk is not None:
                live &= (seg_q_blk.min() <= seg_k_hi) & (seg_k_lo <= seg_q_blk.max())
            return lax.cond(live, compute, lambda c: c, carry), None

        init = (
            jnp.full((b, hkv, g, bq), -jnp.inf, f32),
            jnp.zeros((b, hkv, g, bq), f32),
            jnp.zeros((b, hkv, g, bq, d), f32),
        )
        ys = (
            jnp.arange(nk, dtype=jnp.int32),
            k_blocks,
            v_blocks,
            kv_valid,
            seg_k_blocks,
            *(seg_k_range or (None, None)),
        )
        (m, row_sum, acc), _ = lax.scan(kv_step, init, ys)
        empty = row_sum == 0  # no allowed key in the row: out 0, lse -inf
        row_sum = jnp.where(empty, f32(1), row_sum)
        out = acc / row_sum[..., None]
        lse = jnp.where(empty, -jnp.inf, m + jnp.log(row_sum))
        return out.astype(q.dtype), lse

    out, lse = lax.map(q_step, (q_blocks, diag_blocks, seg_q_blocks, am_q_blocks))
    # out [nq, B, Hkv, G, bq, D] -> [B, Sq, Hq, D]; lse [nq, B, Hkv, G, bq] -> [B, Hq, Sq]
    out = jnp.transpose(out, (1, 0, 4, 2, 3, 5)).reshape(b, nq * bq, hq, d)[:, :sq]
    lse = jnp.transpose(lse, (1, 2, 3, 0, 4)).reshape(b, hq, nq * bq)[..., :sq]
    return out, lse


BACKEND = JaxBlockwise()
