"""The commands that keep an index in step with its folders: `forget` and `watch`.

    attnswitch forget PATH [--db DIR] [--json]
    attnswitch watch FOLDER [--db DIR] [the options of run] [--json]

`forget` removes a file or a folder (every document below it) from the index, with its
chunks and vectors; a path with no indexed document is refused with one line naming it.
`watch` is in `cli/watch.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from attnswitch.cli.options import JsonOption, StoreOption, nonblank_path
from attnswitch.cli.output import print_json


def forget_command(
    path: Annotated[Path, typer.Argument(help="A file or folder of an indexed folder.",
                                         parser=nonblank_path)],
    db: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove a file or a folder from the index, with its chunks and vectors (the files
    themselves are left alone; a later run of their folder indexes them again)."""
    from attnswitch.cli.pipeline import _fail, _open_store, _store_errors, store_location
    from attnswitch.pipeline.forget import NotIndexedError, forget

    location = store_location(db)
    with _store_errors("forget", location, as_json), \
            _open_store(location, "forget", as_json, existing=True) as store:
        try:
            done = forget(path, store)
        except NotIndexedError as exc:
            raise _fail("forget", str(exc), as_json) from None
    report = {"path": done.path, "documents": done.documents,
              "removed": [{"root": r, "documents": n} for r, n in done.removed.items()]}
    if as_json:
        print_json(report)
    else:
        typer.echo(f"forgot {done.documents:,} document(s) at {done.path}")
