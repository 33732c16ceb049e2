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
- A hit opens at its place (issue 53, point 7): a PDF's hit's `uri` is this route with
  `#page=N`, the chunk's page; a chunk of an .eml's attachment gets the attachment alone,
  its own bytes, type and name, under the same rules (an HTML attachment a download, a
  message edited since refused), and the message's body the whole message.
- A hit's path as the service shows it (its folder's name first) is a path filter, flat
  as the CLI takes it or inside `filter` (issue 53, point 8).
"""

from __future__ import annotations

import email.policy
import os
import shutil
from email.message import EmailMessage
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest
from security_testing import CORPUS, SECRET, STARTUP_TIMEOUT_S

from attnswitch.documents.rules import FileRules
from attnswitch.indexing.location import open_store
from attnswitch.jobs.run import RunOptions, run
from attnswitch.service import launch
from text_pdfs import text_pdf

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
# Three pages of words found on one page each ("keeper3" only on page 3), long enough that
# chunks start on every page; sent as `pages.pdf` and attached to `papers.eml`.
WORDS = "harbour tide pier boat net keeper lighthouse chart depth pilot".split()
PAGES = [" ".join(f"{WORDS[(7 * p + j) % 10]}{p + 1}" for j in range(300)) for p in range(3)]
# Long enough that chunks start in it (a chunk that starts in the PDF runs on into it).
CHART = (
    "<html><body><script>window.pwned = 1</script><p>"
    + " ".join(f"the chart of the bay, sounding {i}" for i in range(200))
    + "</p></body></html>"
)


def _papers(pdf: bytes, subject: str) -> bytes:
    """A message with a body, the PDF `pdf` as `tides.pdf` and an HTML page attached."""
    message = EmailMessage(policy=email.policy.SMTP)
    message["Subject"] = subject
    message["From"] = "harbour@example.org"
    message.set_content("The harbour master's papers: tide tables and the bay chart.")
    message.add_attachment(pdf, maintype="application", subtype="pdf", filename="tides.pdf")
    message.add_attachment(CHART, subtype="html", filename="chart.html")
    return message.as_bytes()


class Served(NamedTuple):
    srv: launch.ServerProcess
    docs: Path  # the indexed root
    swap: Path  # another indexed root, swapped for a link by one test
    outside: Path  # secrets outside every root
    chunks: dict[str, int]  # a chunk id of each indexed file, by its path below its root
    located: dict[tuple[str, str | None, int | None], int]  # (path, part, page) -> a chunk id


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
    (docs / "pages.pdf").write_bytes(text_pdf(PAGES))
    (docs / "papers.eml").write_bytes(_papers(text_pdf(PAGES), "Harbour papers"))
    (docs / "edited.eml").write_bytes(_papers(text_pdf(PAGES[:1]), "Edited papers"))
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
    located: dict[tuple[str, str | None, int | None], int] = {}
    with open_store(location) as store:
        for root, rules in ((docs, FileRules(exclude=("*.key",))), (swap, None)):
            summary = run(
                root, store, RunOptions.of(read_workers=0, rules=rules), get_encoder=lambda: encoder
            )
            assert summary.status == "completed", summary
        rows = store.chunks(range(1, store.count() + 100))
        for cid, row in sorted(rows.items(), reverse=True):
            chunks[row.source] = cid
            located[row.source, row.location.get("part"), row.location.get("page")] = cid
    assert set(chunks) == {
        "tides.html",
        "notes.txt",
        "linked.txt",
        "release.pdf",
        "passwd",
        "pages.pdf",
        "papers.eml",
        "edited.eml",
        *NOTES,
    }, chunks
    keys = base / "keys"
    keys.write_text(KEY + "\n")
    srv = launch.start(
        base / "server", "--db", location, "--api-key-file", str(keys), timeout=STARTUP_TIMEOUT_S
    )
    try:
        yield Served(srv, docs, swap, outside, chunks, located)
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


# -- at the place: a PDF's page, an attachment alone (issue 53, point 7) ---------------------


def search(srv, body: dict) -> httpx.Response:
    return httpx.post(
        f"{srv.url}/v1/search",
        json=body,
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=60,
    )


def test_a_pdf_hit_opens_at_its_page(served) -> None:
    answer = search(
        served.srv, {"query": "keeper3", "k": 1, "mode": "keyword", "path": "docs/pages.pdf"}
    )
    assert answer.status_code == 200, answer.text
    (hit,) = answer.json()["data"]
    page = hit["location"]["page"]
    assert page == 3 and hit["path"] == "pages.pdf", hit
    assert hit["uri"] == f"/v1/chunks/{hit['chunk_id']}/file#page=3"
    assert {place[2] for place in served.located if place[0] == "pages.pdf"} == {1, 2, 3}
    pdf = httpx.get(
        served.srv.url + hit["uri"].split("#")[0],
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=60,
    )
    assert pdf.status_code == 200 and pdf.content == (served.docs / "pages.pdf").read_bytes()
    assert pdf.headers["content-disposition"] == 'inline; filename="pages.pdf"'


def test_a_hit_in_a_mail_attachment_gets_the_attachment_alone(served) -> None:
    answer = search(
        served.srv, {"query": "keeper2", "k": 10, "mode": "keyword", "path": "docs/papers.eml"}
    )
    assert answer.status_code == 200, answer.text
    hits = [h for h in answer.json()["data"] if h["location"].get("part") == "tides.pdf"]
    assert hits, answer.json()["data"]
    hit = hits[0]
    page = hit["location"]["page"]
    assert hit["uri"] == f"/v1/chunks/{hit['chunk_id']}/file#page={page}"
    served_pdf = get(served.srv, hit["chunk_id"])
    assert served_pdf.status_code == 200, served_pdf.text
    assert served_pdf.content == text_pdf(PAGES)  # its own bytes, not the message's
    assert served_pdf.headers["content-type"] == "application/pdf"
    assert served_pdf.headers["content-disposition"] == 'inline; filename="tides.pdf"'
    assert served_pdf.headers["content-length"] == str(len(served_pdf.content))
    assert served_pdf.headers["content-security-policy"] == "sandbox"
    assert served_pdf.headers["x-content-type-options"] == "nosniff"


def test_an_html_attachment_is_a_download_and_the_body_the_whole_message(served) -> None:
    chart = served.located["papers.eml", "chart.html", None]
    page = get(served.srv, chart)
    assert page.status_code == 200 and page.text.rstrip() == CHART  # as set, plus a line end
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-disposition"] == 'attachment; filename="chart.html"'
    assert page.headers["content-security-policy"] == "sandbox"
    body = served.located["papers.eml", "body", None]
    whole = get(served.srv, body)
    assert whole.status_code == 200
    assert whole.content == (served.docs / "papers.eml").read_bytes()
    assert whole.headers["content-disposition"].startswith('attachment; filename="papers.eml"')


def test_an_attachment_of_a_message_edited_since_is_not_served(served) -> None:
    edited = served.docs / "edited.eml"
    attachment = served.located["edited.eml", "tides.pdf", 1]
    with edited.open("ab") as f:
        f.write(b"\r\n")
    assert_refused(get(served.srv, attachment))


# -- the path a hit shows is a path filter (issue 53, point 8) ------------------------------


def test_the_shown_path_filters_flat_or_in_filter(served) -> None:
    query = {"query": "harbour log the pier", "k": 3, "mode": "keyword"}
    shown = {
        tuple((h["root"], h["path"]) for h in search(served.srv, {**query, **body}).json()["data"])
        for body in (
            {"path": "docs/notes.txt"},
            {"path": "notes.txt"},
            {"filter": {"path": "docs/notes.txt"}},
            {"path": ["docs/notes.*"]},
        )
    }
    assert shown == {(("docs", "notes.txt"),)}, shown
    both = search(served.srv, {**query, "path": "docs/", "filter": {"type": "text"}})
    assert both.status_code == 422, both.text
    error = both.json()["error"]
    assert (error["param"], error["code"]) == ("filter", "invalid_filter")
    assert error["message"].startswith("filter: expected the filter's fields either flat")
    bad = search(served.srv, {**query, "type": "pdff"})
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "type", bad.text
    assert bad.json()["error"]["message"].startswith("type: expected ")
