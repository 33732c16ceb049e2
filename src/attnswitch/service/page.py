"""The page: a small web application at `/` over the same API (docs/service.md, "The
page"), plain HTML, CSS and JavaScript shipped in the package (`service/ui/`), no build
step and nothing fetched from another origin.

The page holds no data: it and its assets are public, and every figure it shows comes from
the `/v1/` routes, sent with the bearer key the user typed (kept in the tab's
`sessionStorage`; no cookie, so no cross-site request can act with it). Each answer here
carries a strict Content-Security-Policy (scripts, styles, images and requests from this
origin only, no inline script, no framing) and `X-Content-Type-Options: nosniff`.
`serve --no-ui` leaves this router out.
"""

from __future__ import annotations

from importlib import resources
from types import MappingProxyType

from fastapi import APIRouter
from starlette.responses import Response

from attnswitch.service.errors import ServiceError

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = MappingProxyType(
    {
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
    }
)
# The files served under /ui/, and their types: nothing else is read from the package.
ASSETS = MappingProxyType(
    {
        "app.js": "text/javascript; charset=utf-8",
        "app.css": "text/css; charset=utf-8",
        "favicon.svg": "image/svg+xml",
    }
)

page = APIRouter(include_in_schema=False)


def _asset(name: str, media_type: str) -> Response:
    body = resources.files("attnswitch.service").joinpath("ui", name).read_bytes()
    return Response(body, media_type=media_type, headers=dict(HEADERS))


@page.get("/")
async def index() -> Response:
    return _asset("index.html", "text/html; charset=utf-8")


@page.get("/ui/{name}")
async def asset(name: str) -> Response:
    if name not in ASSETS:
        raise ServiceError(
            404,
            f"ui: expected one of {', '.join(ASSETS)}, got {name[:80]!r}",
            code="not_found",
            param="name",
        )
    return _asset(name, ASSETS[name])
