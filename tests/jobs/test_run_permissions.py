"""A run records who may read each document, and a chmod, chown or ACL change of a file or
of a folder above it, followed by `run` or seen by `watch`, changes a reader's results
without reading or encoding anything again (counted by the summary)."""

from __future__ import annotations

import os
import queue
import threading
import time

import pytest

from attnswitch.indexing.access import Reader
from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.location import open_store
from attnswitch.jobs.run import RunOptions, run
from attnswitch.jobs.watch import watch
from permission_tree import kernel_reads, permission_tree, principal, require, setfacl

OPTIONS = RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=8, read_workers=0)
WAIT_S = 120
TEXT = "Notes kept in {path}: the heron fishes at the pond while the otter sleeps.\n"


@pytest.fixture
def tree():
    require()
    with permission_tree(TEXT) as top:
        yield top


def _readable(store, top, who) -> set[str]:
    """The sources a search as `who` may return."""
    where = SearchFilter.for_reader(None, Reader(who.name, who.groups))
    ids = set(store.allowed_documents(where))
    key = str(top.resolve())
    return {s for s in store.sources(key) if store.lookup(key, s).id in ids}


def _kernel(top, who, sources) -> set[str]:
    answers = kernel_reads(who, [top / s for s in sources])
    return {s for s, ok in zip(sources, answers, strict=True) if ok}


def test_a_chmod_and_an_acl_change_reach_the_index_without_encoding(
    location, tree, encoder
) -> None:
    daemon, bin_ = principal("daemon"), principal("bin")
    with open_store(location) as store:
        first = run(tree, store, OPTIONS, get_encoder=lambda: encoder)
        assert first.new == first.indexed > 0 and first.permissions_changed == 0
        sources = sorted(store.sources(str(tree.resolve())))
        for who in (daemon, bin_):
            assert _readable(store, tree, who) == _kernel(tree, who, sources)
        assert "open/public.txt" in _readable(store, tree, daemon)

        (tree / "open" / "public.txt").chmod(0o600)  # a file
        os.chmod(tree / "bin-team", 0o755)  # a folder: its file's chain changes
        setfacl(tree / "closed", "u:daemon:x")  # an ACL on a folder
        again = run(tree, store, OPTIONS, get_encoder=lambda: encoder)
        assert again.permissions_changed == 3
        assert (again.chunks_encoded, again.chunks_quick, again.new, again.changed) == (0, 0, 0, 0)
        assert again.unchanged == first.indexed
        for who in (daemon, bin_):
            assert _readable(store, tree, who) == _kernel(tree, who, sources)
        got = _readable(store, tree, daemon)
        assert "open/public.txt" not in got
        assert {"bin-team/plan.txt", "closed/public.txt"} <= got

        third = run(tree, store, OPTIONS, get_encoder=lambda: encoder)
        assert third.permissions_changed == 0


def test_watch_records_a_folder_chmod_without_encoding(tmp_path, tree, encoder) -> None:
    location = tmp_path / "db" / "index.sqlite3"
    daemon = principal("daemon")
    batches: queue.Queue = queue.Queue()
    stop = threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            with open_store(location) as store:
                watch(
                    tree,
                    store,
                    OPTIONS,
                    get_encoder=lambda: encoder,
                    stop_event=stop,
                    debounce_ms=300,
                    on_batch=lambda summary, _: batches.put(summary),
                )
        except BaseException as exc:
            errors.append(exc)
            batches.put(None)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        first = batches.get(timeout=WAIT_S)
        assert first is not None and first.new > 0, errors
        with open_store(location) as store:
            assert "open/public.txt" in _readable(store, tree, daemon)
        os.chmod(tree / "open", 0o700)
        deadline, seen = time.monotonic() + WAIT_S, []
        while sum(s.permissions_changed for s in seen) < 4:  # the files of open/
            summary = batches.get(timeout=max(deadline - time.monotonic(), 0.01))
            assert summary is not None, errors
            seen.append(summary)
        assert sum(s.chunks_encoded + s.chunks_quick for s in seen) == 0
        with open_store(location) as store:
            assert not {p for p in _readable(store, tree, daemon) if p.startswith("open/")}
    finally:
        stop.set()
        thread.join(WAIT_S)
    assert not thread.is_alive() and not errors
