"""Screenshots of the page `attnswitch serve` shows at / (docs/service.md, "The page"):
each page at desktop and phone width, in the light and the dark scheme, into docs/ui/.

Indexes a copy of part of examples/corpus/postgresql (and an empty file, so that the
index page shows a skipped one) through a job of a real server started with a jobs root,
then drives Debian's chromium with Playwright (`make system-packages` installs it; the
test extra installs Playwright).

    python scripts/screenshots.py [--out docs/ui] [--files 12]   (or `make screenshots`)
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx

from attnswitch.service import launch

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "examples" / "corpus" / "postgresql"
QUERY = "how do I update rows in a table"
# page name -> the URL's query and the selector that says the page has its content
PAGES = {
    "search": (f"?q={QUERY.replace(' ', '+')}", "#hits .hit"),
    "index": ("?page=index", "#skipped tbody tr"),
    "jobs": ("?page=jobs", "#jobs tbody tr"),
    "hardware": ("?page=hardware", "#engines tbody tr"),
}
SIZES = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise SystemExit("screenshots: chromium is not installed (make system-packages)")
    return path


def finished(client: httpx.Client, job: dict) -> dict:
    """`job` once it is neither queued nor running."""
    while job["status"] in ("queued", "running"):
        time.sleep(0.2)
        job = client.get(f"/v1/jobs/{job['id']}").json()
    return job


def indexed_server(work: Path, files: int) -> launch.ServerProcess:
    """A server with a jobs root whose `postgresql/` folder (the first `files` pages, and
    an empty file) has been indexed by a job, and a later job on the other pages
    (`postgresql-more/`) cancelled once it has committed some, so that the jobs page shows
    both."""
    pages = sorted(CORPUS.glob("*.html"))
    for name, chosen in (("postgresql", pages[:files]), ("postgresql-more", pages[files:])):
        folder = work / "jobs" / name
        folder.mkdir(parents=True)
        for page in chosen:
            shutil.copy2(page, folder / page.name)
    (work / "jobs" / "postgresql" / "empty.txt").write_text("")
    server = launch.start(
        work / "server", "--db", str(work / "data"), "--jobs-root", str(work / "jobs")
    )
    with httpx.Client(base_url=server.url, timeout=60) as client:
        job = finished(client, client.post("/v1/jobs", json={"path": "postgresql"}).json())
        if job["status"] != "completed":
            raise SystemExit(f"screenshots: the indexing job ended {job['status']}: {job['error']}")
        more = client.post("/v1/jobs", json={"path": "postgresql-more"}).json()
        while more["status"] in ("queued", "running") and (
            more["progress"].get("files_done", 0) < 2
        ):
            time.sleep(0.1)
            more = client.get(f"/v1/jobs/{more['id']}").json()
        client.post(f"/v1/jobs/{more['id']}/cancel")
        finished(client, more)
    return server


def shoot(url: str, out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    written = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium(), headless=True, args=["--no-sandbox"]
        )
        for scheme in ("light", "dark"):
            for size_name, viewport in SIZES.items():
                context = browser.new_context(viewport=viewport, color_scheme=scheme)
                page = context.new_page()
                for name, (query, ready) in PAGES.items():
                    page.goto(f"{url}/{query}")
                    page.wait_for_selector(ready, timeout=60_000)
                    if name == "hardware":  # a few samples of the live counters' chart
                        page.wait_for_timeout(6_500)
                    page.evaluate("() => document.activeElement && document.activeElement.blur()")
                    path = out / f"{name}-{size_name}-{scheme}.png"
                    page.screenshot(path=str(path), full_page=False)
                    written.append(path)
                context.close()
        browser.close()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "ui")
    parser.add_argument("--files", type=int, default=12, help="Pages of the corpus indexed.")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="attnswitch-screenshots-") as tmp:
        server = indexed_server(Path(tmp), args.files)
        try:
            written = shoot(server.url, args.out)
        finally:
            server.stop()
    for path in written:
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


if __name__ == "__main__":
    sys.exit(main())
