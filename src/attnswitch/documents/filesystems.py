"""Pseudo and special filesystems: the kernel's views (procfs, sysfs, devfs, cgroup, ...),
whose files are not documents. Reading them never ends well: `/proc` alone holds files that
grow as they are read and one tree per process, so `attnswitch run /proc` read pseudo-files
for minutes (issue 41). `scan` refuses such a root and skips such a folder below it.

A folder's filesystem is told by its device id (`st_dev`) matched to the mount table of
`/proc/self/mountinfo` (the kernel's own list: field 3 is the device as major:minor, the
field after " - " its type). Without a readable mount table nothing is detected.
"""

from __future__ import annotations

import os

# The types whose files are the kernel's, not stored documents (as `recollindex` skips).
PSEUDO_TYPES = frozenset(
    {
        "proc",
        "sysfs",
        "devtmpfs",
        "devpts",
        "cgroup",
        "cgroup2",
        "debugfs",
        "tracefs",
        "securityfs",
        "mqueue",
        "pstore",
        "bpf",
        "configfs",
        "fusectl",
        "hugetlbfs",
        "binfmt_misc",
        "autofs",
        "efivarfs",
        "selinuxfs",
        "rpc_pipefs",
        "nsfs",
    }
)
MOUNTINFO = "/proc/self/mountinfo"


def pseudo_devices(mountinfo: str = MOUNTINFO) -> dict[int, str]:
    """Device id -> filesystem type of every mounted pseudo filesystem (empty when the
    mount table cannot be read)."""
    found: dict[int, str] = {}
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return found
    for line in lines:
        head, sep, tail = line.partition(" - ")
        fields = head.split()
        if not sep or len(fields) < 3 or not tail.split():
            continue
        kind = tail.split()[0]
        major, _, minor = fields[2].partition(":")
        if kind in PSEUDO_TYPES and major.isdigit() and minor.isdigit():
            found[os.makedev(int(major), int(minor))] = kind
    return found
