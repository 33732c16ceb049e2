"""`GET /v1/chunks/{chunk_id}/file`, the route the page opens a hit's original file with
(docs/security.md): on a real server with keys, over a real index of a real folder.

- It serves only the file of an indexed chunk, found again at its indexed place: no path
  is taken from the request, so there is nothing to traverse; a file deleted, or swapped
  for a link out of its folder after it was indexed, is a 404 that serves nothing.
- It needs a key like every /v1 route (401 without one).
- A document is never active content of the service's origin: HTML is a download, every
  answer carries `Content-Security-Policy: sandbox` and `nosniff`; PDFs, images and plain
  text are shown in place.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

from attnswitch.jobs.run import RunOptions, run
from attnswitch.index.store import SQLiteStore
from attnswitch.service import launch
from security_testing import CORPUS, SECRET, STARTUP_TIMEOUT_S

KEY = "test-key-file-route-3b9e"
PAGE = "<html><body><h1>Tide tables</h1><script>window.pwned = 1</script>" \
       "<p>the tide tables of the harbour</p></body></html>\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("file-route")
    docs = base / "docs"
    docs.mkdir()
    (docs / "tides.html").write_text(PAGE)
    (docs / "notes.txt").write_text("harbour notes: the tide tables are in tides.html\n")
    (docs / "swapped.txt").write_text("harbour log, to be swapped for a link\n")
    shutil.copy2(CORPUS / "sqlite" / "copyright-release.pdf", docs / "release.pdf")
    (base / "outside").mkdir()
    (base / "outside" / "secret.txt").write_text(SECRET + "\n")
    data = base / "data"
    with SQLiteStore(data) as store:
        assert run(docs, store, RunOptions(read_workers=0)).indexed == 4
        chunks = {row.source: cid for cid, row in
                  store.chunks(range(1, store.count() + 10)).items()}
    keys = base / "keys"
    keys.write_text(KEY + "\n")
    srv = launch.start(base / "server", "--db", str(data), "--api-key-file", str(keys),
                       timeout=STARTUP_TIMEOUT_S)
    try:
        yield srv, docs, base / "outside", chunks
    finally:
        srv.stop()


def get(srv, chunk_id: int, key: str | None = KEY) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.get(f"{srv.url}/v1/chunks/{chunk_id}/file", headers=headers, timeout=60)


def test_a_pdf_and_plain_text_are_shown_in_place(served) -> None:
    srv, docs, _, chunks = served
    pdf = get(srv, chunks["release.pdf"])
    assert pdf.status_code == 200 and pdf.content == (docs / "release.pdf").read_bytes()
    assert pdf.headers["content-type"] == "application/pdf"
    assert pdf.headers["content-disposition"].startswith("inline")
    text = get(srv, chunks["notes.txt"])
    assert text.status_code == 200 and text.headers["content-type"].startswith("text/plain")
    for answer in (pdf, text):
        assert answer.headers["content-security-policy"] == "sandbox"
        assert answer.headers["x-content-type-options"] == "nosniff"


def test_html_is_a_download_never_a_page_of_the_service(served) -> None:
    srv, _, _, chunks = served
    page = get(srv, chunks["tides.html"])
    assert page.status_code == 200 and page.text == PAGE
    assert page.headers["content-disposition"].startswith("attachment")
    assert page.headers["content-security-policy"] == "sandbox"


def test_it_needs_a_key(served) -> None:
    srv, _, _, chunks = served
    assert get(srv, chunks["notes.txt"], key=None).status_code == 401
    assert get(srv, chunks["notes.txt"], key=KEY + "x").status_code == 401


@pytest.mark.parametrize("chunk_id", [999_999, 0, -1, 2**63])
def test_an_unknown_or_invalid_chunk_serves_nothing(served, chunk_id) -> None:
    srv, _, _, _ = served
    answer = get(srv, chunk_id)
    assert answer.status_code in (404, 422), answer.text
    assert answer.json()["error"]["param"] in ("chunk_id", "path.chunk_id")


def test_a_file_swapped_for_a_link_out_of_its_folder_is_not_served(served) -> None:
    srv, docs, outside, chunks = served
    (docs / "swapped.txt").unlink()
    (docs / "swapped.txt").symlink_to(outside / "secret.txt")
    answer = get(srv, chunks["swapped.txt"])
    assert answer.status_code == 404 and SECRET not in answer.text
    assert answer.json()["error"]["code"] == "file_not_found"
    (docs / "swapped.txt").unlink()  # and a deleted one
    assert get(srv, chunks["swapped.txt"]).status_code == 404
