"""Regenerate the text the OCR language tests print and read back
(tests/documents/readers/ocr_pages/): for each language tested, the first paragraphs of a
Debian package's translated documentation (`script_pages.DEBIAN_SOURCES`: the Debian
Reference in German, Japanese and simplified and traditional Chinese, the installation
guide in Russian and Korean, LibreOffice's help in Hindi) that the language's font draws,
about a third of an A4 page of each (at least 900 characters, 450 for Chinese, Japanese
and Korean), as PACK.txt (paragraphs separated by blank lines, UTF-8); each package's
Debian copyright file beside them in licenses/, and NOTICE.md naming the package,
version and file each text came from.

Needs apt-get (the packages are downloaded, not installed), dpkg-deb, and the fonts of
`script_pages.FONTS` (fonts-noto-core, fonts-noto-cjk), whose characters decide which
paragraphs are taken. Run: python scripts/make_ocr_language_fixtures.py (from the
repository root).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "pipeline" / "readers"))

from script_pages import (  # noqa: E402
    DEBIAN_SOURCES,
    PAGES,
    debian_paragraphs,
    fetch_debian_sources,
    missing_font,
    normalised,
    package_version,
)

PACKS = ("deu", "rus", "chi_sim", "chi_tra", "jpn", "kor", "hin")
CJK = ("chi_sim", "chi_tra", "jpn", "kor")


def first_paragraphs(paragraphs: list[str], pack: str) -> list[str]:
    """The first of `paragraphs` that together reach the length wanted for `pack`."""
    wanted = 450 if pack in CJK else 900
    out: list[str] = []
    while sum(len(normalised(p)) for p in out) < wanted:
        out.append(paragraphs[len(out)])
    return out


def main() -> None:
    for pack in PACKS:
        if (why := missing_font(pack)) is not None:
            raise SystemExit(f"make_ocr_language_fixtures: {why}")
    PAGES.mkdir(exist_ok=True)
    (PAGES / "licenses").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        root = fetch_debian_sources(work, list(PACKS))
        rows = []
        for pack in PACKS:
            source = DEBIAN_SOURCES[pack]
            taken = first_paragraphs(debian_paragraphs(pack, root), pack)
            (PAGES / f"{pack}.txt").write_text("\n\n".join(taken) + "\n", encoding="utf-8")
            copyright_file = root / "usr/share/doc" / source.package / "copyright"
            shutil.copy(copyright_file, PAGES / "licenses" / f"{source.package}.copyright")
            rows.append(
                f"| `{pack}.txt` | {len(taken)} paragraphs of `{source.files}` | "
                f"`{source.package}` ({package_version(work, source.package)}) |"
            )
    notice = [
        "# Text printed by the OCR language tests: sources and licences",
        "",
        'Paragraphs of Debian 12 ("bookworm") packages\' translated documentation, '
        "copied unchanged (whitespace collapsed, NFC) from their HTML by "
        "`scripts/make_ocr_language_fixtures.py`, which says how they are chosen. Each "
        "package's Debian copyright file is kept verbatim in `licenses/`: it names the "
        "copyright holders and gives the licence (the Debian Reference: GPL-2+; the "
        "installation guide: GPL-2; LibreOffice's help: MPL-2.0).",
        "",
        "| file | text | package (version) |",
        "|---|---|---|",
        *rows,
        "",
    ]
    (PAGES / "NOTICE.md").write_text("\n".join(notice), encoding="utf-8")
    print(f"make_ocr_language_fixtures: wrote {len(PACKS)} texts to {PAGES.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
