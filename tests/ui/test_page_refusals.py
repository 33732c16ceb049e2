"""The search's plain sentences for a server that refuses (issue 30), in Debian's chromium
against a real server of this module: its store is broken for real (the index file holds
bytes that are no database), so a search answers 503 and the page says the index cannot
be searched, and why, in one sentence; its queue is small (16 texts) and kept full by
clients embedding texts, so a search is refused with 429 and the page says the server is
busy and when to try again. Never a blank result list or a stack trace."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import httpx
import pytest
from ui_testing import STARTUP_TIMEOUT_S

from attnswitch.service import launch

TIMEOUT_MS = 60_000
QUEUE = 16  # texts the server admits at once (--max-queue), one flooding request's worth
BUSY_SENTENCE = re.compile(r"^The server is busy; try again in \d+ seconds\.$")


@pytest.fixture(scope="module")
def strained(
    tmp_path_factory: pytest.TempPathFactory, browser: object
) -> Iterator[launch.ServerProcess]:
    """A keyless server with a queue of `QUEUE` texts over a data folder whose index file
    is not a database (what a disk error or a stray copy leaves)."""
    base = tmp_path_factory.mktemp("ui-strained")
    data = base / "data"
    data.mkdir()
    (data / "index.sqlite3").write_bytes(b"not an SQLite database, only bytes\n" * 64)
    srv = launch.start(
        base / "server",
        "--db",
        str(data),
        "--max-queue",
        str(QUEUE),
        "--max-items",
        str(QUEUE),
        timeout=STARTUP_TIMEOUT_S,
    )
    try:
        yield srv
    finally:
        srv.stop()


def open_page(browser: object, url: str, query: str = "") -> tuple[object, object, list]:
    """A fresh context and page on `url`, and the console errors it sees."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.goto(f"{url}/{query}")
    page.wait_for_selector("#nav:not([hidden])", timeout=TIMEOUT_MS)
    return context, page, errors


def searched(page, query: str) -> str:
    """Search `query` now (Enter) and return the sentence the page shows for it."""
    page.fill("#q", query)
    page.press("#q", "Enter")
    page.wait_for_function(
        "() => document.getElementById('search-status').textContent !== 'Searching…'",
        timeout=TIMEOUT_MS,
    )
    return page.locator("#search-status").inner_text()


def test_a_broken_store_gets_a_plain_sentence(browser, strained) -> None:
    context, page, errors = open_page(browser, strained.url, "?mode=keyword")
    try:
        sentence = searched(page, "rows of a table")
        assert sentence.startswith("The index cannot be searched right now: "), sentence
        assert "not a readable attnswitch index" in sentence and "\n" not in sentence
        assert "Traceback" not in sentence and str(strained.log.parent) not in sentence
        assert page.locator("#search-status").get_attribute("class") == "bad"
        assert page.locator("#hits li").count() == 0
        assert errors == []
    finally:
        context.close()


def test_a_busy_server_gets_a_plain_sentence(browser, strained) -> None:
    stop = threading.Event()
    texts = [f"harbour lantern tide rope {i} " * 40 for i in range(QUEUE)]

    def flood() -> None:  # requests of a whole queue's worth of texts, one after another
        with httpx.Client(base_url=strained.url, timeout=60) as client:
            while not stop.is_set():
                client.post("/v1/embeddings", json={"input": texts})

    flooders = [threading.Thread(target=flood, daemon=True) for _ in range(4)]
    for t in flooders:
        t.start()
    context, page, errors = open_page(browser, strained.url)
    try:
        seen = []
        for attempt in range(40):  # hybrid: the query is encoded, so it waits for the queue
            seen.append(searched(page, f"busy harbour {attempt}"))
            if BUSY_SENTENCE.match(seen[-1]):
                break
        assert BUSY_SENTENCE.match(seen[-1]), seen
        assert page.locator("#search-status").get_attribute("class") == "bad"
        assert page.locator("#hits li").count() == 0
        assert errors == []
    finally:
        stop.set()
        for t in flooders:
            t.join(60)
        context.close()
