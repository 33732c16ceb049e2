"""`python -m attnswitch.cli ARGS`: the `attnswitch` command."""

from attnswitch.cli.entry import main

main()
