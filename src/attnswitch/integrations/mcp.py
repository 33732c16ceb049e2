"""An MCP (Model Context Protocol) server over an attnswitch index, on the official `mcp`
SDK (the `mcp` extra: `pip install 'attnswitch[mcp]'`); `attnswitch mcp --db DB` runs it.

Tools (their descriptions below are written for the model that calls them):

- `search`: the best chunks for a query, with k, mode and the filters of
  `attnswitch.search`; its parameters are derived from the one definition of a search
  (`indexing.requests`: the modes and their help, `k` up to `records.MAX_K` as HTTP and the
  CLI take it; `indexing.filters`: one parameter per filter field, described by
  `FIELD_HELP`);
- `get_document`: a document's indexed text (by path), or one chunk with its neighbours
  (by chunk id);
- `index_status`: what is indexed (documents, chunks, roots, model, skipped files, runs);
- `index_folder`: index (or bring up to date) a folder, only inside a root the server was
  started with (`--allow-index ROOT`); without one the tool is not offered.

Transports: stdio (`run_stdio`, the default: the client spawns `attnswitch mcp`), where a
malformed message (not JSON, a batch, no method, an id that is not a string or an integer)
is answered with a JSON-RPC error (`mcp_stdio`), and streamable HTTP (`run_http`, `--http`)
at `http://HOST:PORT/mcp`, with the same authentication as `attnswitch serve`
(`service.auth`, `service.access`): bearer keys from `--api-key-file` (every one an
admin's) or principals from `--access-file` (re-read on SIGHUP), hashed, compared in
constant time; without keys a non-loopback host is refused unless `--allow-no-auth`, and a
keyless loopback server refuses other Host names. Each call runs as the key's principal: a
reader's search keeps only what it may read, its `get_document` answers a document it may
not read as one not indexed, its `index_status` counts only what it may read and leaves out
skipped files and runs, and `index_folder` is an admin's (a reader's call is a tool error).
stdio is the local user, an admin, unless `--access-file` is given: then it serves the
principal whose key the client puts in the environment variable `ATTNSWITCH_API_KEY` (the
`env` of the server's entry in an MCP client's configuration; `mcp_env_key`), shows roots
by name only as HTTP does, and re-reads the file on SIGHUP; a missing or unknown key
refuses to start. At most `--max-sessions` HTTP sessions are open
at once (a new one past them is answered 503), and one idle for `--session-idle-minutes`
is closed (`mcp_sessions`).

A refusal (a bad filter value, an unknown path or chunk, a folder outside the allowed
roots, a chunk_id outside the stores' ids, 1 to 2^63 - 1, as the HTTP route takes them) is
the SDK's tool error: the call returns `is_error=True` with one line naming the argument
("folder: expected a folder inside an allowed root (...), got ..."). Arguments
that fail the tool's schema (an unknown mode, k out of range) are refused by the SDK the
same way. Over HTTP, roots are shown by their name only (never a server path), as
`attnswitch serve` shows them.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from attnswitch.errors import AttnswitchError
from attnswitch.indexing.filters import FIELD_HELP, FIELD_VALUES, FIELDS
from attnswitch.indexing.records import MAX_CHUNK_ID, MAX_K
from attnswitch.indexing.requests import DEFAULT_K, MODES, MODES_HELP, Mode
from attnswitch.integrations.mcp_sessions import (
    DEFAULT_IDLE_MINUTES,
    DEFAULT_MAX_SESSIONS,
    check_sessions,
)

MAX_CHARS = 200_000
DEFAULT_CHARS = 20_000
MAX_AROUND = 10
MCP_PATH = "/mcp"

INSTRUCTIONS = (
    "Search a local collection of documents (PDF, Office files, web pages, mail, notes, "
    "code, ...) indexed by attnswitch. Use `search` to find passages, then `get_document` "
    "to read a whole document or more around a passage; `index_status` says what the "
    "collection holds."
)


class IndexRootError(AttnswitchError, ValueError):
    """A folder the server may not index."""


def allowed_roots(roots: list[str | os.PathLike] | None) -> tuple[Path, ...]:
    """The `--allow-index` roots, resolved; each must be an existing folder."""
    out = []
    for root in roots or ():
        path = Path(root).expanduser().resolve()
        if not path.is_dir():
            raise IndexRootError(f"allow-index: expected an existing folder, got {str(root)!r}")
        out.append(path)
    return tuple(out)


def check_index_folder(folder: str, roots: tuple[Path, ...]) -> Path:
    """`folder` resolved (links followed), when it lies inside one of `roots`; relative
    folders are taken from the first root."""
    if not roots:
        raise IndexRootError(
            "folder: expected a server started with --allow-index ROOT, got "
            "none: this server indexes nothing"
        )
    path = (roots[0] / folder if not Path(folder).is_absolute() else Path(folder)).resolve()
    if not any(path == r or r in path.parents for r in roots):
        raise IndexRootError(
            f"folder: expected a folder inside an allowed root "
            f"({', '.join(r.name for r in roots)}), got {folder!r}"
        )
    if not path.is_dir():
        raise IndexRootError(f"folder: expected an existing folder, got {folder!r}")
    return path


def _shown_root(root: str, private: bool) -> str:
    return Path(root).name if private else root


def _assembled(rows: list[Any]) -> str:
    """A document's text from its chunks in order: each chunk's part past the end of the
    one before (windows overlap), chunks of separate places joined by a blank line."""
    parts: list[str] = []
    pos = -1
    for row in rows:
        if row.start >= pos or len(row.text) != row.end - row.start:
            parts.append(row.text if not parts else "\n\n" + row.text)
        elif row.end > pos:
            parts.append(row.text[pos - row.start :])
        pos = max(pos, row.end)
    return "".join(parts)


class IndexTools:
    """What the tools do, on the index at `db` (the tools' thin async wrappers call it in
    a worker thread). `private`: show roots by name only (HTTP)."""

    def __init__(
        self, db: str | os.PathLike | None, roots: tuple[Path, ...] = (), private: bool = False
    ):
        from attnswitch.jobs.api import location_of

        self.db, self.roots, self.private = db, roots, private
        self.location = location_of(db)

    def _index(self) -> Any:
        from attnswitch.indexing.index import Index

        if isinstance(self.location, Path) and not self.location.is_file():
            raise ToolError(
                "db: expected an index made by `attnswitch run` or the "
                "index_folder tool, got none yet"
            )
        return Index.open(self.location)

    def search(
        self,
        query: str,
        k: int,
        mode: str,
        filters: dict[str, Any],
        group: str = "chunk",
        reader: Any = None,
    ) -> dict[str, Any]:
        """`reader` (an `indexing.access.Reader`, None: an admin): only what it may read."""
        from attnswitch.jobs.api import search

        found = search(query, self.db, k, mode, group=group, reader=reader, **filters)
        hits = [h.to_dict() for h in found]
        for hit in hits:
            hit["root"] = _shown_root(hit["root"], self.private)
            hit["also_at"] = [
                {**a, "root": _shown_root(a["root"], self.private)} for a in hit.get("also_at", [])
            ]
            hit["where"] = _where(hit)
        note = None if hits else "no chunk matches (a filter may keep no document)"
        return {"hits": hits, "note": note}

    def get_document(
        self,
        path: str | None,
        chunk_id: int | None,
        root: str | None,
        around: int,
        max_chars: int,
        reader: Any = None,
    ) -> dict[str, Any]:
        if (path is None) == (chunk_id is None):
            raise ToolError(
                "path, chunk_id: expected exactly one of them, got "
                + ("both" if path is not None else "neither")
            )
        if chunk_id is not None and not 1 <= chunk_id <= MAX_CHUNK_ID:
            got = (
                str(chunk_id)
                if chunk_id.bit_length() <= 128
                else f"an integer of {chunk_id.bit_length()} bits"
            )
            raise ToolError(
                f"chunk_id: expected an integer from 1 to {MAX_CHUNK_ID} (the "
                f"chunk_id of a search hit), got {got}"
            )
        with self._index() as store:
            if chunk_id is not None:
                return self._chunk(store, chunk_id, around, reader)
            return self._document(store, path or "", root, max_chars, reader)

    def _chunk(self, store: Any, chunk_id: int, around: int, reader: Any) -> dict[str, Any]:
        found = store.chunks([chunk_id]).get(chunk_id)
        if found is not None and not _readable(store, reader, found.root, found.source):
            found = None  # answered as an unknown chunk: nothing says it exists
        if found is None:
            raise ToolError(
                f"chunk_id: expected the id of a chunk of the index (from "
                f"search's chunk_id), got {chunk_id}"
            )
        rows = store.document_chunks(found.root, found.source)
        lo = max(0, found.ordinal - around)
        return {
            "root": _shown_root(found.root, self.private),
            "path": found.source,
            "chunk_id": chunk_id,
            "chunks_in_document": len(rows),
            "chunks": [_chunk_dict(r) for r in rows[lo : found.ordinal + around + 1]],
        }

    def _document(
        self, store: Any, path: str, root: str | None, max_chars: int, reader: Any
    ) -> dict[str, Any]:
        path = path.strip().lstrip("/").replace("\\", "/")
        roots = [r for r in store.roots() if root is None or root in (r, _shown_root(r, True))]
        found = [
            (r, rows)
            for r in roots
            if (rows := store.document_chunks(r, path)) and _readable(store, reader, r, path)
        ]
        if not found:
            raise ToolError(
                f"path: expected the path of an indexed document (as search "
                f"gives it), got {path!r}" + ("" if root is None else f" under root {root!r}")
            )
        if len(found) > 1:
            raise ToolError(
                f"root: expected one of {', '.join(repr(_shown_root(r, self.private)) for r, _ in found)} "
                f"(the path {path!r} is in each), got " + ("none" if root is None else repr(root))
            )
        r, rows = found[0]
        text = _assembled(rows)
        return {
            "root": _shown_root(r, self.private),
            "path": path,
            "chars": len(text),
            "truncated": len(text) > max_chars,
            "text": text[:max_chars],
            "chunks": [{k: v for k, v in _chunk_dict(row).items() if k != "text"} for row in rows],
        }

    def index_status(self, reader: Any = None) -> dict[str, Any]:
        """What the index holds; a reader's counts only the documents it may read, without
        skipped files and runs, as `/v1/index` answers a reader."""
        from attnswitch.service.overview import index_summary

        if isinstance(self.location, Path) and not self.location.is_file():
            return {"documents": 0, "chunks": 0, "note": "nothing indexed yet"}
        with self._index() as store:  # a reader's: the documents it may read, no skips
            summary = index_summary(store, lambda r: _shown_root(r, self.private), reader)
        summary["index_folder_roots"] = [r.name if self.private else str(r) for r in self.roots]
        return summary

    def index_folder(self, folder: str, reader: Any = None) -> dict[str, Any]:
        from attnswitch.jobs.api import index

        if reader is not None:  # as a job of `attnswitch serve`: an admin's
            raise ToolError(f"index_folder: expected an admin's key, got reader {reader.name!r}")
        path = check_index_folder(folder, self.roots)
        summary = index(path, self.db).to_dict()
        return {k: v for k, v in summary.items() if k not in ("files", "root")} | {
            "root": _shown_root(str(path), self.private)
        }


def _where(hit: dict[str, Any]) -> str:
    from attnswitch.indexing.search import where

    return where(hit["path"], hit["location"], hit["heading_path"])


def _readable(index: Any, reader: Any, root: str, source: str) -> bool:
    """Whether `reader` (None: an admin) may read the document `source` of `root`
    (`Index.may_read`); a document it may not read is answered as one not indexed."""
    if reader is None:
        return True
    document = index.lookup(root, source)
    return document is not None and bool(index.may_read(reader, document.id))


def _chunk_dict(row: Any) -> dict[str, Any]:
    return {
        "chunk_id": row.id,
        "ordinal": row.ordinal,
        "heading_path": list(row.heading_path),
        "location": row.location,
        "start": row.start,
        "end": row.end,
        "text": row.text,
    }


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in a worker thread; attnswitch's argument errors become tool errors."""
    try:
        return await asyncio.to_thread(fn, *args)
    except ToolError:
        raise
    except (AttnswitchError, ValueError) as exc:  # "name: expected ..., got ..."
        raise ToolError(str(exc)) from None


