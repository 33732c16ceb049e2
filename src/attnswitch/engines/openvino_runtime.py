"""The openvino engine: the model converted to OpenVINO IR and run by OpenVINO's CPU plugin.

Built once per (model files, library versions) and cached (`export.Artifacts`): the float32
sentence-embedding ONNX graph (`export.export_onnx`) read by OpenVINO's ONNX frontend and
saved as IR with float32 weights (`compress_to_fp16=False`: the default would round weights
to float16).

Precision is a compile-time hint of the CPU plugin: "fp32" is `INFERENCE_PRECISION_HINT=f32`;
"bf16" is `bf16`, offered where the plugin reports BF16 (AMX or AVX-512 BF16; `isa()` says
which), with LayerNorm and softmax kept in float32 by the plugin. "int8" is a second IR,
quantised once from the float32 one by NNCF with a calibration set (`quantize`), cached with
its own manifest; it is offered where NNCF is installed and the plugin reports INT8.

Streams: the plugin's THROUGHPUT hint makes one stream per core (each single-threaded), fed
by an `AsyncInferQueue`: batches run side by side instead of every op splitting across cores
and meeting at a barrier, which is what a busy host punishes. `streams="latency"` runs one
batch at a time over all cores (the plugin's default). Batches are the shared length-sorted
token-budget batches (`base.plan_batches`), a call of fewer than `jobs x max_batch` texts
cut into at least `jobs` batches so that every stream has work.

Each process compiles the IR for the CPU (about 0.6 s for all-MiniLM-L6-v2). OpenVINO's
compiled-model cache (`CACHE_DIR`) is not used: in OpenVINO 2026.4 its key for a model
given by path ignores the inference precision and the performance hint (float32 and
bfloat16 compiles share one blob file), and compiling the other precision in a process
that had the blob memory-mapped rewrote it under it (a bus error). Importing an exported
blob instead took about as long as compiling (0.47-0.59 s against 0.57-0.63 s).

`import_openvino()` imports OpenVINO without its model-conversion tool (`openvino.tools.ovc`,
unused here): importing that tool sends a usage event to Intel's telemetry on every import,
from a process it forks (in a process that already runs JAX's or torch's threads, Python
warns that the fork may deadlock). A document indexer makes no network request of its own.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from attnswitch.engines.base import SHAPE_MULTIPLE, EncodeInputError, Encoder, padded, rounded_width
from attnswitch.engines.model import ModelSpec
from attnswitch.engines.registry import Engine, library_version

STREAMS = ("throughput", "latency")
# int8: the quantised IR's int8 ops run in int8 whatever the hint; the ops NNCF keeps in
# float (the attention's matmuls, LayerNorm, softmax) follow the hint: bf16 where the CPU
# has it (`int8_hint`: on an Intel Xeon with AMX, 1.2x the f32 hint's rate at the same min
# cosine to float32, 0.9955 against 0.9952, over 130 texts on 2 busy cores), else f32
_HINTS = MappingProxyType({"fp32": "f32", "bf16": "bf16", "int8": "f32"})


def int8_hint() -> str:
    return "bf16" if "BF16" in _capabilities() else "f32"


_CONVERSION_TOOL = "openvino.tools.ovc"


def import_openvino() -> Any:
    """The `openvino` module, imported without `openvino.tools.ovc` (see the module doc).
    Where openvino was imported already, that module is returned as it is. Afterwards the
    tool imports normally (`from openvino.tools.ovc import convert_model`) for code that
    wants it; `openvino.convert_model` is then left unset in this process."""
    if "openvino" in sys.modules:
        return sys.modules["openvino"]
    blocked = _CONVERSION_TOOL not in sys.modules
    if blocked:
        sys.modules[_CONVERSION_TOOL] = None  # openvino/__init__ skips it on ImportError
    try:
        import openvino
    finally:
        if blocked and sys.modules.get(_CONVERSION_TOOL, 0) is None:
            del sys.modules[_CONVERSION_TOOL]
    return openvino


@functools.cache
def isa(precision: str) -> str:
    """The CPU instructions the plugin's matmuls use for `precision` on this host."""
    from attnswitch.kernels.cache import cpu_flags

    flags = cpu_flags()
    if precision == "int8":
        for flag, name in (
            ("amx_int8", "AMX int8"),
            ("avx512_vnni", "AVX-512 VNNI"),
            ("avx_vnni", "AVX-VNNI"),
        ):
            if flag in flags:
                return name
        return "int8 without VNNI"
    if precision == "bf16":
        if "amx_bf16" in flags:
            return "AMX bf16"
        return "AVX-512 BF16" if "avx512_bf16" in flags else "bf16 (emulated)"
    if "avx512f" in flags:
        return "AVX-512 fp32"
    return "AVX2 fp32" if "avx2" in flags else "fp32"


