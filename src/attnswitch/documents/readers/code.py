"""Source code and configuration files as code blocks, with their language known by the
file's extension (`LANGUAGES`).

The text is decoded like plain text (`text.decode`: BOM, UTF-8, detection) and refused
as binary the same way. It is cut at blank lines into code blocks, so a chunk can end
between functions or sections rather than inside one; each block records the
language.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from types import MappingProxyType

from attnswitch.documents.readers.blocks import Block, BlockKind, Extracted, ReadOptions
from attnswitch.documents.readers.skip import Skip, Skipped
from attnswitch.documents.readers.text import check_controls, decode

# Extension -> language (the names Pygments and Markdown code fences use). A short fixed
# table rather than Pygments' lookup: these are the extensions `registry.BUILTIN` gives the code reader, and
# the answer must not change with the installed Pygments version. Not here: `.php` and other
# templates, mostly HTML, which content sniffing reads as HTML.
LANGUAGES = MappingProxyType(
    {
        ".py": "python",
        ".pyi": "python",
        ".js": "javascript",
        ".mjs": "javascript",
        ".cjs": "javascript",
        ".jsx": "javascript",
        ".ts": "typescript",
        ".tsx": "typescript",
        ".go": "go",
        ".rs": "rust",
        ".java": "java",
        ".kt": "kotlin",
        ".scala": "scala",
        ".c": "c",
        ".h": "c",
        ".cc": "cpp",
        ".cpp": "cpp",
        ".cxx": "cpp",
        ".hpp": "cpp",
        ".hh": "cpp",
        ".cs": "csharp",
        ".rb": "ruby",
        ".swift": "swift",
        ".sh": "bash",
        ".bash": "bash",
        ".zsh": "zsh",
        ".ps1": "powershell",
        ".sql": "sql",
        ".r": "r",
        ".lua": "lua",
        ".pl": "perl",
        ".hs": "haskell",
        ".ml": "ocaml",
        ".ex": "elixir",
        ".exs": "elixir",
        ".erl": "erlang",
        ".clj": "clojure",
        ".jl": "julia",
        ".dart": "dart",
        ".m": "objective-c",
        ".css": "css",
        ".scss": "scss",
        ".yaml": "yaml",
        ".yml": "yaml",
        ".toml": "toml",
        ".ini": "ini",
        ".cfg": "ini",
        ".conf": "ini",
        ".json": "json",
        ".jsonl": "json",
        ".xml": "xml",
        ".proto": "protobuf",
        ".tf": "terraform",
        ".gradle": "groovy",
        ".cmake": "cmake",
        ".mk": "make",
        ".dockerfile": "docker",
    }
)
_BLANK_LINES = re.compile(r"\n(?:[ \t]*\n)+")


def read_code(data: bytes, options: ReadOptions) -> Extracted:
    """A source or config file as code blocks (see the module)."""
    text, encoding, detected = decode(data)
    check_controls(text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    language = LANGUAGES.get(PurePath(options.name).suffix.lower())
    blocks = [
        Block(BlockKind.CODE, part.strip("\n"), language=language)
        for part in _BLANK_LINES.split(text)
        if part.strip()
    ]
    if not blocks:
        raise Skipped(Skip.EMPTY, "no text")
    return Extracted(tuple(blocks), encoding, detected)
