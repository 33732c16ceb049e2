"""One definition of the attention options (`kernels/options.py`): the public signature,
`explain`, `contract.validate`, the torch op's Python form and the custom ops' schemas are
derived from `AttentionOptions`, and agree with it and with the documented semantics."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
import torch

import attnswitch as asw
from attnswitch.kernels import contract, options, plan, torch_op
from attnswitch.kernels.options import AttentionOptions

KEYWORD_FORMS = {
    "attnswitch.kernels": asw.attention,
    "attnswitch.explain": asw.explain,
    "plan.attention": plan.attention,
    "contract.validate": contract.validate,
    "torch_op.attention": torch_op.attention,
}


@pytest.mark.parametrize("where", list(KEYWORD_FORMS))
def test_keyword_signatures_are_the_options(where: str) -> None:
    params = list(inspect.signature(KEYWORD_FORMS[where]).parameters.values())
    assert [p.name for p in params[:3]] == ["q", "k", "v"], where
    got = [(p.name, p.kind, p.default) for p in params[3:]]
    want = [
        (f.name, inspect.Parameter.KEYWORD_ONLY, f.default)
        for f in dataclasses.fields(AttentionOptions)
    ]
    assert got == want, f"{where}: expected the fields of AttentionOptions, got {got}"


@pytest.mark.parametrize(
    ("op", "leading"),
    [
        ("attention", ["q", "k", "v"]),
        ("attention_backward", ["grad_out", "grad_lse", "out", "lse", "q", "k", "v"]),
    ],
)
def test_op_schemas_are_the_options(op: str, leading: list[str]) -> None:
    schema = getattr(torch.ops.attnswitch, op).default._schema
    names = [a.name for a in schema.arguments]
    assert names == leading + list(options.NAMES), f"{op}: {names}"
    text = str(schema)
    for name, op_type in zip(options.NAMES, options.OP_TYPES, strict=True):
        assert f"{op_type} {name}" in text, f"{op}: expected '{op_type} {name}' in {text}"


def test_the_public_docstring_documents_every_option() -> None:
    doc = asw.attention.__doc__
    # "max_seqlen_q/k" documents both max_seqlen_q and max_seqlen_k
    missing = [n for n in options.NAMES if n not in doc and f"{n[:-2]}_q/k" not in doc]
    assert not missing, f"attention's docstring: expected every option, missing {missing}"


def test_op_arguments_round_trip() -> None:
    given = AttentionOptions(
        causal=True,
        scale=2,
        window=(3, -1),
        softcap=1,
        max_seqlen_q=4,
        return_lse=True,
        backend="torch-math",
    )
    values = options.to_op(given)
    assert values[options.NAMES.index("window")] == [3, -1]
    assert isinstance(values[options.NAMES.index("scale")], float)
    assert options.from_op(values) == dataclasses.replace(given, scale=2.0, softcap=1.0)


def test_unknown_keyword_is_refused_like_python_would() -> None:
    q = np.zeros((1, 2, 1, 4), np.float32)
    with pytest.raises(
        TypeError, match="attention\\(\\) got an unexpected keyword argument 'casual'"
    ):
        asw.attention(q, q, q, casual=True)
    with pytest.raises(TypeError, match="explain\\(\\) got an unexpected keyword argument"):
        asw.explain(q, q, q, windows=(1, 1))


def test_every_option_reaches_the_call() -> None:
    """Options given by keyword arrive in the `Call` the backend reads."""
    q = np.zeros((2, 5, 4, 8), np.float32)
    k = np.zeros((2, 7, 2, 8), np.float32)
    kp = np.ones((2, 7), bool)
    call = contract.validate(
        q,
        k,
        k,
        causal=True,
        scale=0.5,
        window=(3, 1),
        softcap=4.0,
        key_padding_mask=kp,
        return_lse=True,
    )
    assert (
        call.causal,
        call.scale,
        call.window,
        call.softcap,
        call.key_padding,
        call.return_lse,
    ) == (True, 0.5, (3, 1), 4.0, True, True)
    assert call.key_padding_mask is kp
