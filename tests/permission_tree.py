"""A folder tree with per-folder modes, owners and POSIX ACLs, and the kernel's own answer
to "may this user read this file" (a forked child that becomes the user and calls
`os.access`), for the permission tests (tests/documents/test_permissions.py,
tests/indexing/test_access*.py, tests/jobs/test_run_permissions.py). Needs root (chown,
setuid) and setfacl (Debian's acl package); `require` skips with the reason otherwise."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

# An owner with no name in the user database (recorded by number).
NAMELESS_UID = 4242


@dataclass(frozen=True)
class Principal:
    """Who the kernel is asked about: a user name (or a number for a nameless uid), its
    group names, and the ids the forked child takes."""

    name: str
    groups: frozenset[str]
    uid: int
    gid: int
    gids: tuple[int, ...]


def principal(name: str) -> Principal:
    """The system user `name` (its primary group and every group listing it)."""
    user = pwd.getpwnam(name)
    gids = tuple(os.getgrouplist(name, user.pw_gid))
    return Principal(name, frozenset(_group(g) for g in gids), user.pw_uid, user.pw_gid, gids)


def nameless() -> Principal:
    """The owner without a name: principal "4242", in no group."""
    return Principal(str(NAMELESS_UID), frozenset(), NAMELESS_UID, NAMELESS_UID, ())


def principals() -> list[Principal]:
    """daemon and bin (existing system accounts, in different groups) and the nameless uid."""
    return [principal("daemon"), principal("bin"), nameless()]


def require() -> None:
    """Skip unless this process is root with setfacl at hand."""
    if os.geteuid() != 0:
        pytest.skip("the kernel's judgement is asked as other users: needs root (setuid)")
    if shutil.which("setfacl") is None:
        pytest.skip("setfacl: Debian's acl package (make system-packages)")
    for name in ("daemon", "bin"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            pytest.skip(f"the system account {name!r} is missing")


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def setfacl(path: Path, spec: str) -> None:
    subprocess.run(["setfacl", "-m", spec, str(path)], check=True)


# (relative path, owner, group, mode, setfacl spec or None); folders end with "/".
TREE = (
    ("open/", "root", "root", 0o755, None),
    ("open/public.txt", "root", "root", 0o644, None),
    ("open/daemon-only.txt", "daemon", "root", 0o600, None),
    ("open/bin-group.txt", "root", "bin", 0o640, None),
    ("open/nameless.txt", NAMELESS_UID, "root", 0o600, None),
    ("closed/", "root", "root", 0o700, None),
    ("closed/public.txt", "root", "root", 0o644, None),
    ("bin-team/", "root", "bin", 0o750, None),
    ("bin-team/plan.txt", "root", "root", 0o644, None),
    ("acl/", "root", "root", 0o750, "u:daemon:rx"),
    ("acl/daemon.txt", "root", "root", 0o600, "u:daemon:r"),
    ("acl/masked.txt", "root", "root", 0o600, "g:daemon:r,m::---"),
    ("acl/everyone.txt", "root", "root", 0o644, None),
    ("acl-group/", "root", "root", 0o701, "g:bin:x"),
    ("acl-group/bin.txt", "root", "root", 0o640, "g:bin:r"),
    ("acl-group/other-denied.txt", "root", "daemon", 0o604, "g:bin:-,g:daemon:r"),
    ("acl-group/mask-empty.txt", "root", "daemon", 0o604, "g:bin:-"),
    ("acl-group/daemon-masked.txt", "root", "root", 0o604, "u:daemon:-,m::r"),
)


@contextmanager
def permission_tree(text: str = "text of {path}\n") -> Iterator[Path]:
    """A fresh tree of `TREE` (each file holds `text` formatted with its path) in a folder
    any user may search (pytest's own temporary folders are root's alone), removed after."""
    top = Path(tempfile.mkdtemp(prefix="attnswitch-perm-"))
    try:
        top.chmod(0o755)
        for rel, owner, group, mode, acl in TREE:
            path = top / rel.rstrip("/")
            if rel.endswith("/"):
                path.mkdir()
            else:
                path.write_text(text.format(path=rel))
            uid = owner if isinstance(owner, int) else pwd.getpwnam(owner).pw_uid
            os.chown(path, uid, grp.getgrnam(group).gr_gid)
            path.chmod(mode)
            if acl:
                setfacl(path, acl)
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def files(top: Path) -> list[str]:
    """The tree's files, relative to `top`."""
    return [rel for rel, *_ in TREE if not rel.endswith("/")]


def kernel_reads(who: Principal, paths: list[Path]) -> list[bool]:
    """Whether the kernel lets `who` read each of `paths`: a forked child drops to its
    ids and asks `os.access(path, os.R_OK)`."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read_fd)
            os.setgroups(list(who.gids))
            os.setgid(who.gid)
            os.setuid(who.uid)
            answer = "".join("1" if os.access(p, os.R_OK) else "0" for p in paths)
            os.write(write_fd, answer.encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        answer = pipe.read().decode()
    os.waitpid(pid, 0)
    assert len(answer) == len(paths), f"the child answered {answer!r}"
    return [c == "1" for c in answer]
