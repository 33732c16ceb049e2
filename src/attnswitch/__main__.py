"""`python -m attnswitch ARGS`: the `attnswitch` command."""

from attnswitch.cli.entry import main

main()
