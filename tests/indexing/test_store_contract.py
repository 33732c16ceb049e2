"""The `Store` protocol is what both stores implement: every member it names exists on
`SQLiteStore` and `PostgresStore` with the protocol's parameters (names, kinds, defaults),
and a public method one store has and the other lacks is one of the few documented
store-specific ones, so code typed against `Store` cannot reach a method only one store
has. A real instance of each, opened through `open_store`, has every member."""

from __future__ import annotations

import inspect

import pytest

from attnswitch.indexing.location import open_store
from attnswitch.indexing.store import SQLiteStore, Store
from attnswitch.indexing.store_postgres import PostgresStore

STORES = [SQLiteStore, PostgresStore]
# public methods of one store only -> why they are not part of the protocol
STORE_SPECIFIC = {
    "chunk_log_ids": "SQLite: the HNSW sidecar's change log (indexing/ann.py)",
    "chunk_log_state": "SQLite: the HNSW sidecar's change log (indexing/ann.py)",
    "iter_vectors": "SQLite: the HNSW sidecar's rebuild reads vectors in slices",
    "max_chunk_id": "SQLite: the HNSW sidecar's freshness check",
    "reading": "SQLite: one read snapshot for the HNSW sidecar's catch-up",
    "sync_index": "SQLite: brings the HNSW sidecar up to date",
    "vectors_of": "SQLite: the HNSW sidecar's sampled and changed vectors",
}


def protocol_members() -> dict[str, object]:
    """The protocol's members: its methods and properties, and its annotated attributes."""
    members = {
        name: value
        for name, value in vars(Store).items()
        if not name.startswith("_") or name in ("__enter__", "__exit__")
    }
    members = {n: v for n, v in members.items() if callable(v) or isinstance(v, property)}
    members.update({name: None for name in Store.__annotations__})
    return members


def parameters(fn: object) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("store_class", STORES, ids=lambda c: c.__name__)
def test_every_protocol_method_has_the_protocol_s_parameters(store_class) -> None:
    for name, member in protocol_members().items():
        if member is None:  # an attribute: set by __init__, checked on instances below
            continue
        assert hasattr(store_class, name), f"{store_class.__name__}: expected {name}"
        if isinstance(member, property):
            assert isinstance(getattr(store_class, name), property), name
            continue
        want, got = parameters(member), parameters(getattr(store_class, name))
        assert got == want, f"{store_class.__name__}.{name}: expected {want}, got {got}"


def test_a_method_of_one_store_only_is_a_documented_one() -> None:
    public = [{n for n in dir(c) if not n.startswith("_")} for c in STORES]
    one_only = (public[0] ^ public[1]) - set(protocol_members())
    assert one_only == set(STORE_SPECIFIC), (
        f"expected the documented store-specific methods, got {sorted(one_only)}: add a "
        "method both stores need to the Store protocol"
    )


def test_a_real_store_of_each_kind_has_every_member(location) -> None:
    with open_store(location) as store:
        for name in protocol_members():
            assert hasattr(store, name), f"{type(store).__name__}: expected {name}"
        assert isinstance(store.location, str) and isinstance(store.ef_search, int)
