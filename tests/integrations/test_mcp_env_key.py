"""`attnswitch mcp --access-file FILE` on stdio serves the principal whose key is in
ATTNSWITCH_API_KEY (`integrations.mcp_env_key`): a missing, blank or unknown key refuses to
start with one line that never shows the key, and the principal is found again by the same
key after the file is re-read (SIGHUP's `reload`), every call refused while the file no
longer lists it. The tools over stdio as a reader: tests/integrations/test_reader_clients.py."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra")

from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

from access_testing import access_text  # noqa: E402

READER_KEY = "env-reader-key-5b31"
ADMIN_KEY = "env-admin-key-e8c0"


def _invoke(tmp_path: Path, **env: str):
    from typer.testing import CliRunner

    from attnswitch.cli import app

    access = tmp_path / "access.toml"
    access.write_text(access_text(READER_KEY, ADMIN_KEY))
    args = ["mcp", "--db", str(tmp_path / "none"), "--access-file", str(access)]
    return CliRunner(env={"COLUMNS": "200", **env}).invoke(app, args), access


@pytest.mark.parametrize(
    ("key", "said"),
    [
        (None, "got none"),
        ("   ", "got a blank one"),
        ("not-a-key-of-it-77a0", "got an unknown one"),
        (READER_KEY + "x", "got an unknown one"),
    ],
)
def test_stdio_with_an_access_file_and_no_key_of_it_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str | None, said: str
) -> None:
    monkeypatch.delenv("ATTNSWITCH_API_KEY", raising=False)
    result, access = _invoke(tmp_path, **({} if key is None else {"ATTNSWITCH_API_KEY": key}))
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    where = "the access file in the environment" if key is None or not key.strip() else None
    assert lines[0].startswith("attnswitch mcp: ATTNSWITCH_API_KEY: expected the key of a ")
    assert lines[0].endswith(said)
    if where is None:
        assert f"principal of {str(access)!r}" in lines[0]
    else:
        assert where in lines[0]
    if key is not None and key.strip():
        assert key.strip() not in result.output


def test_the_principal_is_found_again_by_its_key_after_a_reload(tmp_path: Path) -> None:
    from attnswitch.integrations.mcp_env_key import EnvKeyPrincipal

    access = tmp_path / "access.toml"
    access.write_text(access_text(READER_KEY, ADMIN_KEY, groups=("staff", "hr")))
    served = EnvKeyPrincipal.start(access, f" {READER_KEY}\n")
    principal, reader = served.asker()
    assert (principal.name, principal.role) == ("alice", "reader")
    assert (reader.name, set(reader.groups)) == ("alice", {"staff", "hr"})

    # alice's key leaves the file: every call is refused, naming no key
    access.write_text(access_text("another-reader-key-90d1", ADMIN_KEY))
    assert served.reload()
    with pytest.raises(ToolError) as refused:
        served.asker()
    assert str(refused.value) == (
        "ATTNSWITCH_API_KEY: expected the key of a principal of the access file, got one it "
        "no longer lists (the file was reloaded)"
    )
    assert READER_KEY not in str(refused.value)

    # a file that cannot be used keeps the access as it was: still refused
    access.write_text("[[principal]]\n")
    assert not served.reload()
    with pytest.raises(ToolError):
        served.asker()

    # the same key, now the admin's: an admin (no reader filter)
    access.write_text(access_text("another-reader-key-90d1", READER_KEY))
    assert served.reload()
    principal, reader = served.asker()
    assert (principal.name, principal.role, reader) == ("root", "admin", None)