ModeName = Literal[MODES]  # type: ignore[valid-type]  # the names of `requests.Mode`


def _filter_parameter(name: str) -> inspect.Parameter:
    """The `search` tool's optional parameter for the filter field `name` (`FIELDS`): one
    text for a time, else a text or a list of texts (`FIELD_VALUES`), described by
    `FIELD_HELP`."""
    several = FIELD_VALUES[name] != "time"
    value = str | list[str] | None if several else str | None
    help_line = FIELD_HELP[name]
    description = f"Optional. {help_line[:1].upper()}{help_line[1:]}" + (
        "; a list means any of them." if several else "."
    )
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[value, Field(description=description)],
    )


def _with_filter_parameters(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, whose `**filters` collects the filter fields, with one keyword parameter per
    field in its signature (what the SDK builds the tool's schema from, and calls it
    with)."""
    signature = inspect.signature(fn, eval_str=True)
    fixed = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    fn.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=fixed + [_filter_parameter(name) for name in FIELDS]
    )
    return fn


def build_server(
    db: str | os.PathLike | None = None,
    allow_index: list[str | os.PathLike] | None = None,
    private: bool = False,
    asker: Callable[[], tuple[Any, Any]] | None = None,
) -> MCPServer:
    """The MCP server over the index at `db` (None: `./.attnswitch/`), its tools bound to
    it; `index_folder` only with `allow_index` roots. `private`: show roots by name only.
    `asker`: (principal, `Reader`) of a call that comes with no HTTP request (stdio with an
    access file: `mcp_env_key.EnvKeyPrincipal.asker`); None: the local user, an admin."""
    from attnswitch._version import __version__

    tools = IndexTools(db, allowed_roots(allow_index), private)
    server = MCPServer(
        "attnswitch", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    async def search(
        query: Annotated[
            str, Field(min_length=1, description="What to look for, in plain words or a question.")
        ],
        k: Annotated[
            int, Field(ge=1, le=MAX_K, description="How many passages to return.")
        ] = DEFAULT_K,
        mode: Annotated[
            ModeName, Field(description=f"How passages are ranked: {MODES_HELP}.")
        ] = Mode.HYBRID.value,
        group: Annotated[
            Literal["chunk", "document"],
            Field(
                description='"chunk": the best passages; "document": the best passage of each '
                "of the k best documents, with more_in_document (how many other passages of "
                "it matched). Use document when the user wants which files, not passages."
            ),
        ] = "chunk",
        ctx: Context | None = None,
        **filters: Any,
    ) -> dict[str, Any]:
        """Search the indexed documents for passages that answer a question or mention a
        topic. Use it first, whenever the user asks about something the documents may hold;
        narrow it with path, type or dates when the user names a folder, a format or a
        period. Returns `hits`, best first: each with `text` (the passage), `where` (file,
        page or slide, section headings), `path` and `root` (the document), `chunk_id`
        (give it to get_document for the passages around it), `score`, `rank`,
        `heading_path`, `location`, `snippet`, `also_at` (copies) and `more_in_document`;
        `note` says why nothing came back."""
        from attnswitch.service.audit import audit_search

        principal, reader = _asker(ctx, asker)
        found = await _call(tools.search, query, k, mode, filters, group, reader)
        audit_search(
            principal, "mcp/search", query, k, str(mode), reader is not None, len(found["hits"])
        )
        return found

    server.tool()(_with_filter_parameters(search))

    @server.tool()
    async def get_document(
        path: Annotated[
            str | None,
            Field(
                description="A document's path as search gives "
                "it ('postgresql/tutorial-update.html')."
            ),
        ] = None,
        # The id's range is checked by `get_document` (one line naming chunk_id; the SDK's
        # own refusal is pydantic's multi-line report) and shown to clients in the schema.
        chunk_id: Annotated[
            int | None,
            Field(
                json_schema_extra={"minimum": 1, "maximum": MAX_CHUNK_ID},
                description="A chunk_id from search: that passage and its neighbours.",
            ),
        ] = None,
        root: Annotated[
            str | None,
            Field(
                description="Optional. The root search gives, when "
                "the same path is indexed under two roots."
            ),
        ] = None,
        around: Annotated[
            int,
            Field(
                ge=0,
                le=MAX_AROUND,
                description="With chunk_id: how many passages before and after it.",
            ),
        ] = 2,
        max_chars: Annotated[
            int,
            Field(
                ge=1, le=MAX_CHARS, description="With path: the most characters of text returned."
            ),
        ] = DEFAULT_CHARS,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Read an indexed document: give `path` for the document's text as indexed (up to
        max_chars; `truncated` says when it was cut; `chunks` lists its passages with ids,
        headings and pages), or `chunk_id` for that passage with `around` passages before
        and after it (`chunks`, in order). Give exactly one of them. Use it after search,
        when a passage is not enough to answer."""
        return await _call(
            tools.get_document, path, chunk_id, root, around, max_chars, _reader(ctx, asker)
        )

    @server.tool()
    async def index_status(ctx: Context | None = None) -> dict[str, Any]:
        """What the index holds: counts of documents, chunks and tokens, the indexed roots,
        the model it was built with, skipped files by reason and the last runs, and the
        roots index_folder may index. Use it to tell the user what can be searched, or
        why a document is missing."""
        return await _call(tools.index_status, _reader(ctx, asker))

    if tools.roots:

        @server.tool()
        async def index_folder(
            folder: Annotated[
                str,
                Field(
                    min_length=1,
                    description="A folder inside an "
                    "allowed root (absolute, or relative to the first "
                    "root).",
                ),
            ],
            ctx: Context | None = None,
        ) -> dict[str, Any]:
            """Index a folder of documents, or bring its index up to date (new and changed
            files read, deleted ones dropped, unchanged ones left alone), so that search
            finds them. Only folders inside the roots index_status lists are accepted. It
            can take minutes for a large folder. Returns the run's counts (files indexed,
            skipped, chunks encoded, seconds)."""
            return await _call(tools.index_folder, folder, _reader(ctx, asker))

    return server


def run_stdio(server: MCPServer, reload: Callable[[], Any] | None = None) -> None:
    """Serve on stdin/stdout until the client closes them; a malformed message is answered
    with a JSON-RPC error (`mcp_stdio`). `reload` (the access file's,
    `EnvKeyPrincipal.reload`) is called on SIGHUP."""
    import anyio

    from attnswitch.integrations.mcp_stdio import serve_stdio

    if reload is not None and hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, lambda signum, frame: reload())
    anyio.run(serve_stdio, server)


