"""Service under load: many concurrent clients against `attnswitch serve` on loopback, a
liveness probe in its own process, and a SIGTERM in the middle of the load.

Three processes: the server (`python -m attnswitch.service`, port chosen by the OS), this
load generator (asyncio + httpx, `--clients` tasks, each posting `--texts` texts of the
example corpus per request as fast as answers come; after a 429 it waits the Retry-After
it was given times a random factor in [0.5, 1] (`--backoff-ms` instead, when given), as a
well-behaved client does),
and a probe process that GETs /livez every `--probe-ms` on a connection of its own and
records each latency. At `--sigterm-at` of `--duration` the server gets SIGTERM; the
clients carry on until the server is gone (or `--grace` seconds more).

Checked, and reported as pass/fail:
- no 5xx and no transport error before SIGTERM; requests beyond capacity get 429;
- /livez p99 under 100 ms throughout (probe process, loopback);
- SIGTERM loses no accepted request: every request the server admitted was answered 200
  (the server's own count, printed when it stops, equals the clients' 200s), and every
  other request after SIGTERM was refused cleanly (503, connection refused, or its
  keep-alive connection closed before the server read it).

    python benchmarks/service_load.py [--duration 40] [--clients 48] [--texts 4]
        [--max-queue 32] [--sigterm-at 0.75] [--out docs/results/service_load.md]

Only loopback addresses; every loop is bounded by time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attnswitch.service import launch
from attnswitch.service.launch import ServerProcess
from e2e_vs_sentence_transformers import Load, cpu_description  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "examples" / "corpus" / "python-tutorial"
LIVEZ_LIMIT_S = 0.100


@dataclass
class Outcome:
    sent: float  # seconds since the load started
    latency: float
    status: int | None  # None: no HTTP response
    error: str | None = None  # the error's `code`, or what went wrong without a response

    @property
    def draining(self) -> bool:
        """Refused with 503 because the server was draining (never admitted)."""
        return self.status == 503 and self.error == "draining"


def texts_from_corpus(n: int, seed: int = 0) -> list[str]:
    """`n` passages of 8 to 120 words from the tutorial's reStructuredText files."""
    words = []
    for path in sorted(CORPUS.glob("*.rst.txt")):
        words.extend(path.read_text(encoding="utf-8").split())
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        length = rng.randint(8, 120)
        start = rng.randrange(0, len(words) - length)
        out.append(" ".join(words[start : start + length]))
    return out


# -- the server ---------------------------------------------------------------------------


def start_server(args: argparse.Namespace, workdir: Path) -> ServerProcess:
    """The server under load: a data folder and jobs root in `workdir`, the run's limits."""
    return launch.start(
        workdir,
        "--db",
        str(workdir / "data"),
        "--jobs-root",
        str(workdir),
        "--max-queue",
        str(args.max_queue),
        "--max-items",
        str(max(args.texts, 16)),
        "--request-timeout",
        str(args.request_timeout),
        "--drain-timeout",
        "60",
        timeout=300,
        poll_s=0.05,
    )


# -- the probe (its own process) ----------------------------------------------------------


def probe(url: str, period: float, until: float, out: mp.Queue) -> None:
    """GET /livez every `period` s until the server is gone or `until` (monotonic)."""
    latencies: list[float] = []
    failures = 0
    with httpx.Client(base_url=url, timeout=5) as c:
        while time.monotonic() < until:
            start = time.perf_counter()
            try:
                ok = c.get("/livez").status_code == 200
            except httpx.TransportError:
                break  # the server stopped listening
            latencies.append(time.perf_counter() - start)
            failures += not ok
            time.sleep(max(0.0, period - (time.perf_counter() - start)))
    out.put({"latencies": latencies, "failures": failures})


# -- the load -----------------------------------------------------------------------------


