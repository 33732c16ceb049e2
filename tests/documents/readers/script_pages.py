"""Pages of real text in many scripts, printed to images for OCR, and how well OCR reads
them back.

The text is that of Debian's translated documents, which no one here wrote
(`DEBIAN_SOURCES`): the Debian Reference in German, French, Spanish, Japanese and
simplified and traditional Chinese, the installation guide in Russian and Korean, and
LibreOffice's help in Hindi. `debian_paragraphs` takes a language's paragraphs from the
unpacked packages (`fetch_debian_sources`, by `apt-get download`: nothing is installed);
the tests read a few of them committed in ocr_pages/ (scripts/make_ocr_language_fixtures.py
writes them), benchmarks/ocr_languages.py reads pages of them.

`render_pages` prints paragraphs with Pillow (libraqm shapes Devanagari) in a Noto font of
the language's script (Debian: fonts-noto-core, fonts-noto-cjk; the CJK face of the
language's region), 11 pt on A4 at the resolution scanned pages are read at (200 dpi,
`ReadOptions.ocr_dpi`), with 1-inch margins, lines broken at spaces (and between any two
Chinese or Japanese characters); it returns each page's image and the text it shows.
`char_accuracy` scores what OCR read against that text.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import unicodedata
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAGES = HERE / "ocr_pages"  # the committed paragraphs, one file per language: PACK.txt
NOTO = Path("/usr/share/fonts/truetype/noto")
NOTO_CJK = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
A4_INCHES = (8.27, 11.69)
POINT_SIZE = 11


@dataclass(frozen=True)
class Font:
    """A font file (with its face in a collection) and the Debian package that has it."""

    path: Path
    index: int
    package: str


LATIN = Font(NOTO / "NotoSans-Regular.ttf", 0, "fonts-noto-core")  # Latin, Cyrillic, Greek
FONTS = {
    "eng": LATIN,
    "deu": LATIN,
    "fra": LATIN,
    "spa": LATIN,
    "rus": LATIN,
    "hin": Font(NOTO / "NotoSansDevanagari-Regular.ttf", 0, "fonts-noto-core"),
    # Noto Sans CJK's faces, in the collection's order: JP, KR, SC, TC (the region's
    # glyph forms)
    "jpn": Font(NOTO_CJK, 0, "fonts-noto-cjk"),
    "kor": Font(NOTO_CJK, 1, "fonts-noto-cjk"),
    "chi_sim": Font(NOTO_CJK, 2, "fonts-noto-cjk"),
    "chi_tra": Font(NOTO_CJK, 3, "fonts-noto-cjk"),
}


@dataclass(frozen=True)
class Source:
    """Where a language's text comes from: a Debian package, the glob of its HTML files
    (in the unpacked package, taken in name order), the letters of the script a paragraph
    must be mostly written in (a regular expression; None: any), and the script's name
    as Tesseract's OSD reports it."""

    package: str
    files: str
    letters: str | None
    script: str


_REFERENCE = "usr/share/debian-reference/ch*.{}.html"
_INSTALL = "usr/share/doc/installation-guide-amd64/{}/ch*.html"
DEBIAN_SOURCES = {
    "eng": Source("debian-reference-en", _REFERENCE.format("en"), None, "Latin"),
    "deu": Source("debian-reference-de", _REFERENCE.format("de"), None, "Latin"),
    "fra": Source("debian-reference-fr", _REFERENCE.format("fr"), None, "Latin"),
    "spa": Source("debian-reference-es", _REFERENCE.format("es"), None, "Latin"),
    "rus": Source(
        "installation-guide-amd64", _INSTALL.format("ru"), r"[\u0400-\u04ff]", "Cyrillic"
    ),
    "chi_sim": Source(
        "debian-reference-zh-cn", _REFERENCE.format("zh-cn"), r"[\u4e00-\u9fff]", "Han"
    ),
    "chi_tra": Source(
        "debian-reference-zh-tw", _REFERENCE.format("zh-tw"), r"[\u4e00-\u9fff]", "Han"
    ),
    "jpn": Source(
        "debian-reference-ja", _REFERENCE.format("ja"), r"[\u3040-\u30ff\u4e00-\u9fff]", "Japanese"
    ),
    "kor": Source("installation-guide-amd64", _INSTALL.format("ko"), r"[\uac00-\ud7af]", "Korean"),
    # LibreOffice's Hindi help is partly untranslated: only paragraphs in Hindi are taken
    "hin": Source(
        "libreoffice-help-hi",
        "usr/share/libreoffice/help/hi/text/shared/**/*.html",
        r"[\u0900-\u097f]",
        "Devanagari",
    ),
}
# The packs the readers read a page of each committed language with when English is the
# chosen language (`OcrLanguages.for_script`): English for a Latin page, else its script's
# packs (both Chinese ones for Han, which OSD does not split) then English, for the Latin
# words of its text.
READ_WITH = {
    "deu": "eng",
    "rus": "rus+eng",
    "chi_sim": "chi_sim+chi_tra+eng",
    "chi_tra": "chi_sim+chi_tra+eng",
    "jpn": "jpn+eng",
    "kor": "kor+eng",
    "hin": "hin+eng",
}
# The character accuracy a page of each committed language reaches with READ_WITH here,
# less a margin for another Tesseract model (docs/results/ocr_languages.md has more
# pages): German read by English misses an umlaut or two (0.98); Chinese read by both
# packs 0.92-0.94; Korean loses the order of some lines, where Tesseract's layout analysis
# takes the page for two columns, and reads "GNU" set in the Korean font as "64" (0.87).
ACCURACY = {
    "deu": 0.95,
    "rus": 0.97,
    "chi_sim": 0.9,
    "chi_tra": 0.88,
    "jpn": 0.95,
    "kor": 0.8,
    "hin": 0.97,
}
_MOSTLY = {"hin": 0.9}  # the share of a paragraph's letters in its script; else half
_MIN_CHARS = 40


