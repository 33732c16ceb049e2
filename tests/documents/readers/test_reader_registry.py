"""The reader table: every extension to one reader, every reader importable, and a
package's reader registered through a real `attnswitch.readers` entry point."""

from __future__ import annotations

import importlib
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from attnswitch.documents.readers import registry
from attnswitch.documents.readers.blocks import ReadOptions
from attnswitch.documents.readers.dispatch import extract
from attnswitch.documents.readers.formats import detect
from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.store_errors import StoreInputError


def test_every_extension_belongs_to_one_reader() -> None:
    owners = Counter(ext for spec in registry.BUILTIN for ext in spec.extensions)
    assert [ext for ext, n in owners.items() if n > 1] == []
    assert len(registry.extension_kinds()) == len(owners)


@pytest.mark.parametrize("spec", registry.BUILTIN, ids=[s.kind for s in registry.BUILTIN])
def test_each_builtin_reader_names_a_function_that_exists(spec) -> None:
    # the lazy wrapper closes over the module and the function's name
    closure = dict(
        zip(spec.read.__code__.co_freevars, (c.cell_contents for c in spec.read.__closure__))
    )
    found = importlib.import_module(f"attnswitch.documents.readers.{closure['module']}")
    assert callable(getattr(found, closure["name"]))
    assert spec.read.__name__ == closure["name"]


@pytest.mark.parametrize(
    "ext, kind",
    sorted((ext, spec.kind) for spec in registry.BUILTIN for ext in spec.extensions if ext),
)
def test_a_file_named_with_an_extension_goes_to_its_reader(ext: str, kind: str) -> None:
    assert detect(f"file{ext}", b"plain words\n", 1 << 20).kind == kind


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """An installed distribution whose entry points name three readers: a new format, one
    that also claims `.pdf`, and one that claims the kind "pdf"."""
    (tmp_path / "attnswitch_plugin_reader.py").write_text(
        textwrap.dedent("""
        from attnswitch.documents.readers.blocks import Block, BlockKind, Extracted
        from attnswitch.documents.readers.registry import ReaderSpec

        def read_stencil(data, options):
            text = data.decode("utf-8").upper()
            return Extracted([Block(BlockKind.PARAGRAPH, text)], text, "utf-8")

        STENCIL = ReaderSpec("stencil", (".vss", ".pdf"), read_stencil)
        GRABBY = ReaderSpec("pdf", (".grab",), read_stencil)
    """)
    )
    dist = tmp_path / "attnswitch_plugin_reader-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: attnswitch-plugin-reader\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(
        "[attnswitch.readers]\nstencil = attnswitch_plugin_reader:STENCIL\n"
        "grabby = attnswitch_plugin_reader:GRABBY\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    registry.reset()
    yield
    monkeypatch.undo()
    registry.reset()


def test_a_package_registers_a_reader_that_cannot_take_a_builtin_s_place(plugin) -> None:
    with pytest.warns(UserWarning) as warned:
        table = registry.readers()
    messages = " | ".join(str(w.message) for w in warned)
    assert "reader 'pdf'" in messages and "skipped" in messages
    assert "extensions .pdf belong to readers pdf; left out" in messages
    assert table["stencil"].extensions == (".vss",)
    assert table["pdf"] is registry.BUILTIN[3] and registry.BUILTIN[3].kind == "pdf"
    found = detect("shapes.vss", b"a stencil", 1 << 20)
    assert found.kind == "stencil"
    assert extract(found.kind, found.data, ReadOptions()).text == "A STENCIL"
    assert detect("report.pdf", b"not a pdf", 1 << 20).kind == "pdf"
    # the search filter knows the new kind
    assert SearchFilter.of(type=("stencil",)) is not None


def test_without_the_package_its_kind_is_unknown() -> None:
    registry.reset()
    assert "stencil" not in registry.readers()
    with pytest.raises(StoreInputError, match="type"):
        SearchFilter.of(type=("stencil",))
