"""attn_implementation="attnswitch": registration, mask mapping, and hidden states of real
transformers models (random-initialised, small) against a float64 eager oracle."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from hf_testing import (
    CAUSAL,
    FAMILIES,
    PACKED_LENGTHS,
    hidden,
    packed_inputs,
    padded_inputs,
    per_sequence,
    rule,
    torch_backends,
)

import attnswitch
from attnswitch.integrations import transformers as hf

BACKENDS = torch_backends()


def _run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=240
    )


# ---- registration ---------------------------------------------------------------------


def test_import_attnswitch_imports_neither_transformers_nor_torch():
    result = _run_python("""
        import sys, attnswitch
        print(sorted(m for m in ("transformers", "torch") if m in sys.modules))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "setup", ["import attnswitch", "import attnswitch.integrations as i; i.install()"]
)
def test_registered_when_transformers_is_imported_afterwards(setup):
    result = _run_python(f"""
        {setup}
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface
        print("attnswitch" in AttentionInterface._global_mapping,
              "attnswitch" in AttentionMaskInterface._global_mapping)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"], result.stderr


def test_registered_when_transformers_was_imported_before():
    result = _run_python("""
        import transformers.modeling_utils, transformers.masking_utils
        import attnswitch.integrations as i
        i.install()
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface
        print(AttentionInterface._global_mapping["attnswitch"].__name__,
              AttentionMaskInterface._global_mapping["attnswitch"].__name__)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["attention_forward", "mask_function"]


def test_from_pretrained_needs_nothing_else(tmp_path, models):
    models("bert").eager.save_pretrained(tmp_path)
    from transformers import AutoModel

    model = AutoModel.from_pretrained(tmp_path, attn_implementation="attnswitch").eval()
    assert model.config._attn_implementation == "attnswitch"
    ids = torch.randint(1, 100, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 5:] = 0
    plan = hf.explain_model(model, {"input_ids": ids, "attention_mask": mask})
    assert plan.chosen is not None
    assert "key_padding_mask" in plan.call.features


# ---- hidden states against the float64 oracle ----------------------------------------------


def _plan_or_skip(model: object, inputs: dict, backend: str) -> attnswitch.Plan:
    plan = hf.explain_model(model, inputs)
    if not plan.candidates:
        reasons = "; ".join(plan.reasons(backend))
        pytest.skip(f"{backend} declines this model's attention: {reasons}")
    return plan


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("family", FAMILIES)
def test_padded_batch_matches_eager_oracle(models, family, side, backend):
    m = models(family)
    ids, mask = padded_inputs(side)
    inputs = {"input_ids": ids, "attention_mask": mask}
    with attnswitch.use(backend):
        plan = _plan_or_skip(m.attnswitch, inputs, backend)
        out = hidden(m.attnswitch, **inputs)
    assert plan.chosen == backend
    real = mask.bool()
    err, bound = rule(out[real], hidden(m.eager, **inputs)[real], per_sequence(m.oracle, ids, mask))
    assert err <= bound, f"{family}/{side}/{backend}: error {err:.3g} > bound {bound:.3g}"


@pytest.mark.parametrize("family", FAMILIES)
def test_packed_batch_takes_the_packed_layout(models, family):
    plan = hf.explain_model(models(family).attnswitch, packed_inputs(family, PACKED_LENGTHS))
    assert plan.call.layout == "packed"
    assert plan.call.seqlens_q == PACKED_LENGTHS
    assert plan.call.causal == (family in CAUSAL)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_packed_batch_matches_each_sequence_alone(models, family, backend):
    m = models(family)
    inputs = packed_inputs(family, PACKED_LENGTHS)
    with attnswitch.use(backend):
        _plan_or_skip(m.attnswitch, inputs, backend)
        out = hidden(m.attnswitch, **inputs)[0]
    pieces = torch.split(inputs["input_ids"][0], PACKED_LENGTHS)
    alone = lambda model: torch.cat([hidden(model, input_ids=p[None])[0] for p in pieces])  # noqa: E731
    err, bound = rule(out, alone(m.eager), alone(m.oracle))
    assert err <= bound, f"{family}/{backend}: error {err:.3g} > bound {bound:.3g}"


def test_rule_rejects_a_dropped_padding_mask(models):
    """Negative control: the rule has teeth. Dropping the padding mask of a padded batch
    moves the real tokens' hidden states far outside the bound."""
    m = models("bert")
    ids, mask = padded_inputs("right")
    real = mask.bool()
    out = hidden(m.attnswitch, input_ids=ids)  # no attention_mask: padding attended
    err, bound = rule(
        out[real],
        hidden(m.eager, input_ids=ids, attention_mask=mask)[real],
        per_sequence(m.oracle, ids, mask),
    )
    assert err > 100 * bound


@pytest.mark.parametrize("family", CAUSAL)
def test_causal_model_keeps_its_causal_mask(models, family):
    model = models(family).attnswitch
    gen = torch.Generator().manual_seed(3)
    a = torch.randint(3, 100, (1, 16), generator=gen)
    b = a.clone()
    b[0, 10:] = (a[0, 10:] + 7) % 97 + 3  # change only the future tokens
    ha, hb = hidden(model, input_ids=a)[0], hidden(model, input_ids=b)[0]
    past = float((ha[:10] - hb[:10]).abs().max())
    future = float((ha[10:] - hb[10:]).abs().max())
    rounding = 4 * torch.finfo(torch.float32).eps * float(ha.abs().max())
    assert future > 100 * rounding  # the change is visible where it may be
    assert past <= rounding


def test_bidirectional_model_sees_future_tokens(models):
    """Control for the causal test: in an encoder a later token changes earlier states."""
    model = models("bert").attnswitch
    a = torch.randint(3, 100, (1, 16), generator=torch.Generator().manual_seed(3))
    b = a.clone()
    b[0, 10:] = (a[0, 10:] + 7) % 97 + 3
    ha, hb = hidden(model, input_ids=a)[0], hidden(model, input_ids=b)[0]
    rounding = 4 * torch.finfo(torch.float32).eps * float(ha.abs().max())
    assert float((ha[:10] - hb[:10]).abs().max()) > 100 * rounding


# ---- mapping transformers' arguments onto the contract ------------------------------------


class _Module(torch.nn.Module):
    def __init__(self, is_causal: bool, groups: int = 1):
        super().__init__()
        self.is_causal = is_causal
        self.num_key_value_groups = groups


def _qkv(b=2, hq=4, hkv=2, sq=10, sk=10, d=8, dtype=torch.float32):
    gen = torch.Generator().manual_seed(4)
    q = torch.randn(b, hq, sq, d, generator=gen, dtype=dtype)
    k = torch.randn(b, hkv, sk, d, generator=gen, dtype=dtype)
    v = torch.randn(b, hkv, sk, d, generator=gen, dtype=dtype)
    return q, k, v


def _sdpa_mask(mask_function, padding, q_length=10, kv_length=10):
    from transformers.masking_utils import sdpa_mask

    return sdpa_mask(
        batch_size=padding.shape[0],
        q_length=q_length,
        kv_length=kv_length,
        mask_function=mask_function,
        attention_mask=padding,
        allow_is_causal_skip=False,
    )


def _padding(left: bool = False) -> torch.Tensor:
    pad = torch.ones(2, 10, dtype=torch.bool)
    if left:
        pad[1, :4] = False
    else:
        pad[1, 6:] = False
    return pad


def _same_as_dense(qkv, options, dense_mask):
    """The mapped call and the plain dense-mask call give the same float64 result."""
    (q, k, v) = qkv
    mapped = attnswitch.attention(q, k, v, **options, backend="reference")
    q0, k0, v0 = (x.transpose(1, 2) for x in _qkv())
    dense = attnswitch.attention(q0, k0, v0, attn_mask=dense_mask, backend="reference")
    torch.testing.assert_close(mapped.reshape(dense.shape), dense, rtol=0, atol=1e-6)


def test_bidirectional_padding_becomes_key_padding_mask():
    from transformers.masking_utils import bidirectional_mask_function

    pad = _padding()
    mask = _sdpa_mask(bidirectional_mask_function, pad)
    qkv, options, shape = hf.contract_arguments(_Module(False), *_qkv(), mask)
    assert "attn_mask" not in options and not options["causal"]
    assert torch.equal(options["key_padding_mask"], pad)
    assert qkv[1].shape == (2, 10, 2, 8)  # GQA heads not repeated, BSHD
    assert shape == (2, 10, 4, 8)
    _same_as_dense(qkv, options, mask)


def test_causal_left_padding_becomes_causal_and_key_padding():
    from transformers.masking_utils import causal_mask_function

    pad = _padding(left=True)
    mask = _sdpa_mask(causal_mask_function, pad)
    qkv, options, _ = hf.contract_arguments(_Module(True), *_qkv(), mask)
    assert options["causal"] and options["window"] is None and "attn_mask" not in options
    assert torch.equal(options["key_padding_mask"], pad)
    _same_as_dense(qkv, options, mask)


def test_sliding_window_becomes_window():
    from transformers.masking_utils import sliding_window_causal_mask_function

    mask = _sdpa_mask(sliding_window_causal_mask_function(4), _padding())
    qkv, options, _ = hf.contract_arguments(_Module(True), *_qkv(), mask, sliding_window=4)
    assert options["causal"] and options["window"] == (3, 3)
    _same_as_dense(qkv, options, mask)


def test_a_mask_changed_in_place_is_analysed_again():
    """The analysis cached on the mask tensor is keyed on its version counter: a mask
    rewritten in place (a new padding row) maps to the new padding, not the cached one."""
    from transformers.masking_utils import bidirectional_mask_function

    pad = _padding()
    mask = _sdpa_mask(bidirectional_mask_function, pad)
    _, options, _ = hf.contract_arguments(_Module(False), *_qkv(), mask)
    assert torch.equal(options["key_padding_mask"], pad)
    pad[0, 8:] = False
    mask.copy_(_sdpa_mask(bidirectional_mask_function, pad))
    qkv, options, _ = hf.contract_arguments(_Module(False), *_qkv(), mask)
    assert torch.equal(options["key_padding_mask"], pad)
    _same_as_dense(qkv, options, mask)


def test_irregular_mask_is_passed_as_attn_mask():
    mask = torch.rand(2, 1, 10, 10, generator=torch.Generator().manual_seed(5)) > 0.4
    qkv, options, _ = hf.contract_arguments(_Module(False), *_qkv(), mask)
    assert options["attn_mask"] is mask
    assert "key_padding_mask" not in options
    _same_as_dense(qkv, options, mask)


def test_additive_float_mask_is_read_as_boolean():
    from transformers.masking_utils import bidirectional_mask_function

    pad = _padding()
    boolean = _sdpa_mask(bidirectional_mask_function, pad)
    additive = torch.where(boolean, 0.0, torch.finfo(torch.float32).min)
    _, options, _ = hf.contract_arguments(_Module(False), *_qkv(), additive)
    assert torch.equal(options["key_padding_mask"], pad)


def test_additive_bias_is_refused():
    bias = torch.randn(2, 1, 10, 10)
    with pytest.raises(ValueError, match="attention_mask: expected a boolean mask or an additive"):
        hf.contract_arguments(_Module(False), *_qkv(), bias)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"dropout": 0.1}, "dropout: expected 0.0"),
        ({"s_aux": torch.zeros(4)}, "s_aux: expected None"),
        ({"position_bias": torch.zeros(1, 4, 10, 10)}, "position_bias: expected None"),
    ],
)
def test_features_outside_the_contract_are_refused(kwargs, message):
    module = _Module(False).train()
    with pytest.raises(ValueError, match=message):
        hf.contract_arguments(module, *_qkv(), None, **kwargs)


