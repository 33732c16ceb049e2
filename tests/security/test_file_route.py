"""`GET /v1/chunks/{chunk_id}/file`, the route the page opens a hit's original file with
(docs/security.md): on a real server with keys, over a real index of real folders, on each
store (SQLite and PostgreSQL).

- It serves only the bytes that were indexed: the file of an indexed chunk, found again at
  its indexed place from "/" down without following a link, still of its recorded size,
  modification time and SHA-256, sent from the descriptor that was checked. No path is
  taken from the request, so there is nothing to traverse. Anything else at that path is a
  404 that serves nothing (issue 50, defect 2): the root swapped for a link to another
  folder, the file swapped for a link out of its folder, to a hidden `.env`, to a file an
  `--exclude` rule kept out, or for a hard link to a secret outside the root (forged to the
  indexed size and modification time), or the file edited in place since (`file_changed`);
  a file deleted (`file_not_found`). An indexed link inside the root is still served.
- It needs a key like every /v1 route (401 without one).
- A document is never active content of the service's origin: HTML is a download, every
  answer carries `Content-Security-Policy: sandbox` and `nosniff`; PDFs, images and plain
  text are shown in place.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest
from security_testing import CORPUS, SECRET, STARTUP_TIMEOUT_S

from attnswitch.documents.rules import FileRules
from attnswitch.indexing.location import open_store
from attnswitch.jobs.run import RunOptions, run
from attnswitch.service import launch

KEY = "test-key-file-route-3b9e"
PAGE = (
    "<html><body><h1>Tide tables</h1><script>window.pwned = 1</script>"
    "<p>the tide tables of the harbour</p></body></html>\n"
)
# Indexed notes, each the victim of one test.
NOTES = (
    "swapped.txt",
    "to-env.txt",
    "to-excluded.txt",
    "to-hardlink.txt",
    "grown.txt",
    "touched.txt",
    "rewritten.txt",
)


class Served(NamedTuple):
    srv: launch.ServerProcess
    docs: Path  # the indexed root
    swap: Path  # another indexed root, swapped for a link by one test
    outside: Path  # secrets outside every root
    chunks: dict[str, int]  # a chunk id of each indexed file, by its path below its root


def _database(pg_cluster, name: str) -> str:
    import psycopg

    with psycopg.connect(pg_cluster.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return pg_cluster.url.rsplit("/", 1)[0] + "/" + name


# PostgreSQL's server and a second index cost a dozen seconds: the slow tier's.
@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def served(request, tmp_path_factory: pytest.TempPathFactory, encoder) -> Served:
    base = tmp_path_factory.mktemp(f"file-route-{request.param}")
    docs = base / "docs"
    docs.mkdir()
    (docs / "tides.html").write_text(PAGE)
    (docs / "notes.txt").write_text("harbour notes: the tide tables are in tides.html\n")
    (docs / "linked.txt").symlink_to("notes.txt")  # a link inside the root: indexed
    for name in NOTES:
        (docs / name).write_text(
            f"harbour log {name}: the pier, the tide, the boats, the nets "
            "and the lighthouse keeper's log\n"
        )
    shutil.copy2(CORPUS / "sqlite" / "copyright-release.pdf", docs / "release.pdf")
    (docs / ".env").write_text(SECRET + " env\n")  # hidden: never indexed
    (docs / "vault.key").write_text(SECRET + " excluded\n")  # excluded by the rule below
    swap = base / "swap"
    swap.mkdir()
    (swap / "passwd").write_text("harbour passwd: the roster of the tide keepers\n")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (outside / "passwd").write_text(SECRET + " passwd\n")
    if request.param == "postgres":
        location = _database(request.getfixturevalue("pg_cluster"), f"file_route_{id(base):x}")
    else:
        (base / "data").mkdir()
        location = str(base / "data")
    chunks: dict[str, int] = {}
    with open_store(location) as store:
        for root, rules in ((docs, FileRules(exclude=("*.key",))), (swap, None)):
            summary = run(
                root, store, RunOptions.of(read_workers=0, rules=rules), get_encoder=lambda: encoder
            )
            assert summary.status == "completed", summary
        rows = store.chunks(range(1, store.count() + 100))
        for cid, row in sorted(rows.items(), reverse=True):
            chunks[row.source] = cid
    assert set(chunks) == {
        "tides.html",
        "notes.txt",
        "linked.txt",
        "release.pdf",
        "passwd",
        *NOTES,
    }, chunks
    keys = base / "keys"
    keys.write_text(KEY + "\n")
    srv = launch.start(
        base / "server", "--db", location, "--api-key-file", str(keys), timeout=STARTUP_TIMEOUT_S
    )
    try:
        yield Served(srv, docs, swap, outside, chunks)
    finally:
        srv.stop()


def get(srv, chunk_id: int, key: str | None = KEY) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.get(f"{srv.url}/v1/chunks/{chunk_id}/file", headers=headers, timeout=60)


def assert_refused(answer: httpx.Response, code: str = "file_changed") -> None:
    """A 404 with `code` naming chunk_id, the secrets of this module nowhere in it."""
    assert SECRET.encode() not in answer.content, answer.text
    assert answer.status_code == 404, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["param"]) == (code, "chunk_id"), error


def test_a_pdf_and_plain_text_are_shown_in_place(served) -> None:
    pdf = get(served.srv, served.chunks["release.pdf"])
    assert pdf.status_code == 200 and pdf.content == (served.docs / "release.pdf").read_bytes()
    assert pdf.headers["content-type"] == "application/pdf"
    assert pdf.headers["content-disposition"] == 'inline; filename="release.pdf"'
    assert pdf.headers["content-length"] == str(len(pdf.content))
    text = get(served.srv, served.chunks["notes.txt"])
    assert text.status_code == 200 and text.headers["content-type"].startswith("text/plain")
    assert text.content == (served.docs / "notes.txt").read_bytes()
    for answer in (pdf, text):
        assert answer.headers["content-security-policy"] == "sandbox"
        assert answer.headers["x-content-type-options"] == "nosniff"


def test_an_indexed_link_inside_its_folder_is_served_as_indexed(served) -> None:
    answer = get(served.srv, served.chunks["linked.txt"])
    assert answer.status_code == 200, answer.text
    assert answer.content == (served.docs / "notes.txt").read_bytes()
    assert answer.headers["content-disposition"] == 'inline; filename="linked.txt"'


def test_html_is_a_download_never_a_page_of_the_service(served) -> None:
    page = get(served.srv, served.chunks["tides.html"])
    assert page.status_code == 200 and page.text == PAGE
    assert page.headers["content-disposition"].startswith("attachment")
    assert page.headers["content-security-policy"] == "sandbox"


def test_it_needs_a_key(served) -> None:
    assert get(served.srv, served.chunks["notes.txt"], key=None).status_code == 401
    assert get(served.srv, served.chunks["notes.txt"], key=KEY + "x").status_code == 401


@pytest.mark.parametrize("chunk_id", [999_999, 0, -1, 2**63])
def test_an_unknown_or_invalid_chunk_serves_nothing(served, chunk_id) -> None:
    answer = get(served.srv, chunk_id)
    assert answer.status_code in (404, 422), answer.text
    assert answer.json()["error"]["param"] in ("chunk_id", "path.chunk_id")


def test_a_file_swapped_for_a_link_out_of_its_folder_is_not_served(served) -> None:
    victim = served.docs / "swapped.txt"
    victim.unlink()
    victim.symlink_to(served.outside / "secret.txt")
    assert_refused(get(served.srv, served.chunks["swapped.txt"]))
    victim.unlink()  # and a deleted one
    assert_refused(get(served.srv, served.chunks["swapped.txt"]), "file_not_found")


def test_a_root_swapped_for_a_link_to_another_folder_is_not_served(served) -> None:
    # `mv root root.old; ln -s OUTSIDE root`: the indexed `passwd` must not become OUTSIDE's
    served.swap.rename(served.swap.with_name("swap.old"))
    served.swap.symlink_to(served.outside, target_is_directory=True)
    assert_refused(get(served.srv, served.chunks["passwd"]))


def test_a_file_swapped_for_a_link_to_a_hidden_file_is_not_served(served) -> None:
    victim = served.docs / "to-env.txt"
    victim.unlink()
    victim.symlink_to(".env")
    assert_refused(get(served.srv, served.chunks["to-env.txt"]))


def test_a_file_swapped_for_a_link_to_an_excluded_file_is_not_served(served) -> None:
    victim = served.docs / "to-excluded.txt"
    victim.unlink()
    victim.symlink_to("vault.key")
    assert_refused(get(served.srv, served.chunks["to-excluded.txt"]))


def test_a_hard_link_to_a_secret_forged_to_the_indexed_size_and_time_is_not_served(served) -> None:
    victim = served.docs / "to-hardlink.txt"
    indexed = victim.stat()
    secret = served.outside / "forged.txt"
    secret.write_bytes((SECRET + " hard link").encode().ljust(indexed.st_size, b"!"))
    assert secret.stat().st_size == indexed.st_size
    victim.unlink()
    os.link(secret, victim)  # the same filesystem: both under the test's folder
    os.utime(victim, ns=(indexed.st_atime_ns, indexed.st_mtime_ns))
    assert_refused(get(served.srv, served.chunks["to-hardlink.txt"]))


def test_a_file_grown_since_it_was_indexed_is_not_served(served) -> None:
    with (served.docs / "grown.txt").open("a") as f:
        f.write("a line written after the run\n")
    assert_refused(get(served.srv, served.chunks["grown.txt"]))


def test_a_file_touched_since_it_was_indexed_is_not_served(served) -> None:
    touched = served.docs / "touched.txt"  # the same bytes, a new modification time
    st = touched.stat()
    os.utime(touched, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert_refused(get(served.srv, served.chunks["touched.txt"]))


def test_a_file_rewritten_to_the_indexed_size_and_time_is_not_served(served) -> None:
    rewritten = served.docs / "rewritten.txt"  # other bytes, the same size and time
    st = rewritten.stat()
    before = rewritten.read_bytes()
    rewritten.write_bytes(before.upper())
    os.utime(rewritten, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert rewritten.stat().st_size == st.st_size and rewritten.read_bytes() != before
    assert_refused(get(served.srv, served.chunks["rewritten.txt"]))
