"""Charset detection of plain text (`readers.text.decode`): Western legacy text is never
read as an East Asian multi-byte codec, text that is UTF-8 but for a few Latin-1 bytes
keeps both, and real Chinese, Japanese and Korean text still decodes right."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from attnswitch.documents.readers.blocks import ReadOptions
from attnswitch.documents.readers.dispatch import read_named
from attnswitch.documents.readers.text import decode

# A changelog as upstream projects kept them before UTF-8: ASCII but for a few names.
CHANGELOG = """Changes in 22.10
================
 - Added French Language (thanks to Marc Léger)
 - killall: -o and -y options; fixed by Lutz Müller and Jürgen Fluk.
 - pstree: show threads in braces, reported by Gaël Quéri.
 - fuser: the -k option now also kills the accessing process. François Pinard
   asked for it; Björn Lößer tested it on a mounted file system.
 - Updated the German translation (Jörg Schröder).

Changes in 22.9
===============
 - peekfd: the output is flushed after each write.
"""
MIXED_BEFORE = "2021-11-30  Václav Haisman  <vhaisman@example.org>  (tiny change)\n" * 3
MIXED_AFTER = "\tReported by Lutz Müller and Gaël Quéri.\n"

CHINESE_T = (
    "本程式庫提供一個以特徵物件為基礎的錯誤型別，讓應用程式能以慣用的方式處理錯誤。"
    "在函式中使用問號運算子，就能輕鬆傳遞任何實作標準錯誤特徵的錯誤。\n"
)
CHINESE_S = (
    "本程序库提供一个基于特征对象的错误类型，让应用程序能够以惯用的方式处理错误。"
    "在函数中使用问号运算符，就能轻松传递任何实现标准错误特征的错误。\n"
)
JAPANESE = (
    "このライブラリは、アプリケーションで慣用的にエラーを処理するための、"
    "トレイトオブジェクトに基づくエラー型を提供します。\n"
)
KOREAN = (
    "이 라이브러리는 응용 프로그램에서 관용적으로 오류를 처리하기 위한 트레이트 객체 "
    "기반의 오류 형식을 제공합니다.\n"
)


@pytest.mark.parametrize("codec", ["latin-1", "cp1252"])
@pytest.mark.parametrize("lines", [3, 4, 12])
def test_latin1_changelog_is_not_read_as_an_east_asian_codec(codec: str, lines: int) -> None:
    text = "".join(CHANGELOG.splitlines(keepends=True)[:lines])
    got, encoding, detected = decode(text.encode(codec))
    assert got == text, encoding
    assert detected and encoding in ("cp1252", "latin_1", "iso8859_15")


def test_a_gzipped_latin1_changelog_reads_its_names() -> None:
    got = read_named("changelog.gz", gzip.compress(CHANGELOG.encode("latin-1")), ReadOptions())
    assert "Marc Léger" in got.text and "Björn Lößer" in got.text
    assert got.encoding == "cp1252"


def test_utf8_with_a_few_latin1_bytes_keeps_both() -> None:
    data = MIXED_BEFORE.encode() + MIXED_AFTER.encode("latin-1") + CHANGELOG.encode() * 2
    got, encoding, detected = decode(data)
    assert got == MIXED_BEFORE + MIXED_AFTER + CHANGELOG * 2
    assert (encoding, detected) == ("utf-8", True)


@pytest.mark.parametrize(
    ("text", "codec"),
    [
        (CHINESE_T, "big5"),
        (CHINESE_S, "gb2312"),
        (CHINESE_S, "gb18030"),
        (JAPANESE, "shift_jis"),
        (JAPANESE, "euc_jp"),
        (KOREAN, "euc_kr"),
    ],
)
@pytest.mark.parametrize("times", [1, 4])
def test_east_asian_text_still_decodes(text: str, codec: str, times: int) -> None:
    got, encoding, detected = decode((text * times).encode(codec))
    assert got == text * times, encoding
    assert detected


DEBIAN_CHANGELOG = Path("/usr/share/doc/psmisc/changelog.gz")


@pytest.mark.skipif(not DEBIAN_CHANGELOG.exists(), reason="Debian's psmisc is not installed")
def test_a_real_latin1_changelog_is_not_read_as_big5() -> None:
    """psmisc's upstream changelog (Debian ships it gzip'd): 30 KB of ASCII and one Latin-1
    "é"; charset-normalizer's samples make Big5 (and four other East Asian codecs) the
    cleanest guess, which reads "L\\xe9ger" as one ideograph between two letters."""
    got = read_named("changelog.gz", DEBIAN_CHANGELOG.read_bytes(), ReadOptions())
    assert "thanks to Marc Léger)" in got.text
    assert got.encoding == "cp1252"
