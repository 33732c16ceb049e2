"""Cancelling a job in the page (issue 30), in Debian's chromium against the shared server of
this module (conftest.py): a job started in the page is cancelled with the keyboard from
its row, ends "cancelled" with its error in one line, and the store keeps every document
the job committed before it stopped."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

from ui_testing import CORPUS

from attnswitch.indexing.location import open_store
from attnswitch.jobs import jobs_table

TIMEOUT_MS = 120_000
# Enough documents that the job still runs when the test presses Cancel: the PostgreSQL
# tutorial pages of the corpus, twice (under two folders).
PAGES = sorted((CORPUS / "postgresql").glob("tutorial-*.html"))


def committed(data: Path, folder: Path) -> int:
    """Documents of `folder` the server's store holds now."""
    with open_store(data) as store:
        return store.root_counts(folder)[0]


def test_a_job_cancelled_in_the_page_ends_cancelled_and_keeps_its_documents(ui, jobs_root):
    folder = jobs_root / "many"
    for half in ("a", "b"):
        (folder / half).mkdir(parents=True)
        for page_file in PAGES:
            shutil.copy2(page_file, folder / half / page_file.name)
    total = 2 * len(PAGES)
    assert total >= 40
    data = jobs_root.parent / "data"

    page = ui.open("?page=jobs")
    page.fill("#job-path", "many")
    page.press("#job-path", "Enter")
    row = page.locator("#jobs tbody tr", has=page.locator("td", has_text=re.compile("^many$")))
    cancel = row.get_by_role("button", name=re.compile(r"^Cancel job \w{8} on many$"))
    cancel.wait_for(timeout=TIMEOUT_MS)
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while committed(data, folder) < 2:  # in the middle of the folder
        assert time.monotonic() < deadline, "no document committed in time"
        time.sleep(0.05)
    cancel.focus()  # the keyboard alone: the focus stays on the button across polls
    page.wait_for_timeout(800)  # at least one poll remakes the row
    assert page.evaluate("document.activeElement.dataset.cancel") is not None
    page.keyboard.press("Enter")

    row.locator('[data-status="cancelled"]').wait_for(timeout=TIMEOUT_MS)
    cells = row.locator("td").all_inner_texts()
    assert cells[2] == "cancelled", cells
    assert cells[6].startswith("cancelled by a client; every document it committed is kept")
    assert cells[7] == "", cells  # no Cancel button on a finished job
    page.wait_for_function(
        "() => document.getElementById('job-status').textContent"
        ".endsWith(': cancelled; the documents it committed are kept.')",
        timeout=TIMEOUT_MS,
    )
    # the quick pass reads at reader speed: it may commit the whole folder before the
    # click lands (the cancel then stops the full pass); either way nothing committed goes
    kept = committed(data, folder)
    assert 2 <= kept <= total, kept
    with open_store(data) as store:
        job = jobs_table.table(store).recent(1)[0]
        assert (job.path, job.status, job.resume) == ("many", "cancelled", False)
    assert ui.errors == []
