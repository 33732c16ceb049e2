"""One contender of benchmarks/e2e_vs_sentence_transformers.py, in a process of its own.

    python benchmarks/e2e_contender.py NAME --texts TEXTS.json --out RESULT.npz
        [--known-items ITEMS.json]

Loads the contender with the defaults a user would have (threads, batch size, its documented
fast path), encodes the first 32 texts once (allocations, compilation and kernel selection
are not timed), then encodes all texts once, timed. Writes the vectors (float32), the
seconds, and what ran (`detail`) to RESULT.npz. With `--known-items` (the known-item set of
benchmarks/retrieval_quality.py: {"chunks", "queries"}), it then encodes those too, untimed,
and adds their vectors (`chunk_vectors`, `query_vectors`) for the caller's MRR@10.

Contenders (`CONTENDERS`):
- st-fp32, st-bf16: sentence-transformers `encode` (batch 32, sorted by characters), float32
  and with the model loaded in bfloat16 (`model_kwargs={"dtype": torch.bfloat16}`);
- asw-auto: `attnswitch.encode` with all its defaults (engine and precision "auto");
- asw-auto-fp32, asw-auto-bf16, asw-auto-int8: engine "auto", precision given;
- asw-<engine>-<precision>: `attnswitch.encode` with the engine forced;
- asw-torch-fp32-nnlinear: the torch engine with torch's own `nn.Linear` (no oneDNN
  prepacking): the named variant that attributes the prepacked linears' gain;
- asw-openvino-<precision>-b4096: the openvino engine with 4,096-token batches (its default
  before it was measured: 1,024), and asw-openvino-fp32-latency: the openvino engine with one
  request at a time over both cores (the plugin's latency hint) instead of a stream per core:
  the variants that attribute the batch size's and the streams' gains;
- asw-torch-fp32-compile: the torch engine's model under `torch.compile` (inductor,
  dynamic shapes, freezing, which prepacks the linears its own way): the variant that
  measures what compiling gains;
- asw-torch-fp32-passive, asw-torch-fp32-1thread: the torch engine with OpenMP threads that
  sleep instead of spinning at barriers (`OMP_WAIT_POLICY=PASSIVE`), and with one intra-op
  thread: the variants that find where contention hurts;
- ov-user-fp32, ov-user-bf16: OpenVINO as its docs show it: `compile_model(model, "CPU",
  {"INFERENCE_PRECISION_HINT": ...})` with the default (latency) hint, a synchronous
  request, batches of 32 sorted by characters as sentence-transformers does;
- ov-user-tput-fp32, ov-user-tput-bf16: OpenVINO for batch work as its docs show it: the
  THROUGHPUT hint and an `AsyncInferQueue` of the compiled model's optimal number of
  requests, the same batches;
- ov-user-nncf-int8: OpenVINO int8 as a user gets it from NNCF's docs: `nncf.quantize(model,
  nncf.Dataset(...), model_type=TRANSFORMER)` calibrated on the first 300 texts to encode
  (one text per sample; quantised once into $ASW_E2E_WORKDIR, not timed), then the
  throughput mode above;
- ort-user-fp32: ONNX Runtime on the graph fused by its transformer optimizer, default
  session options, the same batching.
The user runtimes read the model files attnswitch exported (a user's `torch.onnx.export` of
the same model, with its pooling in the graph); exporting is not timed for anyone.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

BATCH = 32  # sentence-transformers' default batch size, which a user of the runtimes copies


def _st(precision: str) -> tuple[Callable, str]:
    import torch
    from sentence_transformers import SentenceTransformer

    from attnswitch.engines.model import default_model_path

    kwargs = {"model_kwargs": {"dtype": torch.bfloat16}} if precision == "bf16" else {}
    model = SentenceTransformer(str(default_model_path()), device="cpu", **kwargs)

    def encode(texts: list[str]) -> np.ndarray:
        out = model.encode(
            texts,
            batch_size=BATCH,
            convert_to_numpy=False,
            convert_to_tensor=True,
            show_progress_bar=False,
        )
        return out.float().numpy()

    return (
        encode,
        f"sentence-transformers, torch {torch.__version__}, {precision}, "
        f"{torch.get_num_threads()} threads",
    )


def _asw(engine: str, precision: str, linear: str | None = None) -> tuple[Callable, str]:
    from attnswitch.engines import get_engine

    if linear is not None:
        from attnswitch.engines.model import ModelSpec
        from attnswitch.engines.torch_hf import TorchEncoder

        encoder = TorchEncoder(ModelSpec.load(None), precision, linear=linear)
    else:
        encoder = get_engine(None, engine, precision)
    return encoder.encode, f"{encoder.engine}: {encoder.describe()}"


def _asw_batch_tokens(engine: str, precision: str, tokens: int) -> tuple[Callable, str]:
    encode, detail = _asw(engine, precision)
    return (lambda texts: encode(texts, batch_tokens=tokens)), f"{detail}; batch_tokens={tokens}"


def _openvino_latency(precision: str) -> tuple[Callable, str]:
    from attnswitch.engines.model import ModelSpec
    from attnswitch.engines.openvino_runtime import OpenVinoEncoder

    encoder = OpenVinoEncoder(ModelSpec.load(None), precision, streams="latency")
    return encoder.encode, f"{encoder.engine}: {encoder.describe()}"


def _torch_compiled() -> tuple[Callable, str]:
    from attnswitch.engines.model import ModelSpec
    from attnswitch.engines.torch_hf import TorchEncoder

    encoder = TorchEncoder(ModelSpec.load(None), "fp32", compile=True)
    return encoder.encode, f"{encoder.engine}: {encoder.describe()}"


def _user_batches(texts: list[str], tokenizer) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(indices, ids, mask) per batch of 32, longest texts (in characters) first."""
    order = np.argsort([-len(t) for t in texts], kind="stable")
    out = []
    for i in range(0, len(texts), BATCH):
        index = order[i : i + BATCH]
        enc = tokenizer.encode_batch([texts[j] for j in index])
        width = max(len(e.ids) for e in enc)
        ids = np.zeros((len(index), width), np.int64)
        mask = np.zeros_like(ids)
        for r, e in enumerate(enc):
            ids[r, : len(e.ids)] = e.ids
            mask[r, : len(e.ids)] = 1
        out.append((index, ids, mask))
    return out