def test_no_mask_causal_prefill_of_a_static_cache_crops_keys():
    """sdpa's skip leaves keys beyond the queries (empty static-cache slots): cropped, as
    sdpa does, since its top-left causal never reaches them."""
    qkv, options, _ = hf.contract_arguments(_Module(True), *_qkv(sq=6, sk=10), None)
    assert options["causal"] and qkv[1].shape[1] == 6


def test_no_mask_decode_step_attends_every_key():
    qkv, options, _ = hf.contract_arguments(_Module(True), *_qkv(sq=1, sk=10), None)
    assert not options["causal"] and qkv[1].shape[1] == 10


def test_explain_model_refuses_a_model_without_attnswitch(models):
    with pytest.raises(ValueError, match="attn_implementation='attnswitch'"):
        hf.explain_model(models("bert").eager, {"input_ids": torch.tensor([[5, 6, 7]])})


# ---- packed batches: the per-layer mapping reads nothing on the host -----------------------


class _HostReads(torch.overrides.TorchFunctionMode):
    """Records the tensor methods that copy values to the host."""

    READS = {"tolist", "item", "__bool__", "__int__", "__float__", "equal", "numpy"}

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        if name in self.READS:
            self.seen.append(name)
        return func(*args, **(kwargs or {}))


def _packed_causal(lengths):
    """A batch-1 packed causal call: q/k/v `[1, H, T, D]`, cu_seqlens, and the bool mask
    `[1, 1, T, T]` that is causal inside each sequence."""
    total = sum(lengths)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    seg = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    pos = torch.arange(total)
    mask = (seg[:, None] == seg[None, :]) & (pos[None, :] <= pos[:, None])
    return _qkv(b=1, sq=total, sk=total), cu, mask[None, None]


