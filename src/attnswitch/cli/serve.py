"""`attnswitch serve`: the HTTP service over the CLI's data folder, as a plain
typer-annotated function (the CLI registers it; `python -m attnswitch.service` runs it
alone).

    attnswitch serve [--host 127.0.0.1] [--port 8000] [--db DIR|URL]
                     [--api-key-file FILE | --access-file FILE] [--audit-log FILE] ...

SIGHUP re-reads the access file (or key file); a file that cannot be used keeps the old one.

Exit status: 0 after a clean stop, 2 for a refused configuration (bad option, unreadable
key or access file, both given, a non-loopback host without keys), 1 when the address
cannot be bound.
"""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Annotated

import typer

from attnswitch.cli.options import ENGINE_HELP, Precision, StoreOption, nonblank_path


class LogLevel(str, enum.Enum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


def serve_command(
    host: Annotated[
        str,
        typer.Option(
            help="Address to listen on. A non-loopback address needs --api-key-file (or "
            "--allow-no-auth)."
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="Port (0: any free port; the address is printed on stderr).")
    ] = 8000,
    db: StoreOption = None,
    api_key_file: Annotated[
        Path | None,
        typer.Option(
            help="Bearer keys, one a line: 'sha256:<hex digest>' (or a bare 64-hex digest), or "
            "a plain key (hashed when read); every key is an admin's. Default: no keys.",
            show_default=False,
            parser=nonblank_path,
        ),
    ] = None,
    access_file: Annotated[
        Path | None,
        typer.Option(
            help="Principals and their keys (TOML: \\[\\[principal]] name, groups, role "
            '"reader" or "admin", keys; \\[\\[grant]] path, groups): a reader finds only what it '
            "may read. Not with --api-key-file. Re-read on SIGHUP.",
            show_default=False,
            parser=nonblank_path,
        ),
    ] = None,
    audit_log: Annotated[
        Path | None,
        typer.Option(
            help="Append one JSON line per search: who, when, the query's SHA-256 and "
            "length (never its text), k, results returned. Default: the logger "
            "attnswitch.audit only.",
            show_default=False,
            parser=nonblank_path,
        ),
    ] = None,
    allow_no_auth: Annotated[
        bool, typer.Option("--allow-no-auth", help="Serve a non-loopback address without keys.")
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model folder. Default: the index's model, else all-MiniLM-L6-v2.",
            show_default=False,
        ),
    ] = None,
    engine: Annotated[str, typer.Option(help=ENGINE_HELP)] = "auto",
    precision: Annotated[
        Precision | None,
        typer.Option(
            help="Default: the index's precision, else auto (the measured pick).",
            show_default=False,
        ),
    ] = None,
    jobs_root: Annotated[
        Path | None,
        typer.Option(
            help="Turn indexing jobs on: POST /v1/jobs may index folders inside this one. "
            "Default: no jobs.",
            show_default=False,
            parser=nonblank_path,
        ),
    ] = None,
    max_body_bytes: Annotated[int, typer.Option(help="Largest request body (bytes read).")] = 2
    * 2**20,
    max_items: Annotated[int, typer.Option(help="Texts per request.")] = 256,
    max_queue: Annotated[
        int, typer.Option(help="Texts waiting for the model; beyond it requests get 429.")
    ] = 1024,
    batch_tokens: Annotated[
        int,
        typer.Option(
            help="Model tokens per encoder call, gathered across requests (the engine cuts "
            "its own batches inside)."
        ),
    ] = 4096,
    max_wait_ms: Annotated[
        float,
        typer.Option(
            help="How long a batch waits for more requests once one is queued (0: none; "
            "requests that arrive while the encoder works join its next call)."
        ),
    ] = 0.0,
    request_timeout: Annotated[
        float, typer.Option(help="Seconds a request may take (504 past it).")
    ] = 30.0,
    drain_timeout: Annotated[
        float,
        typer.Option(help="Seconds shutdown waits for requests in flight (and for a running job)."),
    ] = 30.0,
    header_timeout: Annotated[
        float, typer.Option(help="Seconds a connection may take to send a request's headers.")
    ] = 10.0,
    body_timeout: Annotated[
        float, typer.Option(help="Seconds a request may take to send its body.")
    ] = 20.0,
    keep_alive: Annotated[
        float,
        typer.Option(
            help="Seconds an idle keep-alive connection stays open (longer than the clients' "
            "own pool expiry: httpx and the OpenAI client keep 5 s)."
        ),
    ] = 20.0,
    query_fill: Annotated[
        int,
        typer.Option(
            help="While the full pass is not done: how many of its best candidates without "
            "the transformer's vectors one search encodes and keeps, 0 to 1000 (0: none)."
        ),
    ] = 20,
    ui: Annotated[
        bool, typer.Option(help="Serve the page (search, index, jobs, hardware) at /.")
    ] = True,
    log_level: Annotated[LogLevel, typer.Option(help="Server log level.")] = LogLevel.info,
    access_log: Annotated[bool, typer.Option(help="Log every request.")] = False,
) -> None:
    """Serve embeddings (OpenAI-compatible), search and indexing jobs over HTTP.

    Health: GET /livez, /readyz (503 while warming up or draining), /metrics (Prometheus).
    """
    from attnswitch.service.auth import BindRefusedError, KeyFileError
    from attnswitch.service.config import ServiceConfig
    from attnswitch.service.server import serve

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        config = ServiceConfig(
            host=host,
            port=port,
            db=db,
            model=model,
            engine=engine,
            precision=None if precision is None else Precision(precision).value,
            api_key_file=api_key_file,
            access_file=access_file,
            audit_log=audit_log,
            allow_no_auth=allow_no_auth,
            jobs_root=jobs_root,
            max_body_bytes=max_body_bytes,
            max_items=max_items,
            max_queue_items=max_queue,
            batch_tokens=batch_tokens,
            max_wait_ms=max_wait_ms,
            request_timeout_s=request_timeout,
            drain_timeout_s=drain_timeout,
            header_timeout_s=header_timeout,
            body_timeout_s=body_timeout,
            keep_alive_s=keep_alive,
            query_fill=query_fill,
            ui=ui,
        )
        serve(config, log_level=LogLevel(log_level).value, access_log=access_log)
    except (ValueError, BindRefusedError, KeyFileError) as exc:
        typer.echo(f"attnswitch serve: {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:
        typer.echo(f"attnswitch serve: cannot listen on {host}:{port}: {exc}", err=True)
        raise typer.Exit(1) from None
