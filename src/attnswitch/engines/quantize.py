"""Post-training static int8 quantisation of the exported models, with a calibration set.

Static quantisation fixes the scale of every quantised activation from the ranges it takes
on calibration inputs, so the calibration set must look like what is encoded: it is
`autopick.calibration_texts` (16 texts near the model's limit and half of it) and the
passages and queries of the built-in retrieval check (`retrieval_check`: 66 short real
sentences), tokenised by the model's tokenizer and grouped into padded batches of
`CALIBRATION_BATCH` texts of similar length (so little padding enters the statistics).

- OpenVINO: `nncf.quantize(model, nncf.Dataset(batches), model_type=TRANSFORMER)`, NNCF's
  recipe for transformer encoders (weights per channel, activations per tensor, SmoothQuant,
  fast bias correction; LayerNorm and softmax kept in float), with the attention's
  activation-by-activation products (scores Q.K^T and context P.V: `attention_matmuls`) in
  its `ignored_scope`. NNCF's recipe quantises Q and K for the scores; OpenVINO 2026.4's CPU
  plugin runs that int8 attention wrongly at some batch widths under its bf16 hint (32
  tokens wide: cosine 0.86 to float32, whether the columns are real or padding; the
  retrieval check at 0.89 with widths rounded to `base.SHAPE_MULTIPLE`), and correctly with
  the f32 hint or with its fused attention kernels (snippets) off. With the scores in float
  the attention is the float model's, which runs right at every width in both hints; the
  matmuls with weights, most of the work, stay int8 (no slower on 300 corpus chunks, 2
  busy cores: docs/architecture.md, "Int8").
- ONNX Runtime: `quantize_static` in QDQ format on the fused graph, per-channel int8
  weights, MatMul nodes only (the fused Attention, EmbedLayerNormalization and
  SkipLayerNormalization kernels stay float32; the QOperator format with per-channel MatMul
  weights raises inside onnxruntime 1.32's quantiser). On the fused graph the quantiser
  cannot type the activations (its shape inference does not know the contrib ops), so it
  stores the MatMul weights in int8 and leaves activations float: the model is a quarter
  the size, and the MatMuls run in float32 on dequantised weights. Typing them first
  (`quant_pre_process`) quantises the activations too, with MinMax ranges: min cosine 0.906
  to float32 on the retrieval check, far below int8's parity, so it is not done (see
  docs/architecture.md, "Precision").

`CALIBRATION_REVISION` is part of every int8 cache key: changing the set rebuilds;
`OPENVINO_RECIPE` is part of OpenVINO's: changing what NNCF is asked rebuilds. Both are also
in the keys of the engine plan and the parity verdicts for int8 (each engine's
`build_revisions`), so a rebuilt model is measured and checked again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from attnswitch.engines.base import padded
from attnswitch.engines.model import ModelSpec

CALIBRATION_BATCH = 8
CALIBRATION_REVISION = 2  # 2: `calibration_documents` added
OPENVINO_RECIPE = 2  # 2: the attention's activation products in NNCF's ignored_scope


def calibration_texts(spec: ModelSpec) -> list[str]:
    from attnswitch.engines import autopick, calibration_documents, retrieval_check

    return [
        *autopick.calibration_texts(spec),
        *retrieval_check.calibration_corpus(),
        *calibration_documents.DOCUMENTS,
    ]


def calibration_batches(spec: ModelSpec) -> list[dict[str, np.ndarray]]:
    """The calibration inputs: `{"input_ids", "attention_mask"}` int64 `[B, S]` per batch."""
    tok = spec.tokenizer()
    texts = calibration_texts(spec)
    if spec.do_lower_case:
        texts = [t.lower() for t in texts]
    ids = sorted((e.ids for e in tok.encode_batch(texts)), key=len, reverse=True)
    out = []
    for start in range(0, len(ids), CALIBRATION_BATCH):
        input_ids, mask = padded(ids[start : start + CALIBRATION_BATCH], spec.pad_token_id)
        out.append({"input_ids": input_ids, "attention_mask": mask})
    return out


@contextlib.contextmanager
def _quiet(logger: logging.Logger) -> Iterator[None]:
    """`logger` at ERROR while quantising: NNCF draws progress bars through it, and
    onnxruntime's quantiser warns through the root logger about every tensor whose type its
    shape inference leaves open (it does not quantise those, which is the intent here)."""
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def import_nncf() -> Any:
    """NNCF, imported with its telemetry off. NNCF sends usage events to Google Analytics
    from `nncf.quantize` unless a consent file says no, and decides once, when
    `nncf.telemetry.wrapper` is imported, from `$NNCF_CI`: the variable is set for that
    import and restored after it (a document indexer makes no network request of its own;
    see also `openvino_runtime.import_openvino`)."""
    if "nncf" in sys.modules:
        return sys.modules["nncf"]
    before = os.environ.get("NNCF_CI")
    os.environ["NNCF_CI"] = "1"
    try:
        import nncf
    finally:
        if before is None:
            os.environ.pop("NNCF_CI", None)
        else:
            os.environ["NNCF_CI"] = before
    return nncf


def attention_matmuls(model: Any) -> list[str]:
    """Names of the MatMul ops of an OpenVINO model whose two inputs are both computed (no
    weight: neither is a Constant, directly or through a Convert): in a transformer encoder,
    each layer's attention scores (Q.K^T) and context (P.V). Found by structure, so any
    model's export is covered whatever its node names."""

    def is_weight(value: Any) -> bool:
        node = value.get_node()
        while node.get_type_name() == "Convert":
            node = node.input_value(0).get_node()
        return node.get_type_name() == "Constant"

    return [
        op.get_friendly_name()
        for op in model.get_ordered_ops()
        if op.get_type_name() == "MatMul"
        and not any(is_weight(op.input_value(i)) for i in range(op.get_input_size()))
    ]


