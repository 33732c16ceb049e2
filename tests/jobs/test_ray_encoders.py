"""Encoder pools for Ray runs: how pools are sized from a cluster's resources (pure), and a
real encoder actor on a real local Ray: it plans its own engine, returns the engine's
vectors, reports what it ran on, and refuses model files that are not the driver's."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from attnswitch.jobs.ray_encoders import (
    READ_CPUS,
    PoolSpec,
    RayUnavailableError,
    import_ray,
    plan_pools,
)

TEXTS = [
    "VACUUM reclaims storage occupied by dead tuples.",
    "The UPDATE command changes the values of existing rows.",
    "A window function performs a calculation across a set of table rows " * 6,
    "SQLite is in the public domain.",
    "Lists are mutable sequences.",
]


def kinds(pools: list[PoolSpec]) -> dict[str, tuple[int, float]]:
    return {p.kind: (p.actors, p.num_cpus) for p in pools}


@pytest.mark.parametrize(
    "cluster, kw, expected",
    [
        # One node: one actor per CPU, sharing what reading and chunking leave.
        ({"CPU": 2}, {}, {"cpu": (2, 0.75)}),
        ({"CPU": 16}, {}, {"cpu": (16, 0.9687)}),
        ({"CPU": 2}, {"cpu_actors": 1}, {"cpu": (1, 1.0)}),
        # Several nodes: whole CPUs, so that some node keeps a whole CPU for reading.
        ({"CPU": 16}, {"nodes": 2}, {"cpu": (15, 1.0)}),
        ({"CPU": 16}, {"nodes": 2, "cpus_per_actor": 4}, {"cpu": (3, 4.0)}),
        ({"CPU": 16}, {"cpus_per_actor": 0.5}, {"cpu": (31, 0.5)}),
        # Accelerators: one actor per device, no CPU actors unless asked.
        ({"CPU": 32, "GPU": 4}, {"nodes": 4}, {"gpu": (4, 1.0)}),
        ({"CPU": 96, "TPU": 4}, {}, {"tpu": (4, 1.0)}),
        (
            {"CPU": 8, "GPU": 1, "TPU": 4},
            {"nodes": 3, "tpu_actors": 2, "cpu_actors": 3},
            {"gpu": (1, 1.0), "tpu": (2, 1.0), "cpu": (3, 1.0)},
        ),
    ],
)
def test_pools_are_sized_from_the_cluster(cluster, kw, expected) -> None:
    pools = plan_pools(cluster, **kw)
    assert kinds(pools) == expected
    held = sum(p.actors * p.num_cpus for p in pools)
    assert held <= cluster["CPU"] - READ_CPUS
    for p in pools:
        asks = p.ray_options()
        if p.kind == "gpu":
            assert asks == {"num_cpus": 1.0, "num_gpus": 1.0}
        elif p.kind == "tpu":
            assert asks == {"num_cpus": 1.0, "num_gpus": 0.0, "resources": {"TPU": 1.0}}
        else:
            assert asks == {"num_cpus": expected["cpu"][1], "num_gpus": 0.0}


@pytest.mark.parametrize(
    "cluster, kw, match",
    [
        ({"CPU": 8}, {"gpu_actors": 1}, r"gpu_actors: expected at most 0 \(the cluster's GPU"),
        ({"CPU": 8, "TPU": 4}, {"tpu_actors": 5}, "tpu_actors: expected at most 4"),
        ({"CPU": 2}, {"cpu_actors": 2, "cpus_per_actor": 1}, "expected at most 1 CPU actors"),
        ({"CPU": 2}, {"cpu_actors": 2, "nodes": 2}, "expected at most 1 CPU actors"),
        ({"CPU": 4, "GPU": 2}, {"cpu_actors": 2, "nodes": 2}, "leave less than 0.5"),
        ({"CPU": 0.5}, {}, "leave less than 0.5 of the cluster's 0.5 CPUs"),
        ({"CPU": 8}, {"cpu_actors": 0}, "at least one encoder actor"),
        ({"CPU": 8}, {"cpus_per_actor": 0}, "cpus_per_actor: expected > 0"),
        ({"CPU": 8}, {"cpu_actors": -1}, "cpu_actors: expected >= 0"),
    ],
)
def test_pools_the_cluster_cannot_hold_are_refused(cluster, kw, match) -> None:
    with pytest.raises(ValueError, match=match):
        plan_pools(cluster, **kw)


def test_a_missing_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails
    with pytest.raises(RayUnavailableError, match=r"pip install 'attnswitch\[ray\]'"):
        import_ray()


@pytest.mark.xdist_group("ray")
def test_an_encoder_actor_returns_the_engines_vectors(ray_cluster, encoder) -> None:
    from attnswitch.indexing.config import model_fingerprint
    from attnswitch.jobs.options import EncodeOptions
    from attnswitch.jobs.ray_encoders import EncoderPool

    pool = EncoderPool(
        [PoolSpec("cpu", 1, 1.0)],
        EncodeOptions(chunks_per_call=2),
        model_fingerprint(encoder.spec.path),
        in_flight=2,
    )
    try:
        (info,) = pool.start(timeout=300)
        assert info["kind"] == "cpu" and info["engine"] == "torch"
        assert info["device"] == "cpu" and info["threads"] == 1
        assert info["node_id"] == ray_cluster.head_node.node_id
        pool.submit(TEXTS, "a")
        pool.submit(TEXTS[::-1], "b")
        assert not pool.has_slot()  # two batches in flight on the one actor
        done = []
        while len(done) < 2:
            finished = pool.wait(timeout=300)
            assert finished, "no batch finished in 300 s"
            done += finished
    finally:
        pool.close()
    results = dict(done)
    want = encoder.encode(TEXTS)
    vectors, report = results["a"]
    np.testing.assert_allclose(vectors, want, atol=2e-5)
    np.testing.assert_allclose(results["b"][0], want[::-1], atol=2e-5)
    assert report["calls"] and report["seconds"] > 0 and report["pid"] == info["pid"]
    assert report["memory"]["samples"] >= 0 and report["peak_rss_mb"] > 0


@pytest.mark.xdist_group("ray")
def test_an_actor_refuses_model_files_that_are_not_the_drivers(ray_cluster) -> None:
    from attnswitch.jobs.options import EncodeOptions
    from attnswitch.jobs.ray_encoders import EncoderPool

    pool = EncoderPool([PoolSpec("cpu", 1, 1.0)], EncodeOptions(), "0" * 64)
    try:
        with pytest.raises(RuntimeError, match="expected the driver's model files"):
            pool.start(timeout=300)
    finally:
        pool.close()
