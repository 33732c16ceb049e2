"""Small random-initialised transformers models and the oracle rule for hidden states
(shared by the integration tests; the `models` fixture lives in conftest.py).

Rule (FlashAttention's, applied to a whole model): with the model's float64 eager run as the
oracle, the attnswitch run in float32 passes when, over the real (non-padding) tokens,

    max|h_attnswitch - h_oracle| <= 2 * max|h_eager_fp32 - h_oracle| + floor

where `floor` is twice the float32 rounding error around the oracle's values. It cannot pass
trivially: the float32 eager error is the error of float32 arithmetic (about 1e-6 here),
while a dropped or misplaced mask changes hidden states by O(1) (see the negative control in
test_transformers.py).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

import attnswitch
import attnswitch.integrations.transformers  # noqa: F401  (registers "attnswitch")

# torch-flex compiles a kernel per shape on CPU (about 25 s the first time): its own tests
# cover it; here it would dominate the suite's time.
_SLOW_HERE = ("torch-flex",)


def torch_backends() -> list[str]:
    """Registered backends that can take torch tensors and are available here."""
    out = []
    for b in attnswitch.backends():
        takes_torch = b.framework == "torch" or getattr(
            getattr(b, "caps", None), "accepts_all_frameworks", False
        )
        if takes_torch and b.name not in _SLOW_HERE and b.unavailable() is None:
            out.append(b.name)
    return out


def _configs() -> dict[str, Callable[[], object]]:
    from transformers import (
        BertConfig,
        Gemma2Config,
        LlamaConfig,
        MistralConfig,
        ModernBertConfig,
    )

    small = dict(vocab_size=100, hidden_size=64, intermediate_size=96, num_attention_heads=4)
    return {
        "bert": lambda: BertConfig(num_hidden_layers=2, **small),
        # local_attention 8 < the test lengths: the sliding layers' window binds
        "modernbert": lambda: ModernBertConfig(
            num_hidden_layers=3,
            local_attention=8,
            global_attn_every_n_layers=2,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            cls_token_id=1,
            sep_token_id=2,
            **small,
        ),
        "llama": lambda: LlamaConfig(num_hidden_layers=2, num_key_value_heads=2, **small),
        "mistral": lambda: MistralConfig(
            num_hidden_layers=2, num_key_value_heads=2, sliding_window=6, **small
        ),
        "gemma2": lambda: Gemma2Config(
            num_hidden_layers=2,
            num_key_value_heads=2,
            head_dim=16,
            sliding_window=6,
            attn_logit_softcapping=5.0,
            final_logit_softcapping=None,
            query_pre_attn_scalar=16,
            **small,
        ),
    }


FAMILIES = ("bert", "modernbert", "llama", "mistral", "gemma2")
CAUSAL = ("llama", "mistral", "gemma2")


class Models:
    """One random model in three runs: eager float64 (oracle), eager float32, attnswitch."""

    def __init__(self, family: str):
        from transformers import AutoModel

        torch.manual_seed(0)
        base = AutoModel.from_config(_configs()[family]()).eval()
        self.family = family
        self.oracle = copy.deepcopy(base).double()
        self.oracle.set_attn_implementation("eager")
        self.eager = copy.deepcopy(base)
        self.eager.set_attn_implementation("eager")
        self.attnswitch = copy.deepcopy(base)
        self.attnswitch.set_attn_implementation("attnswitch")


def hidden(model: object, **inputs: object) -> torch.Tensor:
    with torch.inference_mode():
        return model(**inputs).last_hidden_state


def floor32(ref: torch.Tensor) -> float:
    """Twice the float32 rounding error around the values of `ref` (FlashAttention 3's
    `fwd_atol`)."""
    r = ref.float()
    return 2.0 * float(((r + 0.3) - 0.3 - r).abs().max())


def rule(out: torch.Tensor, eager: torch.Tensor, oracle: torch.Tensor) -> tuple[float, float]:
    """(error, bound) of the oracle rule over rows already restricted to real tokens."""
    err = float((out.double() - oracle).abs().max())
    base = float((eager.double() - oracle).abs().max())
    return err, 2.0 * base + floor32(oracle)


def per_sequence(model: object, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Hidden states of the real tokens of a padded batch, each sequence run alone (no
    padding, no mask) at the positions the padded run gives it, rows in the order of
    `h[mask.bool()]`. The oracle for padded batches: with padding, a float64 eager run is
    not an oracle, since rows with no key to attend (padding under a sliding window) become
    NaN in its float32 softmax and spread through the masked keys."""
    out = []
    for row, real in zip(ids, mask.bool(), strict=True):
        positions = real.nonzero().view(-1)
        out.append(hidden(model, input_ids=row[positions][None], position_ids=positions[None])[0])
    return torch.cat(out)


def padded_inputs(side: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids `[3, 20]` and a padding mask for lengths 20, 13 and 6, padded on `side`."""
    gen = torch.Generator().manual_seed(1)
    lengths = (20, 13, 6)
    ids = torch.randint(3, 100, (len(lengths), 20), generator=gen)
    mask = torch.zeros(len(lengths), 20, dtype=torch.long)
    for r, n in enumerate(lengths):
        if side == "right":
            mask[r, :n] = 1
        else:
            mask[r, 20 - n :] = 1
    return ids, mask


def packed_inputs(family: str, lengths: tuple[int, ...]) -> dict:
    """One packed row of sequences of `lengths`: positions restarting per sequence (and
    explicit cu_seq_lens for ModernBERT)."""
    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(3, 100, (1, sum(lengths)), generator=gen)
    positions = torch.cat([torch.arange(n) for n in lengths])[None]
    inputs = {"input_ids": ids, "position_ids": positions}
    if family == "modernbert":  # ModernBERT does not hand position_ids to its attention
        cu = torch.tensor([0, *torch.cumsum(torch.tensor(lengths), 0).tolist()], dtype=torch.int32)
        inputs.update(
            cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=max(lengths), max_length_k=max(lengths)
        )
    return inputs


PACKED_LENGTHS = (7, 12, 4)  # longer than the sliding windows (6) and local attention (8)
