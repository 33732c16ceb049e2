"""The errors attnswitch raises for its user, as opposed to bugs.

`AttnswitchError` is the base of every error whose message is meant for the person who ran
attnswitch: one line saying what is wrong (the argument or file, what was expected, what
came) and what to do. The CLI prints such an error as that one line and exits non-zero;
any other exception is a bug (or an unexpected failure of the machine) and keeps its
traceback. Each subclass keeps the built-in class it has always been (`ValueError`,
`RuntimeError`, `ConnectionError`...), so code that catches those still does.
"""

from __future__ import annotations


class AttnswitchError(Exception):
    """An error meant for the user (see the module doc)."""


class ConfigError(AttnswitchError, ValueError):
    """A setting out of its range, or settings that do not go together (a command-line
    option, a `RunOptions` or `ServiceConfig` field, an environment variable)."""
