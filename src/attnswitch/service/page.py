"""The page: a small web application at `/` over the same API (docs/service.md, "The
page"), plain HTML, CSS and JavaScript shipped in the package (`service/ui/`), no build
step and nothing fetched from another origin.

The page holds no data: it and its assets are public, and every figure it shows comes from
the `/v1/` routes, sent with the bearer key the user typed (kept in the tab's
`sessionStorage`; no cookie, so no cross-site request can act with it). Each answer here
carries a strict Content-Security-Policy (scripts, styles, images and requests from this
origin only, no inline script, no framing) and `X-Content-Type-Options: nosniff`.
`serve --no-ui` leaves this router out.

The search form's mode selector and filter inputs are not written in `ui/index.html`: the
page route puts them in (`search_controls`, at `CONTROLS_MARKER`), built from the one
definition of a search (`indexing.requests.Mode`: the modes, their help, the default;
`indexing.filters`: `FIELDS`, `FIELD_HELP`, `FIELD_VALUES`, the type names), and `ui/app.js`
reads them from the page (`data-filter`, `data-list`, `data-fused`), so that a mode or a
filter field is named in one place only.
"""

from __future__ import annotations

from html import escape
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

# Where `ui/index.html` takes the search form's controls (`search_controls`).
CONTROLS_MARKER = "<!-- search controls: service/page.py -->"
# An example of a filter's value, by what the field takes (`filters.FIELD_VALUES`).
EXAMPLES = MappingProxyType({"paths": "reports/ or *.pdf", "types": "pdf, mail, .md"})

page = APIRouter(include_in_schema=False)


def _read(name: str) -> bytes:
    return resources.files("attnswitch.service").joinpath("ui", name).read_bytes()


def _asset(name: str, media_type: str) -> Response:
    return Response(_read(name), media_type=media_type, headers=dict(HEADERS))


def search_controls() -> str:
    """The search form's controls as HTML: a radio per `Mode` (its help as the label's
    title, the default checked, `data-fused` on a mode that ranks by meaning and words),
    the "one per document" box (`group` "document": `requests.SearchRequest.group`), then the Filters disclosure with a labelled input per filter field (`FIELD_HELP` as its
    hint; a date for a time, else a text that takes a comma-separated list, `data-list`;
    the type names offered for `type`)."""
    from attnswitch.indexing.filters import FIELD_HELP, FIELD_VALUES, FIELDS, type_names
    from attnswitch.indexing.requests import Mode

    radios = [
        f'  <label title="{escape(mode.help)}"><input type="radio" name="mode" '
        f'value="{escape(mode.value)}"'
        + (" data-fused" if mode.needs_vector and mode.needs_text else "")
        + (" checked" if mode is Mode.HYBRID else "")
        + f"> {escape(mode.value)}</label>"
        for mode in Mode
    ]
    inputs = []
    for name in FIELDS:
        kind, box = FIELD_VALUES[name], "f-" + name.replace("_", "-")
        label = escape(name.replace("_", " ").capitalize())
        inputs.append(
            f'    <label for="{box}">{label} <span class="muted hint">'
            f"{escape(FIELD_HELP[name])}</span></label>"
        )
        attributes = f'id="{box}" name="{escape(name)}" data-filter="{escape(name)}"'
        if kind == "time":
            inputs.append(f'    <input {attributes} type="date">')
            continue
        example = f' placeholder="{escape(EXAMPLES[kind])}"' if kind in EXAMPLES else ""
        choices = f' list="{box}-choices"' if kind == "types" else ""
        inputs.append(
            f'    <input {attributes} data-list type="text" autocomplete="off" '
            f'spellcheck="false"{example}{choices}>'
        )
        if choices:
            options = "".join(f'<option value="{escape(t)}">' for t in type_names())
            inputs.append(f'    <datalist id="{box}-choices">{options}</datalist>')
    return "\n".join(
        [
            '<fieldset class="modes">',
            "  <legend>Mode</legend>",
            *radios,
            '  <label for="per-document" title="The best passage of each document, with how many other '
            'passages of it matched"><input type="checkbox" id="per-document" name="group" '
            'value="document"> one per document</label>',
            "</fieldset>",
            '<details id="filters">',
            "  <summary>Filters</summary>",
            '  <div class="filters">',
            *inputs,
            "  </div>",
            "</details>",
        ]
    )


@page.get("/")
async def index() -> Response:
    body = _read("index.html").decode("utf-8").replace(CONTROLS_MARKER, search_controls(), 1)
    return Response(body, media_type="text/html; charset=utf-8", headers=dict(HEADERS))


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
