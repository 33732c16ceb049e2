#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU: conformance of every CUDA backend, then the
# attention benchmark with GPU shapes (bf16, head dims 64 and 128, 1k to 16k tokens, causal
# and not) with TFLOP/s per backend and as a fraction of the chip's peak dense bf16 rate.
#
#   bash scripts/gpu_check.sh [RESULTS_DIR]     (default docs/results/gpu)
#
# Uses the machine's python3 with its torch/jax; runs attnswitch from this source tree (no
# network needed). Optional wheels in .whl/ (e.g. flash-attn built for that torch) are
# installed first. Each stage has its own time limit so the whole script ends within 8 min.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:-docs/results/gpu}
mkdir -p "$OUT_DIR"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export ATTNSWITCH_CACHE_DIR="$OUT_DIR/cache"

if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/attnswitch-site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/attnswitch-site"
fi
# Light pure-python dependencies the GPU image may lack: report, don't fail.
$PY - <<'PY' | tee "$OUT_DIR/environment.txt"
import importlib, platform, torch
print("python", platform.python_version(), "| torch", torch.__version__, "| cuda", torch.version.cuda)
print("gpu", torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
      torch.cuda.get_device_capability() if torch.cuda.is_available() else "")
for mod in ("jax", "flash_attn", "flash_attn_interface", "ml_dtypes", "typer", "rich", "prometheus_client", "platformdirs"):
    try:
        m = importlib.import_module(mod)
        print(mod, getattr(m, "__version__", "present"))
    except Exception as exc:
        print(mod, "absent:", type(exc).__name__, exc)
PY

PEAK=${PEAK_TFLOPS:-$($PY - <<'PY'
import torch
name = torch.cuda.get_device_name() if torch.cuda.is_available() else ""
# Datasheet dense bf16 peaks (no sparsity), TFLOP/s.
table = {"H200": 989, "H100": 989, "A100": 312, "L40S": 362, "L4": 121, "B200": 2250}
print(next((v for k, v in table.items() if k in name), 989))
PY
)}

echo "== doctor"
timeout 60 $PY -m attnswitch.cli doctor --no-timing 2>&1 | tee "$OUT_DIR/doctor.txt"

echo "== conformance (CUDA backends, cuda device)"
CUDA_BACKENDS=$($PY - <<'PY'
import attnswitch as asw
names = [b.name for b in asw.backends() if b.unavailable() is None and b.name != "reference"
         and b.name not in ("pallas-flash", "pallas-splash")]
print(" ".join(f"--backend {n}" for n in names))
PY
)
timeout 200 $PY -m attnswitch.cli conformance $CUDA_BACKENDS --device cuda --json \
  > "$OUT_DIR/conformance.json" 2> "$OUT_DIR/conformance.log"
echo "conformance exit code: $?" | tee -a "$OUT_DIR/conformance.log"
timeout 30 $PY - "$OUT_DIR/conformance.json" <<'PY' | tee "$OUT_DIR/conformance.md"
import json, sys
try:
    data = json.load(open(sys.argv[1]))
except Exception as exc:
    print("no conformance report:", exc); sys.exit(0)
print(json.dumps(data, indent=1)[:20000])
PY

echo "== attention benchmark (GPU shapes)"
timeout 200 $PY benchmarks/attention_ops.py --device cuda --reps 10 --out "$OUT_DIR" \
  --peak-tflops "$PEAK" --skip torch-math reference 2>&1 | tee "$OUT_DIR/bench.log"
echo "results in $OUT_DIR"