async def client(
    c: httpx.AsyncClient,
    rng: random.Random,
    pool: list[str],
    n_texts: int,
    t0: float,
    until: float,
    stop: asyncio.Event,
    backoff: float | None,
    outcomes: list[Outcome],
) -> None:
    while time.monotonic() < until and not stop.is_set():
        body = {"input": rng.sample(pool, n_texts)}
        sent = time.monotonic()
        try:
            r = await c.post("/v1/embeddings", json=body)
            outcomes.append(Outcome(sent - t0, time.monotonic() - sent, r.status_code))
            if r.status_code == 200 and len(r.json()["data"]) != n_texts:
                outcomes[-1].error = "wrong number of embeddings"
            elif r.status_code >= 400:
                try:
                    outcomes[-1].error = r.json()["error"]["code"]
                except (ValueError, KeyError, TypeError):
                    outcomes[-1].error = "not the JSON error shape"
            if r.status_code in (429, 503):
                if backoff is None:
                    wait = float(r.headers.get("retry-after", 1)) * rng.uniform(0.5, 1.0)
                else:
                    wait = backoff
                await asyncio.sleep(min(wait, max(0.0, until - time.monotonic())))
        except httpx.ConnectError:
            outcomes.append(Outcome(sent - t0, time.monotonic() - sent, None, "refused"))
            stop.set()  # the server stopped listening
        except httpx.RemoteProtocolError:
            outcomes.append(Outcome(sent - t0, time.monotonic() - sent, None, "closed"))
        except httpx.TransportError as exc:
            outcomes.append(Outcome(sent - t0, time.monotonic() - sent, None, type(exc).__name__))


async def load(
    args: argparse.Namespace, url: str, proc: subprocess.Popen
) -> tuple[list[Outcome], float | None, float]:
    pool = texts_from_corpus(2000)
    t0 = time.monotonic()
    until = t0 + args.duration + args.grace
    stop = asyncio.Event()
    outcomes: list[Outcome] = []
    sigterm_at: float | None = None
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    async with httpx.AsyncClient(
        base_url=url, timeout=args.request_timeout + 30, limits=limits
    ) as c:
        tasks = [
            asyncio.create_task(
                client(
                    c,
                    random.Random(i),
                    pool,
                    args.texts,
                    t0,
                    until,
                    stop,
                    None if args.backoff_ms is None else args.backoff_ms / 1e3,
                    outcomes,
                )
            )
            for i in range(args.clients)
        ]
        await asyncio.sleep(args.duration * args.sigterm_at)
        sigterm_at = time.monotonic() - t0
        proc.send_signal(signal.SIGTERM)
        while time.monotonic() < until and proc.poll() is None:
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.gather(*tasks)
    return outcomes, sigterm_at, time.monotonic() - t0


def engine_alone(n: int, engine: str, load_procs: int) -> dict:
    """One engine's own rate on `n` texts of the pool (one `encode` call after a warm-up of
    the same texts), in a fresh process, with `load_procs` busy single-threaded processes
    beside it (the e2e benchmark's fixed load)."""
    code = (
        "import json, sys, time\n"
        "from attnswitch.engines import get_engine\n"
        "texts = json.loads(sys.stdin.read())\n"
        f"encoder = get_engine(None, {engine!r})\n"
        "encoder.encode(texts)\n"
        "start = time.perf_counter()\n"
        "encoder.encode(texts)\n"
        "print(json.dumps({'engine': encoder.engine, 'seconds': time.perf_counter() - start}))\n"
    )
    texts = texts_from_corpus(n, seed=1)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("ATTNSWITCH_ENGINE", None)
    with Load(load_procs):
        proc = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(texts),
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    if proc.returncode != 0:
        raise SystemExit(f"engine alone ({engine}) failed:\n{proc.stderr[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {
        "engine": out["engine"],
        "asked": engine,
        "texts": n,
        "load_procs": load_procs,
        "texts_per_s": n / out["seconds"],
    }


