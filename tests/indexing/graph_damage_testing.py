"""Damage to a saved usearch graph's structure, as the HNSW tests of both vector sets make
it (tests/indexing/test_ann.py, test_quick_graph.py): the layout is in
`indexing/hnsw_file.py`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnswitch.indexing.ann import CONNECTIVITY

DAMAGES = (
    "500 bytes flipped in the last 7%",
    "neighbour slots past the end",
    "counts past the connectivity",
)


def graph_layout(graph: Path) -> tuple[int, int, int]:
    """(offset of the node levels table, node count, base connectivity) of a usearch file."""
    data = graph.read_bytes()
    rows, cols = np.frombuffer(data[:8], "<u4")
    start = 8 + int(rows) * int(cols) + 64
    size, _, base, _, _ = np.frombuffer(data[start : start + 40], "<u8")
    return start + 40, int(size), int(base)


def damage_graph(graph: Path, damage: str) -> None:
    """Write `graph` again with one of `DAMAGES`, its size unchanged."""
    data = bytearray(graph.read_bytes())
    levels_at, size, base = graph_layout(graph)
    if damage.startswith("500"):
        for seed in range(4):  # issue 41 replayed: it crashed usearch in some runs
            for i in np.random.default_rng(seed).integers(int(len(data) * 0.93), len(data), 500):
                data[i] ^= 0xFF
    else:  # every node's level-0 list: its first slot far past the node count, or its count
        levels = np.frombuffer(bytes(data[levels_at : levels_at + 2 * size]), "<i2")
        sizes = 10 + 4 + 4 * base + levels.astype(np.int64) * (4 + 4 * CONNECTIVITY)
        for offset in levels_at + 2 * size + np.concatenate(([0], np.cumsum(sizes[:-1]))):
            if damage == "neighbour slots past the end":
                data[offset + 14 : offset + 18] = np.uint32(0x7FFFFFF0).tobytes()
            else:
                data[offset + 10 : offset + 14] = np.uint32(0x00FFFFFF).tobytes()
    graph.write_bytes(bytes(data))
