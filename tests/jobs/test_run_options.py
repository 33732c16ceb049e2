"""A run's options (jobs/options.py): one part per stage, each option defined once, built
from the front ends' flat keywords (`RunOptions.of`), checked with the same messages."""

from __future__ import annotations

import dataclasses

import pytest

import attnswitch
from attnswitch.errors import ConfigError
from attnswitch.indexing.store import StoreInputError
from attnswitch.jobs import run as run_module
from attnswitch.jobs.options import (
    PARTS,
    ChunkOptions,
    EncodeOptions,
    ReadOptions,
    RunOptions,
)


def test_each_flat_keyword_belongs_to_one_part() -> None:
    names = [f.name for part in PARTS.values() for f in dataclasses.fields(part)]
    assert len(names) == len(set(names)), names
    assert set(RunOptions.flat_names()) == {*names, "hourly_usd"}
    assert set(PARTS) == {"read", "chunk", "encode"}


def test_flat_keywords_land_in_their_part() -> None:
    o = RunOptions.of(
        ocr_max_pages=3, read_workers=0, max_tokens=64, overlap=8, layout="packed", hourly_usd=1.5
    )
    assert o.read == ReadOptions(ocr_max_pages=3, read_workers=0)
    assert o.chunk == ChunkOptions(max_tokens=64, overlap=8)
    assert o.encode == EncodeOptions(layout="packed")
    assert o.hourly_usd == 1.5
    assert RunOptions.of(**o.flat()) == o
    assert o.replace(max_tokens=32).chunk.max_tokens == 32 and o.chunk.max_tokens == 64
    assert RunOptions.of() == RunOptions()


def test_an_unknown_keyword_is_named() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_tokenz'"):
        RunOptions.of(max_tokenz=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'read'"):
        RunOptions.of(read=ReadOptions())


@pytest.mark.parametrize(
    "flat,message",
    [
        ({"ocr_max_pages": 0}, "ocr_max_pages: expected >= 1, got 0"),
        ({"read_workers": -1}, "read_workers: expected >= 0, got -1"),
        ({"read_timeout_s": 0}, "read_timeout_s: expected > 0, got 0"),
        ({"max_bytes": 0}, "max_bytes: expected >= 1, got 0"),
        ({"chunking": "pages"}, "chunking: expected one of blocks, windows, got 'pages'"),
        ({"chunks_per_call": 0}, "chunks_per_call: expected >= 1, got 0"),
        ({"layout": "ragged"}, "layout: expected one of padded, packed, got 'ragged'"),
        ({"hourly_usd": -1.0}, "hourly_usd: expected >= 0, got -1.0"),
    ],
)
def test_bad_values_are_named(flat: dict, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        RunOptions.of(**flat)
    assert str(error.value) == message


def test_the_python_call_takes_the_flat_keywords(tmp_path) -> None:
    # routed to ReadOptions and checked there, before any store is made
    with pytest.raises(ConfigError, match="^ocr_max_pages: expected >= 1, got 0$"):
        attnswitch.index(tmp_path, tmp_path / "db", ocr_max_pages=0)
    with pytest.raises(StoreInputError, match="^options: expected fields of RunOptions"):
        attnswitch.index(tmp_path, tmp_path / "db", read_timeout=3)
    assert not (tmp_path / "db").exists()


def test_old_imports_keep_working() -> None:
    assert run_module.RunOptions is RunOptions
