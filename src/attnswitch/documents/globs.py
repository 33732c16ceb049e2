"""Globs matched in time linear in the name, whatever the pattern: the one place that
compiles a gitignore-style glob (`--include`/`--exclude` file rules, the lines of
`.gitignore`/`.ignore` files, search path filters).

pathspec turns a glob into the regular expression of git's semantics
(`GitIgnoreSpecPattern.pattern_to_regex`: `*`, `?`, `[...]`, `**`, anchoring, `!`
negation, a trailing `/` for folders); RE2 (google-re2) compiles and matches it, in time
linear in the name, never Python's `re`, whose backtracking takes exponential time on a
glob such as `*?*?*?*?*?*?*?*?*?*?*?*?*?*?*Z`. `spec` puts the patterns of a list or of
an ignore file into a `GitIgnoreSpec`, whose `match_file` and `check_file` apply git's
order (the last matching line decides; a file line before a folder line).

A glob is refused with `GlobError` (the reason in a few words) when it is longer than
`MAX_CHARS` characters, when RE2 cannot compile it (`[z-a]`: a range backwards), when its
bracket expression is never closed (`[abc`: git drops such a line; here it is named
rather than matching nothing), or when pathspec cannot read it (a trailing `\\`).
`compile_glob` gives None for a line that is no pattern by git's rules (blank, a `#`
comment, a lone `/`).

Cost: each pattern is one RE2 program of at most `MAX_MEM` bytes; matching a name costs
at most a constant times the program's size times the name's length (RE2's automaton, or
its NFA when the automaton outgrows its memory): the costliest globs of `MAX_CHARS`
characters tried (`*a???...`) take tens of milliseconds of CPU against a 4,096 character
path, a tenth of a millisecond against a 100 character one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import re2
from pathspec import GitIgnoreSpec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from attnswitch.errors import AttnswitchError

# No path is longer than PATH_MAX (4,096 bytes on Linux) and no one writes a glob a quarter
# as long; the bound keeps every program small (the cost above).
MAX_CHARS = 1024
# RE2's memory for one program and its automaton's states: the costliest globs of
# MAX_CHARS characters tried (1,024 `?`, 341 `**/`, 204 `[é-ü]`) compile in it, and one
# that does not is refused; an ignore file (at most 1 MiB: about a thousand such lines)
# then holds at most about a gigabyte.
MAX_MEM = 1 << 20
EXPECTED = "a gitignore-style glob"
_SHOWN_CHARS = 60


class GlobError(AttnswitchError, ValueError):
    """A glob `compile_glob` refuses, and why (`reason`); `got` is the glob as shown with
    the reason, to follow "expected ..., got" in the message of the field that held it."""

    def __init__(self, pattern: str, reason: str):
        self.reason = reason
        self.got = f"{shown(pattern)} ({reason})"
        super().__init__(f"expected {EXPECTED}, got {self.got}")


def shown(pattern: str) -> str:
    """`pattern` as a message shows it: quoted and escaped (repr), cut after
    `_SHOWN_CHARS` characters."""
    if len(pattern) <= _SHOWN_CHARS:
        return repr(pattern)
    return f"{pattern[:_SHOWN_CHARS]!r} and {len(pattern) - _SHOWN_CHARS} characters more"


class _Linear:
    """An RE2 program with the `search` pathspec's patterns call (`RegexPattern` takes any
    compiled expression with `match`)."""

    def __init__(self, program: Any):
        self.program = program
        self.pattern = program.pattern

    def match(self, name: str) -> Any:
        try:
            return self.program.match(name)
        except UnicodeEncodeError:
            return self.program.match(_escaped(name))

    def search(self, name: str) -> Any:
        try:
            return self.program.search(name)
        except UnicodeEncodeError:
            return self.program.search(_escaped(name))


def _escaped(name: str) -> str:
    """A name that is not UTF-8 (its bytes held as surrogates) as RE2 can read it and as
    the walk shows it: those bytes escaped (`\\xff`)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _options() -> Any:
    options = re2.Options()
    options.max_mem = MAX_MEM
    options.log_errors = False  # a refused glob is a GlobError, not a line on stderr
    return options


def compile_glob(line: str) -> GitIgnoreSpecPattern | None:
    """The compiled pattern of one glob or ignore-file line (see the module doc); None for
    a line that is no pattern by git's rules. Raises `GlobError`."""
    if len(line) > MAX_CHARS:
        raise GlobError(line, f"more than the {MAX_CHARS} characters a glob may have")
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        raise GlobError(line, "not Unicode text: it holds a lone surrogate") from None
    try:
        regex, include = GitIgnoreSpecPattern.pattern_to_regex(line)
    except ValueError as exc:  # pathspec's GitIgnorePatternError: a trailing "\", "!" alone
        raise GlobError(line, str(exc)) from None
    if include is None:
        text = line if line.endswith("\\ ") else line.rstrip()  # pathspec's own stripping
        if not text or text.startswith("#") or text == "/":
            return None
        # pathspec drops only a line whose bracket expression is never closed (as git does)
        raise GlobError(line, "a [ that no ] closes")
    try:
        program = re2.compile(regex, _options())
    except re2.error as exc:
        raise GlobError(line, _re2_reason(line, exc)) from None
    return GitIgnoreSpecPattern(_Linear(program), include)


def _re2_reason(line: str, exc: Exception) -> str:
    """RE2's words on a glob it refuses ("invalid character class range: z-a"), without
    the parts of the expression pathspec added (RE2 quotes the rest of the expression)."""
    message = exc.args[0] if exc.args else ""
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    what, _, quoted = message.partition(": ")
    if what.startswith("pattern too large"):
        return f"too large for RE2's {MAX_MEM >> 20} MiB of program"
    reason = message if quoted and quoted in line else what or "RE2 cannot compile it"
    if "[:" in line:  # pathspec ends a bracket expression at the first "]"
        reason += "; POSIX classes such as [[:alpha:]] are not supported"
    return reason


def spec(patterns: Iterable[GitIgnoreSpecPattern | None]) -> GitIgnoreSpec:
    """The spec of compiled patterns in their order (None entries left out). pathspec's
    "simple" backend asks each pattern in turn (RE2 programs here); its "re2" backend is
    not used: it joins all patterns into one RE2 set, which fails to compile past 8 MiB of
    program (an ignore file of 10,000 paths) and, far past it, logs thousands of lines on
    stderr."""
    return GitIgnoreSpec([p for p in patterns if p is not None], backend="simple")


__all__ = ["EXPECTED", "MAX_CHARS", "GlobError", "compile_glob", "shown", "spec"]