def missing_font(pack: str) -> str | None:
    """Why `pack`'s text cannot be printed here (its font's Debian package is not
    installed), or None."""
    font = FONTS[pack]
    if font.path.exists():
        return None
    return f"{font.path.name} is not installed (Debian: {font.package}; make system-packages)"


def committed_paragraphs(pack: str) -> list[str]:
    """The paragraphs of `pack`'s language committed in ocr_pages/ (blank-line separated)."""
    text = (PAGES / f"{pack}.txt").read_text(encoding="utf-8")
    return [p for p in text.split("\n\n") if p.strip()]


def fetch_debian_sources(work: Path, packs: list[str]) -> Path:
    """The Debian packages of `packs`' sources downloaded (`apt-get download`) into
    `work` and unpacked there (`dpkg-deb -x`) unless already; the unpacked root."""
    root = work / "root"
    root.mkdir(parents=True, exist_ok=True)
    for package in sorted({DEBIAN_SOURCES[p].package for p in packs}):
        if list(work.glob(f"{package}_*.deb")):
            continue
        subprocess.run(
            ["apt-get", "download", package], cwd=work, check=True, stdout=subprocess.DEVNULL
        )
        [deb] = work.glob(f"{package}_*.deb")
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root


def package_version(work: Path, package: str) -> str:
    """The version of the downloaded `package` (from its .deb's name)."""
    [deb] = work.glob(f"{package}_*.deb")
    return deb.name.split("_")[1].replace("%3a", ":")


def debian_paragraphs(pack: str, root: Path) -> list[str]:
    """The paragraphs (HTML `<p>`, whitespace collapsed, NFC) of `pack`'s source under the
    unpacked `root`, in file and document order: those of at least 40 characters, mostly
    in the script (`Source.letters`), and whose every character the language's font draws
    (Pillow would print a box for any other, and the box is not the text)."""
    import lxml.html
    from fontTools.ttLib import TTFont

    source = DEBIAN_SOURCES[pack]
    font = FONTS[pack]
    drawn = TTFont(font.path, fontNumber=font.index, lazy=True).getBestCmap()
    mostly = _MOSTLY.get(pack, 0.5)
    out = []
    for path in sorted(root.glob(source.files)):
        page = lxml.html.fromstring(path.read_bytes())
        for element in page.iter("p"):
            text = unicodedata.normalize("NFC", " ".join(element.text_content().split()))
            if len(text) < _MIN_CHARS:
                continue
            if any(ord(c) not in drawn for c in text if not c.isspace()):
                continue
            letters = sum(c.isalpha() for c in text)
            if source.letters and len(re.findall(source.letters, text)) < mostly * letters:
                continue
            out.append(text)
    return out


# A Chinese or Japanese character (ideographs, kana, their punctuation and full-width
# forms) is a place a line may break; so is a space after any other run of characters.
# Korean is written with spaces between words and breaks there, as Latin does.
_CJK = "\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
_PIECE = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+\\s*|\\s+")


