"""End to end: attnswitch's encode against sentence-transformers and the fused CPU runtimes.

The same model (all-MiniLM-L6-v2), the same real chunks (`--chunks`, default 600, cut by
`chunk_text` from examples/corpus with the model's limit and `run`'s default overlap, evenly
spaced over the corpus), the same machine. Each contender runs in a process of its own
(`e2e_contender.py`) with the defaults a user would have, once per round; the order of
contenders is rotated from round to round. Conditions:
- quiet: nothing else runs (other than what the machine already runs; the load average is
  printed);
- load: `--load-procs` background processes (default 2), each running single-threaded
  float32 matrix products without pause, started before the round and stopped after it:
  a fixed load, the same for every contender.

Per condition the table gives each contender's median chunks/s over rounds, the median of
its per-round ratio to sentence-transformers float32 of the same round, and the minimum
cosine of its vectors to sentence-transformers float32's. The page names the CPU model and
its ISA flags (AMX, AVX-512 BF16...), and writes a plot.

Before the rounds, `engine="auto"` is calibrated once (engines.autopick) in the cache
directory every contender shares, so the auto contenders time encoding, not calibration;
the page shows what auto picked and why.

    python benchmarks/e2e_vs_sentence_transformers.py [--chunks 600] [--rounds 3]
        [--conditions quiet,load] [--contenders a,b,...] [--load-contenders a,b,...]
        [--out docs/results]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "examples" / "corpus"
BASELINE = "st-fp32"
QUIET = ("st-fp32", "st-bf16", "asw-auto-fp32", "asw-auto-bf16", "asw-openvino-fp32-b4096",
         "asw-openvino-bf16-b4096", "asw-openvino-fp32-latency", "asw-torch-fp32",
         "asw-torch-fp32-nnlinear", "asw-torch-fp32-compile", "asw-torch-fp32-passive",
         "asw-onnxruntime-fp32", "ov-user-fp32", "ov-user-bf16", "ort-user-fp32")
LOADED = ("st-fp32", "asw-auto-fp32", "asw-auto-bf16", "asw-torch-fp32",
          "asw-torch-fp32-passive", "ov-user-fp32", "ov-user-bf16", "ort-user-fp32")
# the peers each attnswitch default is judged against (issue: fp32 >= best fp32 runtime,
# bf16 >= OpenVINO bf16), and the parity each must keep
JUDGED = {"asw-auto-fp32": (("ort-user-fp32", "ov-user-fp32"), 0.9999),
          "asw-auto-bf16": (("ov-user-bf16",), 0.999)}


def corpus_chunks(n: int) -> list[str]:
    """`n` chunk texts evenly spaced over all chunks of the corpus, in corpus order."""
    from attnswitch.engines.model import ModelSpec
    from attnswitch.pipeline.chunk import chunk_text
    from attnswitch.pipeline.config import DEFAULT_OVERLAP, chunk_tokenizer, special_tokens
    from attnswitch.pipeline.ingest import ingest

    spec = ModelSpec.load(None)
    tok = chunk_tokenizer(spec)
    limit = spec.max_seq_length - special_tokens(tok)
    texts = [c.text for doc in ingest(CORPUS) if doc.ok
             for c in chunk_text(doc.text, tok, max_tokens=limit, overlap=DEFAULT_OVERLAP)]
    if n > len(texts):
        raise SystemExit(f"--chunks: expected at most {len(texts)} (the corpus), got {n}")
    pick = np.linspace(0, len(texts) - 1, n).round().astype(int)
    return [texts[i] for i in pick]
# each gain attributed to its cause: (what changes, the contender with it, the one without)
ATTRIBUTION = (
    ("openvino: 1,024-token batches instead of 4,096 (fp32)", "asw-auto-fp32",
     "asw-openvino-fp32-b4096"),
    ("openvino: 1,024-token batches instead of 4,096 (bf16)", "asw-auto-bf16",
     "asw-openvino-bf16-b4096"),
    ("openvino: a single-threaded stream per core instead of one request over all cores",
     "asw-auto-fp32", "asw-openvino-fp32-latency"),
    ("torch: oneDNN prepacked linears instead of nn.Linear", "asw-torch-fp32",
     "asw-torch-fp32-nnlinear"),
    ("torch: torch.compile (inductor, freezing) instead of the eager engine",
     "asw-torch-fp32-compile", "asw-torch-fp32"),
    ("torch: OpenMP threads that sleep at barriers (OMP_WAIT_POLICY=PASSIVE)",
     "asw-torch-fp32-passive", "asw-torch-fp32"),
)


def per_round_ratio(res: dict, name: str, others: tuple[str, ...]) -> list[float]:
    """`name`'s rate over the best of `others`, round by round."""
    return [res["rates"][name][i] / max(res["rates"][o][i] for o in others)
            for i in range(len(res["rates"][name]))]


