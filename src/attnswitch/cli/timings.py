"""A search's timings: `search_timings`, the `timings` object of `search --json`, and
`report_timings`, the line `$ATTNSWITCH_TIMINGS=1` prints on stderr."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attnswitch.indexing.query import QuerySteps


ENV_TIMINGS = "ATTNSWITCH_TIMINGS"


def report_timings(timings: dict[str, float | None], print_s: float, steps: QuerySteps) -> None:
    """With `$ATTNSWITCH_TIMINGS=1`, one line on stderr after the results: "attnswitch
    search timings: " and a JSON object, the `timings` of `search_timings` plus print_s
    (printing the results) and the query's engine."""
    if os.environ.get(ENV_TIMINGS, "").strip() not in ("1", "true", "yes"):
        return
    import sys

    line = {**timings, "print_s": print_s, "engine": steps.engine or None}
    print(f"attnswitch search timings: {json.dumps(line)}", file=sys.stderr, flush=True)


def search_timings(
    steps: QuerySteps, startup_s: float | None, age_s: float | None
) -> dict[str, float | None]:
    """The `timings` of `search --json`, in seconds:
    import_s: from the process's start to the command's, plus importing the engine's
    runtime (openvino, onnxruntime, torch...); tokenizer_s: loading the model's tokenizer;
    load_s: the rest of loading the engine: reading its plan, reading or compiling the model;
    encode_s: encoding the query; search_s: the store's search; total_s: from the process's
    start to the results (the steps' sum plus opening the store and the index's config).
    Steps a search did not take are 0 (keyword mode loads no model); import_s and total_s
    are None where the process's start time cannot be read."""
    return {
        "import_s": None if startup_s is None else startup_s + steps.runtime_import_s,
        "tokenizer_s": steps.tokenizer_s,
        "load_s": steps.load_s,
        "encode_s": steps.encode_s,
        "search_s": steps.search_s,
        "total_s": age_s,
    }
