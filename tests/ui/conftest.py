"""Fixtures of the page's browser tests: one real `attnswitch serve` (keys on, jobs on) over
a small corpus indexed before the tests, and Debian's chromium driven by Playwright.

The tests skip, saying why, where chromium or Playwright is absent (`make system-packages`
installs chromium, the test extra Playwright; Playwright's own browser download is not
used). The server and the browser are shared by the tests of one module, and closed
after them: Playwright's sync API keeps an event loop running in the thread that started
it, and other modules' tests that call `asyncio.run` must not find it there. Each test
gets a fresh browser context whose session storage already holds the key, as after the
key form.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ui_testing import KEY, STARTUP_TIMEOUT_S, Page, chromium, index_docs, make_jobs_root

from attnswitch.service import launch


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    path = chromium()
    if path is None:
        pytest.skip("chromium is not installed (make system-packages installs Debian's)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as pw:
        # --no-sandbox: the suite runs as root in containers, where chromium's sandbox
        # cannot start
        browser = pw.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def ui_server(
    tmp_path_factory: pytest.TempPathFactory, browser: object
) -> Iterator[launch.ServerProcess]:
    """A server with a key and a jobs root whose `docs/` folder is indexed (by a job)."""
    base = tmp_path_factory.mktemp("ui")
    jobs_root = make_jobs_root(base / "jobs")
    data = base / "data"
    data.mkdir()
    keys = base / "keys.txt"
    keys.write_text(KEY + "\n")
    srv = launch.start(
        base / "server",
        "--db",
        str(data),
        "--api-key-file",
        str(keys),
        "--jobs-root",
        str(jobs_root),
        timeout=STARTUP_TIMEOUT_S,
    )
    try:
        index_docs(srv.url, KEY)
        yield srv
    finally:
        srv.stop()


def _context(browser: object, **options: object) -> object:
    return browser.new_context(**{"viewport": {"width": 1280, "height": 900}, **options})


@pytest.fixture
def new_page(browser: object, ui_server: launch.ServerProcess):
    """`new_page(key=True, **context options)`: a page in a fresh context; with `key`, its
    session storage holds the server's key before the page's script runs."""
    contexts = []

    def make(key: bool = True, **options: object) -> Page:
        context = _context(browser, **options)
        contexts.append(context)
        if key:
            context.add_init_script(f"sessionStorage.setItem('attnswitch.key', {KEY!r});")
        return Page(context.new_page(), ui_server.url)

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def ui(new_page) -> Page:
    return new_page()


@pytest.fixture(scope="module")
def jobs_root(ui_server: launch.ServerProcess) -> Path:
    return Path(ui_server.log).parent.parent / "jobs"


@pytest.fixture(scope="module")
def bare_server(
    tmp_path_factory: pytest.TempPathFactory, browser: object
) -> Iterator[launch.ServerProcess]:
    """A keyless server over an empty data folder, without jobs, returned as soon as it
    listens (still warming up)."""
    base = tmp_path_factory.mktemp("ui-bare")
    srv = launch.start(
        base / "server", "--db", str(base / "data"), wait_ready=False, timeout=STARTUP_TIMEOUT_S
    )
    try:
        yield srv
    finally:
        srv.stop()
