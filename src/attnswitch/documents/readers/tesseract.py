"""Tesseract's command-line program (Debian: `tesseract-ocr`), run as a subprocess: the
language packs it has, the script a page is written in (its orientation and script
detection, OSD), and the text it recognises in a page.

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


def _run(args: list[str], png: bytes, timeout_s: float) -> subprocess.CompletedProcess[bytes]:
    try:
        return run(args, input=png, timeout_s=timeout_s, env=tesseract_env())
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"Tesseract took more than {timeout_s:g} s") from None
    except OSError as exc:
        raise RuntimeError(f"Tesseract does not run: {exc}") from None