def cpu_description() -> tuple[str, list[str]]:
    from attnswitch.attention.verdicts import cpu_name
    from attnswitch.engines.openvino_runtime import cpu_flags

    wanted = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8",
              "amx_tile")
    return cpu_name(), [f for f in wanted if f in cpu_flags()]


def _burn(stop: mp.Event) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    a = np.random.default_rng(0).standard_normal((256, 256), dtype=np.float32)
    while not stop.is_set():
        a = np.tanh(a @ a.T * 1e-3)


class Load:
    """`procs` single-threaded busy processes while the context is open."""

    def __init__(self, procs: int):
        self.procs = procs

    def __enter__(self) -> Load:
        ctx = mp.get_context("spawn")
        self.stop = ctx.Event()
        self.workers = [ctx.Process(target=_burn, args=(self.stop,), daemon=True)
                        for _ in range(self.procs)]
        for w in self.workers:
            w.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for w in self.workers:
            w.join(10)
            if w.is_alive():
                w.kill()


def run_contender(name: str, texts_file: Path, workdir: Path, env: dict) -> dict:
    out = workdir / f"{name}.npz"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "e2e_contender.py"),
                           name, "--texts", str(texts_file), "--out", str(out)],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed:\n{proc.stderr[-3000:]}")
    data = np.load(out)
    return {"vectors": data["vectors"], "seconds": float(data["seconds"]),
            "detail": str(data["detail"])}


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64) / np.linalg.norm(a, axis=1, keepdims=True)
    b = b.astype(np.float64) / np.linalg.norm(b, axis=1, keepdims=True)
    return np.sum(a * b, axis=1)


def measure(condition: str, names: list[str], texts: list[str], texts_file: Path,
            rounds: int, load_procs: int, env: dict, workdir: Path) -> dict:
    per_round: dict[str, list[float]] = {n: [] for n in names}
    ratios: dict[str, list[float]] = {n: [] for n in names}
    min_cos: dict[str, float] = {n: 1.0 for n in names}
    detail: dict[str, str] = {}
    loads = []
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        with Load(load_procs if condition == "load" else 0):
            results = {n: run_contender(n, texts_file, workdir, env) for n in order}
            loads.append(os.getloadavg()[0])
        base = results[BASELINE]
        for n in names:
            rate = len(texts) / results[n]["seconds"]
            per_round[n].append(rate)
            ratios[n].append(rate * base["seconds"] / len(texts))
            min_cos[n] = min(min_cos[n], float(cosines(results[n]["vectors"],
                                                       base["vectors"]).min()))
            detail[n] = results[n]["detail"]
        print(f"[{condition}] round {r + 1}, load {loads[-1]:.1f}: " + ", ".join(
            f"{n} {per_round[n][-1]:.1f}" for n in names), flush=True)
    return {"rates": per_round, "ratios": ratios, "min_cos": min_cos, "detail": detail,
            "loads": loads}


