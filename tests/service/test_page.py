"""The page's HTTP side (`service/page.py`) and the read-only routes it reads
(`/v1/server`, `/v1/index`, `/v1/index/skipped`, `/v1/chunks/{id}/context`,
`/v1/hardware`), through the shared real server (keys on, conftest.py); `--no-ui` through
the app itself. The page in a browser is tests/ui/."""

from __future__ import annotations

import html.parser
import os
import sys
from importlib import resources

import httpx
import pytest

from attnswitch.service.page import ASSETS, CONTENT_SECURITY_POLICY

PAGES = {"/": "text/html", **{f"/ui/{name}": t.split(";")[0] for name, t in ASSETS.items()}}
NEW_ROUTES = (
    "/v1/server",
    "/v1/index",
    "/v1/index/skipped",
    "/v1/chunks/1/context",
    "/v1/hardware",
)


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text = ""
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.script_text += data


@pytest.mark.parametrize("path, media_type", PAGES.items())
def test_page_and_assets_are_public_with_a_strict_policy(server, path, media_type) -> None:
    answer = httpx.get(server.url + path)  # no key: the page holds no data
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith(media_type)
    assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert "set-cookie" not in answer.headers


def test_the_policy_allows_this_origin_only() -> None:
    directives = dict(d.strip().split(" ", 1) for d in CONTENT_SECURITY_POLICY.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == "'self'"  # no inline script, no eval, no other origin
    assert directives["frame-ancestors"] == "'none'"
    assert all(
        "http" not in v and "*" not in v and "unsafe" not in v for v in directives.values()
    ), directives


def test_the_html_has_no_inline_script_style_or_handler(server) -> None:
    parser = _Tags()
    parser.feed(httpx.get(server.url + "/").text)
    scripts = [attrs for tag, attrs in parser.tags if tag == "script"]
    assert scripts and all(a.get("src", "").startswith("/ui/") for a in scripts), scripts
    assert parser.script_text.strip() == ""
    for tag, attrs in parser.tags:
        assert not [a for a in attrs if a.startswith("on") or a == "style"], (tag, attrs)
    linked = {a.get("src") or a.get("href") for tag, a in parser.tags if tag in ("script", "link")}
    assert linked == {f"/ui/{name}" for name in ASSETS}, linked
    labelled = {a["for"] for tag, a in parser.tags if tag == "label" and "for" in a}
    inputs = {a["id"] for tag, a in parser.tags if tag == "input" and a.get("type") != "radio"}
    assert inputs <= labelled, inputs - labelled  # every box has its label


def test_the_page_is_served_with_the_search_controls(server) -> None:
    """The mode radios and filter inputs are the page route's (`page.search_controls`, from
    `requests.Mode` and `filters.FIELDS`), in place of the marker in `ui/index.html`."""
    from attnswitch.indexing.filters import FIELDS
    from attnswitch.indexing.requests import MODES
    from attnswitch.service.page import CONTROLS_MARKER

    parser = _Tags()
    parser.feed(httpx.get(server.url + "/").text)
    radios = [a["value"] for tag, a in parser.tags if tag == "input" and a.get("type") == "radio"]
    assert radios == list(MODES)
    assert [a["data-filter"] for tag, a in parser.tags if "data-filter" in a] == list(FIELDS)
    template = resources.files("attnswitch.service").joinpath("ui", "index.html").read_text()
    assert template.count(CONTROLS_MARKER) == 1
    assert CONTROLS_MARKER not in httpx.get(server.url + "/").text


def test_the_script_writes_no_html() -> None:
    """Text from the server only ever becomes text nodes: no HTML sink in the script."""
    script = resources.files("attnswitch.service").joinpath("ui", "app.js").read_text()
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "DOMParser",
        "createContextualFragment",
    ):
        assert sink not in script, sink


@pytest.mark.parametrize(
    "path",
    [
        "/ui/index.html",
        "/ui/../page.py",
        "/ui/%2e%2e%2fpage.py",
        "/ui/app.js.map",
        "/ui/",
        "/ui/APP.JS",
    ],
)
def test_only_the_listed_assets_are_served(server, path) -> None:
    answer = httpx.get(server.url + path)
    assert answer.status_code == 404, (path, answer.text)
    assert "page.py" not in answer.text or "expected" in answer.text


@pytest.mark.parametrize("path", NEW_ROUTES)
def test_the_pages_routes_need_the_key(server, path) -> None:
    answer = httpx.get(server.url + path)
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"]["code"]


def test_server_says_what_serves(client) -> None:
    body = client.get("/v1/server").json()
    assert body["jobs"] is True and body["engine"] and body["model"]
    assert "/" not in body["model"]  # a name, never a folder of the server


@pytest.mark.parametrize(
    "query, status",
    [
        ("/v1/chunks/1/context?around=11", 422),
        ("/v1/chunks/1/context?around=-1", 422),
        ("/v1/chunks/abc/context", 422),
        ("/v1/chunks/987654321/context", 404),
        ("/v1/index/skipped?limit=0", 422),
        ("/v1/index/skipped?limit=201", 422),
        ("/v1/index/skipped?offset=-1", 422),
        ("/v1/index/skipped?match=" + "x" * 201, 422),
    ],
)
def test_bad_view_requests_get_one_line(client, query, status) -> None:
    answer = client.get(query)
    assert answer.status_code == status, answer.text
    message = answer.json()["error"]["message"]
    assert "\n" not in message and "Traceback" not in message


def test_index_and_hardware_carry_no_server_paths(client, service_dirs) -> None:
    # the data folder, the interpreter's and libraries' folders, the cache of verdicts
    private = (str(service_dirs["base"]), sys.prefix, os.environ["ATTNSWITCH_CACHE_DIR"])
    for path in ("/v1/server", "/v1/index", "/v1/index/skipped", "/v1/hardware"):
        text = client.get(path).text
        assert not [p for p in private if p in text], path
    hardware = client.get("/v1/hardware").json()
    assert {e["name"] for e in hardware["engines"]["status"]} >= {"torch"}
    assert any(b["backend"] == "reference" for b in hardware["backends"])
    assert len(hardware["plans"]) == 3


@pytest.mark.parametrize("ui", [True, False])
def test_no_ui_leaves_the_page_out(ui) -> None:
    from starlette.testclient import TestClient

    from attnswitch.service import ServiceConfig, create_app

    app = create_app(ServiceConfig(ui=ui))
    # no lifespan: the model is not loaded (the page needs none); a loopback Host
    client = TestClient(app, base_url="http://127.0.0.1")
    for path in ("/", "/ui/app.js"):
        assert client.get(path).status_code == (200 if ui else 404), (ui, path)
