"""Which of Tesseract's language packs read a page.

- The chosen languages: `ReadOptions.ocr_languages` (`--ocr-languages`: Tesseract's
  "eng+deu", or "eng,deu"), else the default: the system locale's language (the first
  set of `LC_ALL`, `LC_MESSAGES`, `LANG`; `LOCALE_PACKS`) and English, those of the two
  that are installed (English alone where neither is). A chosen pack that is not
  installed makes OCR unavailable, and every scanned page says so.
- Each page's script, found by Tesseract's orientation and script detection (OSD, the
  `osd` pack: Debian's tesseract-ocr-osd) unless `ReadOptions.ocr_detect` is off or the
  pack is missing (then every page is read with the chosen languages); OSD is asked only
  about a page the chosen packs read unsure, and a second reading by other packs is kept
  only where Tesseract is surer of it (`ocr.read_best`). A page whose
  script a chosen pack reads (`PACK_SCRIPT`) is read with the chosen packs; any other
  with the installed packs of its script (`SCRIPT_PACKS`), then the chosen ones, which
  read the Latin words such pages hold (a Korean page under the default English:
  "kor+eng"). Where no pack of its script is installed the page is not read, and says
  which Debian package would read it (`NoPack`), rather than being read as noise by a
  pack of another script, unless the chosen packs read it well (`ocr.READS_CONFIDENCE`:
  OSD errs on screenshots and short text). A page where OSD finds no script (blank, or too little text)
  is read with the chosen languages.
- OSD tells Han from Japanese (kana) and Korean (hangul), not simplified from traditional
  Chinese: a Han page that no chosen pack covers is read with both Chinese packs where
  both are installed (chi_sim+chi_tra read each script within 1.3 to 4.2 points of 1 -
  CER of the right pack alone; the other pack alone lost 21 points, and both took about
  twice the time of one: docs/results/ocr_languages.md).
- OSD is sure of a full page's script, less of a page of two lines (the same page): such
  a page may be read with another script's packs, or, where OSD names a script with no
  installed pack, not read and said to need that pack.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

# Tesseract names its packs by ISO 639-2 code, with its own names for Chinese (chi_sim,
# chi_tra), variants (srp_latn, aze_cyrl, *_vert) and script packs (Debian's
# tesseract-ocr-script-*: "Latin", "Hangul", "HanS", ...); no library maps between these
# and locale names, hence the tables below. They cover the packs Debian ships
# (`apt-cache search tesseract-ocr-`) in the scripts OSD reports.

# Language packs (and script packs) by the script they read, in OSD's names.
_PACKS_BY_SCRIPT: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "Latin": (
            "afr",
            "aze",
            "bos",
            "bre",
            "cat",
            "ceb",
            "ces",
            "cos",
            "cym",
            "dan",
            "deu",
            "eng",
            "enm",
            "epo",
            "est",
            "eus",
            "fao",
            "fil",
            "fin",
            "fra",
            "frk",
            "frm",
            "fry",
            "gla",
            "gle",
            "glg",
            "hat",
            "hrv",
            "hun",
            "ind",
            "isl",
            "ita",
            "ita_old",
            "jav",
            "kmr",
            "lat",
            "lav",
            "lit",
            "ltz",
            "mlt",
            "mri",
            "msa",
            "nld",
            "nor",
            "oci",
            "pol",
            "por",
            "que",
            "ron",
            "slk",
            "slv",
            "spa",
            "spa_old",
            "sqi",
            "srp_latn",
            "sun",
            "swa",
            "swe",
            "ton",
            "tur",
            "uzb",
            "vie",
            "yor",
            "Latin",
            "Fraktur",
            "Vietnamese",
        ),
        "Cyrillic": (
            "aze_cyrl",
            "bel",
            "bul",
            "kaz",
            "kir",
            "mkd",
            "mon",
            "rus",
            "srp",
            "tat",
            "tgk",
            "ukr",
            "uzb_cyrl",
            "Cyrillic",
        ),
        "Greek": ("ell", "grc", "Greek"),
        "Arabic": ("ara", "fas", "pus", "snd", "uig", "urd", "Arabic"),
        "Hebrew": ("heb", "yid", "Hebrew"),
        "Devanagari": ("hin", "mar", "nep", "san", "Devanagari"),
        "Bengali": ("asm", "ben", "Bengali"),
        "Tamil": ("tam", "Tamil"),
        "Telugu": ("tel", "Telugu"),
        "Kannada": ("kan", "Kannada"),
        "Malayalam": ("mal", "Malayalam"),
        "Thai": ("tha", "Thai"),
        "Han": (
            "chi_sim",
            "chi_tra",
            "chi_sim_vert",
            "chi_tra_vert",
            "HanS",
            "HanT",
            "HanS_vert",
            "HanT_vert",
        ),
        "Japanese": ("jpn", "jpn_vert", "Japanese", "Japanese_vert"),
        "Korean": ("kor", "kor_vert", "Hangul", "Hangul_vert"),
    }
)
PACK_SCRIPT: Mapping[str, str] = MappingProxyType(
    {pack: script for script, packs in _PACKS_BY_SCRIPT.items() for pack in packs}
)
"""A pack -> the script (OSD's name) it reads. A pack not listed covers no script."""

# What OSD may report under another name: Tesseract 5 reports hangul as "Korean", kana as
# "Japanese", and Fraktur, which the Latin packs read, apart.
_ALIASES = MappingProxyType(
    {"Hangul": "Korean", "Hiragana": "Japanese", "Katakana": "Japanese", "Fraktur": "Latin"}
)

SCRIPT_PACKS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "Latin": ("eng", "Latin"),
        "Cyrillic": ("rus", "ukr", "bul", "srp", "bel", "mkd", "kaz", "Cyrillic"),
        "Greek": ("ell", "Greek"),
        "Arabic": ("ara", "fas", "urd", "Arabic"),
        "Hebrew": ("heb", "Hebrew"),
        "Devanagari": ("hin", "mar", "nep", "san", "Devanagari"),
        "Bengali": ("ben", "asm", "Bengali"),
        "Tamil": ("tam", "Tamil"),
        "Telugu": ("tel", "Telugu"),
        "Kannada": ("kan", "Kannada"),
        "Malayalam": ("mal", "Malayalam"),
        "Thai": ("tha", "Thai"),
        "Han": ("chi_sim+chi_tra", "chi_sim", "chi_tra", "HanS+HanT", "HanS", "HanT"),
        "Japanese": ("jpn", "Japanese"),
        "Korean": ("kor", "Hangul"),
    }
)
"""A script (OSD's name) -> the packs that read a page of it when no chosen pack does:
alternatives in order of preference, the first whose packs are all installed taken. The
first alternative is the Debian package a page names when none is installed."""

