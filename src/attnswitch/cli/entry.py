"""The `attnswitch` program (`[project.scripts]`, `python -m attnswitch`): the typer app
(`attnswitch.cli.app`), and for the commands that only read the index (`READ_ONLY`), an exit
without the interpreter's teardown.

A cold `attnswitch search` spent 0.10-0.14 s after its results were printed (measured from
outside on a 2-core AMD EPYC: `benchmarks/cold_search.py`'s "exit" part), none of it in
`atexit` handlers: it is the interpreter's finalisation, tearing down every module and the
native libraries' objects (the inference engine's runtime, the tokenizer). A read-only
command has nothing left to write at that point: its SQLite connection only read (a reader
needs no checkpoint; the file is consistent whatever happens to the process), every cache
file it made was written whole and renamed into place before use. So once the command has
returned, its output and logs are flushed and the process ends with `os._exit` and the
command's exit code. Other commands (run, watch, serve, ...) exit as usual. Tests that
invoke `app` in-process (typer's CliRunner) are untouched: only `main` ends the process.

The indexing commands (`INDEXING`) start with their threads sharing one heap arena, which
the run's heap trims can shrink (`jobs.heap`).
"""

from __future__ import annotations

import logging
import os
import sys

# The commands that write nothing, whose process may skip the interpreter's teardown.
READ_ONLY = frozenset({"search", "status"})
# The commands that index, whose threads share one heap arena (`jobs.heap.limit_arenas`).
INDEXING = frozenset({"run", "watch"})


def command_name(argv: list[str]) -> str | None:
    """The command `argv` (without the program's name) runs: its first word that is not an
    option (the program itself takes only flags: `--version`, `--help`)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def set_up_process(argv: list[str]) -> None:
    """What the process running the command `argv` sets before anything starts a thread: an
    indexing command's threads share one heap arena (`jobs.heap.limit_arenas`)."""
    if command_name(argv) in INDEXING:
        from attnswitch.jobs.heap import limit_arenas

        limit_arenas()


def main() -> None:
    """Run the `attnswitch` command line on `sys.argv`; never returns."""
    set_up_process(sys.argv[1:])
    from attnswitch.cli import app

    try:
        app()
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code
        # A message as the exit code (printed by the teardown) exits as usual.
        if isinstance(code, int) and command_name(sys.argv[1:]) in READ_ONLY and _flushed():
            os._exit(code)
        raise


def _flushed() -> bool:
    """Whether the output, the error stream and the log handlers were all flushed; False
    (so the process exits as usual, reporting what failed) when one could not be."""
    try:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe, a closed stream
        return False
    return True