def render_pages(
    paragraphs: list[str],
    pack: str,
    *,
    dpi: int = 200,
    pages: int = 1,
    max_lines: int | None = None,
) -> list[tuple[object, str]]:
    """Print `paragraphs` in order on up to `pages` A4 pages (see the module), each page
    as (greyscale Pillow image, the text it shows: its lines, paragraphs separated by a
    blank line); a paragraph that does not fit on what is left of a page starts the next.
    `max_lines`: a page holds at most that many lines (and its image ends below them)."""
    from PIL import Image, ImageDraw, ImageFont

    font_file = FONTS[pack]
    font = ImageFont.truetype(
        str(font_file.path), round(POINT_SIZE * dpi / 72), index=font_file.index
    )
    width, height = (round(inches * dpi) for inches in A4_INCHES)
    margin, line_height = dpi, round(POINT_SIZE * 1.6 * dpi / 72)
    measure = ImageDraw.Draw(Image.new("L", (1, 1)))
    laid = [_lines(p, font, width - 2 * margin, measure) for p in paragraphs]
    out = []
    while laid and len(out) < pages:
        room = (height - 2 * margin) // line_height
        if max_lines is not None:
            room = min(room, max_lines)
        shown: list[list[str]] = []
        used = 0
        while laid and used + len(laid[0]) <= room:
            shown.append(laid.pop(0))
            used += len(shown[-1]) + 1  # half a line between paragraphs, rounded up
        if not shown:  # a paragraph longer than a page: print what fits
            shown.append(laid[0][:room])
            laid[0] = laid[0][room:]
        page_height = height if max_lines is None else 2 * margin + used * line_height
        image = Image.new("L", (width, page_height), 255)
        draw = ImageDraw.Draw(image)
        y = margin
        for lines in shown:
            for line in lines:
                draw.text((margin, y), line, font=font, fill=0)
                y += line_height
            y += line_height // 2
        out.append((image, "\n\n".join("\n".join(lines) for lines in shown)))
    return out


def printed_page(pack: str, *, max_lines: int | None = None) -> tuple[bytes, str]:
    """The first page of `pack`'s committed paragraphs (`render_pages`) as PNG bytes, and
    the text it shows."""
    import io

    [(image, text)] = render_pages(committed_paragraphs(pack), pack, max_lines=max_lines)
    png = io.BytesIO()
    image.save(png, format="PNG")
    return png.getvalue(), text


def _lines(paragraph: str, font, width: int, measure) -> list[str]:
    """`paragraph` broken into lines of at most `width` pixels in `font`."""
    lines: list[str] = []
    line = ""
    for piece in _PIECE.findall(paragraph):
        if line and measure.textlength((line + piece).rstrip(), font=font) > width:
            lines.append(line.rstrip())
            line = piece.lstrip()
        else:
            line += piece
    if line.strip():
        lines.append(line.rstrip())
    return lines


def normalised(text: str) -> str:
    """`text` as characters are compared: NFKC (full-width Latin letters and punctuation,
    which Tesseract may give for the half-width ones or the reverse, become the same),
    without whitespace (Tesseract puts spaces between CJK characters and breaks lines its
    own way; spacing is not what is measured)."""
    return "".join(unicodedata.normalize("NFKC", text).split())


def char_accuracy(expected: str, got: str) -> float:
    """1 - (Levenshtein distance / length) of the `normalised` texts: the share of the
    expected characters OCR read right (rapidfuzz); below 0 when OCR adds more than it
    reads."""
    from rapidfuzz.distance import Levenshtein

    want, have = normalised(expected), normalised(got)
    return 1 - Levenshtein.distance(want, have) / len(want)


def tesseract_missing(*packs: str) -> str | None:
    """Why Tesseract cannot read `packs` here (the program or a pack is not installed),
    or None."""
    if shutil.which("tesseract") is None:
        return "Tesseract is not installed (Debian: tesseract-ocr; make system-packages)"
    from attnswitch.documents.readers.ocr_languages import debian_package
    from attnswitch.documents.readers.tesseract import installed_packs

    missing = [p for p in packs if p not in installed_packs()]
    if missing:
        return (
            f"Tesseract has no {'+'.join(missing)} here (Debian: "
            f"{', '.join(debian_package(p) for p in missing)}; make system-packages)"
        )
    return None


def tessdata_with(folder: Path, packs: list[str]) -> Path:
    """`folder` made a Tesseract data folder holding only the installed `packs` (links to
    their files, and to the configs every call reads): set as `TESSDATA_PREFIX`, it is a
    machine where every other pack is not installed."""
    listed = subprocess.run(
        ["tesseract", "--list-langs"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    # the first line names the folder: List of available languages in "/usr/.../tessdata/"
    installed = Path(re.search(r'"(.+?)"', listed).group(1))
    folder.mkdir(parents=True, exist_ok=True)
    for entry in installed.iterdir():
        if entry.suffix != ".traineddata" or entry.stem in packs:
            (folder / entry.name).symlink_to(entry)
    return folder


def need(*packs: str, fonts_of: tuple[str, ...] = ()) -> None:
    """Skip the calling test, saying which Debian package is missing, unless Tesseract
    with `packs` and the fonts of the languages `fonts_of` are installed."""
    import pytest

    why = tesseract_missing(*packs) or next(
        (w for w in map(missing_font, fonts_of) if w is not None), None
    )
    if why is not None:
        pytest.skip(why)
