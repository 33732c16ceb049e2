"""attn_implementation="attnswitch" under torch.compile: no graph break in BERT, ModernBERT,
Llama and Gemma2-style models (padded and packed batches), `fullgraph=True` compiles, and
the compiled model's hidden states pass the oracle rule (hf_testing.py).

The compiles use the `aot_eager` backend: it runs dynamo and AOT autograd on fake tensors (so
the custom op's fake kernel and its schema are exercised) without inductor's C++ compile,
which takes tens of seconds per model on a CPU; one test compiles BERT with inductor."""

from __future__ import annotations

import contextlib

import pytest
import torch
from hf_testing import PACKED_LENGTHS, hidden, packed_inputs, padded_inputs, per_sequence, rule

import attnswitch

FAMILIES = ("bert", "modernbert", "llama", "gemma2")
# Gemma2's softcap is served on CPU by torch-flex, whose first compile (about 25 s) its own
# tests pay; here torch-math serves it, as the graph around the op is what is tested.
_BACKEND = {"gemma2": "torch-math"}


def _inputs(family: str, layout: str) -> dict:
    if layout == "packed":
        return packed_inputs(family, PACKED_LENGTHS)
    ids, mask = padded_inputs("right")
    return {"input_ids": ids, "attention_mask": mask}


def _oracle_check(m, inputs: dict, layout: str, out: torch.Tensor) -> tuple[float, float]:
    """(error, bound) of the oracle rule for hidden states `out` of `inputs`."""
    if layout == "packed":
        pieces = torch.split(inputs["input_ids"][0], PACKED_LENGTHS)
        alone = lambda model: torch.cat([hidden(model, input_ids=p[None])[0] for p in pieces])  # noqa: E731
        return rule(out[0], alone(m.eager), alone(m.oracle))
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    real = mask.bool()
    return rule(out[real], hidden(m.eager, **inputs)[real], per_sequence(m.oracle, ids, mask))


@pytest.mark.parametrize("layout", ["padded", "packed"])
@pytest.mark.parametrize("family", FAMILIES)
def test_compiled_model_has_no_graph_break_and_obeys_the_rule(models, family, layout):
    m = models(family)
    inputs = _inputs(family, layout)

    def forward(**kw):
        return m.attnswitch(**kw).last_hidden_state

    use = attnswitch.use(_BACKEND[family]) if family in _BACKEND else contextlib.nullcontext()
    torch._dynamo.reset()
    with use, torch.inference_mode():
        explained = torch._dynamo.explain(forward)(**inputs)
        compiled = torch.compile(forward, fullgraph=True, backend="aot_eager")
        out = compiled(**inputs)
        eager = forward(**inputs)
    assert explained.graph_break_count == 0, [str(r.reason) for r in explained.break_reasons]
    assert explained.graph_count == 1
    err, bound = _oracle_check(m, inputs, layout, out)
    assert err <= bound, f"{family}/{layout}: error {err:.3g} > bound {bound:.3g}"
    torch.testing.assert_close(out, eager, rtol=0, atol=0)  # the op runs the eager mapping


def test_attention_runs_as_one_op_per_layer(models):
    """The graph holds one `attnswitch::hf_attention` node per layer and nothing of the
    attnswitch Python (no mask analysis, no planning)."""
    m = models("llama")
    inputs = _inputs("llama", "padded")
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    with torch.inference_mode():
        torch.compile(
            lambda **kw: m.attnswitch(**kw).last_hidden_state, fullgraph=True, backend=capture
        )(**inputs)
    targets = [str(n.target) for g in graphs for n in g.graph.nodes if n.op == "call_function"]
    ops = [t for t in targets if "attnswitch" in t]
    assert ops == ["attnswitch.hf_attention"] * m.attnswitch.config.num_hidden_layers


def test_inductor_compiles_bert_fullgraph(models):
    m = models("bert")
    inputs = _inputs("bert", "padded")

    def forward(**kw):
        return m.attnswitch(**kw).last_hidden_state

    torch._dynamo.reset()
    with torch.inference_mode():
        out = torch.compile(forward, fullgraph=True)(**inputs)
    err, bound = _oracle_check(m, inputs, "padded", out)
    assert err <= bound, f"inductor: error {err:.3g} > bound {bound:.3g}"


def test_compiled_training_step_matches_eager_gradients(models):
    """The op's backward (recompute and differentiate) under torch.compile."""
    m = models("bert")
    ids, mask = padded_inputs("right")
    model = m.attnswitch

    def loss(**kw):
        return model(**kw).last_hidden_state.square().mean()

    def grads(fn):
        model.zero_grad()
        fn(input_ids=ids, attention_mask=mask).backward()
        return [p.grad.clone() for p in model.parameters() if p.grad is not None]

    eager = grads(loss)
    torch._dynamo.reset()
    compiled = grads(torch.compile(loss, fullgraph=True, backend="aot_eager"))
    model.zero_grad()
    assert len(eager) == len(compiled) > 0
    for e, c in zip(eager, compiled, strict=True):
        torch.testing.assert_close(c, e, rtol=1e-4, atol=1e-6)