def _user_nncf_ir(spec, texts: list[str]) -> Path:
    """The user's NNCF int8 IR, quantised once per benchmark run (see the module doc)."""
    import openvino as ov

    from attnswitch.engines.openvino_runtime import artifacts
    from attnswitch.engines.quantize import import_nncf

    nncf = import_nncf()  # telemetry off: the benchmark makes no network request
    target = Path(os.environ.get("ASW_E2E_WORKDIR", ".")) / "user-nncf-int8" / "model.xml"
    if target.is_file():
        return target
    folder, _ = artifacts(spec)
    tokenizer = spec.tokenizer()

    def transform(text: str) -> dict:
        ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
        return {"input_ids": ids, "attention_mask": np.ones_like(ids)}

    model = ov.Core().read_model(str(folder / "model.xml"))
    quantized = nncf.quantize(
        model, nncf.Dataset(texts[:300], transform), model_type=nncf.ModelType.TRANSFORMER
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(quantized, str(target))
    return target


def _user_throughput(precision: str, texts: list[str]) -> tuple[Callable, str]:
    import openvino as ov

    from attnswitch.engines.model import ModelSpec
    from attnswitch.engines.openvino_runtime import artifacts

    spec = ModelSpec.load(None)
    tokenizer = spec.tokenizer()
    if precision == "int8":
        path, config = _user_nncf_ir(spec, texts), {}
    else:
        path = artifacts(spec)[0] / "model.xml"
        config = {"INFERENCE_PRECISION_HINT": {"fp32": "f32", "bf16": "bf16"}[precision]}
    compiled = ov.Core().compile_model(
        str(path), "CPU", {**config, "PERFORMANCE_HINT": "THROUGHPUT"}
    )
    jobs = compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
    queue = ov.AsyncInferQueue(compiled, jobs)

    def encode(batch_texts: list[str]) -> np.ndarray:
        out = np.zeros((len(batch_texts), spec.dim), np.float32)

        def done(request, index) -> None:
            out[index] = request.get_output_tensor(0).data

        queue.set_callback(done)
        for index, ids, mask in _user_batches(batch_texts, tokenizer):
            queue.start_async({"input_ids": ids, "attention_mask": mask}, index)
        queue.wait_all()
        return out

    what = (
        "NNCF int8 (TRANSFORMER preset), "
        if precision == "int8"
        else f"hint {config['INFERENCE_PRECISION_HINT']}, "
    )
    return encode, (f"OpenVINO {ov.get_version()} {what}THROUGHPUT hint, AsyncInferQueue of {jobs}")


def _user(runtime: str, precision: str) -> tuple[Callable, str]:
    from attnswitch.engines.model import ModelSpec

    spec = ModelSpec.load(None)
    tokenizer = spec.tokenizer()
    if runtime == "ov":
        import openvino as ov

        from attnswitch.engines.openvino_runtime import artifacts

        folder, _ = artifacts(spec)
        hint = {"fp32": "f32", "bf16": "bf16"}[precision]
        compiled = ov.Core().compile_model(
            str(folder / "model.xml"), "CPU", {"INFERENCE_PRECISION_HINT": hint}
        )
        request = compiled.create_infer_request()

        def run(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
            return request.infer({"input_ids": ids, "attention_mask": mask})[0]

        detail = f"OpenVINO {ov.get_version()} compile_model defaults, hint {hint}"
    else:
        import onnxruntime as ort

        from attnswitch.engines.onnx_runtime import artifacts

        folder, _ = artifacts(spec, "fp32")
        session = ort.InferenceSession(
            str(folder / "model.onnx"), providers=["CPUExecutionProvider"]
        )

        def run(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
            return session.run(None, {"input_ids": ids, "attention_mask": mask})[0]

        detail = f"ONNX Runtime {ort.__version__} fused graph, default session"

    def encode(texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), spec.dim), np.float32)
        for index, ids, mask in _user_batches(texts, tokenizer):
            out[index] = run(ids, mask)
        return out

    return encode, detail


def _with_env(
    name: str, value: str, make: Callable[[], tuple[Callable, str]]
) -> tuple[Callable, str]:
    """`make()` with an environment variable set before any library reads it."""
    os.environ[name] = value
    encode, detail = make()
    return encode, f"{detail}; {name}={value}"


def _torch_threads(n: int) -> tuple[Callable, str]:
    import torch

    torch.set_num_threads(n)
    encode, detail = _asw("torch", "fp32")
    return encode, f"{detail}; torch.set_num_threads({n})"


CONTENDERS: dict[str, Callable[[list[str]], tuple[Callable, str]]] = {
    "st-fp32": lambda texts: _st("fp32"),
    "st-bf16": lambda texts: _st("bf16"),
    "asw-auto": lambda texts: _asw("auto", "auto"),
    "asw-auto-fp32": lambda texts: _asw("auto", "fp32"),
    "asw-auto-bf16": lambda texts: _asw("auto", "bf16"),
    "asw-auto-int8": lambda texts: _asw("auto", "int8"),
    "asw-openvino-int8": lambda texts: _asw("openvino", "int8"),
    "asw-onnxruntime-int8": lambda texts: _asw("onnxruntime", "int8"),
    "ov-user-tput-fp32": lambda texts: _user_throughput("fp32", texts),
    "ov-user-tput-bf16": lambda texts: _user_throughput("bf16", texts),
    "ov-user-nncf-int8": lambda texts: _user_throughput("int8", texts),
    "asw-torch-fp32": lambda texts: _asw("torch", "fp32"),
    "asw-torch-fp32-nnlinear": lambda texts: _asw("torch", "fp32", linear="torch"),
    "asw-torch-bf16": lambda texts: _asw("torch", "bf16"),
    "asw-torch-fp32-passive": lambda texts: _with_env(
        "OMP_WAIT_POLICY", "PASSIVE", lambda: _asw("torch", "fp32")
    ),
    "asw-torch-fp32-1thread": lambda texts: _torch_threads(1),
    "asw-jax-fp32": lambda texts: _asw("jax", "fp32"),
    "asw-openvino-fp32": lambda texts: _asw("openvino", "fp32"),
    "asw-openvino-bf16": lambda texts: _asw("openvino", "bf16"),
    "asw-openvino-fp32-b4096": lambda texts: _asw_batch_tokens("openvino", "fp32", 4096),
    "asw-openvino-bf16-b4096": lambda texts: _asw_batch_tokens("openvino", "bf16", 4096),
    "asw-openvino-fp32-latency": lambda texts: _openvino_latency("fp32"),
    "asw-torch-fp32-compile": lambda texts: _torch_compiled(),
    "asw-onnxruntime-fp32": lambda texts: _asw("onnxruntime", "fp32"),
    "ov-user-fp32": lambda texts: _user("ov", "fp32"),
    "ov-user-bf16": lambda texts: _user("ov", "bf16"),
    "ort-user-fp32": lambda texts: _user("ort", "fp32"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("name", choices=sorted(CONTENDERS))
    p.add_argument("--texts", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--known-items", type=Path)
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    texts = json.loads(args.texts.read_text())
    started = time.perf_counter()
    encode, detail = CONTENDERS[args.name](texts)
    encode(texts[:32])
    load_s = time.perf_counter() - started
    start = time.perf_counter()
    vectors = np.asarray(encode(texts), dtype=np.float32)
    seconds = time.perf_counter() - start
    extra = {}
    if args.known_items is not None:
        items = json.loads(args.known_items.read_text())
        extra = {
            "chunk_vectors": np.asarray(encode(items["chunks"]), dtype=np.float32),
            "query_vectors": np.asarray(encode(items["queries"]), dtype=np.float32),
        }
    np.savez(args.out, vectors=vectors, seconds=seconds, load_s=load_s, detail=detail, **extra)


if __name__ == "__main__":
    main()
