"""How long this process has existed: the cost of starting the interpreter and importing
what a command needs, before the command's own work begins (a cold CLI call's "import"
step).

On Linux it is read from the kernel, both times counted from boot: `/proc/uptime` less the
process's start in `/proc/self/stat` (clock ticks, usually 10 ms). Elsewhere it is
`time.time()` less psutil's `create_time()`, which is as exact as that platform keeps it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def process_age_s() -> float | None:
    """Seconds since this process started, or None where it cannot be told."""
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        # the command name (field 2) may hold spaces: the fields after it start at ")"
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime
        return max(0.0, uptime - started)
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return max(0.0, time.time() - psutil.Process().create_time())
    except Exception:  # no psutil, or no access to this process's record
        return None
