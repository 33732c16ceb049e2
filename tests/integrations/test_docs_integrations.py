"""docs/integrations.md's examples run as written, each in a fresh process started in a
folder laid out like the repository's root (its `examples/corpus/postgresql` holding four
real pages of the corpus, so that indexing takes seconds), and print what they promise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from adapter_testing import PAGES, copy_pages

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
SECTIONS = {
    "LangChain": ("langchain_core", "UPDATE weather"),
    "LlamaIndex": ("llama_index.core", "tutorial-update.html ['2.8. Updates']"),
    "MCP": ("mcp", "'search', 'get_document', 'index_status'"),
}


def example(section: str) -> str:
    """The first Python block under the page's `## section` heading."""
    text = DOC.read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", body, re.S).group(1)


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_the_example_runs(section: str, tmp_path: Path) -> None:
    framework, expected = SECTIONS[section]
    pytest.importorskip(framework)
    copy_pages(tmp_path / "examples" / "corpus", PAGES)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    done = subprocess.run(
        [sys.executable, "-c", example(section)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert expected in done.stdout, done.stdout
