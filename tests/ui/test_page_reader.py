"""The page for a reader and for an admin of a server with an access file, in a real
chromium: a reader's page has no Jobs tab and its Index tab no skipped files nor runs (it
may not use them: the routes answer it 403); an admin's page has all of them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ui_testing import STARTUP_TIMEOUT_S, Page, index_docs, make_jobs_root

from access_testing import access_text
from attnswitch.service import launch

READER_KEY = "ui-reader-key-61b0"
ADMIN_KEY = "ui-admin-key-9e24"
ACCESS = access_text(READER_KEY, ADMIN_KEY)


@pytest.fixture(scope="module")
def access_server(
    tmp_path_factory: pytest.TempPathFactory, browser: object
) -> Iterator[launch.ServerProcess]:
    """A server with an access file and a jobs root whose `docs/` is indexed (a job)."""
    base = tmp_path_factory.mktemp("ui-access")
    jobs_root = make_jobs_root(base / "jobs")
    (base / "data").mkdir()
    (base / "access.toml").write_text(ACCESS)
    srv = launch.start(
        base / "server",
        "--db",
        str(base / "data"),
        "--access-file",
        str(base / "access.toml"),
        "--jobs-root",
        str(jobs_root),
        timeout=STARTUP_TIMEOUT_S,
    )
    try:
        index_docs(srv.url, ADMIN_KEY)
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def page_of(browser: object, access_server: launch.ServerProcess):
    """`page_of(key)`: a page in a fresh context whose session storage holds `key`."""
    contexts = []

    def make(key: str) -> Page:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        contexts.append(context)
        context.add_init_script(f"sessionStorage.setItem('attnswitch.key', {key!r});")
        return Page(context.new_page(), access_server.url)

    yield make
    for context in contexts:
        context.close()


def open_index(page: Page) -> object:
    p = page.open("?page=index")
    p.wait_for_selector("#index-figures div")
    return p


def test_a_readers_page_hides_jobs_skipped_files_and_runs(page_of) -> None:
    reader = page_of(READER_KEY)
    p = open_index(reader)
    assert p.locator('nav a[data-page="jobs"]').is_hidden()
    assert p.locator("#index-admin").is_hidden()
    assert "Skipped files" not in p.locator("#index-figures").inner_text()
    # the jobs page, asked by its address, falls back to search
    p.goto(f"{reader.url}/?page=jobs")
    p.wait_for_selector("#page-search:not([hidden])")
    assert p.locator("#page-jobs").is_hidden()
    assert reader.errors == []


def test_an_admins_page_has_them(page_of) -> None:
    admin = page_of(ADMIN_KEY)
    p = open_index(admin)
    assert p.locator('nav a[data-page="jobs"]').is_visible()
    assert p.locator("#index-admin").is_visible()
    assert "Skipped files" in p.locator("#index-figures").inner_text()
    p.wait_for_selector("#runs tbody tr")
    assert admin.errors == []
