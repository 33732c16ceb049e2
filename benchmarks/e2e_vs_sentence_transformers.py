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
its per-round ratio to sentence-transformers float32 of the same round, the minimum
cosine of its vectors to sentence-transformers float32's, and its MRR@10 on the
repository's known-item retrieval benchmark (benchmarks/retrieval_quality.py: section
headings as queries, each section's first chunk the target; exact cosine ranking), encoded
by the contender in its first round after the timed encode, untimed. The page names the CPU model and
its ISA flags (AMX, AVX-512 BF16...), and writes a plot.

Before the rounds, `engine="auto"` is calibrated once (engines.autopick) in the cache
directory every contender shares, so the auto contenders time encoding, not calibration;
the page shows what auto picked and why.

    python benchmarks/e2e_vs_sentence_transformers.py [--chunks 600] [--rounds 3]
        [--conditions quiet,load] [--contenders a,b,...] [--load-contenders a,b,...]
        [--out docs/results] [--mrr-limit N | --no-mrr]
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
QUIET = (
    "st-fp32",
    "st-bf16",
    "asw-auto",
    "asw-auto-fp32",
    "asw-auto-bf16",
    "asw-auto-int8",
    "asw-openvino-int8",
    "asw-onnxruntime-int8",
    "asw-openvino-fp32-b4096",
    "asw-openvino-bf16-b4096",
    "asw-openvino-fp32-latency",
    "asw-torch-fp32",
    "asw-torch-fp32-nnlinear",
    "asw-torch-fp32-compile",
    "asw-torch-fp32-passive",
    "asw-onnxruntime-fp32",
    "ov-user-fp32",
    "ov-user-bf16",
    "ov-user-tput-fp32",
    "ov-user-tput-bf16",
    "ov-user-nncf-int8",
    "ort-user-fp32",
)
LOADED = (
    "st-fp32",
    "asw-auto",
    "asw-auto-fp32",
    "asw-auto-bf16",
    "asw-auto-int8",
    "asw-torch-fp32",
    "asw-torch-fp32-passive",
    "ov-user-fp32",
    "ov-user-bf16",
    "ov-user-tput-fp32",
    "ov-user-tput-bf16",
    "ov-user-nncf-int8",
    "ort-user-fp32",
)
# the peers each attnswitch contender is judged against (the best of them), the parity it
# must keep, and the ratio it must reach: fp32 >= the best fp32 runtime; bf16 and the
# default >= OpenVINO bf16 (both modes); int8 >= 1.3x OpenVINO bf16 in throughput mode and
# >= 1.0x OpenVINO int8 through NNCF
JUDGED = (
    ("asw-auto-fp32", ("ort-user-fp32", "ov-user-fp32", "ov-user-tput-fp32"), 0.9999, 1.0),
    ("asw-auto-bf16", ("ov-user-bf16", "ov-user-tput-bf16"), 0.999, 1.0),
    ("asw-auto", ("ov-user-bf16", "ov-user-tput-bf16"), 0.999, 1.0),
    ("asw-auto-int8", ("ov-user-tput-bf16",), 0.98, 1.3),
    ("asw-auto-int8", ("ov-user-nncf-int8",), 0.98, 1.0),
)
MRR_TOLERANCE = 0.01  # of the float32 MRR@10, for the default and int8


def corpus_chunks(n: int) -> list[str]:
    """`n` chunk texts evenly spaced over all chunks of the corpus, in corpus order."""
    from attnswitch.documents.chunk import chunk_text
    from attnswitch.documents.ingest import ingest
    from attnswitch.engines.model import ModelSpec
    from attnswitch.indexing.config import DEFAULT_OVERLAP, chunk_tokenizer, special_tokens

    spec = ModelSpec.load(None)
    tok = chunk_tokenizer(spec)
    limit = spec.max_seq_length - special_tokens(tok)
    texts = [
        c.text
        for doc in ingest(CORPUS)
        if doc.ok
        for c in chunk_text(doc.text, tok, max_tokens=limit, overlap=DEFAULT_OVERLAP)
    ]
    if n > len(texts):
        raise SystemExit(f"--chunks: expected at most {len(texts)} (the corpus), got {n}")
    pick = np.linspace(0, len(texts) - 1, n).round().astype(int)
    return [texts[i] for i in pick]


