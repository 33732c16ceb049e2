"""Which place of a document's copies a hit shows: the one rule of every interface.

A drive holds the same bytes at several paths (`Store.copies_of`); search folds them into
one hit (`search.distinct_documents`), shown at one path with the others in `also_at`.
The shown path is the first of the copies in `shown_order`:

1. a path without a copy marker (`is_marked`): "copy" as a word in any of its parts
   ("backup policy (copy).pdf", "Copy of notes.txt", "notes - Copy.txt", "notes_copy.txt",
   and "Kopie", "copie", "copia"), or a number in parentheses ("notes (1).txt");
2. then the oldest file (the earliest modification time stored);
3. then the shortest path;
4. then the path, then the root, alphabetically.

So the original wins over its copy whatever order they were indexed or ranked in, and the
choice is the same for the CLI, `attnswitch.search`, `/v1/search`, MCP and the
LangChain and LlamaIndex retrievers, which all read `search.search`'s hits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import PurePosixPath

from attnswitch.indexing.records import StoredDocument

# "copy" (and its German, French, Spanish/Italian words) as a word: not a letter on either
# side, so "backup_copy" and "(copy)" count, "copyright" does not; or "(1)", "(2)", ...
COPY_MARKER = re.compile(r"(?<![a-z])(?:copy|kopie|copie|copia)(?![a-z])|\(\d+\)", re.IGNORECASE)


def is_marked(path: str) -> bool:
    """Whether a part of `path` (a folder's name, or the file's name less its extension)
    carries a copy marker (`COPY_MARKER`)."""
    parts = PurePosixPath(path).parts
    names = [*parts[:-1], PurePosixPath(parts[-1]).stem] if parts else []
    return any(COPY_MARKER.search(name) for name in names)


def shown_order(doc: StoredDocument) -> tuple[bool, int, int, str, str]:
    """The sort key of `doc` among its copies: the first is shown (the rule above)."""
    return (is_marked(doc.source), doc.mtime_ns, len(doc.source), doc.source, doc.root)


def shown_copy(copies: Iterable[StoredDocument]) -> StoredDocument:
    """The copy a hit shows, of one or more documents with the same bytes."""
    docs = list(copies)
    if not docs:
        raise ValueError("copies: expected at least one document, got none")
    return min(docs, key=shown_order)