# the runtime precisions of a quantised layer (activations u8 or i8, weights i8)
INT8_TYPES = frozenset({"u8", "i8"})


def linear_precisions(compiled: Any) -> dict[str, int]:
    """Runtime precision -> number of the compiled model's linear layers (the CPU plugin's
    `FullyConnected` nodes) that run in it, from the runtime model's `runtimePrecision`."""
    counts: dict[str, int] = {}
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if "layerType" in info and info["layerType"].astype(str) == "FullyConnected":
            precision = info["runtimePrecision"].astype(str)
            counts[precision] = counts.get(precision, 0) + 1
    return counts


def _counted(counts: dict[str, int]) -> str:
    """ "u8 34, i8 2", most first; "none found" for no layer."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{name} {n}" for name, n in ranked) or "none found"


class OpenVinoEncoder(Encoder):
    engine = "openvino"
    # measured on 300 corpus chunks (docs/results/e2e_vs_sentence_transformers.md, variant
    # "-b4096"): with one single-threaded stream per core, batches of about 1k tokens keep
    # each stream's activations close to its core: 1.07x (fp32) and 1.04x (bf16) over 4k
    default_batch_tokens = 1024
    max_batch = 32

    def __init__(self, spec: ModelSpec, precision: str = "fp32", *, streams: str = "throughput"):
        super().__init__(spec, precision)
        if streams not in STREAMS:
            raise EncodeInputError("streams", f"one of {', '.join(STREAMS)}", repr(streams))
        start = time.perf_counter()
        ov = import_openvino()
        self.load_times["import_s"] = time.perf_counter() - start
        start = time.perf_counter()
        folder, self.build_note = artifacts(spec, precision)
        self.streams = streams
        # A bounded set of widths (`SHAPE_MULTIPLE`) in every precision: int8 too, since its
        # attention stays in float (`quantize.quantize_openvino`)
        self.width_multiple = SHAPE_MULTIPLE
        hint = int8_hint() if precision == "int8" else _HINTS[precision]
        config = {"INFERENCE_PRECISION_HINT": hint, "PERFORMANCE_HINT": streams.upper()}
        self.compiled = ov.Core().compile_model(str(folder / "model.xml"), "CPU", config)
        self.jobs = int(self.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        self._queue = ov.AsyncInferQueue(self.compiled, self.jobs)
        self._request = self.compiled.create_infer_request()
        self.load_times["model_s"] = time.perf_counter() - start

    def batch_limit(self, count: int) -> int:
        # a small call (a service batch of a few requests) still feeds every stream
        return max(1, min(self.max_batch, -(-count // self.jobs)))

    def planned_length(self, length: int) -> int:
        return rounded_width(length, self.width_multiple)

    def _inputs(self, batch: list[list[int]]) -> dict[str, np.ndarray]:
        ids, mask = padded(batch, self.spec.pad_token_id, self.width_multiple)
        return {"input_ids": ids, "attention_mask": mask}

    def _forward(self, batch: list[list[int]], batch_tokens: int) -> np.ndarray:
        result = self._request.infer(self._inputs(batch))
        return np.array(result[0], dtype=np.float32)

    def _forward_batches(
        self, batches: Iterable[list[list[int]]], batch_tokens: int
    ) -> list[np.ndarray]:
        if self.jobs < 2:
            return super()._forward_batches(batches, batch_tokens)
        out: dict[int, np.ndarray] = {}

        def done(request: Any, index: int) -> None:
            out[index] = np.array(request.get_output_tensor(0).data, dtype=np.float32)

        self._queue.set_callback(done)
        count = 0
        for count, batch in enumerate(batches, 1):
            self._queue.start_async(self._inputs(batch), count - 1)
        self._queue.wait_all()
        return [out[i] for i in range(count)]

    def describe(self) -> str:
        """What runs, read from the compiled model: the precision its linear layers run in
        (an int8 IR's quantised ones run int8 whatever the hint), the inference precision of
        the other ops, the streams."""
        hint = self.compiled.get_property("INFERENCE_PRECISION_HINT").to_string()
        linear = linear_precisions(self.compiled)
        if linear and set(linear) <= INT8_TYPES:
            label, kind = "weights int8, activations int8", "int8"
        else:
            runs = max(linear, key=linear.__getitem__, default="unknown")
            label = f"weights and activations {runs}"
            kind = {"bf16": "bf16", "f32": "fp32"}.get(runs, self.precision)
        return (
            f"OpenVINO {library_version('openvino')} CPU plugin, linear layers: {label} "
            f"({_counted(linear)}; {isa(kind)}), other ops {hint}, {self.streams} hint, "
            f"{self.jobs} parallel requests; {self.build_note}"
        )

    def explain(self, text: str = "attnswitch explains its plan") -> Any:
        return self.describe()


def artifacts(spec: ModelSpec, precision: str = "fp32") -> tuple[Path, str]:
    """The cached IR folder of `spec` for `precision`, and how it was had. Float precisions
    are chosen at compile time, so one float32 IR serves fp32 and bf16; int8 is its own IR,
    quantised from that one by NNCF (`quantize.quantize_openvino`)."""
    from attnswitch.engines import export

    if precision == "int8":
        return _int8_artifacts(spec)
    key = _float_key(spec)

    def build(folder: Path) -> None:
        ov = import_openvino()
        onnx_path = folder / "exported.onnx"
        export.export_onnx(spec, onnx_path)
        # the runtime's own ONNX reader: `openvino.convert_model` (the OVC tool) would also
        # start a telemetry process that tries to reach the network
        ov.save_model(
            ov.Core().read_model(str(onnx_path)), str(folder / "model.xml"), compress_to_fp16=False
        )
        onnx_path.unlink()

    return export.Artifacts(key).ensure(build)


def _float_key(spec: ModelSpec) -> dict[str, Any]:
    from attnswitch.engines import export

    return export.base_key(spec, ENGINE.name, "any", ENGINE.versions())


def _int8_artifacts(spec: ModelSpec) -> tuple[Path, str]:
    from attnswitch.engines import export, quantize

    source, _ = artifacts(spec, "fp32")
    key = export.base_key(
        spec,
        ENGINE.name,
        "int8",
        {
            **ENGINE.versions(),
            **ENGINE.build_revisions("int8"),
            "source": (source / export.MANIFEST).read_text(),
        },
    )

    def build(folder: Path) -> None:
        quantize.quantize_openvino(
            import_openvino(), spec, source / "model.xml", folder / "model.xml"
        )

    return export.Artifacts(key).ensure(build)


class OpenVinoEngine(Engine):
    name = "openvino"
    requires = ("openvino", "onnx", "torch", "transformers", "tokenizers")
    runtime = ("openvino",)
    extra = "openvino"
    devices = ("cpu",)
    precisions = ("fp32", "bf16", "int8")

    def precision_unavailable(self, precision: str) -> str | None:
        if precision == "bf16" and "BF16" not in _capabilities():
            return "this CPU has no bf16 instructions (the CPU plugin reports no BF16)"
        if precision == "int8":
            if importlib.util.find_spec("nncf") is None:
                return "int8 needs NNCF to quantise the model (pip install 'attnswitch[int8]')"
            if "INT8" not in _capabilities():
                return "this CPU has no int8 instructions (the CPU plugin reports no INT8)"
        return None

    def detail(self) -> str:
        return (
            f"OpenVINO {library_version('openvino')} CPU plugin, IR converted once from "
            f"the exported ONNX graph"
        )

    def build_revisions(self, precision: str) -> dict[str, str]:
        if precision != "int8":
            return {}
        from attnswitch.engines import quantize

        return {
            "nncf": library_version("nncf"),
            "calibration": str(quantize.CALIBRATION_REVISION),
            "recipe": str(quantize.OPENVINO_RECIPE),
        }

    def load(self, spec: ModelSpec, precision: str) -> Encoder:
        return OpenVinoEncoder(spec, precision)

    def ready(self, spec: ModelSpec, precision: str) -> bool:
        """The float IR is built (int8 is quantised from it on its first load: not ready
        until then, which this does not check)."""
        from attnswitch.engines import export

        return precision != "int8" and export.Artifacts(_float_key(spec)).present()

    def import_runtime(self) -> None:
        import_openvino()


@functools.cache
def _capabilities() -> tuple[str, ...]:
    ov = import_openvino()
    return tuple(ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))


ENGINE = OpenVinoEngine()