# each gain attributed to its cause: (what changes, the contender with it, the one without)
ATTRIBUTION = (
    (
        "openvino: 1,024-token batches instead of 4,096 (fp32)",
        "asw-auto-fp32",
        "asw-openvino-fp32-b4096",
    ),
    (
        "openvino: 1,024-token batches instead of 4,096 (bf16)",
        "asw-auto-bf16",
        "asw-openvino-bf16-b4096",
    ),
    (
        "openvino: a single-threaded stream per core instead of one request over all cores",
        "asw-auto-fp32",
        "asw-openvino-fp32-latency",
    ),
    (
        "torch: oneDNN prepacked linears instead of nn.Linear",
        "asw-torch-fp32",
        "asw-torch-fp32-nnlinear",
    ),
    (
        "torch: torch.compile (inductor, freezing) instead of the eager engine",
        "asw-torch-fp32-compile",
        "asw-torch-fp32",
    ),
    (
        "torch: OpenMP threads that sleep at barriers (OMP_WAIT_POLICY=PASSIVE)",
        "asw-torch-fp32-passive",
        "asw-torch-fp32",
    ),
)


def per_round_ratio(res: dict, name: str, others: tuple[str, ...]) -> list[float]:
    """`name`'s rate over the best of `others`, round by round."""
    return [
        res["rates"][name][i] / max(res["rates"][o][i] for o in others)
        for i in range(len(res["rates"][name]))
    ]


def cpu_description() -> tuple[str, list[str]]:
    from attnswitch.kernels.cache import cpu_flags, cpu_name

    wanted = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8", "amx_tile")
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
        self.workers = [
            ctx.Process(target=_burn, args=(self.stop,), daemon=True) for _ in range(self.procs)
        ]
        for w in self.workers:
            w.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for w in self.workers:
            w.join(10)
            if w.is_alive():
                w.kill()


def run_contender(
    name: str, texts_file: Path, workdir: Path, env: dict, items_file: Path | None = None
) -> dict:
    out = workdir / f"{name}.npz"
    extra = [] if items_file is None else ["--known-items", str(items_file)]
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "e2e_contender.py"),
            name,
            "--texts",
            str(texts_file),
            "--out",
            str(out),
            *extra,
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed:\n{proc.stderr[-3000:]}")
    data = np.load(out)
    got = {
        "vectors": data["vectors"],
        "seconds": float(data["seconds"]),
        "detail": str(data["detail"]),
    }
    if "chunk_vectors" in data:
        got["known_items"] = (data["chunk_vectors"], data["query_vectors"])
    return got


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64) / np.linalg.norm(a, axis=1, keepdims=True)
    b = b.astype(np.float64) / np.linalg.norm(b, axis=1, keepdims=True)
    return np.sum(a * b, axis=1)


def measure(
    condition: str,
    names: list[str],
    texts: list[str],
    texts_file: Path,
    rounds: int,
    load_procs: int,
    env: dict,
    workdir: Path,
    items: tuple[Path, list[int]] | None,
) -> dict:
    from retrieval_quality import dense_mrr_at_10

    mrr: dict[str, float] = {}
    per_round: dict[str, list[float]] = {n: [] for n in names}
    ratios: dict[str, list[float]] = {n: [] for n in names}
    min_cos: dict[str, float] = {n: 1.0 for n in names}
    detail: dict[str, str] = {}
    loads = []
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        with Load(load_procs if condition == "load" else 0):
            results = {
                n: run_contender(
                    n, texts_file, workdir, env, items[0] if items and r == 0 else None
                )
                for n in order
            }
            loads.append(os.getloadavg()[0])
        base = results[BASELINE]
        for n in names:
            rate = len(texts) / results[n]["seconds"]
            per_round[n].append(rate)
            ratios[n].append(rate * base["seconds"] / len(texts))
            min_cos[n] = min(
                min_cos[n], float(cosines(results[n]["vectors"], base["vectors"]).min())
            )
            detail[n] = results[n]["detail"]
            if "known_items" in results[n]:
                mrr[n] = dense_mrr_at_10(*results[n]["known_items"], items[1])
        print(
            f"[{condition}] round {r + 1}, load {loads[-1]:.1f}: "
            + ", ".join(f"{n} {per_round[n][-1]:.1f}" for n in names),
            flush=True,
        )
    return {
        "rates": per_round,
        "ratios": ratios,
        "min_cos": min_cos,
        "detail": detail,
        "loads": loads,
        "mrr": mrr,
    }


