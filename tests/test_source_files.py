"""Small modules with one job: no source file of the package is over `MAX_LINES` lines
(docs/architecture.md, "Layers")."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "attnswitch"
MAX_LINES = 800


def long_files(root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """Each `.py` file under `root` with more than `limit` lines, and its count."""
    counts = {
        str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(root.rglob("*.py"))
    }
    return {name: n for name, n in counts.items() if n > limit}


def test_no_source_file_is_over_the_limit() -> None:
    assert long_files(SRC) == {}


def test_the_check_finds_a_long_file(tmp_path: Path) -> None:
    (tmp_path / "short.py").write_text("x = 1\n" * 3)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * 4)
    assert long_files(tmp_path, limit=3) == {"pkg/long.py": 4}
