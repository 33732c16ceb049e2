"""The options of one attention call, defined once: `AttentionOptions`, a frozen dataclass
carried from `attnswitch.attention` through planning and validation to the `Call` a backend
reads, and through the torch custom op.

Everything that spells the options out is derived from the dataclass's fields:
- the keyword signatures of `attention`, `explain` and `contract.validate`
  (`keyword_form`: `fn(q, k, v, options)` called as `fn(q, k, v, *, causal=..., ...)`);
- the schema of the custom op `attnswitch::attention` (`op_schema`, each field's `op` type)
  and the conversion of options to and from its positional arguments (`to_op`, `from_op`).
A new option is one new field here (and its meaning in `contract.validate`).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

R = TypeVar("R")


def _option(default: Any, op: str) -> Any:
    """A field whose custom-op schema type is `op`."""
    return field(default=default, metadata={"op": op})


@dataclass(frozen=True)
class AttentionOptions:
    """Every keyword argument of `attnswitch.attention` (its docstring states the semantics).

    causal: bottom-right aligned causal masking. scale: logit scale, None = 1/sqrt(D).
    key_padding_mask: bool `[B, Sk]`; attn_mask: bool broadcastable to `[B, Hq, Sq, Sk]`.
    window: (left, right), -1 unbounded. softcap: c in `c * tanh(logits / c)`.
    cu_seqlens_q/k: int32 `[N + 1]` (packed layout); max_seqlen_q/k: their host-side maxima.
    return_lse: return `(out, lse)`. backend: run this registered backend, no fallback.
    Values are as the caller passed them; `contract.validate` checks them.
    """

    causal: bool = _option(False, "bool")
    scale: float | None = _option(None, "float?")
    key_padding_mask: Any = _option(None, "Tensor?")
    attn_mask: Any = _option(None, "Tensor?")
    window: tuple[int, int] | None = _option(None, "int[]?")
    softcap: float | None = _option(None, "float?")
    cu_seqlens_q: Any = _option(None, "Tensor?")
    cu_seqlens_k: Any = _option(None, "Tensor?")
    max_seqlen_q: int | None = _option(None, "int?")
    max_seqlen_k: int | None = _option(None, "int?")
    return_lse: bool = _option(False, "bool")
    backend: str | None = _option(None, "str?")


FIELDS: tuple[dataclasses.Field, ...] = dataclasses.fields(AttentionOptions)
NAMES: tuple[str, ...] = tuple(f.name for f in FIELDS)
OP_TYPES: tuple[str, ...] = tuple(f.metadata["op"] for f in FIELDS)
TENSORS: tuple[str, ...] = tuple(n for n, t in zip(NAMES, OP_TYPES) if t == "Tensor?")
ARRAYS = ("q", "k", "v")  # the positional arguments before the options


def of(function: str, keywords: Mapping[str, Any]) -> AttentionOptions:
    """The options named by `keywords`; an unknown name raises TypeError as Python would for
    `function`."""
    for name in keywords:
        if name not in NAMES:
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")
    return AttentionOptions(**keywords)


def signature(returns: Any = inspect.Signature.empty) -> inspect.Signature:
    """`(q, k, v, *, <every option with its default>)`."""
    head = [
        inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="Any")
        for n in ARRAYS
    ]
    tail = [
        inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type
        )
        for f in FIELDS
    ]
    return inspect.Signature(head + tail, return_annotation=returns)


def keyword_form(fn: Callable[..., R], name: str | None = None) -> Callable[..., R]:
    """`fn(q, k, v, options)` as `name(q, k, v, *, causal=False, ...)`: the keyword form,
    with the signature `signature()` (what `help` and `inspect.signature` show) and `fn`'s
    docstring. `.with_options` is `fn` itself, for callers that hold the options."""
    name = name or fn.__name__

    def call(q: Any, k: Any, v: Any, **keywords: Any) -> R:
        return fn(q, k, v, of(name, keywords))

    call.__name__ = call.__qualname__ = name
    call.__module__ = fn.__module__
    call.__doc__ = fn.__doc__
    call.__signature__ = signature(inspect.signature(fn).return_annotation)  # type: ignore[attr-defined]
    call.with_options = fn  # type: ignore[attr-defined]
    return call


# ---- the torch custom op's arguments -------------------------------------------------------


def op_schema(leading: tuple[str, ...], returns: str) -> str:
    """The schema of an op taking the `leading` arguments (e.g. "Tensor q"), then every
    option in field order."""
    args = [*leading, *(f"{t} {n}" for n, t in zip(NAMES, OP_TYPES))]
    return f"({', '.join(args)}) -> {returns}"


def to_op(options: AttentionOptions) -> tuple[Any, ...]:
    """The options as an op's positional arguments (field order): a window as a list, an
    int scale or softcap as a float (the schema's `float?`; anything else unchanged, for the
    contract to refuse with its own message)."""
    values = []
    for name, op_type in zip(NAMES, OP_TYPES):
        x = getattr(options, name)
        if op_type == "float?" and isinstance(x, int) and not isinstance(x, bool):
            x = float(x)
        elif op_type == "int[]?" and isinstance(x, tuple):
            x = list(x)
        values.append(x)
    return tuple(values)


def from_op(values: tuple[Any, ...]) -> AttentionOptions:
    """The options from an op's positional option arguments (`to_op`'s inverse)."""
    if len(values) != len(NAMES):
        raise TypeError(f"options: expected {len(NAMES)} op arguments, got {len(values)}")
    kw = dict(zip(NAMES, values))
    if isinstance(kw["window"], list):
        kw["window"] = tuple(kw["window"])
    return AttentionOptions(**kw)
