"""The service's settings, checked once: one frozen `ServiceConfig` feeds every part.

Sizes are counted as the service sees them: `max_body_bytes` on the bytes actually read
(chunked bodies included), `max_items` texts per request, `max_queue_items` texts admitted
and waiting for the model (beyond it a request gets 429 at once), `batch_tokens` model
tokens per encoder call gathered across requests, `max_wait_ms` how long the batcher waits
for more requests once one is queued (0: none; requests that arrive while the encoder
works are gathered into its next call), `request_timeout_s` the deadline of one request
(504 past it), `drain_timeout_s` how long shutdown waits for requests in flight,
`header_timeout_s` how long a connection may take to send a request's headers and
`body_timeout_s` its body (a client that trickles is closed; see `limits`),
`keep_alive_s` how long an idle keep-alive connection stays open between requests,
`memwatch_interval_s` how often the memory watchdog samples (`memory`), `query_fill` how
many of its best candidates without a full vector one search may encode and keep while the
full pass is not done (`indexing.query_fill`; 0: none).

`keep_alive_s` is longer than the idle expiry of the common HTTP clients' pools (httpx and
the OpenAI client: 5 s, aiohttp: 15 s). When the server's timer is the shorter one (uvicorn
defaults to 5 s, the same as httpx), a pooled client can send a request on a connection at
the moment the server closes it, and the request fails with a reset connection, which
clients do not retry for a POST.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attnswitch.engines.base import check_precision_choice
from attnswitch.errors import ConfigError
from attnswitch.indexing.query_fill import QUERY_FILL, check_fill
from attnswitch.indexing.store_errors import StoreInputError
from attnswitch.service.schemas import MAX_INPUT_ITEMS


@dataclass(frozen=True)
class ServiceConfig:
    """host/port: where to listen (port 0: any free port). db: the store, as the CLI's
    `--db`: a data folder or index file (None: ./.attnswitch/), or a PostgreSQL URL
    (`indexing.index.Index.open`). model/engine/precision: the encoder (None and
    "auto": the index's own when the data folder has one, else the packaged default).
    api_key_file: hashed or plain bearer keys (see `auth`), every one an admin's; None: no
    keys. access_file: principals with their keys, groups and roles, and grants (see
    `access`; not with api_key_file). audit_log: a file that gets one line per search
    (`audit`; None: only the `attnswitch.audit` logger). allow_no_auth:
    permit a non-loopback host without keys. jobs_root: an existing folder; indexing jobs
    may only name folders inside it (None: no jobs). ui: serve the page at `/`
    (`page`)."""

    host: str = "127.0.0.1"
    port: int = 8000
    db: str | Path | None = None
    model: str | None = None
    engine: str = "auto"
    precision: str | None = None
    api_key_file: Path | None = None
    access_file: Path | None = None
    audit_log: Path | None = None
    allow_no_auth: bool = False
    jobs_root: Path | None = None
    max_body_bytes: int = 2 * 2**20
    max_items: int = 256
    max_queue_items: int = 1024
    batch_tokens: int = 4096
    max_wait_ms: float = 0.0
    request_timeout_s: float = 30.0
    drain_timeout_s: float = 30.0
    header_timeout_s: float = 10.0
    body_timeout_s: float = 20.0
    keep_alive_s: float = 20.0
    job_chunks_per_call: int = 32
    ui: bool = True
    memwatch_interval_s: float = 10.0
    query_fill: int = QUERY_FILL

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port: expected 0 to 65535, got {self.port}")
        from attnswitch.engines import engine_names

        if self.engine not in engine_names():
            raise ConfigError(
                f"engine: expected one of {', '.join(engine_names())}, got {self.engine!r}"
            )
        if self.precision is not None:
            check_precision_choice(self.precision)
        for name in (
            "max_body_bytes",
            "max_items",
            "max_queue_items",
            "batch_tokens",
            "job_chunks_per_call",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}: expected an int >= 1, got {value!r}")
        if self.max_items > MAX_INPUT_ITEMS:
            raise ConfigError(
                f"max_items: expected at most {MAX_INPUT_ITEMS}, got {self.max_items}"
            )
        if self.max_items > self.max_queue_items:
            raise ConfigError(
                f"max_items: expected at most max_queue_items "
                f"({self.max_queue_items}), got {self.max_items}"
            )
        for name in (
            "max_wait_ms",
            "request_timeout_s",
            "drain_timeout_s",
            "header_timeout_s",
            "body_timeout_s",
            "keep_alive_s",
            "memwatch_interval_s",
        ):
            value = getattr(self, name)
            if not value >= 0:
                raise ConfigError(f"{name}: expected a number >= 0, got {value!r}")
        for name in (
            "request_timeout_s",
            "header_timeout_s",
            "body_timeout_s",
            "keep_alive_s",
            "memwatch_interval_s",
        ):
            if getattr(self, name) == 0:
                raise ConfigError(f"{name}: expected a number > 0, got 0")
        try:
            check_fill(self.query_fill, "query_fill")
        except StoreInputError as exc:
            raise ConfigError(str(exc)) from None
        if self.api_key_file is not None and self.access_file is not None:
            raise ConfigError(
                "access_file: expected --access-file or --api-key-file, got both (an access "
                "file holds every key, with its principal)"
            )
        if self.jobs_root is not None and not Path(self.jobs_root).is_dir():
            raise ConfigError(
                f"jobs_root: expected an existing folder, got {str(self.jobs_root)!r}"
            )

    @property
    def store_location(self) -> str | Path:
        """The store `db` names, as `run --db` reads it (`Index.resolve`): a PostgreSQL URL as
        given, else the index file."""
        from attnswitch.indexing.index import Index

        return Index.resolve(self.db)

    @property
    def jobs_folder(self) -> Path | None:
        """The jobs root, resolved (None: jobs are off)."""
        return None if self.jobs_root is None else Path(self.jobs_root).resolve()