def quantize_openvino(ov: Any, spec: ModelSpec, source_xml: Path, target_xml: Path) -> None:
    """Write the NNCF int8 model of the float32 IR `source_xml` to `target_xml`; `ov` is the
    `openvino` module as its engine imported it (`openvino_runtime.import_openvino`). The
    attention's activation products stay float (see the module doc)."""
    nncf = import_nncf()
    model = ov.Core().read_model(str(source_xml))
    batches = calibration_batches(spec)
    attention = attention_matmuls(model)
    ignored = nncf.IgnoredScope(names=attention) if attention else None
    # NNCF draws its progress bars on stdout, which `--json` output owns: they go to stderr
    with _quiet(logging.getLogger("nncf")), contextlib.redirect_stdout(sys.stderr):
        quantized = nncf.quantize(
            model,
            nncf.Dataset(batches),
            model_type=nncf.ModelType.TRANSFORMER,
            subset_size=len(batches),
            ignored_scope=ignored,
        )
    ov.save_model(quantized, str(target_xml), compress_to_fp16=False)


def quantize_onnx(spec: ModelSpec, source: Path, target: Path) -> None:
    """Write the static int8 (QDQ) model of the float32 ONNX graph `source` to `target`."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self, batches: list[dict[str, np.ndarray]]):
            self._batches = iter(batches)

        def get_next(self) -> Any:
            return next(self._batches, None)

    with _quiet(logging.getLogger()):
        quantize_static(
            str(source),
            str(target),
            Reader(calibration_batches(spec)),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"],
            calibrate_method=CalibrationMethod.MinMax,
        )


__all__ = [
    "CALIBRATION_BATCH",
    "CALIBRATION_REVISION",
    "OPENVINO_RECIPE",
    "attention_matmuls",
    "calibration_batches",
    "calibration_texts",
    "quantize_onnx",
    "quantize_openvino",
]
