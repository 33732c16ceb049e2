"""Structural check of a saved usearch HNSW file, before usearch is let to walk it.

usearch trusts the graph it memory-maps: a neighbour slot past the node count, a node level
above the graph's, an upper-level neighbour that has no such level, or a neighbour count
above the connectivity is read as an address, and the search dies by SIGSEGV (a damaged
graph killed `attnswitch search` and the server, issue 41). usearch has no validating load,
so the layout it writes (`index_dense_gt::save`, usearch 2.x, read back by its `view`) is
checked here, vectorised with numpy over the graph section only (the vectors before it are
not read; `ann.HnswIndex` samples those against the store):

    u32 rows, u32 cols | rows * cols bytes of vectors | 64-byte head ("usearch", version
    u16 x3, metric, scalar, key and slot kinds u8, present u64, deleted u64, dimensions
    u64, multi) | graph: u64 size, connectivity, base connectivity, max level, entry slot
    | i16 level per node | per node: u64 key, i16 level, u32 count + base x u32 slots
    (level 0), then per upper level u32 count + connectivity x u32 slots.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

MAGIC = b"usearch"
MATRIX_HEAD = 8  # u32 rows, u32 cols
DENSE_HEAD = 64
GRAPH_HEAD = 40
NODE_HEAD = 10  # u64 key, i16 level
MAX_LEVEL = 64  # usearch draws levels geometrically: far below this for any real graph
BATCH = 1 << 15  # nodes gathered at once (bounds the index arrays' memory)


def graph_damage(path: Path, dim: int, item_bytes: int) -> str | None:
    """Why the usearch graph file at `path` (vectors of `dim` elements of `item_bytes`
    bytes each: 2 for the store's float16, `ann.ITEM_BYTES`) cannot be walked safely, or
    None when its structure is sound: every neighbour slot names a node, every count fits
    its level's connectivity, every upper-level neighbour has that level, and the entry
    node holds the top level."""
    data = np.memmap(path, dtype=np.uint8, mode="r")
    if len(data) < MATRIX_HEAD + DENSE_HEAD + GRAPH_HEAD:
        return f"{len(data)} bytes, shorter than the headers"
    rows, cols = (int(x) for x in data[:MATRIX_HEAD].view("<u4"))
    if cols != item_bytes * dim:
        return f"vectors of {cols} bytes, expected {item_bytes * dim}"
    head = MATRIX_HEAD + rows * cols
    if len(data) < head + DENSE_HEAD + GRAPH_HEAD:
        return "truncated before the graph"
    if bytes(data[head : head + len(MAGIC)]) != MAGIC:
        return "no usearch header after the vectors"
    if int(data[head + 33 : head + 41].view("<u8")[0]) != dim:
        return "its header names another dimension"
    start = head + DENSE_HEAD
    size, m, base, max_level, entry = (int(x) for x in data[start : start + GRAPH_HEAD].view("<u8"))
    if size != rows:
        return f"a graph of {size} nodes over {rows} vectors"
    if size == 0:  # usearch writes an empty graph's top level as -1
        return None if len(data) == start + GRAPH_HEAD else "bytes after an empty graph"
    if not (2 <= m <= base <= 1024) or max_level >= MAX_LEVEL:
        return f"connectivity {m}/{base}, top level {max_level}: out of range"
    if entry >= size:
        return f"entry slot {entry} of {size} nodes"
    levels_at = start + GRAPH_HEAD
    levels = data[levels_at : levels_at + 2 * size].view("<i2").astype(np.int64)
    if len(levels) != size or levels.min() < 0 or levels.max() > max_level:
        return "node levels outside 0..top level"
    if levels[entry] != max_level:
        return "the entry node is not on the top level"
    base_bytes, upper_bytes = 4 + 4 * base, 4 + 4 * m
    sizes = NODE_HEAD + base_bytes + levels * upper_bytes
    offsets = levels_at + 2 * size + np.concatenate(([0], np.cumsum(sizes[:-1])))
    if int(offsets[-1] + sizes[-1]) != len(data):
        return f"nodes end at byte {int(offsets[-1] + sizes[-1])} of {len(data)}"
    for first in range(0, size, BATCH):
        at = offsets[first : first + BATCH]
        own = _gather(data, at + 8, 2).view("<i2")[:, 0]
        if not np.array_equal(own, levels[first : first + BATCH]):
            return "a node's level differs from the level table"
        problem = _neighbours(data, at + NODE_HEAD, base, size, levels, 0)
        if problem:
            return problem
    for level in range(1, max_level + 1):
        nodes = np.flatnonzero(levels >= level)
        at = offsets[nodes] + NODE_HEAD + base_bytes + (level - 1) * upper_bytes
        for first in range(0, len(at), BATCH):
            problem = _neighbours(data, at[first : first + BATCH], m, size, levels, level)
            if problem:
                return problem
    return None


def _gather(
    data: npt.NDArray[np.uint8], at: npt.NDArray[np.int64], width: int
) -> npt.NDArray[np.uint8]:
    """`width` bytes from each offset in `at`: `[len(at), width]` uint8, contiguous."""
    return np.ascontiguousarray(data[at[:, None] + np.arange(width)[None, :]])


def _neighbours(
    data: npt.NDArray[np.uint8],
    at: npt.NDArray[np.int64],
    slots: int,
    size: int,
    levels: npt.NDArray[np.int64],
    level: int,
) -> str | None:
    """Check the neighbour lists (u32 count, `slots` u32) at offsets `at` on `level`."""
    block = _gather(data, at, 4 + 4 * slots).view("<u4")
    counts, ids = block[:, 0], block[:, 1:].astype(np.int64)
    if counts.max(initial=0) > slots:
        return f"a level-{level} node with {int(counts.max())} neighbours, at most {slots}"
    used = np.arange(slots)[None, :] < counts[:, None]
    if (ids[used] >= size).any():
        return f"a level-{level} neighbour slot past the {size} nodes"
    if level and (levels[ids[used]] < level).any():
        return f"a level-{level} neighbour without level {level}"
    return None
