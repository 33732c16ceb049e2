"""`python -m attnswitch.cli ARGS`: the `attnswitch` command."""

from attnswitch.cli import app

app()
