"""One base class for errors meant for the user (`attnswitch.errors.AttnswitchError`,
issue 29): every such error is one, and keeps the built-in class it always had; the CLI
prints one as one line and exits non-zero, and lets any other exception (a bug) raise with
its traceback instead of hiding it behind a one-line message."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from attnswitch.errors import AttnswitchError, ConfigError


def _user_errors() -> list[tuple[type, type]]:
    from attnswitch.documents.ingest import RootNameError
    from attnswitch.engines import EncodeInputError, ModelError, NoEngineError
    from attnswitch.indexing.config import IndexMismatchError
    from attnswitch.indexing.store_errors import (
        StoreBusyError,
        StoreConnectError,
        StoreCorruptError,
        StoreInputError,
    )
    from attnswitch.jobs.ray_encoders import RayRunError, RayUnavailableError
    from attnswitch.jobs.ray_run import RayConnectError
    from attnswitch.service.auth import BindRefusedError, KeyFileError

    return [
        (ConfigError, ValueError),
        (StoreInputError, ValueError),
        (StoreBusyError, RuntimeError),
        (StoreConnectError, ConnectionError),
        (StoreCorruptError, RuntimeError),
        (ModelError, ValueError),
        (EncodeInputError, ValueError),
        (NoEngineError, RuntimeError),
        (IndexMismatchError, ValueError),
        (RootNameError, NotADirectoryError),
        (RayUnavailableError, ImportError),
        (RayRunError, RuntimeError),
        (RayConnectError, ConnectionError),
        (KeyFileError, ValueError),
        (BindRefusedError, ValueError),
    ]


@pytest.mark.parametrize("cls, builtin", _user_errors(), ids=lambda c: c.__name__)
def test_each_user_error_is_an_attnswitch_error_and_keeps_its_builtin_class(cls, builtin) -> None:
    assert issubclass(cls, AttnswitchError) and issubclass(cls, builtin)


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["--overlap", "10000"], 1, "overlap: expected 0 <= overlap < max_tokens"),
        (["--chunks-per-call", "0"], 2, "chunks_per_call: expected >= 1, got 0"),
    ],
)
def test_run_prints_a_user_error_as_one_line(tmp_path, args, code, message) -> None:
    from attnswitch.cli import app

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("a few words to index")
    result = CliRunner().invoke(
        app, ["run", str(folder), "--db", str(tmp_path / "db"), "--no-progress", *args]
    )
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnswitch run: ") and message in lines[0]
    assert isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("bug", [ValueError, RuntimeError, ImportError, KeyError])
def test_run_lets_a_bug_raise_with_its_traceback(tmp_path, monkeypatch, bug) -> None:
    """An exception that is not an `AttnswitchError`, raised inside the run (injected into
    the pipeline's chunking step), reaches the caller as itself, not as a one-line exit."""
    import attnswitch.jobs.read_phase as pipeline_read
    from attnswitch.cli import app

    def broken(*args, **kwargs):
        raise bug("a bug inside the run")

    monkeypatch.setattr(pipeline_read, "chunk_document", broken)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("a few words to index")
    result = CliRunner().invoke(
        app, ["run", str(folder), "--db", str(tmp_path / "db"), "--no-progress"]
    )
    assert type(result.exception) is bug, result.output
    assert "a bug inside the run" in str(result.exception)
