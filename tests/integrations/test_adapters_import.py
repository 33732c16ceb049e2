"""`import attnswitch` imports no framework adapter nor any framework (LangChain,
LlamaIndex, the MCP SDK), and each adapter imports only its own framework: checked in a
fresh interpreter, from `sys.modules`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

FRAMEWORKS = {"langchain": "langchain_core", "llamaindex": "llama_index", "mcp": "mcp"}
CHECK = """
import json, sys
{imports}
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & {frameworks!r})
adapters = sorted(m for m in sys.modules if m in {adapters!r})
print(json.dumps([loaded, adapters]))
"""


def loaded_after(*imports: str) -> tuple[list[str], list[str]]:
    adapters = {f"attnswitch.integrations.{name}" for name in FRAMEWORKS}
    code = CHECK.format(
        imports="\n".join(imports), frameworks=set(FRAMEWORKS.values()), adapters=adapters
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    loaded, found = json.loads(done.stdout.splitlines()[-1])
    return loaded, found


def test_import_attnswitch_imports_no_framework() -> None:
    assert loaded_after("import attnswitch", "import attnswitch.integrations") == ([], [])


@pytest.mark.parametrize("adapter", sorted(FRAMEWORKS))
def test_an_adapter_imports_its_own_framework_only(adapter: str) -> None:
    pytest.importorskip(FRAMEWORKS[adapter])
    loaded, found = loaded_after(f"import attnswitch.integrations.{adapter}")
    assert found == [f"attnswitch.integrations.{adapter}"]
    # llama_index imports nothing of the others; the MCP SDK and LangChain neither
    assert loaded == [FRAMEWORKS[adapter]]
