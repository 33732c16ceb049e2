"""`attnswitch mcp`: an MCP server over the index (`integrations.mcp`), for assistants that
speak the Model Context Protocol.

    attnswitch mcp [--db DIR|URL] [--allow-index ROOT ...] [--access-file FILE]   (stdio)
    attnswitch mcp --http [--host 127.0.0.1] [--port 8765] [--api-key-file FILE | --access-file FILE]
                   [--allow-no-auth]
                   [--max-sessions N] [--session-idle-minutes MINUTES]

stdio with --access-file serves the principal whose key is in the environment variable
ATTNSWITCH_API_KEY (an MCP client's `env` for the server); without it, the local user.

Exit status: 0 after a clean stop, 2 for a refused configuration (the mcp extra missing, an
allowed root that is not a folder, an unreadable key or access file or both given, stdio
with an access file and no key of it in ATTNSWITCH_API_KEY, a non-loopback host without
keys, session settings out of range), 1 when the address cannot be bound.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from attnswitch.cli.options import StoreOption, nonblank_path
from attnswitch.integrations.mcp_sessions import (
    DEFAULT_IDLE_MINUTES,
    DEFAULT_MAX_SESSIONS,
    MAX_IDLE_MINUTES,
    MAX_SESSIONS_LIMIT,
)


def mcp_command(
    db: StoreOption = None,
    allow_index: Annotated[
        list[Path] | None,
        typer.Option(
            "--allow-index",
            help="Offer the index_folder tool for folders inside ROOT "
            "(repeatable). Default: no indexing through MCP.",
            show_default=False,
            parser=nonblank_path,
        ),
    ] = None,
    http: Annotated[
        bool,
        typer.Option(
            "--http", help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio."
        ),
    ] = False,
    host: Annotated[
        str,
        typer.Option(
            help="With --http: the address. A non-loopback address needs --api-key-file (or "
            "--allow-no-auth)."
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(
            help="With --http: the port (0: any free port; the address is printed on stderr)."
        ),
    ] = 8765,
    api_key_file: Annotated[
        Path | None,
        typer.Option(
            help="With --http: bearer keys, as `attnswitch serve` reads them (each an admin's).",
            show_default=False,
            parser=nonblank_path,
        ),
    ] = None,
    access_file: Annotated[
        Path | None,
        typer.Option(
            help="Principals and their keys, as `attnswitch serve --access-file` reads them: "
            "a reader finds only what it may read. Re-read on SIGHUP. With --http each "
            "request's bearer key names its principal; on stdio the key is read from the "
            "environment variable ATTNSWITCH_API_KEY (the env an MCP client gives the server).",
            show_default=False,
            parser=nonblank_path,
        ),
    ] = None,
    allow_no_auth: Annotated[
        bool,
        typer.Option(
            "--allow-no-auth", help="With --http: serve a non-loopback address without keys."
        ),
    ] = False,
    max_sessions: Annotated[
        int,
        typer.Option(
            help=f"With --http: the most sessions open at once (1 to {MAX_SESSIONS_LIMIT:,}); a "
            'client that starts another one meanwhile is answered 503 "Too many open '
            'sessions", and the open ones go on.'
        ),
    ] = DEFAULT_MAX_SESSIONS,
    session_idle_minutes: Annotated[
        float,
        typer.Option(
            help="With --http: minutes a session may go with no request in flight (no call, no "
            "open event stream) before it is closed, freeing its place; its client then starts "
            f"a new one. Above 0, at most {MAX_IDLE_MINUTES:g}."
        ),
    ] = DEFAULT_IDLE_MINUTES,
) -> None:
    """Serve the index to MCP clients (assistants): tools search, get_document,
    index_status, and index_folder under --allow-index roots. stdio by default."""
    try:
        from attnswitch.integrations.mcp import build_server, run_http, run_stdio
        from attnswitch.integrations.mcp_env_key import ENV_KEY, EnvKeyPrincipal
    except ModuleNotFoundError as exc:
        typer.echo(
            f"attnswitch mcp: expected the mcp extra (pip install 'attnswitch[mcp]'), got {exc}",
            err=True,
        )
        raise typer.Exit(2) from None
    from attnswitch.service.auth import BindRefusedError, KeyFileError

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        principal = None
        if not http and access_file is not None:  # the key leaves the environment here
            principal = EnvKeyPrincipal.start(access_file, os.environ.pop(ENV_KEY, None))
        server = build_server(
            db,
            [str(p) for p in allow_index or ()],
            private=http or principal is not None,
            asker=None if principal is None else principal.asker,
        )
        if not http:
            run_stdio(server, reload=None if principal is None else principal.reload)
            return
        run_http(
            server,
            host,
            port,
            api_key_file=api_key_file,
            access_file=access_file,
            allow_no_auth=allow_no_auth,
            max_sessions=max_sessions,
            session_idle_minutes=session_idle_minutes,
        )
    except (ValueError, BindRefusedError, KeyFileError) as exc:
        typer.echo(f"attnswitch mcp: {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:
        typer.echo(f"attnswitch mcp: cannot listen on {host}:{port}: {exc}", err=True)
        raise typer.Exit(1) from None
