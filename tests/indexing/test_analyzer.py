"""The keyword analyzer: script-aware terms, per-language stemming, the query's forms in
every stored language, no word dropped from a query."""

from __future__ import annotations

import pytest

from attnswitch.indexing.analyzer import (
    MAX_TERM_CHARS,
    detect_language,
    document_stems,
    document_terms,
    query_terms,
    tsquery_literal,
    tsvector_literal,
)

# (language, a sentence in it): each long enough for the detector to be sure.
SENTENCES = [
    ("en", "The configuration of the network interfaces is read when the system boots."),
    ("de", "Die Konfiguration der Netzwerkschnittstellen wird beim Systemstart gelesen."),
    ("fr", "La configuration des interfaces réseau est lue au démarrage du système."),
    ("es", "La configuración de las interfaces de red se lee al arrancar el sistema."),
    ("hi", "सिस्टम शुरू होने पर नेटवर्क इंटरफ़ेस की सेटिंग पढ़ी जाती है।"),
    ("ko", "시스템이 부팅될 때 네트워크 인터페이스의 설정을 읽습니다."),
    ("ja", "システムの起動時にネットワークインターフェースの設定が読み込まれます。"),
    ("zh", "系统启动时会读取网络接口的配置。"),
]


@pytest.mark.parametrize("language, sentence", SENTENCES, ids=[s[0] for s in SENTENCES])
def test_the_language_of_a_sentence_is_detected(language: str, sentence: str) -> None:
    assert detect_language(sentence) == language


@pytest.mark.parametrize("text", ["", "12345 678", "-- ** //", "\u200b"])
def test_a_text_without_letters_has_no_language(text: str) -> None:
    assert detect_language(text) == ""


def test_devanagari_words_keep_their_vowel_signs() -> None:
    """Python's `\\w` splits नेटवर्क at its virama and vowel signs; the analyzer keeps the
    word whole (and stems it whole)."""
    assert document_terms("नेटवर्क इंटरफ़ेस", "hi") == ["नेटवर्क", "इंटरफ़ेस"]
    assert len(document_stems("नेटवर्क इंटरफ़ेस", "hi")) == 2


@pytest.mark.parametrize(
    "query, document, language",
    [
        ("하드웨어", "엔지니어가 하드웨어를 설치했다", "ko"),  # a particle on the stored word
        ("网络接口", "系统启动时会读取网络接口的配置", "zh"),  # no spaces at all
        ("設定", "ネットワークインターフェースの設定が読み込まれます", "ja"),
    ],
)
def test_a_cjk_word_is_found_inside_a_run(query: str, document: str, language: str) -> None:
    """Every bigram of the query's word is among the stored run's bigrams."""
    stored = set(document_terms(document, language))
    wanted, stems = query_terms(query, [language])
    assert wanted and set(wanted) <= stored and stems == [], (wanted, stored)


@pytest.mark.parametrize(
    "query, document, language",
    [
        ("configuring", "The configuration was saved.", "en"),
        ("Schnittstellen", "Eine Schnittstelle des Netzwerks.", "de"),
        ("démarrages", "Le démarrage du système.", "fr"),
        ("configuraciones", "La configuración de red.", "es"),
    ],
)
def test_inflected_forms_meet_at_their_stem(query: str, document: str, language: str) -> None:
    words, stems = query_terms(query, [language])
    assert not set(words) & set(document_terms(document, language))  # not as written
    assert set(stems) & set(document_stems(document, language))


def test_a_query_looks_for_its_words_in_every_stored_language() -> None:
    """Stored chunks in English and German, and some of no detected language: a word is
    looked for as written, and as each language stems it."""
    words, stems = query_terms("Schnittstellen", ["de", "en", ""])
    assert words == ["schnittstellen"]
    assert stems == ["schnittstell", "schnittstellen"]  # German's stem, English's


def test_a_query_keeps_every_word() -> None:
    """No stop word list: function words stay in the query (and in the index), so a title
    made of them ("To be or not to be") is found as written."""
    assert query_terms("what is the network", ["en"]) == (
        ["what", "is", "the", "network"],
        ["what", "is", "the", "network"],
    )
    assert query_terms("Wie kann ich das System aktualisieren?", ["de"])[0] == [
        "wie",
        "kann",
        "ich",
        "das",
        "system",
        "aktualisieren",
    ]
    assert document_terms("To be or not to be", "en") == ["to", "be", "or", "not", "to", "be"]


