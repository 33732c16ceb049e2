"""Files opened below a pinned folder without following a link on the way: the
descriptor-based steps the walk (`ingest.scan`), the reads (`ingest.load`) and the file route
(`ingest.open_indexed`) share. Every name is opened relative to its folder's descriptor
with `O_NOFOLLOW`, so a folder or file swapped for a link after it was looked at is refused
(ELOOP), never followed (docs/architecture.md, "The document engine")."""

from __future__ import annotations

import errno
import os
import stat

DIR_FLAGS = (getattr(os, "O_PATH", 0) or os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW
LIST_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def open_dir(path: str, dir_fd: int | None, flags: int = DIR_FLAGS) -> int:
    """Open the folder `path` (relative to `dir_fd`, None: the current folder) without
    following a link at its last name."""
    return os.open(path, flags, dir_fd=dir_fd)


def open_beneath(dir_fd: int, parts: tuple[str, ...], flags: int) -> int:
    """Open `parts` (names) below the folder `dir_fd`, following no link on the way
    (`flags` for the last one, which gets `O_NOFOLLOW` too); `dir_fd` is closed. With no
    parts, `dir_fd` itself is returned. A link on the way raises `OSError` (ELOOP)."""
    fd = dir_fd
    try:
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            try:
                child = os.open(name, (flags if last else DIR_FLAGS) | os.O_NOFOLLOW, dir_fd=fd)
            except NotADirectoryError:  # O_PATH with O_NOFOLLOW: a link is "not a folder"
                if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise OSError(errno.ELOOP, "a link on the way", name) from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def lstat_beneath(root_fd: int, parts: tuple[str, ...]) -> os.stat_result:
    """The stat of `parts` below `root_fd`, following no link (the last one included)."""
    parent = open_beneath(os.dup(root_fd), parts[:-1], DIR_FLAGS)
    try:
        return os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
    finally:
        os.close(parent)


def listing(fd: int) -> list[str] | str:
    """The names in the folder `fd`, sorted by code point, or why it cannot be listed."""
    try:
        listed = os.open(".", LIST_FLAGS, dir_fd=fd)
        try:
            return sorted(os.listdir(listed))
        finally:
            os.close(listed)
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror or exc}"


def mode_name(mode: int) -> str:
    """What a file of `mode` is, in words (for a skip's reason)."""
    for test, name in (
        (stat.S_ISFIFO, "named pipe"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
    ):
        if test(mode):
            return name
    return f"mode {stat.filemode(mode)}"
