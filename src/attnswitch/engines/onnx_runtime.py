"""The onnxruntime engine: the model exported to ONNX, fused by ONNX Runtime's transformer
optimizer, run by ONNX Runtime's CPU provider.

Built once per (model files, precision, library versions) and cached (`export.Artifacts`):
- `model.onnx`: the float32 sentence-embedding graph (`export.export_onnx`), passed through
  `onnxruntime.transformers.optimizer.optimize_model` (for BERT-family models it fuses
  EmbedLayerNormalization, Attention, SkipLayerNormalization and BiasGelu);
- its weights in `weights.bin` beside the graph (ONNX external data, `WEIGHTS`), which ONNX
  Runtime maps when a session starts;
- int8: static quantisation of the fused graph with a calibration set
  (`quantize.quantize_onnx`: QDQ, per-channel int8 weights, MatMul nodes); dynamic
  quantisation, which this engine used before, rescales activations on every call.
ONNX Runtime's CPU provider has no bfloat16 GEMM on x86, so bf16 is declined.

Batches are the shared length-sorted token-budget batches (`base.plan_batches`), so a batch
carries almost no padding.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from attnswitch.engines.base import SHAPE_MULTIPLE, Encoder, padded, rounded_width
from attnswitch.engines.model import ModelSpec
from attnswitch.engines.registry import Engine, library_version

# model types the optimizer's "bert" fusions understand; others run unfused
_FUSED_TYPES = ("bert", "roberta", "xlm-roberta", "camembert", "distilbert", "mpnet")


class OnnxEncoder(Encoder):
    engine = "onnxruntime"
    default_batch_tokens = 4096
    max_batch = 32

    def __init__(self, spec: ModelSpec, precision: str = "fp32"):
        super().__init__(spec, precision)
        start = time.perf_counter()
        import onnxruntime as ort

        self.load_times["import_s"] = time.perf_counter() - start
        start = time.perf_counter()
        folder, self.build_note = artifacts(spec, precision)
        self.folder = folder
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(
            str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self.fused = (folder / "fused").is_file()
        self.load_times["model_s"] = time.perf_counter() - start

    def planned_length(self, length: int) -> int:
        return rounded_width(length)  # a bounded set of shapes (`SHAPE_MULTIPLE`)

    def _forward(self, batch: list[list[int]], batch_tokens: int) -> np.ndarray:
        ids, mask = padded(batch, self.spec.pad_token_id, SHAPE_MULTIPLE)
        (vectors,) = self.session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})
        return vectors

    def describe(self) -> str:
        """What runs, read from the model file: the graph, and for the MatMul nodes how
        many take int8 weights and int8 activations (a QDQ model whose activations are not
        quantised multiplies in float32 on dequantised weights)."""
        graph = "fused graph" if self.fused else "unfused graph (no fusions for this model type)"
        matmuls, weights, activations = quantised_matmuls(self.folder / "model.onnx")
        linear = (
            f"MatMuls: weights int8 in {weights} of {matmuls}, activations int8 in "
            f"{activations} of {matmuls}"
            + (
                "; the others multiply in float32 on dequantised weights"
                if activations < weights
                else ""
            )
            if weights
            else f"MatMuls: weights and activations float32 ({matmuls})"
        )
        return (
            f"ONNX Runtime {library_version('onnxruntime')} CPU provider, {graph}, "
            f"{self.precision}; {linear}; {self.build_note}"
        )

    def explain(self, text: str = "attnswitch explains its plan") -> Any:
        return self.describe()


def quantised_matmuls(path: Path) -> tuple[int, int, int]:
    """(MatMul nodes, those whose weight input is dequantised from int8, those whose
    activation input is too) in the ONNX model at `path` (its graph only, no weights)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    made_by = {out: node for node in graph.node for out in node.output}

    def dequantised(name: str) -> bool:
        node = made_by.get(name)
        return node is not None and node.op_type == "DequantizeLinear"

    matmuls = [node for node in graph.node if node.op_type == "MatMul"]
    return (
        len(matmuls),
        sum(dequantised(n.input[1]) for n in matmuls),
        sum(dequantised(n.input[0]) for n in matmuls),
    )


# How the built model is laid out: the graph in model.onnx, its weights in weights.bin
# (ONNX external data), which ONNX Runtime maps instead of parsing and copying them: a
# session of all-MiniLM-L6-v2 started in 0.05 s against 0.18 s from one 90 MB file.
WEIGHTS = "weights.bin"


def _key(spec: ModelSpec, precision: str) -> dict[str, Any]:
    from attnswitch.engines import export

    return export.base_key(
        spec,
        ENGINE.name,
        precision,
        {**ENGINE.versions(), **ENGINE.build_revisions(precision), "weights": WEIGHTS},
    )


def artifacts(spec: ModelSpec, precision: str) -> tuple[Path, str]:
    """The cached folder of `spec`'s ONNX Runtime model in `precision`, and how it was had."""
    from attnswitch.engines import export

    key = _key(spec, precision)

    def build(folder: Path) -> None:
        raw = folder / "exported.onnx"
        export.export_onnx(spec, raw)
        target = folder / "model.onnx"
        if _optimize(spec, raw, target):
            (folder / "fused").write_text("onnxruntime transformer optimizer\n")
        else:
            raw.rename(target)
        raw.unlink(missing_ok=True)
        if precision == "int8":
            from attnswitch.engines import quantize

            source = target.with_name("float32.onnx")
            target.rename(source)
            quantize.quantize_onnx(spec, source, target)
            source.unlink()
        _external_weights(target)

    return export.Artifacts(key).ensure(build)


def _external_weights(path: Path) -> None:
    """Rewrite the model at `path` with its weights in `WEIGHTS` beside it."""
    import onnx

    model = onnx.load(str(path))
    onnx.save_model(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=WEIGHTS,
        size_threshold=1024,
    )


def _optimize(spec: ModelSpec, source: Path, target: Path) -> bool:
    """Fuse `source` into `target` with ORT's transformer optimizer; False when the model
    type has no fusions (then nothing is written)."""
    if spec.model_type not in _FUSED_TYPES:
        return False
    from onnxruntime.transformers import optimizer

    config = spec.config
    model = optimizer.optimize_model(
        str(source),
        model_type="bert",
        num_heads=int(config["num_attention_heads"]),
        hidden_size=int(config["hidden_size"]),
        opt_level=1,
    )
    model.save_model_to_file(str(target))
    return True


class OnnxRuntimeEngine(Engine):
    name = "onnxruntime"
    requires = ("onnxruntime", "onnx", "torch", "transformers", "tokenizers")
    runtime = ("onnxruntime",)
    extra = "onnx"
    devices = ("cpu",)
    precisions = ("fp32", "int8")

    def detail(self) -> str:
        return (
            f"ONNX Runtime {library_version('onnxruntime')} CPU provider, graph exported "
            f"once (torch.onnx, opset 17) and fused by its transformer optimizer"
        )

    def load(self, spec: ModelSpec, precision: str) -> Encoder:
        return OnnxEncoder(spec, precision)

    def ready(self, spec: ModelSpec, precision: str) -> bool:
        from attnswitch.engines import export

        return export.Artifacts(_key(spec, precision)).present()

    def build_revisions(self, precision: str) -> dict[str, str]:
        if precision != "int8":
            return {}
        from attnswitch.engines import quantize

        return {"calibration": str(quantize.CALIBRATION_REVISION)}


ENGINE = OnnxRuntimeEngine()
