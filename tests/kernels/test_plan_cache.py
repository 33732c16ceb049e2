"""Plans are keyed on geometry: packed calls of any make-up within a bucket share one plan,
and `attnswitch.stats()` reports the cache's hits and misses."""

from __future__ import annotations

import numpy as np
import torch

import attnswitch as asw
from attnswitch.kernels.contract import validate


def _packed(lengths, hq=4, hkv=2, d=16):
    total = sum(lengths)
    g = torch.Generator().manual_seed(len(lengths))
    q = torch.randn(total, hq, d, generator=g)
    k = torch.randn(total, hkv, d, generator=g)
    cu = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int32)
    return q, k, k, dict(cu_seqlens_q=cu, cu_seqlens_k=cu, causal=True)


def _lookups():
    plans = asw.stats()["plans"]
    return plans["hits"], plans["misses"]


def test_packed_batches_of_new_make_up_hit_the_plan_of_their_bucket():
    # N in 5..8 and longest 17..32: one bucket for each; lengths and totals all different
    batches = [
        (20, 9, 17, 30, 1),
        (32, 31, 5, 2, 8, 1),
        (18, 18, 18, 18, 18, 18),
        (25, 3, 3, 3, 3, 3, 20, 10),
    ]
    q, k, v, kw = _packed(batches[0])
    asw.attention(q, k, v, **kw)  # warm-up: the bucket's first call plans (and verifies,
    asw.attention(q, k, v, **kw)  # which records a verdict: the next call plans once more)
    hits, misses = _lookups()
    for lengths in batches[1:]:
        q, k, v, kw = _packed(lengths)
        asw.attention(q, k, v, **kw)
    after = _lookups()
    assert (after[0] - hits, after[1] - misses) == (len(batches) - 1, 0)
    assert asw.stats()["plans"]["hit_rate"] == after[0] / sum(after)


def test_geometry_outside_the_bucket_plans_again():
    q, k, v, kw = _packed((20, 9, 17, 30, 1))
    asw.attention(q, k, v, **kw)
    misses = _lookups()[1]
    q, k, v, kw = _packed((100, 9, 17, 30, 1))  # longest 100: another bucket
    asw.attention(q, k, v, **kw)
    assert _lookups()[1] == misses + 1


def test_window_bounds_split_plans_within_a_bucket():
    """A window reaching past the longest sequence restricts nothing there: the effective
    bounds differ, and a backend's rules may read them, so the key tells them apart."""
    q, k, v, kw = _packed((20, 9, 17, 30, 1))
    narrow = validate(q, k, v, **kw, window=(25, 0))  # bounds (25, 0): longest is 30
    q, k, v, kw = _packed((20, 9, 17, 25, 1))
    wide = validate(q, k, v, **kw, window=(25, 0))  # reaches every key: bounds (-1, 0)
    assert narrow.bounds != wide.bounds
    assert narrow.plan_key != wide.plan_key


def test_explain_describes_the_callers_own_call():
    first = _packed((20, 9, 17, 30, 1))
    second = _packed((32, 31, 5, 2, 8, 1))
    asw.explain(*first[:3], **first[3])
    plan = asw.explain(*second[:3], **second[3])
    assert plan.call.seqlens_q == (32, 31, 5, 2, 8, 1)
    assert "one call per sequence (6)" in str(plan)


def test_dense_calls_are_keyed_on_their_exact_shape():
    q = torch.randn(2, 9, 4, 16)
    k = torch.randn(2, 13, 2, 16)
    a, b = validate(q, k, k), validate(q, k[:, :12], k[:, :12])
    assert a.plan_key == validate(q.clone(), k.clone(), k.clone()).plan_key
    assert a.plan_key != b.plan_key
