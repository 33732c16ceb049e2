"""`OpenIndexes`, the indexes `attnswitch.search` keeps open between calls, on both stores:
a kept index is used again and sees every write committed since; it is opened again when
its file was replaced, after an error and in a forked child; each thread has its own; at
most `most` stay open."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from test_index_open import DIM, fill

from attnswitch.documents.ingest import ingest
from attnswitch.indexing.index import Index, IndexMissingError
from attnswitch.indexing.open_indexes import OpenIndexes
from attnswitch.indexing.requests import SearchRequest
from attnswitch.indexing.store import ChunkRecord


def keyword(index: Index, query: str) -> list[str]:
    """The sources of a keyword search's hits (no model is loaded)."""
    hits = index.searcher().search(SearchRequest.of(query, 5, "keyword")).hits
    return [hit.source for hit in hits]


def add(location: str | Path, root: Path, name: str, text: str) -> None:
    """One more document of one chunk, written through a connection of its own."""
    (root / name).write_text(text)
    with Index.open_store(location) as store:
        (doc,) = [d for d in ingest(root) if d.source == name]
        vector = np.random.default_rng(1).normal(size=(1, DIM))
        store.write_document(doc, [ChunkRecord(text, 3, 0, len(text))], vector)


def test_a_kept_index_is_used_again_and_sees_later_writes(location, tmp_path: Path) -> None:
    fill(location, tmp_path / "docs")
    indexes = OpenIndexes()
    with indexes.using(location) as first:
        assert keyword(first, "checkpoint") == ["a.txt"]
        assert keyword(first, "zeppelin") == []
    add(location, tmp_path / "docs", "c.txt", "zeppelin hangar")
    with indexes.using(location) as second:
        assert second is first
        assert keyword(second, "zeppelin") == ["c.txt"]
    assert len(indexes) == 1
    indexes.close()
    assert len(indexes) == 0


def test_a_replaced_sqlite_file_is_opened_again(tmp_path: Path) -> None:
    location = tmp_path / "db" / "index.sqlite3"
    fill(location, tmp_path / "docs")
    indexes = OpenIndexes()
    with indexes.using(location) as first:
        assert keyword(first, "replication") == ["b.txt"]
    shutil.rmtree(location.parent)
    with pytest.raises(IndexMissingError), indexes.using(location):
        pass
    fill(location, tmp_path / "other")
    add(location, tmp_path / "other", "d.txt", "lighthouse keeper")
    with indexes.using(location) as again:
        assert again is not first
        assert keyword(again, "lighthouse") == ["d.txt"]


def test_an_index_that_raised_is_not_kept(tmp_path: Path) -> None:
    location = tmp_path / "db" / "index.sqlite3"
    fill(location, tmp_path / "docs")
    indexes = OpenIndexes()
    with pytest.raises(RuntimeError), indexes.using(location) as first:
        raise RuntimeError("a search failed")
    assert len(indexes) == 0
    with indexes.using(location) as second:
        assert second is not first
        assert keyword(second, "vacuum") == ["a.txt"]


def test_at_most_most_indexes_stay_open(tmp_path: Path) -> None:
    locations = [tmp_path / name / "index.sqlite3" for name in ("x", "y", "z")]
    for n, location in enumerate(locations):
        fill(location, tmp_path / f"docs{n}")
    indexes = OpenIndexes(most=2)
    opened = []
    for location in locations:
        with indexes.using(location) as index:
            opened.append(index)
    assert len(indexes) == 2
    with indexes.using(locations[0]) as index:  # the least recently used was closed
        assert index is not opened[0]
    with indexes.using(locations[2]) as index:
        assert index is opened[2]


def test_each_thread_has_its_own(tmp_path: Path) -> None:
    location = tmp_path / "db" / "index.sqlite3"
    fill(location, tmp_path / "docs")
    indexes = OpenIndexes()
    with indexes.using(location) as mine:
        pass
    seen: list[object] = []

    def search_there() -> None:
        with indexes.using(location) as theirs:
            seen.append(theirs)
            seen.append(keyword(theirs, "backup"))

    thread = threading.Thread(target=search_there)
    thread.start()
    thread.join()
    assert seen[0] is not mine and seen[1] == ["b.txt"]
    assert len(indexes) == 1


# Forks in a process of its own: the test process has JAX's threads, which a fork breaks.
FORKED = """
import os, sys
from attnswitch.indexing.open_indexes import OpenIndexes
from attnswitch.indexing.requests import SearchRequest
indexes = OpenIndexes()
def keyword(index):
    return [h.source for h in index.searcher().search(SearchRequest.of("analyze", 5, "keyword")).hits]
with indexes.using(sys.argv[1]) as index:
    parent = keyword(index)
pid = os.fork()
if pid == 0:
    kept = len(indexes)
    with indexes.using(sys.argv[1]) as index:
        ok = kept == 0 and keyword(index) == parent
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
with indexes.using(sys.argv[1]) as index:  # the parent's connection still works
    assert keyword(index) == parent == ["a.txt"], parent
print("child", os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_opens_its_own(tmp_path: Path) -> None:
    location = tmp_path / "db" / "index.sqlite3"
    fill(location, tmp_path / "docs")
    done = subprocess.run(
        [sys.executable, "-c", FORKED, str(location)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("child 0"), done.stdout


@pytest.mark.parametrize("most", [0, -1, 1.5, True])
def test_most_must_be_a_positive_count(most) -> None:
    with pytest.raises(ValueError, match="most: expected a positive number"):
        OpenIndexes(most=most)