# -- report -------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def summarise(args, outcomes, sigterm_at, probe_result, server_log: str, load_avg) -> dict:
    before = [o for o in outcomes if o.sent < sigterm_at]
    after = [o for o in outcomes if o.sent >= sigterm_at]
    in_flight = [o for o in before if o.sent + o.latency >= sigterm_at]
    ok_before = [o for o in before if o.status == 200]
    span = sigterm_at
    statuses: dict[str, int] = {}
    for o in outcomes:
        key = str(o.status) if o.status is not None else o.error
        statuses[key] = statuses.get(key, 0) + 1
    match = re.search(r"attnswitch serve: stopped (\{.*\})", server_log)
    server = json.loads(match.group(1)) if match else None
    ready = re.search(r"attnswitch serve: ready (\{.*\})", server_log)
    served = (
        json.loads(ready.group(1))
        if ready
        else {"model": "?", "engine": "?", "precision": "?", "runs_on": None}
    )
    livez = probe_result["latencies"]
    after_other = [
        o
        for o in after
        if o.status != 200 and not o.draining and o.error not in ("refused", "closed")
    ]
    total_200 = sum(1 for o in outcomes if o.status == 200)
    return {
        "served": served,
        "settings": {
            k: getattr(args, k)
            for k in (
                "duration",
                "clients",
                "texts",
                "max_queue",
                "sigterm_at",
                "backoff_ms",
                "probe_ms",
            )
        },
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "cpu": cpu_description(),
            "load_avg_start": load_avg[0],
            "load_avg_end": load_avg[1],
        },
        "before_sigterm": {
            "seconds": span,
            "requests": len(before),
            "ok_per_s": len(ok_before) / span,
            "texts_per_s": len(ok_before) * args.texts / span,
            "p50_ms": pct([o.latency for o in ok_before], 50) * 1e3,
            "p99_ms": pct([o.latency for o in ok_before], 99) * 1e3,
            "share_429": sum(o.status == 429 for o in before) / max(1, len(before)),
            "p99_429_ms": pct([o.latency for o in before if o.status == 429], 99) * 1e3,
            "errors_5xx": sum(
                1 for o in outcomes if o.status is not None and o.status >= 500 and not o.draining
            ),
            "transport_errors": sum(
                1 for o in before if o.status is None and o.sent + o.latency < sigterm_at
            ),
            "wrong_bodies": sum(1 for o in before if o.error and o.status == 200),
        },
        "in_flight_at_sigterm": {
            "requests": len(in_flight),
            "ok": sum(o.status == 200 for o in in_flight),
            "refused_503": sum(o.draining for o in in_flight),
            "closed": sum(o.error in ("refused", "closed") for o in in_flight),
            "other": [
                f"{o.status} {o.error}"
                for o in in_flight
                if o.status != 200 and not o.draining and o.error not in ("refused", "closed")
            ],
            "last_answer_s": max((o.sent + o.latency - sigterm_at for o in in_flight), default=0.0),
        },
        "after_sigterm": {
            "ok": sum(o.status == 200 for o in after),
            "refused_503": sum(o.draining for o in after),
            "refused_connect": sum(o.error == "refused" for o in after),
            "closed_before_read": sum(o.error == "closed" for o in after),
            "other": len(after_other),
        },
        "statuses": statuses,
        "livez": {
            "probes": len(livez),
            "p50_ms": pct(livez, 50) * 1e3,
            "p99_ms": pct(livez, 99) * 1e3,
            "max_ms": max(livez, default=float("nan")) * 1e3,
            "over_100ms": sum(x > LIVEZ_LIMIT_S for x in livez),
            "failures": probe_result["failures"],
        },
        "server": server,
        "client_200_total": total_200,
        "engine_alone": None,
    }


