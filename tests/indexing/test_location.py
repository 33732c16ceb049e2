"""`location.py`: with no `--db`, the index is the nearest `.attnswitch/` of the current
folder or its parents, then the per-user default (`ATTNSWITCH_DB`, then the config file);
none found names every place looked. A run reuses an index found above only when it
already holds the run's folder. Real SQLite indexes, made by `Index.open_store`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnswitch.indexing.index import Index, IndexMissingError
from attnswitch.indexing.location import (
    ENV_VAR,
    NEW_INDEX,
    IndexNotFoundError,
    config_file,
    find_index,
    locate,
    nearest_index,
    run_location,
    search_index,
    user_default,
)
from attnswitch.indexing.store import StoreInputError


def make_index(data_dir: Path, root: Path | None = None) -> Path:
    """An index file in `data_dir` (with one document of `root` when given)."""
    from attnswitch.documents.ingest import ingest
    from attnswitch.indexing.store import ChunkRecord

    with Index.open_store(data_dir) as store:
        if root is not None:
            root.mkdir(parents=True, exist_ok=True)
            (root / "a.txt").write_text("vacuum and analyze")
            for doc in ingest(root):
                store.write_document(
                    doc, [ChunkRecord(doc.text, 3, 0, len(doc.text))], np.ones((1, 8))
                )
    return data_dir / "index.sqlite3"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An environment with no per-user default: an empty HOME and config folder."""
    (tmp_path / "home").mkdir()
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "home/.config")}


def test_the_nearest_data_folder_above_is_found(tmp_path: Path, monkeypatch, home) -> None:
    project = tmp_path / "project"
    found = make_index(project / ".attnswitch")
    deep = project / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert find_index().location == found
    assert find_index().source == "nearest .attnswitch/"
    assert Index.resolve(None) == found
    with Index.open() as index:
        assert index.location == found
    # a nearer one wins; in the current folder it is named as before, relatively
    nearer = make_index(project / "a" / ".attnswitch")
    assert locate(None) == nearer
    monkeypatch.chdir(project / "a")
    assert locate(None) == NEW_INDEX
    # a --db is taken as given
    assert locate(str(tmp_path / "x")) == tmp_path / "x" / "index.sqlite3"


def test_a_data_folder_without_an_index_file_is_passed_over(tmp_path, monkeypatch, home):
    found = make_index(tmp_path / "p" / ".attnswitch")
    (tmp_path / "p" / "q" / ".attnswitch").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "p" / "q")
    path, looked = nearest_index()
    assert path == found
    assert looked == [tmp_path / "p" / "q" / ".attnswitch", tmp_path / "p" / ".attnswitch"]


def test_the_environment_variable_then_the_config_file(tmp_path, monkeypatch, home) -> None:
    monkeypatch.chdir(tmp_path)
    assert user_default() is None
    by_config = make_index(tmp_path / "by-config")
    config = Path(home["XDG_CONFIG_HOME"]) / "attnswitch" / "config.toml"
    assert config_file() == config
    config.parent.mkdir(parents=True)
    config.write_text('db = "../../../by-config"\n')  # relative to the config file's folder
    found = find_index()
    assert Path(found.location).resolve() == by_config.resolve()
    assert found.source == f"config file {config}"
    by_env = make_index(tmp_path / "by-env")
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "by-env"))
    assert find_index() == find_index()
    assert find_index().location == by_env
    assert find_index().source == ENV_VAR
    # a nearer .attnswitch/ comes first
    monkeypatch.chdir(tmp_path / "by-env")
    (tmp_path / "by-env" / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "by-env" / "sub")
    monkeypatch.setenv(ENV_VAR, str(by_config.parent))
    assert find_index().location == by_config.parent / "index.sqlite3"
    make_index(tmp_path / "by-env" / "sub" / ".attnswitch")
    assert find_index().location == NEW_INDEX


def test_the_config_file_default_is_read_from_xdg_or_home() -> None:
    assert config_file({"XDG_CONFIG_HOME": "/x"}) == Path("/x/attnswitch/config.toml")
    assert config_file({"HOME": "/h"}) == Path("/h/.config/attnswitch/config.toml")
    assert config_file({"HOME": "/h", "XDG_CONFIG_HOME": ""}) == Path(
        "/h/.config/attnswitch/config.toml"
    )
    assert user_default({"HOME": "/h", ENV_VAR: "~/idx"}) == ("/h/idx", ENV_VAR)
    url = "postgresql://u@host/db"
    assert user_default({"HOME": "/h", ENV_VAR: url}) == (url, ENV_VAR)


def test_a_bad_config_file_is_refused_naming_it(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    config = tmp_path / "attnswitch" / "config.toml"
    config.parent.mkdir()
    config.write_text("db = \n")
    with pytest.raises(StoreInputError, match=str(config)):
        user_default(env)
    config.write_text("db = 3\n")
    with pytest.raises(StoreInputError, match="db: expected a folder"):
        user_default(env)
    config.write_text("other = 1\n")
    assert user_default(env) is None


def test_nothing_found_names_every_place_looked(tmp_path, monkeypatch, home) -> None:
    deep = tmp_path / "empty" / "deep"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    with pytest.raises(IndexNotFoundError) as error:
        find_index()
    message = str(error.value)
    assert message.startswith("db: expected an index, got none: looked in ")
    for folder in (deep, *deep.parents):
        assert f"{folder / '.attnswitch'}/" in message
    assert f"{ENV_VAR} unset" in message
    assert str(config_file()) in message
    assert "--db" in message
    assert isinstance(error.value, IndexMissingError)  # callers that catch it keep working
    with pytest.raises(IndexNotFoundError):
        Index.open()
    assert Index.resolve(None) == NEW_INDEX  # where a new index is made
    # a configured default that holds no index is named as looked at
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "gone"))
    with pytest.raises(IndexNotFoundError, match=f"gone/index.sqlite3 \\({ENV_VAR}, no index"):
        find_index()
    assert not (tmp_path / "gone").exists()  # looking never creates


def test_a_run_reuses_an_index_above_only_when_it_holds_the_folder(
    tmp_path, monkeypatch, home
) -> None:
    project = tmp_path / "project"
    found = make_index(project / ".attnswitch", root=project / "docs")
    (project / "docs" / "sub").mkdir()
    (project / "src").mkdir()
    monkeypatch.chdir(project / "src")
    assert run_location(project / "docs", None) == found
    assert run_location(project / "docs" / "sub", None) == found
    assert run_location(project / "src", None) == NEW_INDEX  # not one of its roots
    assert run_location(project, None) == NEW_INDEX  # holds docs/, not all of project/
    assert run_location(project / "src", str(tmp_path / "t")) == tmp_path / "t" / "index.sqlite3"
    # the current folder's own index is used whatever it holds (the rule before)
    monkeypatch.chdir(project)
    assert run_location(project / "src", None) == NEW_INDEX
    assert (project / NEW_INDEX).is_file()
    # the per-user default too, only when it holds the folder
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv(ENV_VAR, str(project / ".attnswitch"))
    assert run_location(project / "docs", None) == found
    assert run_location(project / "src", None) == NEW_INDEX
    assert search_index().found is not None
