"""A reader's views of a real server, checked against the kernel: an index built by an
admin's job over a tree with per-folder modes and an ACL (a public folder, a folder only
group adm may enter holding a copy of a public file, a folder bin may read by an ACL); for
the readers daemon (groups daemon, adm) and bin (groups bin, staff), the files each may read
are asked of the kernel (a forked child as that user calls os.access). A reader's search is
the admin's restricted to those files, k readable hits still come back, its index counts
only them, and no forbidden path or text appears in any answer. Both stores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reader_tree import QUERIES, READERS, Served, client_of, served_tree, strings, view_of

pytestmark = pytest.mark.xdist_group("service")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(request, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The tree served and indexed on each store (tests/reader_tree.py)."""
    with served_tree(request, tmp_path_factory, "reader_views") as tree:
        yield tree


@pytest.mark.parametrize("who", READERS)
def test_a_readers_search_is_the_admins_restricted_to_what_the_kernel_lets_it_read(
    served: Served, who: str
) -> None:
    view = view_of(served, who)
    allowed = {i for i, (paths, _) in view.chunks.items() if paths & view.readable}
    assert 0 < len(allowed) < len(view.chunks)  # the reader is neither blind nor all-seeing
    with client_of(served.server.url, who) as reader:
        for query, admin_order in view.order.items():
            found = reader.post("/v1/search", json={"query": query, "k": len(view.chunks)})
            assert found.status_code == 200, found.text
            hits = found.json()["data"]
            assert [h["chunk_id"] for h in hits] == [i for i in admin_order if i in allowed]
            for h in hits:  # the path and every copy listed are readable
                assert {h["path"]} | {a["path"] for a in h["also_at"]} <= view.readable, h
                assert {h["path"]} | {a["path"] for a in h["also_at"]} == (
                    view.chunks[h["chunk_id"]][0] & view.readable
                ), h
            small = reader.post("/v1/search", json={"query": query, "k": len(allowed) - 1})
            assert len(small.json()["data"]) == len(allowed) - 1
            assert len(
                reader.post("/v1/search", json={"query": query, "k": len(allowed)}).json()["data"]
            ) == len(allowed)


@pytest.mark.parametrize("who", READERS)
def test_no_reader_answer_names_or_quotes_a_forbidden_file(served: Served, who: str) -> None:
    view = view_of(served, who)
    forbidden_paths = {f.removeprefix("tree/") for f in served.files} - view.readable
    forbidden_ids = {i for i, (paths, _) in view.chunks.items() if not paths & view.readable}
    forbidden_texts = {view.chunks[i][1] for i in forbidden_ids}
    assert forbidden_paths and forbidden_ids
    names = {Path(p).name for p in forbidden_paths}
    with client_of(served.server.url, who) as reader:
        answers = [reader.post("/v1/search", json={"query": q, "k": 50}) for q in QUERIES]
        answers += [
            reader.post("/v1/search", json={"query": q, "k": 50, "mode": "keyword"})
            for q in QUERIES
        ]
        answers += [
            reader.post("/v1/search", json={"query": QUERIES[0], "k": 5, "path": p})
            for p in sorted(forbidden_paths)
        ]
        answers += [reader.get("/v1/index"), reader.get("/v1/whoami"), reader.get("/v1/server")]
        unknown = {tail: reader.get(f"/v1/chunks/424242/{tail}") for tail in ("context", "file")}
        for chunk_id in sorted(view.chunks):
            for tail, nothing in unknown.items():
                got = reader.get(f"/v1/chunks/{chunk_id}/{tail}")
                answers.append(got)
                if chunk_id in forbidden_ids:
                    assert got.status_code == nothing.status_code, (chunk_id, tail)
                    assert got.content.replace(str(chunk_id).encode(), b"ID") == (
                        nothing.content.replace(b"424242", b"ID")
                    ), (chunk_id, tail)
                else:
                    assert got.status_code == 200, (chunk_id, tail, got.text)
        for answer in answers:
            body = answer.text
            for name in names | {p.split("/")[0] for p in forbidden_paths if "/" in p}:
                if name == "public":
                    continue
                assert name not in body, (answer.request.url, name)
            if answer.headers.get("content-type", "").startswith("application/json"):
                for text in strings(answer.json()):
                    for secret in forbidden_texts:
                        assert secret not in text and (len(text) < 40 or text not in secret), (
                            answer.request.url,
                            text,
                        )


@pytest.mark.parametrize("who", READERS)
def test_a_readers_index_counts_only_what_it_may_read(served: Served, who: str) -> None:
    view = view_of(served, who)
    with client_of(served.server.url, who) as reader:
        summary = reader.get("/v1/index").json()
    assert summary["documents"] == len(view.readable)
    allowed = {i for i, (paths, _) in view.chunks.items() if paths & view.readable}
    # a copy's chunks count once per readable copy, as the admin's index counts them
    assert summary["chunks"] == sum(len(view.chunks[i][0] & view.readable) for i in allowed)