def _asker(
    ctx: Context | None, local: Callable[[], tuple[Any, Any]] | None = None
) -> tuple[Any, Any]:
    """The call's principal, which `BearerKeys` put on its HTTP request, and its
    `indexing.access.Reader` (None: an admin). A call without one (stdio) is `local()`'s
    (stdio with an access file: the environment's key), else, as on a keyless server, the
    local user (`access.LOCAL`)."""
    from attnswitch.service.access import LOCAL

    request = None
    if ctx is not None:
        try:
            request = ctx.request_context.request
        except ValueError:  # outside a request
            request = None
    state = getattr(request, "scope", {}).get("state") or {}
    principal, access = state.get("principal"), state.get("access")
    if principal is None or access is None:
        return (LOCAL, None) if local is None else local()
    return principal, access.reader(principal)


def _reader(ctx: Context | None, local: Callable[[], tuple[Any, Any]] | None = None) -> Any:
    """The `indexing.access.Reader` of the call's principal (`_asker`)."""
    return _asker(ctx, local)[1]


class BearerKeys:
    """ASGI middleware: every request needs `Authorization: Bearer <key>` of one of the
    principals of `control` (`service.access.AccessControl`), else 401 in the service's
    error shape; the request's principal and the access it was judged by go on its state
    (`principal`, `access`), where the tools read them (`_reader`)."""

    def __init__(self, app: Any, control: Any):
        self.app, self.control = app, control

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            from starlette.requests import Request

            from attnswitch.service.errors import ServiceError, error_response

            try:
                request = Request(scope)
                access = self.control.current
                request.state.principal = access.principal(request)
                request.state.access = access
            except ServiceError as exc:
                await error_response(exc.status, exc.message, exc.code, headers=exc.headers)(
                    scope, receive, send
                )
                return
        await self.app(scope, receive, send)