LOCALE_PACKS: Mapping[str, str] = MappingProxyType(
    {
        "af": "afr",
        "am": "amh",
        "ar": "ara",
        "as": "asm",
        "az": "aze",
        "be": "bel",
        "bg": "bul",
        "bn": "ben",
        "bo": "bod",
        "br": "bre",
        "bs": "bos",
        "ca": "cat",
        "co": "cos",
        "cs": "ces",
        "cy": "cym",
        "da": "dan",
        "de": "deu",
        "dv": "div",
        "dz": "dzo",
        "el": "ell",
        "en": "eng",
        "eo": "epo",
        "es": "spa",
        "et": "est",
        "eu": "eus",
        "fa": "fas",
        "fi": "fin",
        "fo": "fao",
        "fr": "fra",
        "fy": "fry",
        "ga": "gle",
        "gd": "gla",
        "gl": "glg",
        "gu": "guj",
        "he": "heb",
        "hi": "hin",
        "hr": "hrv",
        "ht": "hat",
        "hu": "hun",
        "hy": "hye",
        "id": "ind",
        "is": "isl",
        "it": "ita",
        "iu": "iku",
        "ja": "jpn",
        "jv": "jav",
        "ka": "kat",
        "kk": "kaz",
        "km": "khm",
        "kn": "kan",
        "ko": "kor",
        "ku": "kmr",
        "ky": "kir",
        "la": "lat",
        "lb": "ltz",
        "lo": "lao",
        "lt": "lit",
        "lv": "lav",
        "mi": "mri",
        "mk": "mkd",
        "ml": "mal",
        "mn": "mon",
        "mr": "mar",
        "ms": "msa",
        "mt": "mlt",
        "my": "mya",
        "nb": "nor",
        "ne": "nep",
        "nl": "nld",
        "nn": "nor",
        "no": "nor",
        "oc": "oci",
        "or": "ori",
        "pa": "pan",
        "pl": "pol",
        "ps": "pus",
        "pt": "por",
        "qu": "que",
        "ro": "ron",
        "ru": "rus",
        "sa": "san",
        "sd": "snd",
        "si": "sin",
        "sk": "slk",
        "sl": "slv",
        "sq": "sqi",
        "sr": "srp",
        "su": "sun",
        "sv": "swe",
        "sw": "swa",
        "ta": "tam",
        "te": "tel",
        "tg": "tgk",
        "th": "tha",
        "ti": "tir",
        "tl": "fil",
        "to": "ton",
        "tr": "tur",
        "tt": "tat",
        "ug": "uig",
        "uk": "ukr",
        "ur": "urd",
        "uz": "uzb",
        "vi": "vie",
        "yi": "yid",
        "yo": "yor",
    }
)
"""A locale's language (ISO 639-1) -> its Tesseract pack. Chinese goes by territory
(`locale_pack`); a three-letter locale language (fil, ceb) is its pack's own name."""

