"""Which of Tesseract's language packs read a page (`readers.ocr_languages`): the option's
syntax, the system locale's pack, the default choice, the packs a script found by OSD
takes, the Debian package a missing pack is named by, and that every name in the tables is
one Debian ships. Pure functions of their arguments: the installed packs are given as sets
here; tests/documents/readers/test_ocr.py reads real pages with the packs of this machine."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from attnswitch.documents.readers.ocr_languages import (
    LOCALE_PACKS,
    PACK_SCRIPT,
    SCRIPT_PACKS,
    NoPack,
    OcrLanguages,
    check_installed,
    debian_package,
    default_languages,
    locale_pack,
    parse_languages,
    resolve,
)

# The documented set (the Makefile's OCR_PACKS, docs/formats.md).
DOCUMENTED = frozenset(
    {"osd", "eng", "deu", "fra", "spa", "rus", "chi_sim", "chi_tra", "jpn", "kor", "hin"}
)


@pytest.mark.parametrize(
    ("spec", "packs"),
    [
        ("eng", ("eng",)),
        ("eng+deu", ("eng", "deu")),
        ("eng,deu", ("eng", "deu")),
        (" deu , eng ", ("deu", "eng")),
        ("eng+deu+eng", ("eng", "deu")),
        ("chi_sim+script/Hangul", ("chi_sim", "script/Hangul")),
    ],
)
def test_the_option_names_packs_in_order_each_once(spec: str, packs: tuple[str, ...]) -> None:
    assert parse_languages(spec) == packs


@pytest.mark.parametrize("spec", ["", "eng+", "eng deu", "eng;deu", "-l eng", "../eng"])
def test_anything_else_is_refused_naming_the_option(spec: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_languages(spec, "--ocr-languages")
    assert str(caught.value) == (
        "--ocr-languages: expected Tesseract language packs joined "
        f"by '+' or ',' (such as eng+deu), got {spec!r}"
    )


def test_a_pack_not_installed_is_refused_listing_the_installed_ones() -> None:
    installed = frozenset({"osd", "eng", "deu"})
    assert check_installed("deu,eng", installed) == ("deu", "eng")
    with pytest.raises(ValueError) as caught:
        check_installed("eng+kor+chi_sim", installed, "--ocr-languages")
    assert str(caught.value) == (
        "--ocr-languages: expected language packs Tesseract has here (deu, eng) joined by "
        "'+' or ',', got 'eng+kor+chi_sim': kor+chi_sim not installed (Debian: "
        "tesseract-ocr-kor, tesseract-ocr-chi-sim)"
    )
    with pytest.raises(ValueError) as caught:
        check_installed("eng deu", installed, "--ocr-languages")
    assert str(caught.value) == (
        "--ocr-languages: expected language packs Tesseract has "
        "here (deu, eng) joined by '+' or ',', got 'eng deu'"
    )


@pytest.mark.parametrize(
    ("environ", "pack"),
    [
        ({"LANG": "de_DE.UTF-8"}, "deu"),
        ({"LANG": "fr_CA.UTF-8"}, "fra"),
        ({"LANG": "ja_JP.eucJP"}, "jpn"),
        ({"LANG": "ko_KR.UTF-8"}, "kor"),
        ({"LANG": "hi_IN"}, "hin"),
        ({"LANG": "zh_CN.UTF-8"}, "chi_sim"),
        ({"LANG": "zh_SG.UTF-8"}, "chi_sim"),
        ({"LANG": "zh_TW.UTF-8"}, "chi_tra"),
        ({"LANG": "zh_HK.UTF-8"}, "chi_tra"),
        ({"LANG": "sr_RS.UTF-8@latin"}, "srp_latn"),
        ({"LANG": "sr_RS.UTF-8"}, "srp"),
        ({"LANG": "fil_PH"}, "fil"),
        ({"LANG": "C.UTF-8"}, None),
        ({"LANG": "POSIX"}, None),
        ({}, None),
        ({"LANG": "xx_YY.UTF-8"}, None),
        # LC_ALL, then LC_MESSAGES, then LANG; an empty one does not count
        ({"LC_ALL": "es_ES.UTF-8", "LC_MESSAGES": "de_DE", "LANG": "fr_FR"}, "spa"),
        ({"LC_ALL": "", "LC_MESSAGES": "de_DE", "LANG": "fr_FR"}, "deu"),
    ],
)
def test_the_locale_gives_its_language_pack(environ: dict[str, str], pack: str | None) -> None:
    assert locale_pack(environ) == pack


@pytest.mark.parametrize(
    ("installed", "environ", "chosen"),
    [
        ({"eng", "deu", "osd"}, {"LANG": "de_DE.UTF-8"}, ("deu", "eng")),
        ({"eng", "osd"}, {"LANG": "de_DE.UTF-8"}, ("eng",)),  # deu missing: English alone
        ({"eng"}, {"LANG": "C.UTF-8"}, ("eng",)),
        ({"eng"}, {"LANG": "en_GB.UTF-8"}, ("eng",)),
        ({"deu"}, {"LANG": "de_AT.UTF-8"}, ("deu",)),
        ({"deu"}, {"LANG": "C"}, ("eng",)),  # neither installed: English, which OCR says is missing
    ],
)
def test_the_default_is_the_locale_and_english_those_installed(
    installed: set[str], environ: dict[str, str], chosen: tuple[str, ...]
) -> None:
    assert default_languages(frozenset(installed), environ) == chosen


def test_resolve_checks_the_chosen_packs_and_turns_detection_on_only_with_osd() -> None:
    installed = frozenset({"eng", "deu", "kor", "osd"})
    got = resolve(None, True, installed, {"LANG": "de_DE.UTF-8"})
    assert (got.chosen, got.detect) == (("deu", "eng"), True)
    assert not resolve("eng", False, installed).detect
    assert not resolve("eng", True, installed - {"osd"}).detect
    with pytest.raises(LookupError) as caught:
        resolve("eng+qaa", True, installed)
    assert str(caught.value) == "Tesseract has no data for qaa (Debian: tesseract-ocr-qaa)"


EVERY_PACK = frozenset(DOCUMENTED)


@pytest.mark.parametrize(
    ("chosen", "script", "packs"),
    [
        (("eng",), None, "eng"),  # OSD found no script (a blank page) or did not run
        (("eng",), "Latin", "eng"),
        (("deu", "eng"), "Latin", "deu+eng"),
        (("eng",), "Korean", "kor+eng"),  # its script's pack, then the chosen ones (Latin words)
        (("eng",), "Hangul", "kor+eng"),  # OSD's other name for it
        (("eng",), "Japanese", "jpn+eng"),
        (("eng",), "Katakana", "jpn+eng"),
        (("eng",), "Han", "chi_sim+chi_tra+eng"),  # OSD does not tell simplified from traditional
        (("chi_tra", "eng"), "Han", "chi_tra+eng"),  # a chosen pack reads it
        (("eng",), "Devanagari", "hin+eng"),
        (("eng",), "Cyrillic", "rus+eng"),
        (("jpn",), "Latin", "eng+jpn"),
        (("eng",), "Fraktur", "eng"),  # the Latin packs read it
        (("eng",), "Klingon", "eng"),  # a script no table knows: the chosen packs
    ],
)
def test_a_page_is_read_with_the_packs_of_its_script(
    chosen: tuple[str, ...], script: str | None, packs: str
) -> None:
    assert OcrLanguages(chosen, EVERY_PACK, True).for_script(script) == packs


def test_one_chinese_pack_alone_reads_han() -> None:
    assert (
        OcrLanguages(("eng",), frozenset({"eng", "chi_tra"}), True).for_script("Han")
        == "chi_tra+eng"
    )


@pytest.mark.parametrize(
    ("script", "packages"),
    [
        ("Korean", "tesseract-ocr-kor"),
        ("Han", "tesseract-ocr-chi-sim, tesseract-ocr-chi-tra"),
        ("Hebrew", "tesseract-ocr-heb"),
        ("Devanagari", "tesseract-ocr-hin"),
    ],
)
def test_a_script_without_an_installed_pack_names_the_debian_package(
    script: str, packages: str
) -> None:
    languages = OcrLanguages(("eng",), frozenset({"eng", "osd"}), True)
    with pytest.raises(NoPack) as caught:
        languages.for_script(script)
    assert str(caught.value) == (
        f"Tesseract has no data for the {script} script (Debian: {packages})"
    )


@pytest.mark.parametrize(
    ("pack", "package"),
    [
        ("eng", "tesseract-ocr-eng"),
        ("chi_sim", "tesseract-ocr-chi-sim"),
        ("chi_tra_vert", "tesseract-ocr-chi-tra-vert"),
        ("srp_latn", "tesseract-ocr-srp-latn"),
        ("Hangul", "tesseract-ocr-script-hang"),
        ("script/HanS_vert", "tesseract-ocr-script-hans-vert"),
    ],
)
def test_a_pack_is_named_by_its_debian_package(pack: str, package: str) -> None:
    assert debian_package(pack) == package


def test_the_documented_packs_are_in_the_tables() -> None:
    languages = DOCUMENTED - {"osd"}
    assert languages <= set(PACK_SCRIPT)
    assert languages <= set(LOCALE_PACKS.values()) | {"chi_sim", "chi_tra"}
    first_choice = {alternatives[0] for alternatives in SCRIPT_PACKS.values()}
    assert {"eng", "chi_sim+chi_tra", "jpn", "kor", "hin", "rus"} <= first_choice


def debian_tesseract_packages() -> set[str]:
    if shutil.which("apt-cache") is None:
        pytest.skip("apt-cache is not here (not Debian)")
    listed = subprocess.run(
        ["apt-cache", "pkgnames", "tesseract-ocr-"], capture_output=True, text=True, timeout=60
    ).stdout.split()
    if not listed:
        pytest.skip("apt has no package lists here (apt-get update)")
    return set(listed)


def test_every_pack_the_tables_name_is_a_debian_package() -> None:
    """The Debian package a missing pack is named by exists (apt's package lists), for
    every pack of the tables a page may ask for."""
    known = debian_tesseract_packages()
    packs = set(PACK_SCRIPT) | set(LOCALE_PACKS.values()) | {"chi_sim", "chi_tra", "srp_latn"}
    packs |= {
        p for alternatives in SCRIPT_PACKS.values() for a in alternatives for p in a.split("+")
    }
    unknown = sorted(p for p in packs if debian_package(p) not in known)
    assert not unknown, [(p, debian_package(p)) for p in unknown]