def test_packed_mask_is_mapped_once_per_forward_without_host_reads():
    """Every layer of a forward gets the same mask and cu_seqlens tensors: after the first
    layer the packed form comes from the cache with no host read (no `cu.tolist()`, which
    is a device synchronisation per layer on a GPU)."""
    (q, k, v), cu, mask = _packed_causal([3, 4, 3])
    first = hf.contract_arguments(
        _Module(True),
        q,
        k,
        v,
        mask,
        cu_seq_lens_q=cu,
        cu_seq_lens_k=cu,
        max_length_q=4,
        max_length_k=4,
    )
    assert first[1]["causal"] and "attn_mask" not in first[1]
    reads = _HostReads()
    with reads:
        again = hf.contract_arguments(
            _Module(True),
            q,
            k,
            v,
            mask,
            cu_seq_lens_q=cu,
            cu_seq_lens_k=cu,
            max_length_q=4,
            max_length_k=4,
        )
    assert reads.seen == []
    assert again[1]["causal"] and again[1]["max_seqlen_q"] == 4


def test_packed_form_is_keyed_on_the_sequences_not_only_the_mask():
    """The same mask with other sequences (a new cu_seqlens tensor, or one changed in place)
    is analysed again: under cu [0, 4, 10] the causal blocks of [0, 5, 10] do not follow
    the packed pattern, so the mask goes in densely."""
    (q, k, v), cu, mask = _packed_causal([5, 5])
    _, options, _ = hf.contract_arguments(
        _Module(True), q, k, v, mask, cu_seq_lens_q=cu, cu_seq_lens_k=cu
    )
    assert "attn_mask" not in options
    other = torch.tensor([0, 4, 10], dtype=torch.int32)
    _, options, _ = hf.contract_arguments(
        _Module(True), q, k, v, mask, cu_seq_lens_q=other, cu_seq_lens_k=other
    )
    assert "attn_mask" in options
    cu.copy_(other)
    _, options, _ = hf.contract_arguments(
        _Module(True), q, k, v, mask, cu_seq_lens_q=cu, cu_seq_lens_k=cu
    )
    assert "attn_mask" in options