# Debian's script packs are named by ISO 15924 code (tesseract-ocr-script-hang: Hangul).
_SCRIPT_PACK_CODES = MappingProxyType(
    {
        "Latin": "latn",
        "Fraktur": "frak",
        "Vietnamese": "viet",
        "Cyrillic": "cyrl",
        "Greek": "grek",
        "Arabic": "arab",
        "Hebrew": "hebr",
        "Devanagari": "deva",
        "Bengali": "beng",
        "Tamil": "taml",
        "Telugu": "telu",
        "Kannada": "knda",
        "Malayalam": "mlym",
        "Thai": "thai",
        "HanS": "hans",
        "HanT": "hant",
        "Japanese": "jpan",
        "Hangul": "hang",
    }
)
_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:/[A-Za-z][A-Za-z0-9_]*)?")
_CHINESE_TRADITIONAL = ("TW", "HK", "MO")


class NoPack(Exception):
    """A page is in a script no installed pack reads; the message names the script and
    the Debian package that reads it."""

    def __init__(self, script: str, packs: str):
        super().__init__(
            f"Tesseract has no data for the {script} script (Debian: {debian_packages(packs)})"
        )
        self.script = script
        self.packs = packs


def parse_languages(spec: str, name: str = "ocr_languages") -> tuple[str, ...]:
    """The packs `spec` names: Tesseract's "eng+deu", or "eng,deu" (spaces around the
    names ignored), in order, each once; `ValueError` naming `name` (the option) for
    anything else."""
    names = [pack.strip() for pack in re.split(r"[+,]", spec)]
    if not all(_CODE.fullmatch(pack) for pack in names):
        raise ValueError(
            f"{name}: expected Tesseract language packs joined by '+' "
            f"or ',' (such as eng+deu), got {spec!r}"
        )
    return tuple(dict.fromkeys(names))


def check_installed(
    spec: str, installed: frozenset[str], name: str = "ocr_languages"
) -> tuple[str, ...]:
    """The packs `spec` names (`parse_languages`), each of them one of the `installed`
    language packs; `ValueError` naming `name` otherwise, listing the installed language
    packs (all but `osd`, which reads no language) and the Debian package of each
    missing one."""
    languages = installed - {"osd"}
    expected = (
        f"{name}: expected language packs Tesseract has here "
        f"({', '.join(sorted(languages)) or 'none'}) joined by '+' or ','"
    )
    try:
        chosen = parse_languages(spec, name)
    except ValueError:
        raise ValueError(f"{expected}, got {spec!r}") from None
    missing = [pack for pack in chosen if pack not in languages]
    if missing:
        raise ValueError(
            f"{expected}, got {spec!r}: {'+'.join(missing)} not installed "
            f"(Debian: {debian_packages('+'.join(missing))})"
        )
    return chosen


