"""Who may read a file, as the file system says at read time (`of`), and the kernel's
judgement of one principal against it (`Access.may_read`).

A document's `Access` is the chain of every folder from `/` down to its file, and the
file itself (the file's real path: `os.path.realpath`, as the kernel resolves a link),
each step as (owner, group, mode, acl):

- `owner` and `group`: the user and group names (`pwd`, `grp`), or the numeric id as a
  string when the id has no name;
- `mode`: the permission bits (`st_mode & 0o7777`);
- `acl`: the POSIX access ACL's extended entries (`system.posix_acl_access`), each
  (tag, name, perm) with tag "u" (a named user), "g" (a named group), "G" (the owning
  group's ACL entry) or "m" (the mask), sorted; () when the file has no ACL beyond its mode.

Its JSON form (`to_json`) is compact and canonical, the same chain always the same text,
and `signature` a digest of it: many documents share their folder chain and their
owner, so the stores keep each distinct chain once (see indexing/access.py). Chains are
interned here too (`of` returns the same object for the same chain), and each folder's
step is read once per change of the folder (keyed by its device, inode and ctime: a
chmod, chown or setfacl changes the ctime).

The judgement (`may_read(name, groups)`) is the kernel's (fs/posix_acl.c,
`posix_acl_permission`; `generic_permission` without an ACL): each folder must grant
search (x) and the file read (r) to the principal: its owner gets the owner bits; else a
named-user ACL entry gives its perm (masked when a mask exists); else, when the owning
group or any named group entry is one of `groups`, it is allowed iff one of those grants
(masked, and the owning group's ACL entry in place of the mode's group bits when there is
an ACL), else denied; else the other bits. As the kernel does (`acl_permission_check`),
an ACL whose mask is empty (the mode's group bits 0) is not looked at: the mode decides
alone, so a named entry then neither grants nor denies. Names compare as strings: a principal named
like a numeric uid matches an owner recorded by that number. The superuser's override
(root reads everything) is not modelled: principals are people, not root.
"""

from __future__ import annotations

import functools
import grp
import hashlib
import json
import os
import pwd
import stat
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

ACL_XATTR = "system.posix_acl_access"
# The ACL's binary form (linux/posix_acl_xattr.h): a u32 version, then entries of
# (tag u16, perm u16, id u32), little-endian.
ACL_VERSION = 2
_HEADER = struct.Struct("<I")
_ENTRY = struct.Struct("<HHI")
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
READ, SEARCH = 4, 1  # the r and x bits of a perm (and of each triplet of a mode)


class AclEntry(NamedTuple):
    """One extended ACL entry: `tag` "u" (named user), "g" (named group), "G" (owning
    group) or "m" (mask); `name` the user or group ("" for "G" and "m"); `perm` rwx bits."""

    tag: str
    name: str
    perm: int


class Step(NamedTuple):
    """One folder, or the file, on the way to a document (see the module doc)."""

    owner: str
    group: str
    mode: int
    acl: tuple[AclEntry, ...] = ()

    def grants(self, name: str, groups: frozenset[str], bit: int) -> bool:
        """Whether the kernel gives `bit` (READ or SEARCH) of this step to the principal
        `name` in `groups`."""
        mode = self.mode
        if name == self.owner:
            return bool((mode >> 6) & bit)
        if not self.acl or not mode & 0o070:  # the kernel skips an ACL whose mask is ---
            if self.group in groups:
                return bool((mode >> 3) & bit)
            return bool(mode & bit)
        mask = next((e.perm for e in self.acl if e.tag == "m"), 7)
        for e in self.acl:
            if e.tag == "u" and e.name == name:
                return bool(e.perm & mask & bit)
        owning = next((e.perm for e in self.acl if e.tag == "G"), (mode >> 3) & 7)
        found, allowed = False, False
        if self.group in groups:
            found, allowed = True, bool(owning & mask & bit)
        for e in self.acl:
            if e.tag == "g" and e.name in groups:
                found, allowed = True, allowed or bool(e.perm & mask & bit)
        if found:
            return allowed
        return bool(mode & bit)


@dataclass(frozen=True)
class Access:
    """The steps from `/` to a document's file, the file last (see the module doc)."""

    steps: tuple[Step, ...]
    signature: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.signature:
            digest = hashlib.sha256(self.to_json().encode()).hexdigest()[:32]
            object.__setattr__(self, "signature", digest)

    def to_json(self) -> str:
        """The canonical JSON form: [[owner, group, mode, [[tag, name, perm], ...]], ...]."""
        return json.dumps(
            [[s.owner, s.group, s.mode, [list(e) for e in s.acl]] for s in self.steps],
            separators=(",", ":"),
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str) -> Access:
        """The `Access` of `to_json`'s text; ValueError naming what is wrong."""
        try:
            raw = json.loads(text)
            steps = tuple(
                Step(
                    str(o), str(g), int(m), tuple(AclEntry(str(t), str(n), int(p)) for t, n, p in a)
                )
                for o, g, m, a in raw
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"access: expected [[owner, group, mode, [[tag, name, perm], ...]], ...], "
                f"got {text[:80]!r} ({exc})"
            ) from None
        if not steps:
            raise ValueError("access: expected at least the file's step, got none")
        return intern(steps)

    def may_read(self, name: str, groups: Iterable[str] = ()) -> bool:
        """Whether the principal `name` in `groups` may read the file: every folder grants
        it search, the file read (the kernel's judgement, see the module doc)."""
        member = groups if isinstance(groups, frozenset) else frozenset(groups)
        *folders, file = self.steps
        return all(s.grants(name, member, SEARCH) for s in folders) and file.grants(
            name, member, READ
        )


