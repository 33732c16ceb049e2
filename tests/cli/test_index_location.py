"""The index found with no `--db` (`indexing/location.py`), as a user meets it: `search`
from a subfolder of the folder that holds `.attnswitch/` (in a fresh process, the real
console entry), the `ATTNSWITCH_DB` variable, the config file, and the one line that
names every place looked when there is none."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_testing import Indexed, invoke

from attnswitch.indexing.location import ENV_VAR


@pytest.fixture
def no_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """No per-user default: ATTNSWITCH_DB empty, an empty config folder."""
    env = {ENV_VAR: "", "XDG_CONFIG_HOME": str(tmp_path / "config")}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def project(indexed: Indexed, tmp_path: Path) -> Path:
    """A folder whose `.attnswitch/` holds a copy of the test index, and a subfolder."""
    top = tmp_path / "project"
    shutil.copytree(indexed.db, top / ".attnswitch")
    (top / "notes" / "2024").mkdir(parents=True)
    return top


def hits(output: str) -> list[dict]:
    return json.loads(output)["data"]


def test_search_from_a_subfolder_finds_the_index_above(
    indexed: Indexed, tmp_path: Path, no_default: dict[str, str]
) -> None:
    top = project(indexed, tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "attnswitch.cli", "search", "update rows", "--mode", "keyword"]
        + ["--json"],
        cwd=top / "notes" / "2024",
        capture_output=True,
        text=True,
        timeout=600,
        env={**__import__("os").environ, **no_default},
    )
    assert done.returncode == 0, done.stderr
    assert hits(done.stdout)[0]["source"] == "postgresql/tutorial-update.html"


def test_status_from_a_subfolder_names_the_index_found(
    indexed: Indexed, tmp_path: Path, monkeypatch, no_default
) -> None:
    top = project(indexed, tmp_path)
    monkeypatch.chdir(top / "notes")
    result = invoke("status", "--json", **no_default)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["index"] == str(top / ".attnswitch" / "index.sqlite3")


def test_the_environment_variable_names_the_index(
    indexed: Indexed, tmp_path: Path, monkeypatch, no_default
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke(
        "search",
        "update rows",
        "--mode",
        "keyword",
        "--json",
        **{**no_default, ENV_VAR: str(indexed.db)},
    )
    assert result.exit_code == 0, result.output
    assert hits(result.stdout)[0]["source"] == "postgresql/tutorial-update.html"


def test_the_config_file_names_the_index(
    indexed: Indexed, tmp_path: Path, monkeypatch, no_default
) -> None:
    config = Path(no_default["XDG_CONFIG_HOME"]) / "attnswitch" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f"db = {json.dumps(str(indexed.db))}\n")
    monkeypatch.chdir(tmp_path)
    result = invoke("search", "update rows", "--mode", "keyword", "--json", **no_default)
    assert result.exit_code == 0, result.output
    assert hits(result.stdout)[0]["source"] == "postgresql/tutorial-update.html"


def test_no_index_names_every_place_looked_and_suggests_db(
    tmp_path: Path, monkeypatch, no_default
) -> None:
    deep = tmp_path / "empty" / "deep"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    for args in (("search", "rows"), ("status",)):
        result = invoke(*args, "--json", **no_default)
        assert result.exit_code == 1
        error = json.loads(result.stdout)["error"]
        assert error.startswith("no index found: looked in ")
        for folder in (deep, *deep.parents):
            assert f"{folder / '.attnswitch'}/" in error
        assert f"{ENV_VAR} unset" in error
        assert no_default["XDG_CONFIG_HOME"] in error
        assert "--db" in error
        assert f"attnswitch {args[0]}: no index found" in result.stderr
    assert not (deep / ".attnswitch").exists()  # refusing never creates a store


def test_run_from_a_subfolder_updates_the_index_that_holds_the_folder(
    indexed: Indexed, tmp_path: Path, monkeypatch, no_default
) -> None:
    from cli_testing import FAST

    top = project(indexed, tmp_path)
    monkeypatch.chdir(top / "notes")
    result = invoke("run", str(indexed.folder), "--no-progress", "--json", *FAST, **no_default)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["db"] == str(top / ".attnswitch" / "index.sqlite3")
    assert not (top / "notes" / ".attnswitch").exists()
