"""The jax engine: the BERT encoder family written natively in JAX (jax.numpy + jax.jit).

Same safetensors weights and tokenizer as the torch engine; attention is
`attnswitch.attention` on jax arrays inside `jax.jit`, so the planner picks the jax backend
(XLA on CPU/GPU, Pallas kernels on TPU). This is the TPU path.

Served: `model_type` "bert" (BERT, MiniLM, ...) and the RoBERTa family ("roberta",
"xlm-roberta", "camembert": the same layers, with positions numbered from `pad_token_id + 1`
over the real tokens). Post-LayerNorm encoder:

    x = LN(word[ids] + position[pos] + token_type[0])
    per layer: x = LN(x + Wo attention(Wq x, Wk x, Wv x)); x = LN(x + W2 act(W1 x))

Layers are stacked and run with `lax.scan`, so a shape compiles one layer body. Shapes are
bucketed (sequence lengths rounded up to `BUCKETS`, a fixed batch size per bucket, spare
rows fully masked) so that a corpus compiles a handful of programs, not one per batch.
Precision "bf16" runs matmuls and attention in bfloat16 with float32 accumulation and
float32 LayerNorm and residuals; "fp32" is float32 throughout.
"""

from __future__ import annotations

import functools
import time
from types import MappingProxyType
from typing import Any

import numpy as np

from attnswitch.engines.base import Encoder
from attnswitch.engines.model import ModelError, ModelSpec
from attnswitch.engines.registry import Engine, library_version

MODEL_TYPES = ("bert", "roberta", "xlm-roberta", "camembert")
_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert")
BUCKETS = (16, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512)
_ACTIVATIONS = MappingProxyType(
    {
        "gelu": "erf",
        "gelu_python": "erf",
        "gelu_new": "tanh",
        "gelu_pytorch_tanh": "tanh",
        "gelu_fast": "tanh",
        "relu": "relu",
        "silu": "silu",
        "swish": "silu",
    }
)
_PREFIXES = ("bert.", "roberta.", "model.")


def bucket(length: int) -> int:
    """The padded sequence length a batch of longest text `length` compiles for."""
    for b in BUCKETS:
        if length <= b:
            return b
    return -(-length // 64) * 64


def load_params(spec: ModelSpec, dtype: Any) -> dict[str, Any]:
    """The model's safetensors weights as jax arrays: embeddings, and every layer's weights
    stacked on a leading layer axis. Linear weights are transposed to `[in, out]` and cast to
    `dtype` (the matmul dtype); embeddings, biases and LayerNorm stay float32."""
    import jax.numpy as jnp
    from safetensors.numpy import load_file

    files = sorted(spec.path.glob("*.safetensors"))
    if not files:
        raise ModelError(f"model: expected *.safetensors weights in {str(spec.path)!r}, got none")
    raw: dict[str, np.ndarray] = {}
    for f in files:
        raw.update(load_file(str(f)))
    weights = {}
    for name, value in raw.items():
        for prefix in _PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix) :]
                break
        weights[
            name.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
                "LayerNorm.beta", "LayerNorm.bias"
            )
        ] = value

    def get(name: str) -> np.ndarray:
        if name not in weights:
            raise ModelError(f"weights: expected tensor {name!r} in {str(spec.path)!r}, got none")
        return weights[name].astype(np.float32)

    n_layers = int(spec.config["num_hidden_layers"])

    def stack(suffix: str, linear: bool = False) -> Any:
        arrays = [get(f"encoder.layer.{i}.{suffix}") for i in range(n_layers)]
        if linear:
            return jnp.asarray(np.stack([a.T for a in arrays]), dtype=dtype)
        return jnp.asarray(np.stack(arrays))

    def fused_qkv(i: int, kind: str) -> np.ndarray:
        """Query, key and value of layer i side by side: weights `[in, 3 * out]`, biases."""
        parts = [
            get(f"encoder.layer.{i}.attention.self.{p}.{kind}") for p in ("query", "key", "value")
        ]
        if kind == "weight":
            return np.concatenate([w.T for w in parts], axis=1)
        return np.concatenate(parts)

    wqkv = np.stack([fused_qkv(i, "weight") for i in range(n_layers)])
    bqkv = np.stack([fused_qkv(i, "bias") for i in range(n_layers)])
    return {
        "word": jnp.asarray(get("embeddings.word_embeddings.weight")),
        "position": jnp.asarray(get("embeddings.position_embeddings.weight")),
        "token_type": jnp.asarray(get("embeddings.token_type_embeddings.weight")[0]),
        "emb_ln_g": jnp.asarray(get("embeddings.LayerNorm.weight")),
        "emb_ln_b": jnp.asarray(get("embeddings.LayerNorm.bias")),
        "layers": {
            "wqkv": jnp.asarray(wqkv, dtype=dtype),
            "bqkv": jnp.asarray(bqkv),
            "wo": stack("attention.output.dense.weight", linear=True),
            "bo": stack("attention.output.dense.bias"),
            "ln1_g": stack("attention.output.LayerNorm.weight"),
            "ln1_b": stack("attention.output.LayerNorm.bias"),
            "wi": stack("intermediate.dense.weight", linear=True),
            "bi": stack("intermediate.dense.bias"),
            "wo2": stack("output.dense.weight", linear=True),
            "bo2": stack("output.dense.bias"),
            "ln2_g": stack("output.LayerNorm.weight"),
            "ln2_b": stack("output.LayerNorm.bias"),
        },
    }


