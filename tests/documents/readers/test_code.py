"""Source and config files of this repository read as code blocks with their language,
cut at blank lines, nothing lost."""

from __future__ import annotations

import pytest
from reader_sources import ROOT

from attnswitch.documents.readers.blocks import BlockKind, ReadOptions
from attnswitch.documents.readers.dispatch import read_named
from attnswitch.documents.readers.skip import Skip, Skipped


@pytest.mark.parametrize(
    ("path", "language"),
    [
        ("src/attnswitch/documents/readers/skip.py", "python"),
        ("pyproject.toml", "toml"),
        ("scripts/gpu_check.sh", "bash"),
        ("docs/results/cold_search.json", "json"),
    ],
)
def test_a_source_file_gives_its_code_and_language(path: str, language: str) -> None:
    text = (ROOT / path).read_text()
    got = read_named(path.rsplit("/", 1)[-1], text.encode(), ReadOptions())
    assert {b.kind for b in got.blocks} == {BlockKind.CODE}
    assert {b.language for b in got.blocks} == {language}
    lines = [line for line in text.splitlines() if line.strip()]
    assert [line for b in got.blocks for line in b.text.splitlines() if line.strip()] == lines


def test_blocks_end_at_blank_lines() -> None:
    source = b"import os\n\n\ndef f():\n    return 1\n\n    \nclass A:\n    pass\n"
    got = read_named("m.py", source, ReadOptions())
    assert [b.text for b in got.blocks] == [
        "import os",
        "def f():\n    return 1",
        "class A:\n    pass",
    ]


def test_binary_under_a_source_name_is_refused() -> None:
    with pytest.raises(Skipped) as caught:
        read_named("blob.py", b"\x00\x01\x02" * 100, ReadOptions())
    assert caught.value.skip is Skip.BINARY
