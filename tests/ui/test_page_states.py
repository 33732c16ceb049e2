"""The page of a server in the states a first visit may meet (conftest.py's `bare_server`:
no keys, no jobs, nothing indexed), in Debian's chromium: warming up, then an empty index,
each told in a sentence, and no key form where the server has no keys."""

from __future__ import annotations

import re

TIMEOUT_MS = 120_000


def test_a_page_opened_while_warming_up_waits_then_works(browser, bare_server) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(bare_server.url + "/?q=rows&mode=keyword")
        # the model may still be loading: the page says so and tries again by itself
        notice = page.locator("#notice").inner_text()
        assert notice in ("Loading…", "") or notice.startswith("The server is not ready yet"), (
            notice
        )
        page.wait_for_selector("#nav:not([hidden])", timeout=TIMEOUT_MS)
        assert page.locator("#page-key").is_hidden()  # no keys: no key form
        assert page.locator('nav a[data-page="jobs"]').is_hidden()  # no --jobs-root
        page.wait_for_function(
            "() => document.getElementById('search-status').textContent"
            ".startsWith('Nothing is indexed yet')",
            timeout=TIMEOUT_MS,
        )
        assert page.locator("#hits .hit").count() == 0
        page.click("nav >> text=Index")
        page.wait_for_function(
            "() => document.getElementById('index-status').textContent"
            " === 'Nothing is indexed yet.'",
            timeout=TIMEOUT_MS,
        )
        assert re.search(r"Documents\s+0\b", page.locator("#index-figures").inner_text())
        # the skipped list is a request of its own, answered after the figures or before them
        page.wait_for_function(
            "() => document.getElementById('skipped-status').textContent"
            " === 'No file was skipped.'",
            timeout=TIMEOUT_MS,
        )
        # a jobs URL on a server without jobs shows the search page
        page.goto(bare_server.url + "/?page=jobs")
        page.wait_for_selector("#page-search:not([hidden])", timeout=TIMEOUT_MS)
        assert page.locator("#page-jobs").is_hidden()
    finally:
        context.close()
