"""Tesseract's command-line program (Debian: `tesseract-ocr`), run as a subprocess: the
language packs it has, the script a page is written in (its orientation and script
detection, OSD), and the text it recognises in a page: as plain text (`recognise_png`),
or with how sure Tesseract is of its words (`read_page`, from its TSV output).

The readers run Tesseract's program directly, as they run antiword and xls2csv, rather than
through pytesseract (a thin wrapper over the same program): each call here needs its own
environment (one thread), time limit and reading of the program's output, which is all
pytesseract would add. Each run goes through `readers.helper_process`: no Tesseract
outlives its call, nor the process that made it (a `kill -9` of the run included).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from attnswitch.documents.readers.helper_process import run

_LIST_TIMEOUT_S = 30
_SCRIPT = re.compile(r"^Script: (\S+)$", re.MULTILINE)
_FOLDER = re.compile(r'"([^"]+)"')


def tesseract_env() -> dict[str, str]:
    """The environment Tesseract runs in: this process's (`TESSDATA_PREFIX` included,
    which names the folder of the language packs) with one thread per Tesseract."""
    # One thread per Tesseract: its OpenMP threads fight over a busy machine's cores (one
    # page took 21 s instead of 2.4 s on two loaded cores); pages run side by side in
    # processes instead, as Tesseract's documentation advises.
    return {**os.environ, "OMP_THREAD_LIMIT": "1"}


def installed_packs() -> frozenset[str]:
    """The language packs Tesseract finds (`tesseract --list-langs`: "eng", "osd",
    "chi_sim", ...); `RuntimeError` when the program does not run."""
    # The first line is a title ("List of available languages in ..."), then one a line.
    lines = _output(["tesseract", "--list-langs"]).splitlines()[1:]
    return frozenset(line.strip() for line in lines if line.strip())


def build() -> str:
    """What Tesseract's text depends on besides a page and its packs, as one line: the
    program's version and each language data file's name, size and modification time (an
    upgraded pack is another build); `RuntimeError` when the program does not run."""
    version = _output(["tesseract", "--version"]).partition("\n")[0].strip()
    title = _output(["tesseract", "--list-langs"]).partition("\n")[0]
    folder = _FOLDER.search(title)
    files = sorted(Path(folder.group(1)).glob("*.traineddata")) if folder else []
    stamps = []
    for path in files:
        with contextlib.suppress(OSError):
            stat = path.stat()
            stamps.append(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}")
    return " ".join([version, *stamps])


def _output(args: list[str]) -> str:
    try:
        done = run(args, timeout_s=_LIST_TIMEOUT_S, env=tesseract_env())
        done.check_returncode()
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"Tesseract does not run: {type(exc).__name__}: {exc}") from None
    return done.stdout.decode(errors="replace")


def detect_script(png: bytes, timeout_s: float) -> str | None:
    """The script Tesseract's OSD (`--psm 0` with the `osd` pack) finds a page image
    (PNG bytes) written in, by its name in OSD's output: "Latin", "Cyrillic", "Han",
    "Japanese" (kana), "Korean" (hangul), "Devanagari", "Arabic", ... None when OSD finds
    none: too few characters (a blank or nearly blank page), or it fails. `RuntimeError`
    when it takes more than `timeout_s`."""
    done = _run(["tesseract", "stdin", "stdout", "--psm", "0", "-l", "osd"], png, timeout_s)
    if done.returncode != 0:
        return None  # "Too few characters. Skipping this page", or OSD could not run
    found = _SCRIPT.search(done.stdout.decode("utf-8", "replace"))
    return found.group(1) if found else None


def recognise_png(png: bytes, languages: str, timeout_s: float) -> str:
    """The text Tesseract reads in a page image (PNG bytes) with the language packs
    `languages` ("eng", "kor+eng"); `RuntimeError` when it fails or takes more than
    `timeout_s`."""
    done = _run(["tesseract", "stdin", "stdout", "-l", languages], png, timeout_s)
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(
            f"Tesseract failed ({done.returncode}): {lines[-1] if lines else 'no message'}"
        )
    return done.stdout.decode("utf-8", "replace")


@dataclass(frozen=True)
class Reading:
    """What Tesseract read in a page with the packs `packs` ("eng", "kor+eng"): its text
    (`reading_of_tsv`'s: a line a line, a blank line between paragraphs, words joined by
    spaces; `read_page`'s: Tesseract's own text), how many `words`, and their mean
    `confidence`, Tesseract's own 0-100 (0 with no words). A page in a script its packs
    read gives 91-96 (English, German by English, Russian, Korean, Japanese, Chinese,
    Hindi pages by their packs); read by English, the Russian page gave 47 and the
    others 28-40."""

    packs: str
    text: str
    words: int
    confidence: float


def read_page(png: bytes, languages: str, timeout_s: float) -> Reading:
    """The `Reading` of a page image (PNG bytes) by the packs `languages`, from one run
    that writes Tesseract's text (the same as `recognise_png`'s) and its TSV (a row per
    word with its confidence) to files of a temporary folder; `RuntimeError` when it fails
    or takes more than `timeout_s`."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="attnswitch-ocr-") as folder:
        base = Path(folder) / "page"
        args = ["tesseract", "stdin", str(base), "-l", languages, "txt", "tsv"]
        done = _run(args, png, timeout_s)
        if done.returncode != 0:
            lines = done.stderr.decode(errors="replace").strip().splitlines()
            raise RuntimeError(
                f"Tesseract failed ({done.returncode}): {lines[-1] if lines else 'no message'}"
            )
        try:
            text = base.with_suffix(".txt").read_text("utf-8", "replace")
            tsv = base.with_suffix(".tsv").read_text("utf-8", "replace")
        except OSError as exc:
            raise RuntimeError(f"Tesseract wrote no output: {exc}") from None
    found = reading_of_tsv(languages, tsv)
    return Reading(languages, text, found.words, found.confidence)


def reading_of_tsv(packs: str, tsv: str) -> Reading:
    """The `Reading` of Tesseract's TSV output `tsv` (its header row first; the columns
    level, page_num, block_num, par_num, line_num, word_num, left, top, width, height,
    conf, text; a word is a row of level 5 with text)."""
    paragraphs: dict[tuple[str, ...], dict[str, list[str]]] = {}
    confidences: list[float] = []
    for row in tsv.splitlines()[1:]:
        cells = row.split("\t")
        if len(cells) < 12 or cells[0] != "5" or not cells[11].strip():
            continue
        try:
            confidences.append(max(float(cells[10]), 0.0))
        except ValueError:
            continue
        lines = paragraphs.setdefault(tuple(cells[1:4]), {})
        lines.setdefault(cells[4], []).append(cells[11].strip())
    text = "\n\n".join(
        "\n".join(" ".join(words) for words in lines.values()) for lines in paragraphs.values()
    )
    mean = sum(confidences) / len(confidences) if confidences else 0.0
    return Reading(packs, text, len(confidences), mean)


def _run(args: list[str], png: bytes, timeout_s: float) -> subprocess.CompletedProcess[bytes]:
    try:
        return run(args, input=png, timeout_s=timeout_s, env=tesseract_env())
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"Tesseract took more than {timeout_s:g} s") from None
    except OSError as exc:
        raise RuntimeError(f"Tesseract does not run: {exc}") from None
