"""The contract's alignment, written once (`kernels/masks.py`): `diagonal_offset` and
`key_range` against the contract's definition spelled out position by position, on Python
ints and on arrays (every backend builds its masks and block skipping from these two)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from attnswitch.kernels import masks
from attnswitch.kernels.contract import attention_bounds

LENGTHS = [(3, 5), (5, 3), (4, 4), (1, 7), (7, 1)]
OPTIONS = [
    (True, None),
    (False, (2, 0)),
    (False, (0, 1)),
    (True, (3, 2)),
    (False, (-1, 2)),
    (False, (1, -1)),
]


def _contract(
    i: int, j: int, sq: int, sk: int, causal: bool, window: tuple[int, int] | None
) -> bool:
    """docs/architecture.md: query i attends key j iff j <= i + (Sk - Sq) under causal, and
    i + (Sk - Sq) - left <= j <= i + (Sk - Sq) + right under window (-1 unbounded)."""
    diag = i + sk - sq
    ok = not causal or j <= diag
    if window is not None:
        left, right = window
        ok &= (left < 0 or j >= diag - left) and (right < 0 or j <= diag + right)
    return ok


@pytest.mark.parametrize(("causal", "window"), OPTIONS)
@pytest.mark.parametrize(("sq", "sk"), LENGTHS)
def test_key_range_around_the_aligned_diagonal_is_the_contract(
    sq: int, sk: int, causal: bool, window: tuple[int, int] | None
) -> None:
    bounds = attention_bounds(causal, window, sq, sk)
    for i, j in itertools.product(range(sq), range(sk)):
        lowest, highest = masks.key_range(i + masks.diagonal_offset(sq, sk), bounds)
        inside = (lowest is None or j >= lowest) and (highest is None or j <= highest)
        assert inside == _contract(i, j, sq, sk, causal, window), (i, j)


@pytest.mark.parametrize(("causal", "window"), OPTIONS)
@pytest.mark.parametrize(("sq", "sk"), LENGTHS)
def test_position_mask_on_arrays_is_the_contract(
    sq: int, sk: int, causal: bool, window: tuple[int, int] | None
) -> None:
    mask = masks.position_mask(np.arange, sq, sk, attention_bounds(causal, window, sq, sk))
    want = np.array(
        [[_contract(i, j, sq, sk, causal, window) for j in range(sk)] for i in range(sq)]
    )
    got = np.ones((sq, sk), bool) if mask is None else np.broadcast_to(mask, (sq, sk))
    np.testing.assert_array_equal(got, want)


def test_offset_in_absolute_packed_rows_is_each_sequences_own() -> None:
    """With the sequences' end rows (`cu_seqlens[s + 1]`) as the lengths, the offset aligns
    absolute packed rows: query row r of sequence s meets the key row its own bottom-right
    alignment gives (sequences of 2/5, 4/1 and 3/3 queries/keys)."""
    cu_q, cu_k = np.array([0, 2, 6, 9]), np.array([0, 5, 6, 9])
    for s in range(3):
        len_q, len_k = cu_q[s + 1] - cu_q[s], cu_k[s + 1] - cu_k[s]
        for local in range(len_q):
            absolute = cu_q[s] + local + masks.diagonal_offset(cu_q[s + 1], cu_k[s + 1])
            assert absolute - cu_k[s] == local + masks.diagonal_offset(len_q, len_k)
            assert absolute - cu_k[s] == local + len_k - len_q
