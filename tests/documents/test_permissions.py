"""documents.permissions: the recorded chain of a file and the kernel's judgement of it,
checked against the kernel itself (a child process as each user calls os.access)."""

from __future__ import annotations

import os
import struct

import pytest

from attnswitch.documents import permissions
from attnswitch.documents.permissions import Access, AclEntry, Step
from permission_tree import (
    NAMELESS_UID,
    TREE,
    files,
    kernel_reads,
    permission_tree,
    principals,
    require,
    setfacl,
)


def test_judgement_equals_the_kernels_for_every_file_and_principal():
    require()
    with permission_tree() as top:
        rels = files(top)
        paths = [top / rel for rel in rels]
        chains = [permissions.of(p) for p in paths]
        checked = 0
        for who in principals():
            kernel = kernel_reads(who, paths)
            ours = [c.may_read(who.name, who.groups) for c in chains]
            assert dict(zip(rels, ours, strict=True)) == dict(zip(rels, kernel, strict=True)), who
            checked += sum(kernel)
        # the tree is not trivially open or closed: some reads are allowed, some refused
        assert 0 < checked < len(rels) * len(principals())


def test_a_chain_records_every_folder_from_the_root_and_resolves_names():
    require()
    with permission_tree() as top:
        chain = permissions.of(top / "acl" / "daemon.txt")
        assert len(chain.steps) == len(top.parts) + 2
        assert chain.steps[0] == permissions.step("/")
        folder, file = chain.steps[-2:]
        assert folder.mode == 0o750 and AclEntry("u", "daemon", 5) in folder.acl
        assert file.acl == (AclEntry("G", "", 0), AclEntry("m", "", 4), AclEntry("u", "daemon", 4))
        nameless = permissions.of(top / "open" / "nameless.txt").steps[-1]
        assert nameless.owner == str(NAMELESS_UID)


def test_chains_are_canonical_interned_and_round_trip():
    require()
    with permission_tree() as top:
        a = permissions.of(top / "open" / "public.txt")
        b = permissions.of(top / "open" / "bin-group.txt")
        assert a.steps[:-1] == b.steps[:-1]
        same = permissions.of(top / "closed" / ".." / "open" / "public.txt")
        assert same is a
        assert Access.from_json(a.to_json()) is a
        assert a.signature != b.signature and len(a.signature) == 32
        assert " " not in a.to_json()


def test_a_chmod_or_setfacl_changes_the_chain():
    require()
    with permission_tree() as top:
        path = top / "open" / "public.txt"
        before = permissions.of(path)
        path.chmod(0o600)
        after = permissions.of(path)
        assert after.signature != before.signature
        assert not after.may_read("daemon", {"daemon"})
        setfacl(path, "u:daemon:r")
        assert permissions.of(path).may_read("daemon", {"daemon"})
        os.chmod(top / "open", 0o700)  # the folder's change reaches the file's chain
        assert not permissions.of(path).may_read("daemon", {"daemon"})


def _acl(*entries: tuple[int, int, int]) -> bytes:
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


def test_parse_acl_reads_the_kernels_binary_form():
    assert permissions.parse_acl(None) == ()
    minimal = _acl((0x01, 6, 0xFFFFFFFF), (0x04, 4, 0xFFFFFFFF), (0x20, 4, 0xFFFFFFFF))
    assert permissions.parse_acl(minimal) == ()
    extended = _acl(
        (0x01, 6, 0xFFFFFFFF),
        (0x02, 4, 0),
        (0x04, 0, 0xFFFFFFFF),
        (0x08, 5, 0),
        (0x10, 4, 0xFFFFFFFF),
        (0x20, 0, 0xFFFFFFFF),
    )
    assert permissions.parse_acl(extended) == (
        AclEntry("G", "", 0),
        AclEntry("g", "root", 5),
        AclEntry("m", "", 4),
        AclEntry("u", "root", 4),
    )
    with pytest.raises(ValueError, match="version 2"):
        permissions.parse_acl(struct.pack("<I", 3))
    with pytest.raises(ValueError, match="4 \\+ 8n bytes"):
        permissions.parse_acl(b"\x02\x00\x00\x00\x01")


@pytest.mark.parametrize(
    ("step", "name", "groups", "allowed"),
    [
        (Step("alice", "staff", 0o400), "alice", set(), True),
        (Step("alice", "staff", 0o044), "alice", {"staff"}, False),  # owner bits only
        (Step("alice", "staff", 0o040), "bob", {"staff"}, True),
        (Step("alice", "staff", 0o004), "bob", {"staff"}, False),  # group bits only
        (Step("alice", "staff", 0o004), "bob", set(), True),
        (Step("alice", "staff", 0o000, (AclEntry("m", "", 0), AclEntry("u", "bob", 4))), "bob", set(), False),
        (Step("alice", "staff", 0o044, (AclEntry("G", "", 0), AclEntry("g", "dev", 4), AclEntry("m", "", 4))), "bob", {"staff", "dev"}, True),
        (Step("alice", "staff", 0o044, (AclEntry("G", "", 0), AclEntry("g", "dev", 0), AclEntry("m", "", 4))), "bob", {"dev"}, False),
        # an empty mask (group bits 0): the kernel looks at the mode alone
        (Step("alice", "staff", 0o004, (AclEntry("G", "", 0), AclEntry("m", "", 0), AclEntry("u", "bob", 0))), "bob", set(), True),
        (Step("42", "staff", 0o400), "42", set(), True),
    ],
)  # fmt: skip
def test_step_judgement_by_the_kernels_rules(step, name, groups, allowed):
    assert step.grants(name, frozenset(groups), permissions.READ) is allowed


def test_tree_covers_modes_and_acls():
    assert any(acl for *_, acl in TREE) and any(mode == 0o700 for *_, mode, _ in TREE)