def verdicts(s: dict) -> list[tuple[str, bool]]:
    b, a, server = s["before_sigterm"], s["after_sigterm"], s["server"]
    f = s["in_flight_at_sigterm"]
    return [
        (
            "no 5xx (but 503 draining) at all; no transport error, no wrong body before SIGTERM",
            b["errors_5xx"] == 0 and b["transport_errors"] == 0 and b["wrong_bodies"] == 0,
        ),
        ("requests beyond capacity got 429", b["share_429"] > 0),
        (
            "/livez p99 < 100 ms (probe process)",
            s["livez"]["p99_ms"] < LIVEZ_LIMIT_S * 1e3 and s["livez"]["failures"] == 0,
        ),
        (
            "SIGTERM: every request in flight at SIGTERM answered 200, or refused cleanly if it "
            "reached the server after the signal",
            f["requests"] > 0 and not f["other"],
        ),
        (
            "SIGTERM: every admitted request answered 200 (server count = client 200s)",
            server is not None
            and server["unanswered"] == 0
            and server["completed"] == s["client_200_total"],
        ),
        (
            "SIGTERM: every other request refused cleanly (503 / refused / closed unread)",
            a["other"] == 0,
        ),
    ]


def markdown(s: dict) -> str:
    b, a, lz, st, m = (
        s["before_sigterm"],
        s["after_sigterm"],
        s["livez"],
        s["settings"],
        s["machine"],
    )
    f, alone = s["in_flight_at_sigterm"], s["engine_alone"]
    backoff = (
        "the Retry-After it got x U(0.5, 1)"
        if st["backoff_ms"] is None
        else f"{st['backoff_ms']} ms"
    )
    server = s["server"] or {}
    lines = [
        "# Service under load",
        "",
        f"`python benchmarks/service_load.py --duration {st['duration']} --clients "
        f"{st['clients']} --texts {st['texts']} --max-queue {st['max_queue']} --sigterm-at "
        f"{st['sigterm_at']}`: {st['clients']} concurrent clients (one asyncio process, httpx), "
        f"{st['texts']} texts of 8-120 words per request, the default model "
        f"({s['served']['model']}, {s['served']['engine']} engine (the auto pick: "
        f"{s['served']['runs_on']}), {s['served']['precision']}) on {m['cpus']} CPU cores "
        f"shared with the clients and the probe; loopback only. Queue: {st['max_queue']} texts. After a 429 a client waits "
        f"{backoff}. /livez is probed every {st['probe_ms']} ms from a separate process."
        f" SIGTERM at {b['seconds']:.1f} s. Load average (1 min) at start and end: "
        f"{m['load_avg_start']:.1f} and {m['load_avg_end']:.1f}. CPU: {m['cpu'][0]} "
        f"({', '.join(m['cpu'][1]) or 'no ISA flags of note'}).",
        "",
        "| before SIGTERM | value |",
        "|---|---:|",
        f"| requests | {b['requests']:,} |",
        f"| answered 200 per second | {b['ok_per_s']:.1f} |",
        f"| texts embedded per second | {b['texts_per_s']:.1f} |",
        f"| latency of 200s, p50 / p99 (ms) | {b['p50_ms']:.0f} / {b['p99_ms']:.0f} |",
        f"| share of 429 (queue full) | {b['share_429']:.1%} |",
        f"| latency of 429s, p99 (ms) | {b['p99_429_ms']:.1f} |",
        f"| 5xx other than 503 draining (whole run) / transport errors | {b['errors_5xx']} / "
        f"{b['transport_errors']} |",
        "",
    ]
    if alone:
        lines += [
            "For scale, each engine alone in a fresh process, no HTTP, no other client: "
            f"{alone[0]['texts']} texts of the same pool in one `encode` call (after a warm-up "
            "call on the same texts), on a quiet machine and beside a fixed load of busy "
            "single-threaded processes (as in the e2e benchmark):",
            "",
            "| engine | load processes | texts/s |",
            "|---|---:|---:|",
            *[
                f"| {a['engine']} (asked: {a['asked']}) | {a['load_procs']} | "
                f"{a['texts_per_s']:.1f} |"
                for a in alone
            ],
            "",
        ]
    lines += [
        "| /livez (probe process, whole run) | value |",
        "|---|---:|",
        f"| probes | {lz['probes']:,} |",
        f"| p50 / p99 / max (ms) | {lz['p50_ms']:.1f} / {lz['p99_ms']:.1f} / {lz['max_ms']:.1f} |",
        f"| over 100 ms | {lz['over_100ms']} |",
        "",
        "| SIGTERM | requests |",
        "|---|---:|",
        f"| in flight at SIGTERM (sent before, answered after) | {f['requests']} |",
        f"| of which answered 200 | {f['ok']} (last {f['last_answer_s']:.1f} s after SIGTERM) |",
        f"| of which reached the server after the signal: 503 draining | {f['refused_503']} |",
        f"| of which refused or closed unread when the server stopped listening | {f['closed']} |",
        f"| of which anything else | {len(f['other'])} |",
        f"| sent after SIGTERM and answered 200 | {a['ok']} |",
        f"| refused with 503 (draining) | {a['refused_503']} |",
        f"| connection refused (listener closed) | {a['refused_connect']} |",
        f"| keep-alive connection closed before the server read the request | "
        f"{a['closed_before_read']} |",
        f"| anything else | {a['other']} |",
        "",
        f"Server's own count when it stopped: {server.get('admitted', '?')} requests admitted "
        f"to the queue, {server.get('completed', '?')} answered 200, "
        f"{server.get('unanswered', '?')} unanswered; clients received "
        f"{s['client_200_total']} answers 200 in all.",
        "",
        "| check | result |",
        "|---|---|",
    ]
    lines += [f"| {name} | {'pass' if ok else 'FAIL'} |" for name, ok in verdicts(s)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=40.0, help="Seconds of load.")
    ap.add_argument("--clients", type=int, default=48)
    ap.add_argument("--texts", type=int, default=4, help="Texts per request.")
    ap.add_argument("--max-queue", type=int, default=32, help="Server queue, in texts.")
    ap.add_argument(
        "--sigterm-at",
        type=float,
        default=0.75,
        help="Fraction of --duration at which the server gets SIGTERM.",
    )
    ap.add_argument(
        "--grace",
        type=float,
        default=60.0,
        help="Most seconds to wait for the server to stop after SIGTERM.",
    )
    ap.add_argument(
        "--backoff-ms",
        type=float,
        default=None,
        help="Fixed wait after a 429 (default: the Retry-After given, jittered).",
    )
    ap.add_argument("--probe-ms", type=float, default=20.0)
    ap.add_argument("--request-timeout", type=float, default=60.0)
    ap.add_argument(
        "--baseline",
        type=int,
        default=64,
        help="Texts to encode with the engine alone afterwards, for scale (0: none).",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "service_load.md")
    args = ap.parse_args(argv)
    if not 0 < args.sigterm_at < 1 or args.duration <= 0 or args.clients < 1:
        ap.error("expected 0 < --sigterm-at < 1, --duration > 0, --clients >= 1")

    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="attnswitch-load-") as tmp:
        workdir = Path(tmp)
        server = start_server(args, workdir)
        proc, url = server.proc, server.url
        try:
            results: mp.Queue = mp.get_context("spawn").Queue()
            prober = mp.get_context("spawn").Process(
                target=probe,
                args=(
                    url,
                    args.probe_ms / 1e3,
                    time.monotonic() + args.duration + args.grace,
                    results,
                ),
            )
            prober.start()
            time.sleep(0.5)  # the probe is up before the load begins
            outcomes, sigterm_at, _ = asyncio.run(load(args, url, proc))
            proc.wait(args.grace)
            probe_result = results.get(timeout=args.grace)
            prober.join(10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        server_log = server.stderr()
    summary = summarise(
        args, outcomes, sigterm_at, probe_result, server_log, (load_start, os.getloadavg()[0])
    )
    if args.baseline:
        summary["engine_alone"] = [
            engine_alone(args.baseline, engine, procs)
            for engine in ("auto", "torch")
            for procs in (0, 2)
        ]
    text = markdown(summary)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0 if all(ok for _, ok in verdicts(summary)) else 1


if __name__ == "__main__":
    sys.exit(main())