def render(args, texts_tokens: tuple[int, float, int], cpu: tuple[str, list[str]],
           results: dict, plans: dict) -> str:
    import torch

    from attnswitch.engines.registry import library_version

    n, mean_tokens, total = texts_tokens
    lines = [
        "# End to end: attnswitch encode vs sentence-transformers and the CPU runtimes", "",
        f"Generated by `benchmarks/e2e_vs_sentence_transformers.py` on "
        f"{dt.date.today().isoformat()}. CPU: **{cpu[0]}**, ISA flags: "
        f"{', '.join(cpu[1]) or 'none of note'}; {len(os.sched_getaffinity(0))} cores; "
        f"torch {torch.__version__}, OpenVINO {library_version('openvino')}, ONNX Runtime "
        f"{library_version('onnxruntime')}, sentence-transformers "
        f"{library_version('sentence_transformers')}.", "",
        f"Command: `{' '.join(['python', 'benchmarks/e2e_vs_sentence_transformers.py', *sys.argv[1:]])}`.", "",
        f"{n} real chunks of examples/corpus (mean {mean_tokens:.0f} tokens, {total:,} in "
        f"all). Each contender in its own process with its defaults, once per round, in an "
        f"order rotated every round; {args.rounds} rounds per condition. chunks/s: median "
        "over rounds; vs ST: median of the per-round ratio to sentence-transformers float32 "
        "of the same round; min cosine: to sentence-transformers float32's vectors, over all "
        f"rounds. Load: {args.load_procs} single-threaded busy processes beside the "
        "contender.", "",
    ]
    for precision, plan in plans.items():
        lines += [f"`engine=\"auto\"` ({precision}) picked **{plan['chosen']}**: "
                  f"{plan['reason']}.", ""]
        for row in plan["rows"]:
            rate = "-" if row["chunks_per_s"] is None else f"{row['chunks_per_s']:.1f}"
            cos = "-" if row["min_cosine"] is None else f"{row['min_cosine']:.6f}"
            lines.append(f"- {row['engine']}: {row['status']}, calibration {rate} chunks/s, "
                         f"min cosine {cos}" + (f" ({row['reason']})" if row["reason"]
                                                else ""))
        lines.append("")
    for condition, res in results.items():
        lines += [f"## {condition} (load average during rounds: "
                  f"{', '.join(f'{x:.1f}' for x in res['loads'])})", "",
                  "| contender | chunks/s | vs ST fp32 | min cosine | chunks/s per round | "
                  "what ran |", "|---|---:|---:|---:|---|---|"]
        for name, rates in res["rates"].items():
            lines.append(
                f"| {name} | {statistics.median(rates):.1f} | "
                f"{statistics.median(res['ratios'][name]):.2f}x | {res['min_cos'][name]:.6f} | "
                f"{', '.join(f'{x:.1f}' for x in rates)} | {res['detail'][name]} |")
        lines.append("")
        for ours, (peers, parity) in JUDGED.items():
            if ours not in res["rates"] or not all(p in res["rates"] for p in peers):
                continue
            per_round = per_round_ratio(res, ours, peers)
            ratio = statistics.median(per_round)
            ok = res["min_cos"][ours] >= parity
            lines.append(f"- **{ours} vs the best of {', '.join(peers)}: {ratio:.2f}x** "
                         f"(median of per-round ratios: "
                         f"{', '.join(f'{x:.2f}' for x in per_round)}); min cosine "
                         f"{res['min_cos'][ours]:.6f} {'>=' if ok else '<'} {parity}.")
        lines.append("")
        attributed = [(what, a, b) for what, a, b in ATTRIBUTION
                      if a in res["rates"] and b in res["rates"]]
        if attributed:
            lines += ["| named variant: what changes | with / without (median of per-round "
                      "ratios) |", "|---|---:|"]
            lines += [f"| {what} (`{a}` / `{b}`) | "
                      f"{statistics.median(per_round_ratio(res, a, (b,))):.2f}x |"
                      for what, a, b in attributed]
            lines.append("")
    return "\n".join(lines)


def plot(path: Path, results: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 6), squeeze=False)
    for ax, (condition, res) in zip(axes[0], results.items(), strict=True):
        names = list(res["rates"])
        ratios = [statistics.median(res["ratios"][n]) for n in names]
        colors = ["#3a7" if n.startswith("asw-auto") else "#8bd" if n.startswith("asw")
                  else "#999" for n in names]
        ax.barh(names, ratios, color=colors)
        for i, r in enumerate(ratios):
            ax.text(r, i, f" {r:.2f}x", va="center", fontsize=8)
        ax.axvline(1.0, color="k", lw=0.5)
        ax.invert_yaxis()
        ax.set_xlabel("chunks/s vs sentence-transformers fp32 (median of per-round ratios)")
        ax.set_title(condition, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chunks", type=int, default=600)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--conditions", default="quiet,load")
    p.add_argument("--contenders", default=",".join(QUIET))
    p.add_argument("--load-contenders", default=",".join(LOADED))
    p.add_argument("--load-procs", type=int, default=2)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    texts = corpus_chunks(args.chunks)
    from attnswitch.engines import explain_engine, get_engine

    ids = get_engine(None, "torch").tokenize(texts)
    lengths = [len(r) for r in ids]
    workdir = Path(tempfile.mkdtemp(prefix="asw-e2e-"))
    texts_file = workdir / "texts.json"
    texts_file.write_text(json.dumps(texts))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("ATTNSWITCH_ENGINE", None)
    os.environ.pop("ATTNSWITCH_ENGINE", None)
    plans = {}
    for precision in ("fp32", "bf16"):  # calibrated once, shared through the cache dir
        plans[precision] = explain_engine(None, "auto", precision).to_dict()
        print(f"auto {precision}: {plans[precision]['chosen']} ({plans[precision]['reason']})",
              flush=True)
    results = {}
    for condition in args.conditions.split(","):
        names = (args.contenders if condition == "quiet" else args.load_contenders).split(",")
        if BASELINE not in names:
            names.insert(0, BASELINE)
        results[condition] = measure(condition, names, texts, texts_file, args.rounds,
                                     args.load_procs, env, workdir)
    cpu = cpu_description()
    page = render(args, (len(texts), float(np.mean(lengths)), int(np.sum(lengths))), cpu,
                  results, plans)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "e2e_vs_sentence_transformers.md").write_text(page)
    (args.out / "e2e_vs_sentence_transformers.json").write_text(json.dumps(
        {"cpu": cpu, "plans": plans, "results": results,
         "platform": platform.platform()}, indent=1, default=float))
    plot(args.out / "e2e_vs_sentence_transformers.png", results)
    print(page)


if __name__ == "__main__":
    main()
