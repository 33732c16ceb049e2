"""`python -m attnswitch.service [OPTIONS]`: `attnswitch serve` on its own."""

import typer

from attnswitch.cli.serve import serve_command

if __name__ == "__main__":
    typer.run(serve_command)
