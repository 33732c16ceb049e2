"""The front ends (the command line, the service, the integrations and the package root's
facade) stand on the one definition of a search (docs/architecture.md, "The service"),
checked from the source with `ast` (nothing is imported for the first two checks):

- no front end reaches a store: it imports no store module (`STORE_MODULES`, nor names
  one in a string, as `importlib.import_module` would take it), neither `sqlite3` nor
  `psycopg`, and writes no SQL (`SQL`: a string literal that reads as a statement);
- a filter field's name or a mode's name (`NAMES`) is a string literal in the modules
  that define them only (`indexing/requests.py`, `indexing/filters.py`), in the Python
  sources and in the page's static files alike;
- what each front end offers (the HTTP schema, the MCP tool, the CLI options, the page's
  controls, the adapters' search spec) is exactly those modes and fields.

Docstrings are prose, not code: a word in one is no literal. Exemptions carry their reason;
each check is also run on a small package written to break it, so that it can fail.
"""

from __future__ import annotations

import ast
import html.parser
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import MappingProxyType

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "attnswitch"

# The front ends, as paths below the package: packages end with "/".
FRONT_ENDS = ("cli/", "service/", "integrations/", "__init__.py")
STORE_MODULES = tuple(
    f"attnswitch.indexing.{name}"
    for name in (
        "store",
        "store_base",
        "store_sqlite",
        "store_postgres",
        "sqlite_schema",
        "postgres_upgrades",
        "location",
    )
)
# `attnswitch.indexing.store_errors` is no store module: it is the errors' module (the
# exceptions a front end words for its user, and `describe`), which front ends may import.
DATABASE_LIBRARIES = ("sqlite3", "psycopg")
SQL = re.compile(
    r"\bSELECT\b[\s\S]*\bFROM\b|\bINSERT\s+(?:OR\s+\w+\s+)?INTO\b|\bUPDATE\s+\w+\s+SET\b"
    r"|\bDELETE\s+FROM\b|\bCREATE\s+(?:TEMP\w*\s+|VIRTUAL\s+)?TABLE\b|\bPRAGMA\s+\w+"
)
# (module, what it imports) -> why it may, for now.
STORE_EXEMPT: MappingProxyType[tuple[str, str], str] = MappingProxyType({})

NAMES = ("modified_after", "modified_before", "hybrid", "keyword", "dense")
# Where the names are defined: the one definition of a search.
DEFINITIONS = ("indexing/requests.py", "indexing/filters.py")
# Path below the package (a folder ends with "/") -> (the names allowed there, why).
NAMES_EXEMPT = MappingProxyType(
    {
        "kernels/": (
            ("dense",),
            "an attention mask or layout that is dense (not packed, not a callable), "
            "not a search mode",
        ),
        "integrations/transformers.py": (
            ("dense",),
            "a transformers attention mask in its dense form, not a search mode",
        ),
    }
)


def _parse(path: Path) -> ast.Module:
    # On a fresh thread, as tests/test_layers.py does (CPython 3.11's recursion
    # bookkeeping after another test's RecursionError).
    with ThreadPoolExecutor(max_workers=1) as fresh:
        return fresh.submit(ast.parse, path.read_text(), str(path)).result()


def _name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _below(path: Path, src: Path) -> str:
    """`path` below the package, with "/" separators ("cli/options.py")."""
    return path.relative_to(src / PACKAGE).as_posix()


def _matches(below: str, places: tuple[str, ...] | str) -> bool:
    places = (places,) if isinstance(places, str) else places
    return any(below.startswith(p) if p.endswith("/") else below == p for p in places)


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _strings(tree: ast.Module) -> Iterator[ast.Constant]:
    """The string literals of `tree` that are code (docstrings left out); an f-string's
    literal parts are among them."""
    prose = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in prose:
                yield node


