"""The package's layers, checked from the source (ast; nothing is imported): every import,
at module level or inside a function, goes one way,

    attention <- integrations <- engines <- the package root's modules <- documents
        <- index <- jobs <- service <- the framework adapters (integrations' langchain,
        llamaindex, mcp and their helpers) <- cli <- the package root itself
        (`attnswitch/__init__.py`)

with observe, errors, plugins and the version as leaves, and the import graph has no
cycle (docs/architecture.md, "Layers"). The root module is the public facade: it
re-exports names of every layer (`attention`, `encode`, `search`, `index`, ...), so nothing
inside the package imports it. Typer lives only in the CLI, and the document engine
(documents, index, jobs) and the service reach engines only through the engine interface
and registry."""

from __future__ import annotations

import ast
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "attnswitch"

# Lower rank = lower layer; a module may import its own layer and the ones below.
LEAVES = (
    "attnswitch._version",
    "attnswitch.plugins",
    "attnswitch.runtimes",
    "attnswitch.observe",
    "attnswitch.errors",
    "attnswitch.provenance",
)
LAYERS = {
    "attnswitch.kernels": 1,
    "attnswitch.integrations": 2,
    "attnswitch.engines": 3,
    "attnswitch": 4,  # the root: public names (attention, explain, encode, ...)
    # The document engine: documents (readers, chunking), the index (stores, search), jobs
    # (runs, watch, Ray, the jobs table, the Python calls).
    "attnswitch.documents": 5,
    "attnswitch.indexing": 6,
    "attnswitch.jobs": 7,
    "attnswitch.service": 8,
    # The framework adapters sit in integrations/ but above the index and the service
    # (they search it, read documents with the document engine and serve MCP with the service's
    # auth); the Hugging Face integration stays below the engines.
    "attnswitch.integrations.index_client": 9,
    "attnswitch.integrations.extraction": 9,
    "attnswitch.integrations.langchain": 9,
    "attnswitch.integrations.llamaindex": 9,
    "attnswitch.integrations.mcp": 9,
    "attnswitch.integrations.mcp_env_key": 9,
    "attnswitch.cli": 10,
}
# The root module (`attnswitch/__init__.py`), above every layer; its other modules
# (`attnswitch.doctor`) are the layer "attnswitch" names.
FACADE = "attnswitch"
# The engine interface and registry: what the document engine and the service may import of engines.
ENGINE_INTERFACE = {
    "attnswitch.engines",
    "attnswitch.engines.base",
    "attnswitch.engines.model",
    "attnswitch.engines.registry",
    # the static model of the quick pass: made from a model, encoded by model2vec, no engine
    "attnswitch.engines.static_model",
}
CLI_ONLY_LIBRARIES = ("typer",)


def modules(src: Path = SRC) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules `name` imports, anywhere in its body: package modules resolved to the
    module itself (`from attnswitch.kernels import plan` is `attnswitch.kernels.plan`),
    other libraries by their top-level name."""
    # Parsed on a fresh thread: CPython 3.11 can leave a thread's recursion
    # bookkeeping off after a RecursionError that another test provoked and handled, and
    # its ast then raises "AST constructor recursion depth mismatch" (seen in CI).
    with ThreadPoolExecutor(max_workers=1) as fresh:
        tree = fresh.submit(ast.parse, path.read_text(), str(path)).result()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                child = f"{module}.{alias.name}"
                found.add(child if child in known else module)
    return {m if m.split(".")[0] == PACKAGE else m.split(".")[0] for m in found}


def graph(src: Path = SRC) -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    known = modules(src)
    return {
        name: {m for m in imports(name, path, known) if m in known and m != name}
        for name, path in known.items()
    }


def rank(module: str) -> int:
    """The module's layer; `__main__` modules are entry points, at the top."""
    if module.endswith(".__main__"):
        return max(LAYERS.values())
    if module == FACADE:
        return max(LAYERS.values()) + 1
    if any(module == leaf or module.startswith(leaf + ".") for leaf in LEAVES):
        return 0
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def upward(edges: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{a} (layer {rank(a)}) imports {b} (layer {rank(b)})"
        for a, targets in edges.items()
        for b in targets
        if rank(b) > rank(a)
    )


def test_no_module_imports_a_higher_layer() -> None:
    assert upward(graph()) == []


def test_the_import_graph_has_no_cycle() -> None:
    assert cycles(graph()) == []


def test_observe_is_a_leaf() -> None:
    edges = graph()
    out = {
        f"{a} imports {b}"
        for a, targets in edges.items()
        if a.startswith("attnswitch.observe")
        for b in targets
        if not b.startswith("attnswitch.observe")
    }
    assert out == set()


def test_typer_is_imported_by_the_cli_only() -> None:
    known = modules()
    users = sorted(
        name
        for name, path in known.items()
        if set(CLI_ONLY_LIBRARIES) & imports(name, path, known)
        and rank(name) < LAYERS["attnswitch.cli"]
    )
    assert users == []


@pytest.mark.parametrize(
    "layer",
    ["attnswitch.documents", "attnswitch.indexing", "attnswitch.jobs", "attnswitch.service"],
)
def test_engines_are_driven_through_their_interface(layer: str) -> None:
    edges = graph()
    concrete = sorted(
        f"{a} imports {b}"
        for a, targets in edges.items()
        if a.startswith(layer + ".")
        for b in targets
        if b.startswith("attnswitch.engines") and b not in ENGINE_INTERFACE
    )
    assert concrete == []


# The checks themselves, on a small package written for them: they must see what they guard.


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checks_find_an_upward_import_inside_a_function_and_a_cycle(tmp_path: Path) -> None:
    src = _write(
        tmp_path,
        {
            "__init__.py": "",
            "kernels/__init__.py": "",
            "kernels/plan.py": "def f():\n    from attnswitch.jobs import run\n",
            "kernels/verdicts.py": "from attnswitch.kernels import conformance\n",
            "kernels/conformance.py": "from . import verdicts\n",
            "jobs/__init__.py": "",
            "jobs/run.py": "import attnswitch.kernels.plan\n",
        },
    )
    edges = graph(src)
    assert upward(edges) == [
        "attnswitch.kernels.plan (layer 1) imports attnswitch.jobs.run (layer 7)"
    ]
    assert cycles(edges) == [
        ["attnswitch.jobs.run", "attnswitch.kernels.plan"],
        ["attnswitch.kernels.conformance", "attnswitch.kernels.verdicts"],
    ]