def http_app(
    server: MCPServer,
    host: str,
    api_key_file: str | os.PathLike | None = None,
    *,
    access_file: str | os.PathLike | None = None,
    control: Any = None,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    session_idle_minutes: float = DEFAULT_IDLE_MINUTES,
) -> Any:
    """The streamable HTTP app at `MCP_PATH`, behind the service's authentication: the keys
    of `api_key_file` (admins) or the principals of `access_file`, or those of `control`
    (an `AccessControl` the caller keeps, to reload it); none: a keyless loopback server.

    At most `max_sessions` sessions are open at once: an `initialize` past them is refused
    by the SDK's session manager (HTTP 503, a JSON-RPC error "Too many open sessions", and
    a warning on stderr) while the open ones go on; a session with no request in flight
    (no call, no open event stream) for `session_idle_minutes` is closed, and its id then
    answers 404, so that its client starts a new one (`mcp_sessions`)."""
    from attnswitch.service.access import AccessControl
    from attnswitch.service.auth import LoopbackHostMiddleware

    max_sessions, idle_s = check_sessions(max_sessions, session_idle_minutes)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        max_sessions=max_sessions,
        session_idle_timeout=idle_s,
    )
    if control is None:
        control = AccessControl(access_file, api_key_file, label="attnswitch mcp")
    if not control.keyless:
        return BearerKeys(app, control)
    return LoopbackHostMiddleware(app)


