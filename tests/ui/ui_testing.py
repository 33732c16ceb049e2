"""Helpers of the page's browser tests: where Debian's chromium is, the corpus the shared
server indexes (real documents of examples/corpus plus files made to be awkward), and
the key the tests type."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import httpx

from text_pdfs import text_pdf

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
# Indexed by the shared server before the tests: four PostgreSQL tutorial pages, a page
# holding a script, a PDF of three pages (`PDF_NAME`), an empty file and a broken PDF (the
# last two skipped, with reasons).
DOCS = (
    "postgresql/tutorial-start.html",
    "postgresql/tutorial-window.html",
    "postgresql/tutorial-update.html",
    "postgresql/tutorial-conclusion.html",
)
# Indexed by a job the jobs test starts in the browser.
MORE = ("python-tutorial/appetite.rst.txt",)
KEY = "ui-test-key-5c2e"
# A word found only in the file that holds a script; the script would set PWNED_FLAG.
SCRIPT_WORD = "zanzibarquokka"
PWNED_FLAG = "__attnswitchPwned"
SCRIPT_TEXT = (
    f"<p>Notes on {SCRIPT_WORD} handling.</p>\n"
    f"<script>window.{PWNED_FLAG} = true;</script>\n"
    f'<img src=x onerror="window.{PWNED_FLAG} = true"> the {SCRIPT_WORD} end\n'
)
STARTUP_TIMEOUT_S = 180.0
# A PDF of three pages, each of its own words ("lantern3" only on page 3): a hit on page 3
# opens the file at that page.
PDF_NAME = "harbour.pdf"
_WORDS = "harbour tide pier boat net keeper lantern chart depth pilot".split()
PDF_PAGES = [" ".join(f"{_WORDS[(7 * p + j) % 10]}{p + 1}" for j in range(300)) for p in range(3)]


def chromium() -> str | None:
    """The path of Debian's chromium (`make system-packages` installs it), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def make_jobs_root(root: Path) -> Path:
    """The jobs root: `docs/` (indexed before the tests) and `more/` (indexed by a job)."""
    for folder, sources in (("docs", DOCS), ("more", MORE)):
        for source in sources:
            dest = root / folder / Path(source).name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(CORPUS / source, dest)
    (root / "docs" / "script-notes.txt").write_text(SCRIPT_TEXT)
    (root / "docs" / PDF_NAME).write_bytes(text_pdf(PDF_PAGES))
    (root / "docs" / "empty.txt").write_text("")
    (root / "docs" / "broken.pdf").write_bytes(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\nnot a PDF body\n")
    return root


def index_docs(url: str, key: str) -> None:
    """Index the jobs root's `docs/` on the server at `url` by a job, as the admin of
    `key`, and wait for it to complete."""
    with httpx.Client(
        base_url=url, timeout=60, headers={"Authorization": f"Bearer {key}"}
    ) as client:
        job = client.post("/v1/jobs", json={"path": "docs"}).json()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while job["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, f"indexing docs/ took too long: {job}"
            time.sleep(0.1)
            job = client.get(f"/v1/jobs/{job['id']}").json()
        assert job["status"] == "completed", job


class Page:
    """A Playwright page on the server, with the console errors and page errors it saw."""

    def __init__(self, page: object, url: str):
        self.page = page
        self.url = url
        self.errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))

    def open(self, query: str = "") -> object:
        self.page.goto(f"{self.url}/{query}")
        self.page.wait_for_selector("#nav:not([hidden])")
        return self.page
