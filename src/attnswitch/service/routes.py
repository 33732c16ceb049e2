"""The HTTP routes. Health routes are open; `/v1/` routes need a key when keys are set.

    GET  /livez                 200 while the process serves
    GET  /readyz                200 ready; 503 warming up, draining or failed
    GET  /metrics               Prometheus text: the service's and attnswitch's metrics
    POST /v1/embeddings         OpenAI-compatible embeddings
    POST /v1/search             {"query", "k", "mode", "ef", "group", "filter" or its fields
                                flat}: the k best chunks of the index
    POST /v1/jobs               {"path"}: index a folder of the server (202, the job)
    GET  /v1/jobs/{id}          a job's status and progress
    POST /v1/jobs/{id}/cancel   cancel a queued or running job (never resumed); 409 if finished
    GET  /v1/jobs               recent jobs, newest first
    GET  /v1/models             the served model (OpenAI's models list)
    GET  /v1/server             what serves: model, engine, precision, device, jobs on/off
    GET  /v1/index              what is indexed, skipped counts by reason, the last runs
    GET  /v1/index/skipped      skipped files and why (?match=&offset=&limit=)
    GET  /v1/chunks/{id}/context  a chunk among its neighbours (?around=2)
    GET  /v1/hardware           `attnswitch doctor --json` without timings
    GET  /v1/whoami             the caller's principal: name, groups, role (the page reads it)

Every `/v1/` route checks the key (401) and then readiness (503 with Retry-After while
warming up, draining or failed) before anything else, as one router dependency (`gate`);
the key's principal (`access`) is then on `request.state.principal`. Only an admin starts,
cancels, lists or reads jobs and lists skipped files: a reader gets 403 `forbidden`. A
reader's search is restricted to what it may read (`SearchFilter.for_reader`), and every
search may write an audit line (`audit`).
Every refusal has the JSON error shape of `errors`. A client may shorten its deadline with
the header `X-Request-Timeout: <seconds>` (never beyond the server's `--request-timeout`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from types import MappingProxyType
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from attnswitch.indexing.records import MAX_CHUNK_ID
from attnswitch.service import overview
from attnswitch.service.access import ADMIN_ONLY_FIELDS, principal_of, reader_of, require_admin
from attnswitch.service.audit import audit_search
from attnswitch.service.errors import ServiceError
from attnswitch.service.indexed_file import IndexedFileResponse, content_disposition
from attnswitch.service.limits import check_items
from attnswitch.service.runtime import Service
from attnswitch.service.schemas import (
    EmbeddingRequest,
    EmbeddingResponse,
    Health,
    JobList,
    JobRequest,
    JobResponse,
    ModelList,
    SearchRequest,
    SearchResponse,
    errors,
    render_embeddings,
    search_filter_values,
)

TimeoutHeader = Annotated[
    float | None,
    Header(
        alias="x-request-timeout",
        description="Seconds this request may take (at most the server's --request-timeout).",
    ),
]


def service(request: Request) -> Service:
    return request.app.state.service


async def authorized(request: Request) -> None:
    """401 unless the request carries a valid key (when the service has keys); its
    principal on `request.state.principal` (`access.AccessControl.identify`)."""
    service(request).access.identify(request)


def reader(request: Request) -> Any:
    """The request's `indexing.access.Reader` (None: an admin, or a keyless server's one
    user): what every answer that can reveal a document is filtered by."""
    return reader_of(request, service(request).access)


async def admin_only(request: Request) -> None:
    """403 `forbidden` unless the caller is an admin (jobs, skipped files)."""
    require_admin(request, request.url.path)


async def ready(request: Request) -> None:
    """503 with Retry-After unless the service is ready (warming up, draining, failed)."""
    service(request).readiness.check()


async def gate(request: Request) -> None:
    """What every /v1 route checks first, in this order: the key (401), then readiness
    (503). The router's dependencies; `app` also runs it before answering a body that is
    not JSON, so that such a body says nothing before the key is checked."""
    await authorized(request)
    await ready(request)


health = APIRouter(tags=["health"])
v1 = APIRouter(prefix="/v1", dependencies=[Depends(gate)], tags=["v1"])
_COMMON = (400, 401, 408, 413, 422, 429, 503, 504)
# On every file the service sends: never run as this origin's content, never sniffed.
_FILE_HEADERS = MappingProxyType(
    {"Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff"}
)


@health.get("/livez", response_model=Health)
async def livez() -> dict:
    return {"status": "alive"}


@health.get("/readyz", response_model=Health, responses={503: {"model": Health}})
async def readyz(request: Request) -> JSONResponse:
    readiness = service(request).readiness
    return JSONResponse(readiness.report(), status_code=200 if readiness.ready else 503)


@health.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
async def metrics(request: Request) -> Response:
    body, content_type = service(request).metrics.exposition()
    return Response(body, media_type=content_type)


@v1.post("/embeddings", response_model=EmbeddingResponse, responses=errors(*_COMMON))
async def embeddings(
    body: EmbeddingRequest, request: Request, timeout: TimeoutHeader = None
) -> Response:
    svc = service(request)
    is_list = not isinstance(body.input, str)
    texts = list(body.input) if is_list else [body.input]
    check_items(texts, svc.config.max_items, "input", is_list)
    if body.dimensions is not None and body.dimensions != svc.encoder.dim:
        raise ServiceError(
            422,
            f"dimensions: expected {svc.encoder.dim} (this model's) or none, got {body.dimensions}",
            code="invalid_dimensions",
            param="dimensions",
        )
    vectors, tokens = await svc.embed(
        texts,
        truncate=body.truncate,
        route="/v1/embeddings",
        deadline=svc.deadline(timeout),
        is_list=is_list,
    )
    content = await svc.in_cpu_pool(
        render_embeddings, vectors, body.encoding_format, svc.model, tokens
    )
    return Response(content, media_type="application/json")


# A reader's coverage note: the index's count of chunks without a full vector would count
# documents it may not read.
READER_COVERAGE_NOTE = (
    "the full pass is not done: some chunks had no full vector yet (found by keywords and "
    "quick vectors meanwhile)"
)


@v1.post("/search", response_model=SearchResponse, responses=errors(*_COMMON, 409))
async def search(body: SearchRequest, request: Request, timeout: TimeoutHeader = None) -> dict:
    from attnswitch.documents.readers.mail_parts import page_fragment
    from attnswitch.indexing.filters import SearchFilter
    from attnswitch.indexing.store_errors import StoreInputError

    svc = service(request)
    deadline = svc.deadline(timeout)
    check_items([body.query], 1, "query", is_list=False)
    where = None
    values, named = search_filter_values(body)  # `filter`'s fields, or the flat ones
    if values is not None:
        try:
            # thousands of globs take seconds to compile: on a CPU thread, by the deadline
            async with asyncio.timeout_at(deadline):
                where = await svc.in_cpu_pool(SearchFilter.from_mapping, values)
        except StoreInputError as exc:  # "type: expected ..." -> "filter.type: expected ..."
            param = named + exc.argument.removeprefix("filter.")
            raise ServiceError(
                422, param + str(exc)[len(exc.argument) :], code="invalid_filter", param=param
            ) from None
        except TimeoutError:
            raise svc.search_timed_out() from None
    asker = reader(request)
    if asker is not None:  # the one call site: the stores keep only what `asker` may read
        where = SearchFilter.for_reader(where, asker)
    result, tokens = await svc.search(
        body.query, body.k, deadline, body.mode, body.ef, where, body.group
    )
    hits, kept = result.hits, result.kept
    audit_search(
        principal_of(request),
        "/v1/search",
        body.query,
        body.k,
        str(body.mode),
        asker is not None,
        len(hits),
    )
    # never the server's absolute paths
    data = [
        dataclasses.replace(
            h,
            root=svc.jobs.shown(h.root),
            uri=f"/v1/chunks/{h.chunk_id}/file" + page_fragment(h.source, h.location),
            also_at=[{**a, "root": svc.jobs.shown(a["root"])} for a in h.also_at],
        )
        for h in hits
    ]
    if asker is not None and values is None:
        kept = None  # no filter of the asker's: nothing to say of what "the filter" kept
    note = (
        None
        if kept is None
        else (
            "no document passes the filter"
            if kept == 0
            else f"no chunk matches the query in the {kept} documents the filter keeps"
        )
    )
    return {
        "object": "list",
        "data": data,
        "model": svc.model,
        "note": note,
        "coverage_note": (
            READER_COVERAGE_NOTE
            if asker is not None and result.coverage_note
            else result.coverage_note
        ),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


@v1.post(
    "/jobs",
    status_code=202,
    response_model=JobResponse,
    responses=errors(400, 401, 403, 408, 409, 413, 422, 503),
    dependencies=[Depends(admin_only)],
)
async def create_job(body: JobRequest, request: Request) -> JSONResponse:
    svc = service(request)
    job = await svc.in_cpu_pool(svc.jobs.start, body.path)
    return JSONResponse(job.to_dict(), status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})


@v1.get(
    "/jobs",
    response_model=JobList,
    responses=errors(401, 403, 503),
    dependencies=[Depends(admin_only)],
)
async def list_jobs(request: Request) -> dict:
    return {"object": "list", "data": [j.to_dict() for j in service(request).jobs.recent()]}


@v1.get(
    "/jobs/{job_id}",
    response_model=JobResponse,
    responses=errors(401, 403, 404, 503),
    dependencies=[Depends(admin_only)],
)
async def get_job(job_id: str, request: Request) -> dict:
    return service(request).jobs.get(job_id).to_dict()


@v1.post(
    "/jobs/{job_id}/cancel",
    response_model=JobResponse,
    responses=errors(401, 403, 404, 409, 503),
    dependencies=[Depends(admin_only)],
)
async def cancel_job(job_id: str, request: Request) -> dict:
    """Cancel a job: a running one stops at its next safe point, keeping every document it
    committed; its status becomes "cancelled" and no server resumes it (`jobs.JobManager.
    cancel`). A POST to a sub-resource, as OpenAI's batch and fine-tuning APIs cancel: the
    job stays listed, with its status, rather than being deleted."""
    svc = service(request)
    return (await svc.in_cpu_pool(svc.jobs.cancel, job_id)).to_dict()


@v1.get("/models", response_model=ModelList, responses=errors(401, 503))
async def models(request: Request) -> dict:
    svc = service(request)
    return {
        "object": "list",
        "data": [
            {
                "id": svc.model,
                "object": "model",
                "created": svc.started_at,
                "owned_by": "attnswitch",
            }
        ],
    }


@v1.get("/server", responses=errors(401, 503))
async def server_info(request: Request) -> dict:
    """What serves (the `ready` line of the log), whether the caller may use jobs (they
    are on and it is an admin) and its role (the page hides what a reader may not use)."""
    from attnswitch._version import __version__

    svc = service(request)
    principal = principal_of(request)
    return {
        **svc.serving(),
        "version": __version__,
        "jobs": principal.admin and svc.config.jobs_root is not None,
        "role": principal.role,
    }


def _empty_index() -> dict:
    """What /v1/index says before there is an index."""
    return {
        "documents": 0,
        "chunks": 0,
        "tokens": 0,
        "bytes": 0,
        "dim": None,
        "roots": [],
        "model": None,
        "skipped": 0,
        "skipped_by_reason": {},
        "runs": [],
    }


async def _view(request: Request, fn: Callable[..., dict], *args: Any) -> dict | None:
    """`fn(store, shown, *args)` on the index's thread (`SearchIndex.view`): None when there
    is no index yet."""
    svc = service(request)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(svc.index.executor, svc.index.view, fn, svc.jobs.shown, *args)


@v1.get("/index", responses=errors(401, 503))
async def index_summary(request: Request) -> dict:
    """What is indexed; a reader gets it without `ADMIN_ONLY_FIELDS`."""
    asker = reader(request)
    summary = await _view(request, overview.index_summary, asker)
    if summary is None:
        summary = _empty_index()
        if asker is not None:
            summary = {k: v for k, v in summary.items() if k not in ADMIN_ONLY_FIELDS}
    return summary


@v1.get("/index/skipped", responses=errors(401, 403, 422, 503), dependencies=[Depends(admin_only)])
async def skipped_files(
    request: Request,
    match: Annotated[str, Query(max_length=200)] = "",
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=overview.MAX_SKIPPED_PAGE)] = 50,
) -> dict:
    found = await _view(request, overview.skipped_files, match, offset, limit)
    return found or {"object": "list", "total": 0, "offset": offset, "data": []}


@v1.get("/chunks/{chunk_id}/context", responses=errors(401, 404, 409, 422, 503))
async def chunk_context(
    request: Request,
    chunk_id: Annotated[int, Path(ge=1, le=MAX_CHUNK_ID)],
    around: Annotated[int, Query(ge=0, le=overview.MAX_AROUND)] = 2,
) -> dict:
    found = await _view(request, overview.chunk_context, chunk_id, around, reader(request))
    if found is None:
        raise ServiceError(
            404,
            f"chunk: expected the id of a chunk of the index, got {chunk_id} (no index yet)",
            code="chunk_not_found",
            param="chunk_id",
        )
    return found


@v1.get(
    "/chunks/{chunk_id}/file",
    response_class=IndexedFileResponse,
    status_code=200,
    responses={
        **errors(401, 404, 422, 503),
        200: {"description": "The indexed file the chunk comes from."},
    },
)
async def chunk_file(
    request: Request, chunk_id: Annotated[int, Path(ge=1, le=MAX_CHUNK_ID)]
) -> IndexedFileResponse:
    """The original file of a hit (the document that holds the chunk), to the users the
    service admits: only the bytes indexed in this store, of a file found again at its
    indexed place without following a link and still of its recorded size, modification
    time and SHA-256 (else 404 `file_changed`; `file_not_found` when it is gone), sent from
    the descriptor that was checked; PDFs, images and plain text shown in place, everything
    else (HTML included) downloaded; never run as this origin's content (a sandbox
    Content-Security-Policy, no type sniffing). A chunk of a mail attachment gets that
    attachment alone (`mail_parts`), cut from the checked bytes of its message, with its
    own media type and file name under the same rules. A hit's `uri` is this route, with
    `#page=N` where the file is a PDF and the chunk's page is known."""
    found = await _view(request, overview.chunk_file, chunk_id, reader(request))
    if found is None:
        raise ServiceError(
            404,
            f"chunk: expected the id of a chunk of the index, got {chunk_id} (no index yet)",
            code="chunk_not_found",
            param="chunk_id",
        )
    file = await run_in_threadpool(overview.open_chunk_file, found, chunk_id)
    if found["attachment"] is not None:
        part = await run_in_threadpool(overview.read_attachment, file, found)
        if part is not None:  # the attachment alone, from the bytes checked above
            file.close()
            return Response(
                part.data,
                media_type=part.media_type,
                headers={
                    "Content-Disposition": content_disposition(
                        "inline" if overview.attachment_shown_inline(part) else "attachment",
                        part.name,
                    ),
                    **_FILE_HEADERS,
                },
            )
    return IndexedFileResponse(
        file,
        found["size"],
        media_type=found["media_type"],
        filename=found["name"],
        inline=found["inline"],
        headers=_FILE_HEADERS,
    )


@v1.get("/whoami", responses=errors(401, 503))
async def whoami(request: Request) -> dict:
    """The caller's principal (name, groups, role) and whether it may use jobs: what the
    page shows and hides."""
    svc = service(request)
    principal = principal_of(request)
    return {
        **principal.to_dict(),
        "jobs": principal.admin and svc.config.jobs_root is not None,
    }


@v1.get("/hardware", responses=errors(401, 503))
async def hardware(request: Request) -> dict:
    """The backends with their verdicts, the planner's choice for common calls, the engines
    and their recorded plans (`attnswitch doctor --json --no-timing`), and what serves."""
    from attnswitch.doctor import doctor_report

    svc = service(request)
    report = await svc.in_cpu_pool(doctor_report, False)
    return {**report, "serving": svc.serving()}