def _layer_norm(x: Any, g: Any, b: Any, eps: float) -> Any:
    import jax
    import jax.numpy as jnp

    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * g + b


def _dense(x: Any, w: Any, b: Any) -> Any:
    """x @ w + b with float32 accumulation; float32 weights get full float32 precision (TPUs
    otherwise multiply float32 in bfloat16 passes)."""
    import jax
    import jax.numpy as jnp

    precision = jax.lax.Precision.HIGHEST if w.dtype == jnp.float32 else None
    return (
        jnp.dot(x.astype(w.dtype), w, precision=precision, preferred_element_type=jnp.float32) + b
    )


def _activation(kind: str, x: Any) -> Any:
    import jax

    if kind == "erf":
        return jax.nn.gelu(x, approximate=False)
    if kind == "tanh":
        return jax.nn.gelu(x, approximate=True)
    if kind == "relu":
        return jax.nn.relu(x)
    return jax.nn.silu(x)


def hidden_states(
    params: dict[str, Any],
    ids: Any,
    mask: Any,
    *,
    heads: int,
    eps: float,
    activation: str,
    position_offset: int | None,
    dtype: Any,
) -> Any:
    """Last hidden states float32 `[B, S, H]` for right-padded ids `[B, S]` and the bool mask
    of real tokens `[B, S]` (traceable)."""
    import jax
    import jax.numpy as jnp

    # here, not at the top: the engine registry imports this module (its descriptor), and
    # a process that never runs jax needs no attention planner
    from attnswitch.kernels.entry import attention

    b, s = ids.shape
    if position_offset is None:
        positions = jnp.broadcast_to(jnp.arange(s), (b, s))
    else:  # RoBERTa: real tokens numbered from padding_idx + 1, padding at padding_idx
        m = mask.astype(jnp.int32)
        positions = jnp.cumsum(m, axis=1) * m + position_offset
    x = params["word"][ids] + params["position"][positions] + params["token_type"]
    x = _layer_norm(x, params["emb_ln_g"], params["emb_ln_b"], eps)
    hidden = x.shape[-1]
    head_dim = hidden // heads

    def layer(x: Any, p: dict[str, Any]) -> tuple[Any, None]:
        qkv = _dense(x, p["wqkv"], p["bqkv"]).astype(dtype)
        q, k, v = (t.reshape(b, s, heads, head_dim) for t in jnp.split(qkv, 3, axis=-1))
        a = attention(q, k, v, key_padding_mask=mask).reshape(b, s, hidden)
        x = _layer_norm(x + _dense(a, p["wo"], p["bo"]), p["ln1_g"], p["ln1_b"], eps)
        h = _activation(activation, _dense(x, p["wi"], p["bi"]))
        x = _layer_norm(x + _dense(h, p["wo2"], p["bo2"]), p["ln2_g"], p["ln2_b"], eps)
        return x, None

    x, _ = jax.lax.scan(layer, x, params["layers"])
    return x


def pool(x: Any, mask: Any, mode: str, normalize: bool) -> Any:
    """Pooled float32 `[B, H]` over the real tokens of `x [B, S, H]` (see `engines.base`)."""
    import jax.numpy as jnp

    m = mask.astype(x.dtype)
    lengths = jnp.sum(m, axis=1)
    if mode == "cls":
        out = x[:, 0]
    elif mode == "last":
        last = jnp.maximum(lengths.astype(jnp.int32) - 1, 0)
        out = x[jnp.arange(x.shape[0]), last]
    else:
        out = jnp.sum(x * m[..., None], axis=1) / jnp.maximum(lengths, 1e-9)[:, None]
    if normalize:
        norm = jnp.sqrt(jnp.sum(out * out, axis=1, keepdims=True))
        out = out / jnp.maximum(norm, 1e-12)
    return out


