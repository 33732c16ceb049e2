"""Search through a real server over the CLI's data folder: documents indexed by the
pipeline in another process (as `attnswitch run` does) are found at once, with the hits and
scores that the in-process search gives for the same query, in each search mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from service_testing import PYTHON_DOCS, copy_corpus, start_server, wait_for_jobs

from attnswitch.indexing.search import search
from attnswitch.indexing.store import SQLiteStore
from attnswitch.jobs.run import RunOptions, run

pytestmark = pytest.mark.xdist_group("service")
QUERY = "automate a task: search-and-replace over many text files, rename photo files"


@pytest.fixture(scope="session")
def cli_indexed(shared_client, service_dirs, reference):
    wait_for_jobs(shared_client)  # the store takes one writer at a time
    root = copy_corpus(service_dirs["base"] / "cli-docs", PYTHON_DOCS)
    with SQLiteStore(service_dirs["data"]) as store:
        summary = run(root, store, RunOptions(), get_encoder=lambda: reference)
    assert summary.status == "completed" and summary.indexed == len(PYTHON_DOCS)
    return root


@pytest.fixture(scope="session")
def shared_client(server):
    import httpx

    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=120) as c:
        yield c


@pytest.mark.parametrize(
    ("k", "mode"),
    [(1, "dense"), (3, "dense"), (100, "dense"), (3, "hybrid"), (100, "hybrid"), (3, "keyword")],
)
def test_search_finds_what_the_cli_indexed(
    shared_client, cli_indexed, service_dirs, reference, k, mode
) -> None:
    r = shared_client.post("/v1/search", json={"query": QUERY, "k": k, "mode": mode})
    assert r.status_code == 200, r.text
    body = r.json()
    with SQLiteStore(service_dirs["data"]) as store:
        want = search(store, reference.encode([QUERY])[0], k, text=QUERY, mode=mode)
    assert want
    got = body["data"]
    jobs_root = service_dirs["jobs_root"].resolve()

    def shown(root: str) -> str:  # never the server's absolute path
        inside = Path(root).is_relative_to(jobs_root)
        return Path(root).relative_to(jobs_root).as_posix() if inside else Path(root).name

    assert [(h["root"], h["source"], h["ordinal"]) for h in got] == [
        (shown(h.root), h.source, h.ordinal) for h in want
    ]
    assert [h["rank"] for h in got] == list(range(1, len(want) + 1))
    for g, w in zip(got, want):
        assert abs(g["score"] - w.score) <= 1e-5 and g["text"] == w.text
    assert got[0]["root"] == cli_indexed.name  # outside the jobs root: its name only
    assert got[0]["path"] == got[0]["source"]  # relative to its root
    assert body["usage"]["prompt_tokens"] == (
        0 if mode == "keyword" else len(reference.tokenize([QUERY])[0])
    )


def test_search_is_hybrid_by_default_and_refuses_an_unknown_mode(
    shared_client, cli_indexed
) -> None:
    plain = shared_client.post("/v1/search", json={"query": QUERY, "k": 5})
    hybrid = shared_client.post("/v1/search", json={"query": QUERY, "k": 5, "mode": "hybrid"})
    assert plain.status_code == hybrid.status_code == 200
    assert plain.json()["data"] == hybrid.json()["data"]
    bad = shared_client.post("/v1/search", json={"query": QUERY, "mode": "fuzzy"})
    assert bad.status_code == 422 and "mode" in bad.text


def test_search_takes_an_ann_beam_and_refuses_one_out_of_range(shared_client, cli_indexed) -> None:
    """This index is small enough to be searched exactly, so any beam gives the same hits;
    a beam outside 1..1000 is a 422 naming `ef`."""
    plain = shared_client.post("/v1/search", json={"query": QUERY, "k": 5, "mode": "dense"})
    for ef in (1, 1000):
        beamed = shared_client.post(
            "/v1/search", json={"query": QUERY, "k": 5, "mode": "dense", "ef": ef}
        )
        assert beamed.status_code == 200, beamed.text
        assert beamed.json()["data"] == plain.json()["data"]
    for ef in (0, 1001, 2.5, "64"):
        bad = shared_client.post("/v1/search", json={"query": QUERY, "ef": ef})
        assert bad.status_code == 422 and "ef" in bad.json()["error"]["param"], bad.text


@pytest.mark.parametrize("mode", ["hybrid", "dense", "keyword"])
def test_the_cli_the_api_and_python_give_one_result_shape(
    shared_client, cli_indexed, service_dirs, reference, mode
) -> None:
    """`/v1/search`, `attnswitch search --json` and `indexing.search.search` answer the same
    hits in the same shape (`indexing.search.Hit`): the same fields in the same order and
    the same values, but for `root`, which the service shows relative to its jobs root,
    and `uri`, the file's `file://` URI, which the service gives as its file route (no
    server path)."""
    from typer.testing import CliRunner

    from attnswitch.cli import app

    wait_for_jobs(shared_client)
    api = shared_client.post("/v1/search", json={"query": QUERY, "k": 5, "mode": mode})
    assert api.status_code == 200, api.text
    done = CliRunner().invoke(
        app,
        ["search", QUERY, "-k", "5", "--mode", mode, "--db", str(service_dirs["data"]), "--json"],
    )
    assert done.exit_code == 0, done.output
    cli = json.loads(done.stdout)
    with SQLiteStore(service_dirs["data"]) as store:
        python = [
            h.to_dict()
            for h in search(store, reference.encode([QUERY])[0], 5, text=QUERY, mode=mode)
        ]
    assert len(python) == 5
    assert cli["object"] == api.json()["object"] == "list"
    for a, c, p in zip(api.json()["data"], cli["data"], python, strict=True):
        assert list(a) == list(c) == list(p)
        for key, value in p.items():
            if key == "root":
                assert c[key] == value and a[key] == Path(value).name  # outside the jobs root
            elif key == "uri":
                assert c[key] == value == (Path(p["root"]) / p["path"]).as_uri()
                assert a[key] == f"/v1/chunks/{p['chunk_id']}/file"
            elif isinstance(value, float):
                assert a[key] == pytest.approx(value, abs=1e-5), key
                assert c[key] == pytest.approx(value, abs=1e-5), key
            else:
                assert a[key] == c[key] == value, key
        assert p["path"] == Path(p["path"]).as_posix() and not Path(p["path"]).is_absolute()
        assert p["snippet"] and p["chunk_id"] >= 1
        assert (p["dense_similarity"] is None) == (mode == "keyword")
        if mode != "hybrid":  # a hybrid hit may be in one list only
            assert (p["keyword_score"] is None) == (mode == "dense")


def test_an_empty_index_without_jobs_says_to_index_with_the_cli(tmp_path) -> None:
    """A server without --jobs-root cannot index: on an empty index it tells the user to
    index with `attnswitch run`, not to POST /v1/jobs (which it would refuse)."""
    import httpx

    data = tmp_path / "data"
    data.mkdir()
    srv = start_server(tmp_path / "server", "--db", str(data))
    try:
        with httpx.Client(base_url=srv.url, timeout=120) as client:
            for got in ("no index yet", "an empty index"):
                r = client.post("/v1/search", json={"query": "rows", "mode": "keyword"})
                assert r.status_code == 409, r.text
                error = r.json()["error"]
                assert error["code"] == "index_empty"
                assert error["message"].startswith(
                    f"index: expected documents to search, got {got}: index a folder with "
                    "`attnswitch run FOLDER`"
                ), error
                assert "/v1/jobs" not in error["message"] and str(data) not in error["message"]
                SQLiteStore(data).close()  # an index file with no documents
            assert client.post("/v1/jobs", json={"path": "x"}).status_code != 202
    finally:
        srv.stop()


def test_a_hit_carries_its_heading_path_and_location(
    shared_client, cli_indexed, service_dirs, reference
) -> None:
    """`/v1/search` answers each hit's heading path and location, as the Python API does:
    a Markdown section under nested headings, and a PDF page."""
    from service_testing import CORPUS

    wait_for_jobs(shared_client)
    root = service_dirs["base"] / "structured-docs"
    root.mkdir(exist_ok=True)
    (root / "guide.md").write_text(
        "# json\n\n## Basic Usage\n\nCall dumps to serialise a "
        "Python object as a JSON formatted string.\n"
    )
    (root / "release.pdf").write_bytes((CORPUS / "sqlite/copyright-release.pdf").read_bytes())
    with SQLiteStore(service_dirs["data"]) as store:
        assert run(root, store, RunOptions(), get_encoder=lambda: reference).indexed == 2
    for query, want in (
        ("dumps serialise JSON formatted string", ("guide.md", ["json", "Basic Usage"], {})),
        ("public domain dedication copyright release", ("release.pdf", [], {"page": 1})),
    ):
        r = shared_client.post("/v1/search", json={"query": query, "k": 1, "mode": "keyword"})
        assert r.status_code == 200, r.text
        (hit,) = r.json()["data"]
        assert (hit["path"], hit["heading_path"], hit["location"]) == want
        with SQLiteStore(service_dirs["data"]) as store:
            (local,) = search(store, None, 1, text=query, mode="keyword")
        assert (local.heading_path, local.location) == (hit["heading_path"], hit["location"])


def test_search_takes_a_filter_and_says_when_it_keeps_nothing(shared_client, cli_indexed) -> None:
    """`filter` narrows the hits to the documents it keeps (k of them when k pass), and a
    filter that keeps no document answers no hit with a note saying so."""
    everything = shared_client.post("/v1/search", json={"query": QUERY, "k": 10})
    assert everything.status_code == 200, everything.text
    paths = {h["path"] for h in everything.json()["data"]}
    assert len(paths) > 1
    keep = sorted(paths)[-1]
    narrowed = shared_client.post(
        "/v1/search", json={"query": QUERY, "k": 3, "filter": {"path": [keep]}}
    )
    assert narrowed.status_code == 200, narrowed.text
    hits = narrowed.json()["data"]
    assert hits and {h["path"] for h in hits} == {keep}
    assert narrowed.json()["note"] is None
    none = shared_client.post(
        "/v1/search", json={"query": QUERY, "filter": {"modified_before": "1990-01-01"}}
    )
    assert none.status_code == 200 and none.json()["data"] == []
    assert none.json()["note"] == "no document passes the filter"


@pytest.mark.parametrize(
    "body, param",
    [
        ({"query": QUERY, "filtre": {"type": "pdf"}}, "filtre"),
        ({"query": QUERY, "filter": {"kind": "pdf"}}, "filter.kind"),
        ({"query": QUERY, "filter": {"type": "pdff"}}, "filter.type"),
        ({"query": QUERY, "filter": {"modified_after": "soon"}}, "filter.modified_after"),
        ({"query": QUERY, "modified_before": "soon"}, "modified_before"),
        ({"query": QUERY, "path": "a/", "filter": {"path": "a/"}}, "filter"),
    ],
)
def test_an_unknown_field_or_a_bad_filter_is_a_422_naming_it(
    shared_client, cli_indexed, body, param
) -> None:
    r = shared_client.post("/v1/search", json=body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["message"].startswith(f"{param}: expected "), error


def test_the_filter_fields_are_taken_flat_as_the_cli_takes_them(shared_client, cli_indexed) -> None:
    """`path`, `type`, `modified_after` and `modified_before` flat narrow as inside
    `filter` do, the path as a hit shows it (its folder's name first) or from its folder."""
    first = shared_client.post("/v1/search", json={"query": QUERY, "k": 10}).json()["data"]
    keep = first[-1]
    shown = f"{keep['root']}/{keep['path']}"
    answers = [
        shared_client.post("/v1/search", json={"query": QUERY, "k": 3, **body})
        for body in (
            {"path": shown, "type": ".txt", "modified_after": "1990-01-01"},
            {"filter": {"path": [shown], "type": [".txt"], "modified_after": "1990-01-01"}},
            {"path": keep["path"]},
        )
    ]
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    hits = [[(h["root"], h["path"], h["chunk_id"]) for h in a.json()["data"]] for a in answers]
    assert hits[0] and hits[0] == hits[1] == hits[2]
    assert {path for _, path, _ in hits[0]} == {keep["path"]}


def test_every_request_schema_refuses_unknown_fields(shared_client) -> None:
    """The OpenAPI schema says so (`additionalProperties: false`) for every request body."""
    schemas = shared_client.get("/openapi.json").json()["components"]["schemas"]
    requests = [name for name in schemas if name.endswith("Request")]
    assert {"SearchRequest", "EmbeddingRequest", "JobRequest", "SearchFilterRequest"} <= set(
        requests
    )
    assert all(schemas[name].get("additionalProperties") is False for name in requests), {
        name: schemas[name].get("additionalProperties") for name in requests
    }
