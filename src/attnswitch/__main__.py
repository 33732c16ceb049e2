"""`python -m attnswitch ARGS`: the `attnswitch` command."""

from attnswitch.cli import app

app()
