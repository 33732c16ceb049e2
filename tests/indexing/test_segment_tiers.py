"""When segments merge (`segment_tiers`): tiers in powers of `FANIN` of a segment's rows over
the seal size, below it too, and the newest `FANIN` merged only when they share one and fit
the size bound."""

from __future__ import annotations

import pytest

from attnswitch.indexing.segment_tiers import FANIN, merge_count, tier


@pytest.mark.parametrize(
    ("rows", "want"),
    [(100, 0), (399, 0), (400, 1), (1_599, 1), (1_600, 2), (99, -1), (25, -1), (24, -2), (1, -3)],
)
def test_a_tier_is_the_power_of_the_fanin_of_rows_over_the_seal_size(rows: int, want: int) -> None:
    assert FANIN == 4
    assert tier(rows, 100) == want


@pytest.mark.parametrize(
    ("rows", "largest", "want"),
    [
        ([100, 100, 100], None, 0),  # fewer than FANIN
        ([100, 100, 100, 100], None, 4),
        ([400, 100, 100, 100], None, 0),  # the oldest of the four is of a higher tier
        ([400, 100, 100, 100, 100], None, 4),  # the newest four
        ([160, 40, 40, 40], None, 0),  # small segments a sync sealed: not into a larger one
        ([40, 40, 40, 40], None, 4),
        ([400, 400, 400, 400], 1_500, 0),  # together over the bound
        ([400, 400, 400, 400], 1_600, 4),
    ],
)
def test_the_newest_segments_merge_when_they_share_a_tier_and_fit(
    rows: list[int], largest: int | None, want: int
) -> None:
    assert merge_count(rows, 100, largest) == want
