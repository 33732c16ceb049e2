"""The API's documentation pages through a real server: /docs (Swagger UI) and /redoc
reference no remote origin (no CDN, no fonts, no online validator), and every script,
style sheet and icon they name is served by the server itself, so they work offline."""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

pytestmark = pytest.mark.xdist_group("service")

ASSET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")
CONTENT_TYPES = {".js": "javascript", ".css": "text/css", ".png": "image/png"}


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_everything_from_the_server(server, page: str) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:  # no key: docs are open
        r = client.get(page)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        html = r.text
        assert not re.search(r"(?:https?:)?//[\w.-]+\.\w", html), html  # no origin named
        assets = ASSET.findall(html)
        assert any(a.endswith(".js") for a in assets), html
        for asset in assets:
            url = urljoin(server.url + page, asset)
            assert urlsplit(url).netloc == urlsplit(server.url).netloc, asset
            got = client.get(url)
            assert got.status_code == 200, asset
            kind = CONTENT_TYPES[asset[asset.rindex(".") :]]
            assert kind in got.headers["content-type"] and len(got.content) > 1000, asset
        assert client.get("/openapi.json").json()["info"]["title"] == "attnswitch"
        if page == "/docs":
            assert '"validatorUrl": null' in html  # Swagger UI's default is a remote one
