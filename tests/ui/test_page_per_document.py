"""The page's "one per document" box in a real headless Chromium (Debian's, driven by
Playwright) against a real server over the small indexed corpus of conftest.py: with the
box ticked, one row per document, each saying how many more of its passages matched, as
`/v1/search`'s `"group": "document"` answers; unticked, the passages again."""

from __future__ import annotations

import re
from collections import Counter

import httpx
from ui_testing import KEY

UPDATE_QUERY = "update the rows of a table"
UPDATE_FILE = "docs/tutorial-update.html"
WINDOW_FILE = "docs/tutorial-window.html"
TIMEOUT_MS = 30_000
MORE = re.compile(r"(\d+) more passages? in this document")


def search(page, query: str) -> list[str]:
    """Type `query` into the box (results come as you type); the paths of the hits."""
    page.fill("#q", query)
    page.wait_for_function(
        "q => document.getElementById('search-status').textContent.includes(q)",
        arg=query.strip(),
        timeout=TIMEOUT_MS,
    )
    return page.locator("#hits .path").all_inner_texts()


def rows(page) -> list[tuple[str, str]]:
    """Each result row as a user reads it: its path and its "more in this document" line
    ("" when it has none)."""
    return [
        (
            hit.locator(".path").inner_text(),
            " ".join(m.inner_text() for m in hit.locator(".where.more").all()),
        )
        for hit in page.locator("#hits .hit").all()
    ]


def tick(page, checked: bool) -> None:
    """Tick or untick the box by its label, as a user does; the search runs again."""
    box = page.get_by_label("one per document")
    box.set_checked(checked)
    if checked:  # rows grouped by document say how many more passages they have
        page.wait_for_selector("#hits .where.more", timeout=TIMEOUT_MS)
    else:
        page.wait_for_selector("#hits .where.more", state="detached", timeout=TIMEOUT_MS)


def grouped(url: str, query: str, mode: str) -> list[tuple[str, int]]:
    """(shown path, more_in_document) of each hit of `/v1/search` grouped by document, as
    the page asks it (k 10)."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}) as client:
        answer = client.post(
            "/v1/search", json={"query": query, "mode": mode, "k": 10, "group": "document"}
        )
    assert answer.status_code == 200, answer.text
    return [(f"{h['root']}/{h['path']}", h["more_in_document"]) for h in answer.json()["data"]]


def said(more: int) -> str:
    return "" if more == 0 else f"{more} more passage{'s' if more > 1 else ''} in this document"


def test_one_row_for_a_document_whose_passages_filled_the_list(ui):
    page = ui.open("?mode=keyword")
    passages = search(page, "partition")
    assert len(passages) > 1 and set(passages) == {WINDOW_FILE}, passages
    assert page.locator("#hits .where.more").count() == 0

    tick(page, True)
    assert rows(page) == [(WINDOW_FILE, said(len(passages) - 1))]
    assert "1 result for “partition” (keyword)" in page.locator("#search-status").inner_text()

    tick(page, False)
    assert page.locator("#hits .path").all_inner_texts() == passages
    assert ui.errors == []


def test_one_row_per_document_with_how_many_more(ui, ui_server):
    page = ui.open()
    passages = search(page, UPDATE_QUERY)
    assert max(Counter(passages).values()) > 1, passages  # a document shown several times

    tick(page, True)
    shown = rows(page)
    paths = [path for path, _ in shown]
    assert len(paths) == len(set(paths)) and paths[0] == UPDATE_FILE, paths
    assert set(passages) <= set(paths)  # every document the passages came from, once
    # each row says what the service counted for its document, in words, and only then
    want = grouped(ui_server.url, UPDATE_QUERY, "hybrid")
    assert shown == [(path, said(more)) for path, more in want]
    assert any(more > 1 for _, more in want) and any(more == 0 for _, more in want)
    for _, line in shown:
        assert line == "" or MORE.fullmatch(line), line
    assert ui.errors == []