def test_a_word_stemmed_to_nothing_has_no_stem() -> None:
    """Nepali's stemmer gives "" for `को` and `यो`: neither the chunk nor the query holds
    an empty stem (PostgreSQL refuses an empty lexeme; FTS5 would look for nothing)."""
    text = "यो शहर को इतिहास धेरै पुरानो छ"
    assert "" not in document_stems(text, "ne")
    assert document_stems(text, "ne") == ["शहर", "इतिहास", "धेरै", "पुरानो"]
    assert query_terms("को", ["ne"]) == (["को"], [])


def test_case_and_compatibility_forms_are_folded() -> None:
    assert document_terms("ＡＢＣ Straße", "") == ["abc", "strasse"]


def test_overlong_runs_are_not_terms() -> None:
    assert document_terms("a" * (MAX_TERM_CHARS + 1) + " word", "") == ["word"]
    assert query_terms("a" * (MAX_TERM_CHARS + 1), [""]) == ([], [])


def test_postgres_literals_quote_every_term() -> None:
    """A term holding a quote or a backslash is one lexeme; positions are 1-based, words
    as written weighted A, stems D (unmarked) after them, a stem equal to its word kept
    apart at its own position."""
    assert tsvector_literal(["it's", "a\\b", "it's"]) == "'it''s':1A,3A 'a\\\\b':2A"
    assert tsvector_literal(["rows", "row"], ["row", "row"]) == "'rows':1A 'row':2A,3,4"
    assert tsquery_literal(["it's", "x"], ["x"]) == "'it''s':A | 'x':A | 'x':D"


# -- the language detector's model: an uncompressed copy in the cache, else in memory -----


def test_the_detector_model_is_unpacked_once_into_the_cache(tmp_path, monkeypatch) -> None:
    """The first use writes the model's arrays into a folder of attnswitch's cache; the
    next one maps that copy (read-only memory maps of the files, not the model decompressed
    again), and detects the same."""
    import numpy as np

    from attnswitch.indexing import analyzer

    monkeypatch.setenv("ATTNSWITCH_CACHE_DIR", str(tmp_path / "cache"))
    first = analyzer._model_arrays()
    assert not any(isinstance(a, np.memmap) for a in first.values())  # made now, in memory
    (copy,) = (tmp_path / "cache").glob("langid-model-*")
    assert sorted(p.name for p in copy.iterdir()) == sorted(
        f"{name}.npy" for name in analyzer.MODEL_ARRAYS
    )
    assert not list((tmp_path / "cache").glob("*.part"))
    again = analyzer._model_arrays()
    assert all(isinstance(a, np.memmap) and not a.flags.writeable for a in again.values())
    for name in analyzer.MODEL_ARRAYS:
        assert np.array_equal(first[name], again[name]), name
    analyzer._identifier.cache_clear()
    try:
        assert analyzer.detect_language("Die Katze schläft auf dem warmen Sofa.") == "de"
    finally:
        analyzer._identifier.cache_clear()


def test_a_cache_that_cannot_be_written_leaves_the_model_in_memory(tmp_path, monkeypatch) -> None:
    """A cache folder that cannot be made (a file in its place): the model is decompressed
    in memory and the detector works; a torn copy is made again."""
    import numpy as np

    from attnswitch.indexing import analyzer

    blocker = tmp_path / "not a folder"
    blocker.write_text("a file where the cache folder would be\n")
    monkeypatch.setenv("ATTNSWITCH_CACHE_DIR", str(blocker / "cache"))
    assert not any(isinstance(a, np.memmap) for a in analyzer._model_arrays().values())
    monkeypatch.setenv("ATTNSWITCH_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    analyzer._model_arrays()
    (copy,) = (tmp_path / "cache").glob("langid-model-*")
    (copy / "nextmove.npy").write_bytes(b"torn")
    torn = analyzer._model_arrays()
    assert not isinstance(torn["nextmove"], np.memmap)  # made again, from the package
    assert all(isinstance(a, np.memmap) for a in analyzer._model_arrays().values())
    analyzer._identifier.cache_clear()
    try:
        assert analyzer.detect_language("The cat sleeps on the warm sofa all day.") == "en"
    finally:
        analyzer._identifier.cache_clear()
