"""Key files and the HTTP edge (issue 29, minor items of row 10): a key file saved with a
UTF-8 byte order mark still works, a `sha256:` line that is not 64 hex digits is refused
rather than taken for a plain key, a named pipe as key file is refused at start instead of
hanging it, and a body declared over the limit with `Expect: 100-continue` gets 413 at once
(no "100 Continue"). Real files, a real `serve` process, a real socket on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from attnswitch.service.auth import KeyChecker, KeyFileError, hash_key, load_keys

pytestmark = pytest.mark.xdist_group("security")
KEY = "correct horse battery staple"


def test_a_key_file_with_a_byte_order_mark_works(tmp_path: Path) -> None:
    for line in (KEY, f"sha256:{hash_key(KEY)}", hash_key(KEY)):
        path = tmp_path / "keys"
        path.write_bytes(b"\xef\xbb\xbf" + line.encode() + b"\n")
        assert KeyChecker(load_keys(path)).valid(KEY), line


@pytest.mark.parametrize(
    "line", [f"sha256:{hash_key(KEY)[:63]}", f"sha256:{hash_key(KEY)}0", "sha256:" + "g" * 64]
)
def test_a_malformed_sha256_line_is_refused(tmp_path: Path, line: str) -> None:
    path = tmp_path / "keys"
    path.write_text(f"# keys\n{line}\n")
    with pytest.raises(KeyFileError, match=r"line 2: expected 'sha256:' and 64 hex digits"):
        load_keys(path)


def test_an_uppercase_sha256_prefix_is_a_digest(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"SHA256:{hash_key(KEY).upper()}\n")
    assert KeyChecker(load_keys(path)).valid(KEY)


def test_a_named_pipe_as_key_file_is_refused_at_start(tmp_path: Path) -> None:
    fifo = tmp_path / "keys"
    os.mkfifo(fifo)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnswitch.service",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--api-key-file",
            str(fifo),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert "api key file: expected a regular file, got a named pipe" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_expect_100_continue_over_the_limit_gets_413_at_once(keyless) -> None:
    host, port = keyless.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 10000000\r\n"
            b"Expect: 100-continue\r\n\r\n"
        )
        sock.settimeout(10)
        first = sock.recv(4096)
    assert first.startswith(b"HTTP/1.1 413"), first[:200]
    assert b"body_too_large" in first or b"413" in first