class JaxEncoder(Encoder):
    engine = "jax"
    default_batch_tokens = 2048
    max_batch = 16

    def __init__(self, spec: ModelSpec, precision: str = "fp32"):
        super().__init__(spec, precision)
        if spec.model_type not in MODEL_TYPES:
            raise ModelError(
                f"model: expected a model_type among {', '.join(MODEL_TYPES)} for the jax "
                f"engine, got {spec.model_type!r} (the torch engine serves any transformers model)"
            )
        act = str(spec.config.get("hidden_act", "gelu"))
        if act not in _ACTIVATIONS:
            raise ModelError(f"hidden_act: expected one of {', '.join(_ACTIVATIONS)}, got {act!r}")
        start = time.perf_counter()
        import jax
        import jax.numpy as jnp

        self.load_times["import_s"] = time.perf_counter() - start
        start = time.perf_counter()
        self._dtype = jnp.bfloat16 if precision == "bf16" else jnp.float32
        self.params = load_params(spec, self._dtype)
        self._heads = int(spec.config["num_attention_heads"])
        options = dict(
            heads=self._heads,
            eps=float(spec.config.get("layer_norm_eps", 1e-12)),
            activation=_ACTIVATIONS[act],
            dtype=self._dtype,
            position_offset=spec.pad_token_id if spec.model_type in _OFFSET_POSITIONS else None,
        )

        def run(params: Any, ids: Any, mask: Any) -> Any:
            x = hidden_states(params, ids, mask, **options)
            return pool(x, mask, spec.pooling, spec.normalize)

        self._run = jax.jit(run)
        self._hidden = jax.jit(functools.partial(hidden_states, **options))
        self.load_times["model_s"] = time.perf_counter() - start

    def planned_length(self, length: int) -> int:
        return bucket(length)

    def arrays(
        self, batch: list[list[int]], batch_tokens: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Padded int32 ids and bool mask `[rows, width]` of the shape compiled for this batch:
        width is the bucket of its longest text, rows the batch size planned for that bucket
        under `batch_tokens` (spare rows have no real token)."""
        budget = self.default_batch_tokens if batch_tokens is None else batch_tokens
        width = bucket(max(len(row) for row in batch))
        rows = max(len(batch), min(self.max_batch, max(1, budget // width)))
        ids = np.full((rows, width), self.spec.pad_token_id, dtype=np.int32)
        mask = np.zeros((rows, width), dtype=bool)
        for r, row in enumerate(batch):
            ids[r, : len(row)] = row
            mask[r, : len(row)] = True
        return ids, mask

    def _forward(self, batch: list[list[int]], batch_tokens: int) -> np.ndarray:
        ids, mask = self.arrays(batch, batch_tokens)
        return np.asarray(self._run(self.params, ids, mask), dtype=np.float32)[: len(batch)]

    def hidden(self, batch: list[list[int]]) -> np.ndarray:
        """Last hidden states float32 `[len(batch), S, H]` (S: the bucket) for token id lists."""
        ids, mask = self.arrays(batch)
        return np.asarray(self._hidden(self.params, ids, mask))[: len(batch)]

    def explain(self, text: str = "attnswitch explains its plan") -> Any:
        """The plan of the attention call this engine traces for `text` (its compiled shape)."""
        import jax

        from attnswitch.kernels.plan import explain

        ids, mask = self.arrays(self.tokenize([text]))
        b, s = ids.shape
        head_dim = self.dim // self._heads
        qkv = jax.ShapeDtypeStruct((b, s, self._heads, head_dim), self._dtype)
        plans: list[Any] = []

        def probe(q: Any, k: Any, v: Any, m: Any) -> Any:
            plans.append(explain(q, k, v, key_padding_mask=m))
            return q

        jax.eval_shape(probe, qkv, qkv, qkv, jax.ShapeDtypeStruct(mask.shape, bool))
        return plans[0]

    def device_label(self) -> str:
        import jax

        dev = jax.devices()[0]
        return "cpu" if dev.platform == "cpu" else dev.device_kind

    def describe(self) -> str:
        import jax

        return (
            f"BERT-family encoder in JAX {library_version('jax')} on "
            f"{jax.default_backend()}, jit per length bucket, {self.precision}"
        )


class JaxEngine(Engine):
    name = "jax"
    requires = ("jax", "jaxlib", "safetensors", "tokenizers")
    runtime = ("jax",)
    extra = "jax,models"
    devices = ("cpu", "tpu")
    precisions = ("fp32", "bf16")

    def extra_unavailable(self) -> str | None:
        from attnswitch.kernels import registry

        found = [b for b in registry.backends() if b.framework == "jax"]
        if not found:
            return "no jax attention backend is registered"
        if all(b.unavailable() is not None for b in found):
            return "no jax attention backend is available: " + "; ".join(
                f"{b.name}: {b.unavailable()}" for b in found
            )
        return None

    def model_unsupported(self, spec: ModelSpec) -> str | None:
        if spec.model_type not in MODEL_TYPES:
            return f"serves model types {', '.join(MODEL_TYPES)}, not {spec.model_type!r}"
        act = str(spec.config.get("hidden_act", "gelu"))
        if act not in _ACTIVATIONS:
            return f"serves activations {', '.join(_ACTIVATIONS)}, not {act!r}"
        return None

    def detail(self) -> str:
        return f"BERT-family encoder in JAX {library_version('jax')} (jit), safetensors weights"

    def load(self, spec: ModelSpec, precision: str) -> Encoder:
        return JaxEncoder(spec, precision)


ENGINE = JaxEngine()
