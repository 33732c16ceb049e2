"""Fixtures of the pipeline tests: a copy of a few real corpus documents, the model,
loaded once per test process, a local Ray cluster for the Ray tests, and a store location
of each backend (the PostgreSQL cluster itself is tests/conftest.py's `pg_cluster`)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from corpus_testing import copy_corpus

# Small real documents: four short html pages (19 chunks of 32 tokens), and six documents
# of three formats (html, reStructuredText, pdf; 66 such chunks).
SMALL = ("postgresql/tutorial-start.html", "postgresql/tutorial-advanced.html",
         "postgresql/tutorial-update.html", "postgresql/tutorial-conclusion.html")
LARGER = SMALL + ("sqlite/copyright-release.pdf", "python-tutorial/index.rst.txt")


@pytest.fixture(scope="session")
def encoder():
    """The default model on the default engine, float32 (what `run` uses by default)."""
    from attnswitch.engines import get_engine

    return get_engine()


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """A copy of four short html pages."""
    return copy_corpus(tmp_path / "docs", SMALL)


@pytest.fixture
def more_docs(tmp_path: Path) -> Path:
    """A copy of six documents (html, rst, pdf)."""
    return copy_corpus(tmp_path / "more", LARGER)


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster (`ray.cluster_utils.Cluster`) of one head node with 2 CPUs, this
    process connected to it. Tests may add nodes and must remove them. Each xdist worker
    that runs one of them starts its own cluster: their `xdist_group("ray")` mark is inert
    with pytest 9.2 and pytest-xdist 3.8 (see tests/engines/test_quantize.py)."""
    ray = pytest.importorskip("ray", reason="Ray is an optional extra (attnswitch[ray])")
    pytest.importorskip("ray.data", reason="Ray Data is part of the ray extra")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "include_dashboard": False, "object_store_memory": 300 * 2**20})
    try:
        ray.init(address=cluster.address, logging_level=logging.WARNING)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture(params=["sqlite", "postgres"])
def location(request, tmp_path: Path) -> str | Path:
    """Where a fresh store lives, per backend: a SQLite file, or a new database on the test
    cluster (`open_store(location)` opens either)."""
    if request.param == "postgres":
        return request.getfixturevalue("pg_url")
    return tmp_path / "db" / "index.sqlite3"


@pytest.fixture(scope="session")
def model_frameworks() -> tuple[str, ...]:
    """Modules a search must not import to open a store and answer from it (encoding the
    query is the model's part, apart): each costs seconds of a cold CLI search."""
    return ("torch", "transformers", "jax", "sentence_transformers", "onnxruntime",
            "openvino", "ray", "tensorflow")