@functools.lru_cache(maxsize=65536)
def intern(steps: tuple[Step, ...]) -> Access:
    """The one `Access` of these steps in this process."""
    return Access(steps)


def of(path: str | os.PathLike[str]) -> Access:
    """The access of the file at `path` now (its real path's folders from `/` down, then
    the file); OSError when a step cannot be looked at."""
    return intern(tuple(step(p) for p in _places(os.path.realpath(path))))


def of_file(path: str | os.PathLike[str]) -> Access | None:
    """`of(path)`, None when the file or a folder on its way cannot be looked at (gone, or
    refused to this process): what a document records when it is read."""
    try:
        return of(path)
    except (OSError, ValueError):
        return None


def of_many(paths: Iterable[str | os.PathLike[str]]) -> list[Access | None]:
    """`of_file` of each of `paths`, each folder on their ways looked at once for all
    of them (a run's unchanged files, whose access is read again without reading them)."""
    steps: dict[str, Step | None] = {}
    reals: dict[str, str | None] = {}

    def cached(place: str) -> Step | None:
        if place not in steps:
            try:
                steps[place] = step(place)
            except (OSError, ValueError):
                steps[place] = None
        return steps[place]

    out: list[Access | None] = []
    for path in paths:
        parent, name = os.path.split(os.fspath(path))
        if parent not in reals:
            try:
                reals[parent] = os.path.realpath(parent)
            except (OSError, ValueError):
                reals[parent] = None
        real = reals[parent]
        if real is None:
            out.append(None)
            continue
        file = os.path.join(real, name)
        if os.path.islink(file):
            out.append(of_file(file))
            continue
        chain = [cached(p) for p in _places(real)]
        try:
            chain.append(step(file))
        except (OSError, ValueError):
            out.append(None)
            continue
        out.append(None if None in chain else intern(tuple(s for s in chain if s is not None)))
    return out


def _places(real: str) -> list[str]:
    """`/` and every folder below it down to `real` (an absolute, resolved path), then
    `real` itself."""
    parts = [p for p in real.split(os.sep) if p]
    return ["/"] + ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def step(path: str) -> Step:
    """The `Step` of `path` now: one stat, and the ACL read again only when the ctime
    changed (`_step_of`)."""
    st = os.stat(path)
    return _step_of(path, st.st_dev, st.st_ino, st.st_ctime_ns, st.st_uid, st.st_gid, st.st_mode)


@functools.lru_cache(maxsize=65536)
def _step_of(
    path: str, dev: int, ino: int, ctime_ns: int, uid: int, gid: int, st_mode: int
) -> Step:
    del dev, ino, ctime_ns  # the cache's key: a changed owner, mode or ACL changes ctime
    try:
        blob: bytes | None = os.getxattr(path, ACL_XATTR)
    except OSError:  # ENODATA: no ACL; ENOTSUP: a file system without ACLs
        blob = None
    return Step(_user(uid), _group(gid), stat.S_IMODE(st_mode), parse_acl(blob))


def parse_acl(blob: bytes | None) -> tuple[AclEntry, ...]:
    """The extended entries (`AclEntry`, sorted) of a `system.posix_acl_access` value; ()
    for None or a minimal ACL (owner, owning group and others only: the mode says it).

    Parsed by hand: no well-kept library ships wheels for it (pylibacl builds against
    libacl's headers), and the format is a fixed, documented kernel ABI
    (include/uapi/linux/posix_acl_xattr.h)."""
    if not blob:
        return ()
    if len(blob) < _HEADER.size or (len(blob) - _HEADER.size) % _ENTRY.size:
        raise ValueError(f"{ACL_XATTR}: expected 4 + 8n bytes, got {len(blob)}")
    (version,) = _HEADER.unpack_from(blob)
    if version != ACL_VERSION:
        raise ValueError(f"{ACL_XATTR}: expected version {ACL_VERSION}, got {version}")
    entries: list[AclEntry] = []
    owning: int | None = None
    extended = False
    for offset in range(_HEADER.size, len(blob), _ENTRY.size):
        tag, perm, ident = _ENTRY.unpack_from(blob, offset)
        perm &= 7
        if tag == USER:
            entries.append(AclEntry("u", _user(ident), perm))
            extended = True
        elif tag == GROUP:
            entries.append(AclEntry("g", _group(ident), perm))
            extended = True
        elif tag == GROUP_OBJ:
            owning = perm
        elif tag == MASK:
            entries.append(AclEntry("m", "", perm))
            extended = True
        elif tag not in (USER_OBJ, OTHER):
            raise ValueError(f"{ACL_XATTR}: expected tags 1, 2, 4, 8, 16 or 32, got {tag}")
    if not extended:
        return ()
    if owning is not None:
        entries.append(AclEntry("G", "", owning))
    return tuple(sorted(entries))


@functools.lru_cache(maxsize=4096)
def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@functools.lru_cache(maxsize=4096)
def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def unix_groups(name: str) -> frozenset[str]:
    """The group names of the Unix user `name` (its primary group and those listing it),
    empty when there is no such user: what a principal named after a Unix user belongs to."""
    try:
        user = pwd.getpwnam(name)
    except KeyError:
        return frozenset()
    return frozenset(_group(g) for g in os.getgrouplist(name, user.pw_gid))


__all__ = [
    "Access",
    "AclEntry",
    "Step",
    "intern",
    "of",
    "of_file",
    "of_many",
    "parse_acl",
    "step",
    "unix_groups",
]
