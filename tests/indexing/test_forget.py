"""`forget` removes a file or a folder of an indexed root from the index, with its chunks
and vectors, on both stores; search no longer finds them; a path not in the index is
refused with its name, removing nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnswitch.indexing.forget import NotIndexedError, forget
from attnswitch.indexing.location import open_store
from attnswitch.jobs.run import RunOptions, run

OPTIONS = RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=8, read_workers=0)


def test_forget_a_file_then_a_folder(docs: Path, encoder, location) -> None:
    (docs / "postgresql" / "tutorial-start.html").rename(docs / "start.html")
    with open_store(location) as store:
        run(docs, store, OPTIONS, get_encoder=lambda: encoder)
        total = store.count()
        gone = {c.id for c in store.document_chunks(docs, "start.html")}
        assert gone and store.status().documents == 4

        done = forget(docs / "start.html", store)
        assert (done.documents, done.removed) == (1, {str(docs.resolve()): 1})
        assert store.sources(docs) == {
            "postgresql/tutorial-advanced.html",
            "postgresql/tutorial-update.html",
            "postgresql/tutorial-conclusion.html",
        }
        assert store.count() == total - len(gone)
        ids, vectors = store.vectors()
        assert not gone & set(ids.tolist())
        found = {cid for cid, _ in store.dense(vectors[:1], 100)[0]}
        assert not gone & found and found
        assert not gone & {cid for cid, _ in store.keyword("PostgreSQL tutorial", 1000)}

        assert forget(docs / "postgresql", store).documents == 3
        assert store.sources(docs) == set() and store.count() == 0


def test_forget_refuses_a_path_not_in_the_index(
    docs: Path, tmp_path: Path, encoder, location
) -> None:
    with open_store(location) as store:
        run(docs, store, OPTIONS, get_encoder=lambda: encoder)
        before = store.count()
        for path in (
            docs / "postgresql" / "nothing.html",
            tmp_path / "elsewhere",
            docs / "postgresql" / "tutorial-start",
        ):  # a prefix is not a folder
            with pytest.raises(NotIndexedError, match=str(path)):
                forget(path, store)
        assert store.count() == before and len(store.sources(docs)) == 4
        # the whole root
        assert forget(docs, store).documents == 4 and store.roots() == []
