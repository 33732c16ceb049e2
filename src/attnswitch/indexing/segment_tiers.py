"""When a store's segments of full vectors merge (docs/architecture.md, "The full vectors'
segments"): the policy both stores share (`postgres_segments`, `sqlite_segments`).

A segment's tier counts its vectors in powers of `FANIN` past the size a tail is sealed at;
after each seal, the newest `FANIN` segments are merged into one while they share a tier, as
a log-structured merge tree merges its runs, while together they hold at most `LARGEST`
vectors. So a store holds O(log n) segments (at most `FANIN` - 1 a tier between merges,
plus the segments the size cap keeps apart) and each vector is built into a graph O(log n)
times.
"""

from __future__ import annotations

from collections.abc import Sequence

# How many segments of one tier are merged into one.
FANIN = 4
# A merge makes no segment of more vectors than this, which bounds what one build holds in
# memory: one usearch graph of 2 M held 2,353 MiB while it was built (SQLite's writer);
# pgvector's build holds about 1.5 KB a 384-dimension vector (PostgreSQL's server,
# `postgres_segments.build_memory_kb`). Past it a store keeps several top segments, each
# walked by a search, instead of building most of the store again at each top merge.
LARGEST = 2**21


def tier(rows: int, seal_at: int) -> int:
    """A segment's tier: the power of `FANIN` of its rows over `seal_at`, rounded down (0
    from `seal_at` rows, 1 from `FANIN` x `seal_at`, ...; negative below `seal_at`, for the
    small segments a store's sync seals, so that three of them are not merged with a large
    one, whose build would cost the large one's rows every few syncs)."""
    level, low = 0, max(1, seal_at)
    while rows >= low * FANIN:
        level, low = level + 1, low * FANIN
    while rows < low and low > 1:
        level, low = level - 1, max(1, low // FANIN)
    return level


def merge_count(rows: Sequence[int], seal_at: int, largest: int | None = None) -> int:
    """How many of the newest segments to merge into one now, given every segment's
    vectors `rows` (oldest first): `FANIN` when the newest `FANIN` share a tier (and, with
    `largest`, hold at most that many together: a bound on what one build holds in
    memory), else 0."""
    newest = rows[-FANIN:]
    if len(newest) < FANIN or len({tier(r, seal_at) for r in newest}) != 1:
        return 0
    if largest is not None and sum(newest) > largest:
        return 0
    return FANIN


__all__ = ["FANIN", "LARGEST", "merge_count", "tier"]
