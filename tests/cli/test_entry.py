"""The `attnswitch` program (`cli/entry.py`): read-only commands end without the
interpreter's teardown, with their whole output and their exit code; other commands exit as
usual. Run as a user runs it: a fresh process, its output to a pipe. The indexing commands'
threads share one heap arena."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_testing import Indexed

from attnswitch.cli.entry import READ_ONLY, command_name
from heap_arenas import glibc_only, in_fresh_interpreter

# Runs the program in a fresh process with an atexit handler that reports the teardown.
PROGRAM = """
import atexit, sys
atexit.register(lambda: print("teardown ran", file=sys.stderr, flush=True))
sys.argv = ["attnswitch", *sys.argv[1:]]
from attnswitch.cli.entry import main
main()
"""


def _program(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, *args], capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["search", "q", "-k", "3"], "search"),
        (["--version"], None),
        (["status", "--json"], "status"),
        ([], None),
        (["run", "folder", "--db", "x"], "run"),
    ],
)
def test_the_command_is_the_first_word_that_is_no_option(argv, name) -> None:
    assert command_name(argv) == name


def test_a_search_ends_without_teardown_and_keeps_its_whole_output(indexed: Indexed) -> None:
    done = _program("search", "update rows", "--db", str(indexed.db), "-k", "100", "--json")
    assert done.returncode == 0, done.stderr
    hits = json.loads(done.stdout)["data"]
    assert len(hits) > 3
    assert "teardown ran" not in done.stderr


def test_a_failed_search_keeps_its_message_and_exit_code(tmp_path) -> None:
    done = _program("search", "update rows", "--db", str(tmp_path / "none"))
    assert done.returncode == 1
    assert "no index at" in done.stderr + done.stdout
    assert "teardown ran" not in done.stderr


def test_other_commands_exit_as_usual() -> None:
    assert "version" not in READ_ONLY
    done = _program("--version")
    assert done.returncode == 0 and done.stdout.startswith("attnswitch ")
    assert "teardown ran" in done.stderr


# In a fresh interpreter: set the process up for a command, then count the heap's arenas
# after four threads allocated at once (tests/heap_arenas.py).
ARENAS = """
import sys
from attnswitch.cli.entry import set_up_process
from heap_arenas import arenas_after_threads
set_up_process(sys.argv[1:])
print(arenas_after_threads(4))
"""


@glibc_only
@pytest.mark.parametrize(
    ("argv", "arenas"), [(["run", "x"], 1), (["watch", "x"], 1), (["serve"], 5)]
)
def test_the_indexing_commands_threads_share_one_arena(argv: list[str], arenas: int) -> None:
    assert int(in_fresh_interpreter(ARENAS, *argv)) == arenas