def run_http(
    server: MCPServer,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    api_key_file: str | os.PathLike | None = None,
    access_file: str | os.PathLike | None = None,
    allow_no_auth: bool = False,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    session_idle_minutes: float = DEFAULT_IDLE_MINUTES,
    log_level: str = "warning",
) -> None:
    """Serve streamable HTTP until stopped. Refuses a non-loopback host without keys
    (`auth.check_bind`); binds the socket itself (port 0: a free one) and prints
    "attnswitch mcp: listening on http://HOST:PORT/mcp" on stderr before serving. SIGHUP
    re-reads the access (or key) file (`AccessControl.reload`). Sessions: see `http_app`."""
    import uvicorn

    from attnswitch.service.access import AccessControl
    from attnswitch.service.auth import check_bind
    from attnswitch.service.server import bind

    check_bind(host, api_key_file is not None or access_file is not None, allow_no_auth)
    control = AccessControl(access_file, api_key_file, label="attnswitch mcp")
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, lambda signum, frame: control.reload())
    app = http_app(
        server,
        host,
        control=control,
        max_sessions=max_sessions,
        session_idle_minutes=session_idle_minutes,
    )
    sock = bind(host, port)
    bound, bound_port = sock.getsockname()[:2]
    shown = f"[{bound}]" if ":" in bound else bound
    print(
        f"attnswitch mcp: listening on http://{shown}:{bound_port}{MCP_PATH}",
        file=sys.stderr,
        flush=True,
    )
    config = uvicorn.Config(
        app,
        host=bound,
        port=bound_port,
        log_level=log_level,
        lifespan="on",
        loop="asyncio",
        ws="none",
    )
    uvicorn.Server(config).run(sockets=[sock])


__all__ = [
    "BearerKeys",
    "IndexRootError",
    "IndexTools",
    "build_server",
    "check_index_folder",
    "http_app",
    "run_http",
    "run_stdio",
]