def render(
    args,
    texts_tokens: tuple[int, float, int],
    cpu: tuple[str, list[str]],
    results: dict,
    plans: dict,
) -> str:
    import torch

    from attnswitch.engines.registry import library_version

    n, mean_tokens, total = texts_tokens
    lines = [
        "# End to end: attnswitch encode vs sentence-transformers and the CPU runtimes",
        "",
        f"Generated by `benchmarks/e2e_vs_sentence_transformers.py` on "
        f"{dt.date.today().isoformat()}. CPU: **{cpu[0]}**, ISA flags: "
        f"{', '.join(cpu[1]) or 'none of note'}; {len(os.sched_getaffinity(0))} cores; "
        f"torch {torch.__version__}, OpenVINO {library_version('openvino')}, ONNX Runtime "
        f"{library_version('onnxruntime')}, sentence-transformers "
        f"{library_version('sentence_transformers')}.",
        "",
        f"Command: `{' '.join(['python', 'benchmarks/e2e_vs_sentence_transformers.py', *sys.argv[1:]])}`.",
        "",
        f"{n} real chunks of examples/corpus (mean {mean_tokens:.0f} tokens, {total:,} in "
        f"all). Each contender in its own process with its defaults, once per round, in an "
        f"order rotated every round; {args.rounds} rounds per condition. chunks/s: median "
        "over rounds; vs ST: median of the per-round ratio to sentence-transformers float32 "
        "of the same round; min cosine: to sentence-transformers float32's vectors, over all "
        f"rounds. Load: {args.load_procs} single-threaded busy processes beside the "
        "contender.",
        "",
    ]
    for precision, plan in plans.items():
        if precision == "auto":
            lines += [
                f'`precision="auto"` (the default) picked **{plan["chosen"]}**: {plan["reason"]}.',
                "",
            ]
            for row in plan["rows"]:
                rate = "-" if row["chunks_per_s"] is None else f"{row['chunks_per_s']:.1f}"
                cos = "-" if row["min_cosine"] is None else f"{row['min_cosine']:.6f}"
                lines.append(
                    f"- {row['precision']}: {row['status']} on "
                    f"{row['engine'] or '-'}, calibration {rate} chunks/s, min "
                    f"cosine {cos}, same top-10 "
                    f"{'-' if row['top10'] is None else format(row['top10'], '.0%')}"
                    + (f" ({row['reason']})" if row["reason"] else "")
                )
            lines.append("")
            continue
        lines += [
            f'`engine="auto"` ({precision}) picked **{plan["chosen"]}**: {plan["reason"]}.',
            "",
        ]
        for row in plan["rows"]:
            rate = "-" if row["chunks_per_s"] is None else f"{row['chunks_per_s']:.1f}"
            cos = "-" if row["min_cosine"] is None else f"{row['min_cosine']:.6f}"
            lines.append(
                f"- {row['engine']}: {row['status']}, calibration {rate} chunks/s, "
                f"min cosine {cos}" + (f" ({row['reason']})" if row["reason"] else "")
            )
        lines.append("")
    for condition, res in results.items():
        lines += [
            f"## {condition} (load average during rounds: "
            f"{', '.join(f'{x:.1f}' for x in res['loads'])})",
            "",
            "| contender | chunks/s | vs ST fp32 | min cosine | MRR@10 | chunks/s per "
            "round | what ran |",
            "|---|---:|---:|---:|---:|---|---|",
        ]
        mrr = res.get("mrr", {})
        for name, rates in res["rates"].items():
            lines.append(
                f"| {name} | {statistics.median(rates):.1f} | "
                f"{statistics.median(res['ratios'][name]):.2f}x | {res['min_cos'][name]:.6f} | "
                f"{mrr[name]:.4f} | "
                if name in mrr
                else f"| {name} | {statistics.median(rates):.1f} | "
                f"{statistics.median(res['ratios'][name]):.2f}x | {res['min_cos'][name]:.6f} | "
                "- | "
            )
            lines[-1] += f"{', '.join(f'{x:.1f}' for x in rates)} | {res['detail'][name]} |"
        lines.append("")
        for ours, peers, parity, target in JUDGED:
            if ours not in res["rates"] or not all(p in res["rates"] for p in peers):
                continue
            per_round = per_round_ratio(res, ours, peers)
            ratio = statistics.median(per_round)
            ok = res["min_cos"][ours] >= parity
            quality = ""
            if ours in mrr and BASELINE in mrr:
                delta = mrr[ours] - mrr[BASELINE]
                quality = (
                    f"; MRR@10 {mrr[ours]:.4f}, {delta:+.4f} vs float32 "
                    f"({'within' if abs(delta) <= MRR_TOLERANCE else 'outside'} "
                    f"{MRR_TOLERANCE})"
                )
            lines.append(
                f"- **{ours} vs the best of {', '.join(peers)}: {ratio:.2f}x** "
                f"({'meets' if ratio >= target else 'misses'} {target}x; median of "
                f"per-round ratios: {', '.join(f'{x:.2f}' for x in per_round)}); "
                f"min cosine {res['min_cos'][ours]:.6f} {'>=' if ok else '<'} "
                f"{parity}{quality}."
            )
        lines.append("")
        attributed = [
            (what, a, b) for what, a, b in ATTRIBUTION if a in res["rates"] and b in res["rates"]
        ]
        if attributed:
            lines += [
                "| named variant: what changes | with / without (median of per-round ratios) |",
                "|---|---:|",
            ]
            lines += [
                f"| {what} (`{a}` / `{b}`) | "
                f"{statistics.median(per_round_ratio(res, a, (b,))):.2f}x |"
                for what, a, b in attributed
            ]
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
        colors = [
            "#3a7" if n.startswith("asw-auto") else "#8bd" if n.startswith("asw") else "#999"
            for n in names
        ]
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
    p.add_argument(
        "--mrr-limit",
        type=int,
        default=0,
        help="Known items: only the first N section chunks and their queries "
        "(0: all; for a smoke run).",
    )
    p.add_argument("--no-mrr", action="store_true", help="Skip the known-item MRR@10.")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    texts = corpus_chunks(args.chunks)
    from attnswitch.engines import explain_engine, get_engine

    ids = get_engine(None, "torch", "fp32").tokenize(texts)
    lengths = [len(r) for r in ids]
    workdir = Path(tempfile.mkdtemp(prefix="asw-e2e-"))
    texts_file = workdir / "texts.json"
    texts_file.write_text(json.dumps(texts))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ASW_E2E_WORKDIR": str(workdir)}
    items = None
    if not args.no_mrr:
        from retrieval_quality import known_items

        chunks, queries, targets = known_items()
        if args.mrr_limit:
            keep = [i for i, t in enumerate(targets) if t < args.mrr_limit]
            chunks = chunks[: args.mrr_limit]
            queries, targets = [queries[i] for i in keep], [targets[i] for i in keep]
        items_file = workdir / "known_items.json"
        items_file.write_text(json.dumps({"chunks": chunks, "queries": queries}))
        items = (items_file, targets)
        print(f"known items: {len(queries)} queries over {len(chunks)} chunks", flush=True)
    env.pop("ATTNSWITCH_ENGINE", None)
    os.environ.pop("ATTNSWITCH_ENGINE", None)
    from attnswitch.engines import explain_precision, runtime

    runtime.current().reset(encoders=False)  # engine settings are read once: again now

    plans = {"auto": explain_precision(None, "auto").to_dict()}
    print(f"auto precision: {plans['auto']['chosen']} ({plans['auto']['reason']})", flush=True)
    for precision in ("fp32", "bf16", "int8"):  # calibrated once, shared through the cache dir
        plans[precision] = explain_engine(None, "auto", precision).to_dict()
        print(
            f"auto {precision}: {plans[precision]['chosen']} ({plans[precision]['reason']})",
            flush=True,
        )
    results = {}
    for condition in args.conditions.split(","):
        names = (args.contenders if condition == "quiet" else args.load_contenders).split(",")
        if BASELINE not in names:
            names.insert(0, BASELINE)
        results[condition] = measure(
            condition, names, texts, texts_file, args.rounds, args.load_procs, env, workdir, items
        )
    cpu = cpu_description()
    page = render(
        args, (len(texts), float(np.mean(lengths)), int(np.sum(lengths))), cpu, results, plans
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "e2e_vs_sentence_transformers.md").write_text(page)
    (args.out / "e2e_vs_sentence_transformers.json").write_text(
        json.dumps(
            {"cpu": cpu, "plans": plans, "results": results, "platform": platform.platform()},
            indent=1,
            default=float,
        )
    )
    plot(args.out / "e2e_vs_sentence_transformers.png", results)
    print(page)


if __name__ == "__main__":
    main()