def debian_package(pack: str) -> str:
    """The Debian package holding Tesseract's `pack`: "chi_sim" -> tesseract-ocr-chi-sim,
    "Hangul" (a script pack) -> tesseract-ocr-script-hang."""
    name = pack.removeprefix("script/")
    base, vertical = (name[:-5], "-vert") if name.endswith("_vert") else (name, "")
    if base in _SCRIPT_PACK_CODES:
        return f"tesseract-ocr-script-{_SCRIPT_PACK_CODES[base]}{vertical}"
    return f"tesseract-ocr-{name.lower().replace('_', '-')}"


def debian_packages(packs: str) -> str:
    """`debian_package` of each of "chi_sim+chi_tra", joined by ", "."""
    return ", ".join(debian_package(pack) for pack in packs.split("+"))


def locale_pack(environ: Mapping[str, str] = os.environ) -> str | None:
    """The pack of the system locale's language: of the first set of `LC_ALL`,
    `LC_MESSAGES` and `LANG` ("de_DE.UTF-8" -> "deu", "zh_TW.UTF-8" -> "chi_tra",
    "sr_RS@latin" -> "srp_latn"); None for the C and POSIX locales or a language with no
    pack."""
    value = next(
        (environ[name] for name in ("LC_ALL", "LC_MESSAGES", "LANG") if environ.get(name)), ""
    )
    base, _, modifier = value.partition("@")
    language, _, territory = base.partition(".")[0].partition("_")
    language = language.lower()
    if language in ("", "c", "posix"):
        return None
    if language == "zh":
        traditional = territory.upper() in _CHINESE_TRADITIONAL or modifier.lower() == "hant"
        return "chi_tra" if traditional else "chi_sim"
    if language == "sr" and modifier.lower() == "latin":
        return "srp_latn"
    if len(language) == 3:
        return language
    return LOCALE_PACKS.get(language)


def default_languages(
    installed: frozenset[str], environ: Mapping[str, str] = os.environ
) -> tuple[str, ...]:
    """The system locale's pack and English, those of them `installed`; ("eng",) when
    neither is (OCR then says that English is missing)."""
    wanted = [pack for pack in (locale_pack(environ), "eng") if pack is not None]
    return tuple(dict.fromkeys(p for p in wanted if p in installed)) or ("eng",)


@dataclass(frozen=True)
class OcrLanguages:
    """The packs OCR uses on this machine for a file: `chosen` (installed, in Tesseract's
    order of preference), the `installed` ones, and `detect`: each page's script is found
    by OSD first (asked for, and the `osd` pack installed); `build`: Tesseract's version
    and data files (`tesseract.build`; "" where not known), part of what a page's cached
    text is keyed by (`ocr_cache`)."""

    chosen: tuple[str, ...]
    installed: frozenset[str]
    detect: bool
    build: str = ""

    def for_script(self, script: str | None) -> str:
        """Tesseract's `-l` for a page OSD found in `script` (None: OSD found none, or
        was not run): the chosen packs where one of them reads the script (or the script
        is one no table here knows), else the first installed alternative of
        `SCRIPT_PACKS` followed by the chosen packs; `NoPack` when the script has none."""
        chosen = "+".join(self.chosen)
        if script is None:
            return chosen
        script = _ALIASES.get(script, script)
        alternatives = SCRIPT_PACKS.get(script)
        if alternatives is None or any(PACK_SCRIPT.get(p) == script for p in self.chosen):
            return chosen
        for alternative in alternatives:
            packs = alternative.split("+")
            if all(pack in self.installed for pack in packs):
                return "+".join(dict.fromkeys(packs + list(self.chosen)))
        raise NoPack(script, alternatives[0])


def resolve(
    spec: str | None,
    detect: bool,
    installed: frozenset[str],
    environ: Mapping[str, str] = os.environ,
) -> OcrLanguages:
    """The `OcrLanguages` of the option `spec` (None: `default_languages`) given the
    `installed` packs; `LookupError` naming the first chosen pack that is not installed
    ("Tesseract has no data for qaa (Debian: tesseract-ocr-qaa)")."""
    chosen = default_languages(installed, environ) if spec is None else parse_languages(spec)
    missing = [pack for pack in chosen if pack not in installed]
    if missing:
        raise LookupError(
            f"Tesseract has no data for {'+'.join(missing)} (Debian: {debian_package(missing[0])})"
        )
    return OcrLanguages(chosen, installed, detect and "osd" in installed)
