"""The structural check of a saved usearch graph (`hnsw_file.graph_damage`) on real files
written by usearch in the store's precision (float16, `ann.DTYPE`): sound after inserts and
deletes, each kind of damage named, a graph of float32 vectors (the format before) refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnswitch.indexing.ann import DTYPE, ITEM_BYTES
from attnswitch.indexing.hnsw_file import graph_damage

usearch_index = pytest.importorskip("usearch.index", reason="usearch is not installed")
DIM = 16


def saved(tmp_path: Path, n: int = 2000, removed: int = 0, dtype: str = DTYPE) -> Path:
    index = usearch_index.Index(ndim=DIM, metric="ip", dtype=dtype, connectivity=16)
    vectors = np.random.default_rng(0).normal(size=(n, DIM)).astype(np.float32)
    index.add(np.arange(1, n + 1, dtype=np.uint64), vectors, threads=1)
    if removed:
        index.remove(np.arange(1, removed + 1, dtype=np.uint64))
    path = tmp_path / "graph.hnsw"
    index.save(str(path))
    return path


@pytest.mark.parametrize("n, removed", [(2000, 0), (2000, 300), (1, 0), (0, 0)])
def test_a_graph_as_usearch_saved_it_is_sound(tmp_path: Path, n: int, removed: int) -> None:
    assert graph_damage(saved(tmp_path, n, removed), DIM, ITEM_BYTES) is None


def test_a_graph_of_float32_vectors_is_refused(tmp_path: Path) -> None:
    """A graph saved before the store kept float16 (usearch "f32"): its vectors are of
    another size than the store's, so it is not walked (`ann.HnswIndex` rebuilds it)."""
    assert ITEM_BYTES == 2
    assert graph_damage(saved(tmp_path, dtype="f32"), DIM, ITEM_BYTES) == (
        f"vectors of {4 * DIM} bytes, expected {2 * DIM}"
    )


def _levels_at(data: bytes) -> tuple[int, int]:
    rows, cols = np.frombuffer(data[:8], "<u4")
    start = 8 + int(rows) * int(cols) + 64
    return start + 40, int(np.frombuffer(data[start : start + 8], "<u8")[0])


@pytest.mark.parametrize(
    "damage, reason",
    [
        ("truncated", "nodes end at byte"),
        ("other dimension", "vectors of"),
        ("negative level", "node levels outside"),
        ("entry past the end", "entry slot"),
        ("slot past the end", "level-0 neighbour slot past"),
        ("count past the connectivity", "level-0 node with"),
    ],
)
def test_each_damage_is_named(tmp_path: Path, damage: str, reason: str) -> None:
    path = saved(tmp_path)
    data = bytearray(path.read_bytes())
    levels_at, size = _levels_at(bytes(data))
    first_node = levels_at + 2 * size
    if damage == "truncated":
        del data[-100:]
    elif damage == "other dimension":
        data[4:8] = np.uint32(ITEM_BYTES * DIM + 4).tobytes()
    elif damage == "negative level":
        data[levels_at + 2 : levels_at + 4] = np.int16(-3).tobytes()
    elif damage == "entry past the end":
        data[levels_at - 8 : levels_at] = np.uint64(size).tobytes()
    elif damage == "slot past the end":
        data[first_node + 10 : first_node + 18] = np.array([1, size], "<u4").tobytes()
    else:
        data[first_node + 10 : first_node + 14] = np.uint32(33).tobytes()
    path.write_bytes(bytes(data))
    assert reason in (graph_damage(path, DIM, ITEM_BYTES) or "")