def _imported(tree: ast.Module, package: str) -> Iterator[tuple[int, str]]:
    """(line, module) of every import, at module level or inside a function; `from A
    import b` gives both `A` and `A.b` (b may be a module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:
                yield node.lineno, f"{module}.{alias.name}"


def _forbidden(module: str) -> str | None:
    """The store module or database library `module` is or lies in, else None."""
    for name in STORE_MODULES + DATABASE_LIBRARIES:
        if module == name or module.startswith(name + "."):
            return name
    return None


def store_reaches(src: Path = SRC) -> list[str]:
    """Every place a front end imports a store module or a database library, names a store
    module in a string, or writes SQL: "path:line: what"."""
    found = []
    for path in sorted((src / PACKAGE).rglob("*.py")):
        below = _below(path, src)
        if not _matches(below, FRONT_ENDS):
            continue
        name, tree = _name(path, src), _parse(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        where = f"src/{PACKAGE}/{below}"
        for line, module in sorted(set(_imported(tree, package))):
            target = _forbidden(module)
            if target is not None and (name, target) not in STORE_EXEMPT:
                found.append(f"{where}:{line}: imports {target}")
        for node in _strings(tree):
            target = _forbidden(node.value)
            if target is not None and node.value == target and (name, target) not in STORE_EXEMPT:
                found.append(f"{where}:{node.lineno}: names {target} (a dynamic import)")
            elif SQL.search(node.value):
                found.append(f"{where}:{node.lineno}: SQL {node.value[:60]!r}")
    return sorted(set(found), key=_place)


class _Html(html.parser.HTMLParser):
    """The attribute values and the texts of a page, with their lines."""

    def __init__(self) -> None:
        super().__init__()
        self.values: list[tuple[int, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        line = self.getpos()[0]
        self.values += [(line, v) for _, v in attrs if v is not None]

    def handle_data(self, data: str) -> None:
        self.values.append((self.getpos()[0], data.strip()))


_JS_STRING = re.compile(r"""(["'`])((?:\\.|(?!\1).)*?)\1""")


def _literals(path: Path) -> Iterator[tuple[int, str]]:
    """(line, value) of the literals of a Python, JavaScript or HTML file: Python's string
    constants (not docstrings), JavaScript's quoted strings (comments left out), HTML's
    attribute values and texts."""
    if path.suffix == ".py":
        for node in _strings(_parse(path)):
            yield node.lineno, node.value
    elif path.suffix == ".js":
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith(("//", "/*", "*")):  # a comment
                continue
            for match in _JS_STRING.finditer(line):
                yield number, match.group(2)
    else:
        parser = _Html()
        parser.feed(path.read_text())
        yield from parser.values


def names_outside_definitions(src: Path = SRC) -> list[str]:
    """Every literal that is exactly a filter field's or a mode's name (`NAMES`) outside
    `DEFINITIONS` and the exemptions: "path:line: 'name'"."""
    found = []
    files = [p for ext in ("py", "js", "html") for p in (src / PACKAGE).rglob(f"*.{ext}")]
    for path in sorted(files):
        below = _below(path, src)
        if _matches(below, DEFINITIONS):
            continue
        allowed = {
            name
            for place, (names, _) in NAMES_EXEMPT.items()
            if _matches(below, place)
            for name in names
        }
        for line, value in _literals(path):
            if value in NAMES and value not in allowed:
                found.append(f"src/{PACKAGE}/{below}:{line}: {value!r}")
    return sorted(set(found), key=_place)


def _place(entry: str) -> tuple[str, int]:
    path, line, _ = entry.split(":", 2)
    return path, int(line)


# -- the checks on the package ----------------------------------------------------------


def test_no_front_end_reaches_a_store() -> None:
    assert store_reaches() == []


def test_mode_and_filter_names_are_written_in_one_place() -> None:
    assert names_outside_definitions() == []


def test_the_exemptions_still_apply_and_say_why() -> None:
    for (module, target), reason in STORE_EXEMPT.items():
        assert target in STORE_MODULES and len(reason) > 40, (module, target)
        path = SRC / (module.replace(".", "/") + ".py")
        assert any(_forbidden(m) == target for _, m in _imported(_parse(path), module)), module
    for place, (names, reason) in NAMES_EXEMPT.items():
        assert set(names) <= set(NAMES) and len(reason) > 40, place
        assert (SRC / PACKAGE / place).exists(), place


# -- the checks on a small package written to break them ---------------------------------


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_store_check_finds_imports_in_functions_dynamic_imports_and_sql(
    tmp_path: Path,
) -> None:
    src = _write(
        tmp_path,
        {
            "__init__.py": '"""SELECT the names FROM the table (prose)."""\n',
            "cli/__init__.py": "",
            "cli/run.py": "def f():\n    from attnswitch.indexing import store\n",
            "cli/ok.py": "from attnswitch.indexing.store_errors import StoreInputError\n",
            "service/__init__.py": "import sqlite3\n",
            "service/rows.py": 'def g(t):\n    return f"SELECT id FROM {t} WHERE x = ?"\n',
            "service/late.py": 'import importlib\nimportlib.import_module("attnswitch.indexing.location")\n',
            "integrations/pg.py": "from psycopg.rows import dict_row\nQ = 'PRAGMA data_version'\n",
            "indexing/store.py": "import sqlite3\nQ = 'SELECT 1 FROM t'\n",  # no front end
        },
    )
    assert store_reaches(src) == [
        "src/attnswitch/cli/run.py:2: imports attnswitch.indexing.store",
        "src/attnswitch/integrations/pg.py:1: imports psycopg",
        "src/attnswitch/integrations/pg.py:2: SQL 'PRAGMA data_version'",
        "src/attnswitch/service/__init__.py:1: imports sqlite3",
        "src/attnswitch/service/late.py:2: names attnswitch.indexing.location (a dynamic import)",
        "src/attnswitch/service/rows.py:2: SQL 'SELECT id FROM '",
    ]


def test_the_names_check_finds_literals_in_python_javascript_and_html(tmp_path: Path) -> None:
    src = _write(
        tmp_path,
        {
            "indexing/requests.py": 'HYBRID = "hybrid"\n',
            "indexing/filters.py": 'FIELDS = ("modified_after",)\n',
            "service/search.py": (
                '"""A hybrid search; modified_after bounds it."""\n'
                'def f(mode="hybrid"):\n    return {"modified_before": 1, "dense_rank": 2}\n'
            ),
            "kernels/mask.py": 'LAYOUT = "dense"\nMODE = "keyword"\n',
            "service/ui/app.js": (
                '// a "hybrid" search in a comment\nconst m = mode === "keyword";\n'
                "const x = `dense`; const y = 'hybrid mode';\n"
            ),
            "service/ui/index.html": (
                '<input name="modified_after" placeholder="dense or not">\n<b>hybrid</b>\n'
            ),
        },
    )
    assert names_outside_definitions(src) == [
        "src/attnswitch/kernels/mask.py:2: 'keyword'",
        "src/attnswitch/service/search.py:2: 'hybrid'",
        "src/attnswitch/service/search.py:3: 'modified_before'",
        "src/attnswitch/service/ui/app.js:2: 'keyword'",
        "src/attnswitch/service/ui/app.js:3: 'dense'",
        "src/attnswitch/service/ui/index.html:1: 'modified_after'",
        "src/attnswitch/service/ui/index.html:2: 'hybrid'",
    ]


# -- what each front end offers is the one definition ------------------------------------


def test_the_http_schema_offers_the_modes_fields_and_bounds() -> None:
    from attnswitch.indexing.filters import FIELD_HELP, FIELDS
    from attnswitch.indexing.records import MAX_EF_SEARCH, MAX_K
    from attnswitch.indexing.requests import DEFAULT_K, MODES, Mode
    from attnswitch.service.app import create_app
    from attnswitch.service.config import ServiceConfig

    schemas = create_app(ServiceConfig()).openapi()["components"]["schemas"]
    search, where = schemas["SearchRequest"]["properties"], schemas["SearchFilterRequest"]
    assert search["mode"]["enum"] == list(MODES) and search["mode"]["default"] == Mode.HYBRID.value
    assert (search["k"]["minimum"], search["k"]["maximum"], search["k"]["default"]) == (
        1,
        MAX_K,
        DEFAULT_K,
    )
    assert search["ef"]["anyOf"][0]["maximum"] == MAX_EF_SEARCH
    assert list(where["properties"]) == list(FIELDS)
    for name in FIELDS:
        assert FIELD_HELP[name][1:] in where["properties"][name]["description"]
        # the same fields flat, as the CLI, Python and MCP take them
        assert FIELD_HELP[name][1:] in search[name]["description"]


def test_the_mcp_tool_offers_the_modes_fields_and_bounds(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the mcp extra")
    import asyncio

    from attnswitch.indexing.diversity import GROUPS
    from attnswitch.indexing.filters import FIELD_HELP, FIELDS
    from attnswitch.indexing.records import MAX_K
    from attnswitch.indexing.requests import MODES
    from attnswitch.integrations.mcp import build_server

    tools = asyncio.run(build_server(tmp_path / "data").list_tools())
    schema = next(t for t in tools if t.name == "search").input_schema["properties"]
    assert list(schema) == ["query", "k", "mode", "group", *FIELDS]
    assert schema["mode"]["enum"] == list(MODES) and schema["k"]["maximum"] == MAX_K
    assert schema["group"]["enum"] == list(GROUPS)
    for name in FIELDS:
        assert FIELD_HELP[name][1:] in schema[name]["description"]


def test_the_cli_options_offer_the_modes_and_fields() -> None:
    import inspect

    from attnswitch.cli.options import FILTER_OPTIONS, ModeOption
    from attnswitch.cli.options import with_filter_options as options
    from attnswitch.indexing.filters import FIELDS
    from attnswitch.indexing.requests import MODES

    def command(query, mode=None, filters=None, as_json=False):  # type: ignore[no-untyped-def]
        pass

    assert list(inspect.signature(options(command)).parameters) == [
        "query",
        "mode",
        *FIELDS,
        "as_json",
    ]
    assert tuple(m.value for m in ModeOption.__origin__) == MODES
    assert list(FILTER_OPTIONS) == list(FIELDS)


def test_the_page_controls_offer_the_modes_and_fields() -> None:
    from attnswitch.indexing.filters import FIELD_HELP, FIELDS
    from attnswitch.indexing.requests import MODES, Mode
    from attnswitch.service.page import search_controls

    text = search_controls()
    radios = re.findall(r'<input type="radio" name="mode" value="(\w+)"([^>]*)>', text)
    assert [value for value, _ in radios] == list(MODES)
    assert [value for value, rest in radios if " checked" in rest] == [Mode.HYBRID.value]
    assert re.findall(r'data-filter="(\w+)"', text) == list(FIELDS)
    for name in FIELDS:
        assert html.escape(FIELD_HELP[name]) in text


def test_the_adapters_search_spec_takes_the_fields() -> None:
    import dataclasses

    from attnswitch.indexing.filters import FIELDS
    from attnswitch.integrations.index_client import SearchSpec

    fields = [f.name for f in dataclasses.fields(SearchSpec)]
    assert fields == ["k", "mode", *FIELDS, "group"]
    assert list(SearchSpec().filters()) == list(FIELDS)
