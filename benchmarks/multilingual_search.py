"""Known-item search per language, on documents Debian ships translated (issue 42, item 4).

    make multilingual-sources        # as root: the Debian packages below
    python benchmarks/multilingual_search.py [--languages en,de,...] [--per-kind 50]
        [--max-files 150] [--store sqlite|postgres] [--store-dir DIR] [--label after]
        --out RUN.json
    python benchmarks/multilingual_search.py --langchain [--peers-venv DIR] --out RUN.json
    python benchmarks/multilingual_search.py --report RUN.json [RUN.json ...]
        [--english-search BEFORE.json AFTER.json] [--english-retrieval BEFORE.json AFTER.json]
        --md PAGE.md --json PAGE.json [--plot PAGE.png]

One corpus per language, copied from what Debian installs (documents no one here wrote):
Debian's reference manual (`debian-reference-<lang>`: its chapters and appendices) and
Debian's FAQ (`debian-faq`, `debian-faq-<lang>`), where Debian has them in the language,
and for Hindi, which neither is translated into, the pages of LibreOffice's Hindi help
(`libreoffice-help-hi`) that hold the most Devanagari (most of that help is untranslated:
on the pages taken a fifth of the letters are Devanagari). The tables of contents
(`index.<lang>.html`) are left out: they repeat every section title. At most `--max-files`
files a language.

Known-item queries come from the documents' own text, none written by hand, in four kinds:
- words: a word of the language that one file only holds (as a whole word, case and
  Unicode width ignored), found in a paragraph: in space-separated languages a word of
  letters of the language's script (Latin, Cyrillic, Hangul, Devanagari) of at least
  `MIN_WORD_CHARS` characters (Hangul: 3 syllables), which the English corpus does not hold
  (not a command or file name left in English); in Chinese and Japanese, written without
  spaces, a whole run of 2 to 4 Han characters (a compound between kana or punctuation)
  or, in Japanese, of 3 to 10 Katakana (a loanword);
- headings: section titles (`h2`-`h4` of the DocBook manuals, `h1`-`h3` of the help pages),
  their numbers removed, of at least two words or four CJK characters, that are not
  questions (phrases);
- questions: the titles that are questions (end in "?" or "？": the FAQ's);
- partial sentences: from the middle of a paragraph of at least 16 words, 8 consecutive
  words; in Chinese and Japanese, 12 consecutive characters of a paragraph of at least 40,
  most of them Chinese or Japanese (one paragraph in three of a page at most, a
  deterministic sample) (phrases).
A query is kept only when its text (case and spacing ignored) occurs in one file of the
corpus, the answer, and when py3langid detects the corpus's language in it (a paragraph's
language for a word or a partial sentence): the translations leave some sections in
English. `--per-kind` of each kind are drawn (seeded), the same set for every contender.

Contenders, each a process of its own with its default settings:
- attnswitch, through its public Python API only: `attnswitch.index(folder, db=...)`
  (default options, the default model all-MiniLM-L6-v2, offline) indexes each corpus into a
  store (a SQLite file kept in `--store-dir`, or with `--store postgres` a database of a
  throwaway PostgreSQL cluster, `search_quality.stores`), and `attnswitch.search(query,
  db=..., k=50, mode=...)` answers in its three modes. The code is whatever `attnswitch`
  imports: run the script with `PYTHONPATH=<tree>/src` to score another revision (the
  previous analyzer: the parent of the commit that added it). Two diagnoses change a
  setting of a module while the run lasts, where the module has it (`SEARCH_MODULE`,
  `ANALYZER_MODULE`, named at the top): hybrid with the other dense weights of
  `FOREIGN_WEIGHTS` for a query or chunk in a language the model's card does not declare
  (`FOREIGN_DENSE_WEIGHT`), and keyword search with no stop word dropped from the query
  (`_stop_words`: the analyzer dropped the query's stop words until that measurement
  showed it cost more than it bought; today's code has no `_stop_words`).
- `--langchain`: LangChain's documented recipe (`benchmarks/peers/langchain_recipe.py`, in
  the peers' venv: `make bench-peers-env`) on the same files and queries: dense (FAISS over
  HuggingFaceEmbeddings of the same model folder), keyword (`BM25Retriever` of
  langchain_community, rank_bm25's BM25Okapi, with its default preprocessing: the text
  split on whitespace, case kept) and hybrid (`EnsembleRetriever` of the two, weights 0.5
  and 0.5, its reciprocal rank fusion).

A hit list of 50 chunks is collapsed to distinct files; the answer's rank gives MRR@10 and
recall@10 (`search_quality.file_rank`, `metrics`). `--report` puts runs side by side (and
the English benchmarks' JSON of two revisions: `search_quality.py --json` and
`retrieval_quality.py --json`), with the two checks of the issue: a language's keyword
MRR@10 at least 0.9 times English's, and hybrid at most 0.01 below the better of keyword
and dense. With `--md`, the tables replace what lies between the page's `<!-- tables -->`
and `<!-- /tables -->` marks, so the text written around them stays.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import attnswitch  # the public API: attnswitch.index, attnswitch.search

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_quality as sq

# The modules whose settings the two diagnoses change (absent before the keyword analyzer).
SEARCH_MODULE = "attnswitch.indexing.search"  # FOREIGN_DENSE_WEIGHT
ANALYZER_MODULE = "attnswitch.indexing.analyzer"  # _stop_words

REFERENCE = Path("/usr/share/debian-reference")
FAQ = Path("/usr/share/doc/debian/FAQ")
LIBREOFFICE_HELP = Path("/usr/share/libreoffice/help")
KINDS = ("words", "headings", "questions", "partial sentences")
MODES = ("keyword", "dense", "hybrid")
FOREIGN_WEIGHTS = (0.0, 0.2, 0.4, 0.8)
KEPT_STOP_WORDS = "keyword, stop words kept"
PARTIAL_CHARS = 12  # a partial sentence in a language written without spaces
MIN_PARAGRAPH_CHARS = 40
MIN_WORD_CHARS = 6  # a word query in a space-separated language (Hangul: 3 syllables)
KEYWORD_RATIO = 0.9  # a language's keyword MRR@10 against English's
HYBRID_SLACK = 0.01  # how far hybrid may fall below the better of its halves
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_LATIN = re.compile(r"[A-Za-z0-9]{2}")  # two characters of one Latin word
_NUMBER = re.compile(r"^\s*(?:[A-Z]|\d+)(?:\.\d+)*\.?\s+")


@dataclass(frozen=True)
class Source:
    """Pages of one Debian package: `folder/<glob>`, their section titles `headings`."""

    package: str
    name: str  # the folder the pages are copied under
    folder: Path
    glob: str
    headings: tuple[str, ...] = ("h2", "h3", "h4")
    rank_by_script: bool = False  # take the pages with the most letters of the language's script


def reference(lang: str) -> Source:
    return Source(f"debian-reference-{lang}", "reference", REFERENCE, f"*.{lang}.html")


def faq(lang: str) -> Source:
    if lang == "en":
        return Source("debian-faq", "faq", FAQ, "*.en.html")
    return Source(f"debian-faq-{lang}", "faq", FAQ / lang, f"*.{lang}.html")


HINDI_HELP = Source(
    "libreoffice-help-hi",
    "help",
    LIBREOFFICE_HELP / "hi",
    "text/**/*.html",
    headings=("h1", "h2", "h3"),
    rank_by_script=True,
)
LANGUAGES: dict[str, tuple[Source, ...]] = {
    "en": (reference("en"), faq("en")),
    "de": (reference("de"), faq("de")),
    "fr": (reference("fr"), faq("fr")),
    "es": (reference("es"),),
    "it": (faq("it"),),
    "nl": (faq("nl"),),
    "pt": (faq("pt"),),
    "ru": (faq("ru"),),
    "ja": (reference("ja"), faq("ja")),
    "zh-cn": (reference("zh-cn"), faq("zh-cn")),
    "ko": (faq("ko"),),
    "hi": (HINDI_HELP,),
}
UNSPACED = ("ja", "zh-cn")  # partial sentences by characters
SCRIPTS = {"hi": ("\u0900", "\u097f")}  # the script `rank_by_script` counts
# The script of a word query in each space-separated language (a `regex` property).
WORD_SCRIPT = {"ru": "Cyrillic", "ko": "Hangul", "hi": "Devanagari"}  # others: Latin


def packages() -> list[str]:
    """The Debian packages every corpus comes from (the Makefile's MULTILINGUAL_PACKAGES)."""
    return sorted({s.package for sources in LANGUAGES.values() for s in sources})


def langid_code(lang: str) -> str:
    return lang.split("-")[0]


def cpu() -> str:
    """The CPU's model name and its vector ISA flags, as lscpu gives them."""
    text = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    model = re.search(r"Model name:\s*(.+)", text)
    flags = re.search(r"Flags:\s*(.+)", text)
    wanted = (
        "avx",
        "avx2",
        "fma",
        "avx512f",
        "avx512bw",
        "avx512_vnni",
        "avx512_bf16",
        "amx_tile",
        "amx_bf16",
        "amx_int8",
    )
    have = [f for f in wanted if flags and f in flags.group(1).split()]
    cores = re.search(r"^CPU\(s\):\s*(\d+)", text, re.MULTILINE)
    return (
        f"{model.group(1).strip() if model else platform.processor()} "
        f"({', '.join(have) or 'no AVX'}; {cores.group(1) if cores else '?'} CPUs)"
    )


def text_of(page: Path):
    """The page's parsed tree with scripts and styles dropped."""
    from lxml import html

    tree = html.parse(str(page)).getroot()
    for node in tree.xpath("//script|//style"):
        node.drop_tree()
    return tree


def flat(text: str) -> str:
    """Text as written, one space between words (a query's text)."""
    return " ".join(text.replace("¶", " ").split())


def folded(text: str) -> str:
    """What two texts are compared by: NFKC, case folded, one space between words."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def script_letters(page: Path, lang: str) -> int:
    low, high = SCRIPTS[lang]
    return sum(low <= c <= high for c in text_of(page).text_content())


def pages(lang: str, max_files: int) -> list[tuple[Source, Path]]:
    """The (source, page) pairs of a language's corpus: each source's pages less its table
    of contents, sorted by name (or by letters of the language's script, most first), at
    most `max_files` in all."""
    out: list[tuple[Source, Path]] = []
    for source in LANGUAGES[lang]:
        found = sorted(
            p
            for p in source.folder.glob(source.glob)
            if p.is_file() and not p.name.startswith("index.")
        )
        if not found:
            raise SystemExit(
                f"{lang}: expected the pages of Debian's {source.package} at "
                f"{source.folder}/{source.glob}, got none (make "
                f"multilingual-sources, as root)"
            )
        if source.rank_by_script:
            found = sorted(found, key=lambda p: (-script_letters(p, lang), p.as_posix()))
        out += [(source, p) for p in found]
    return out[:max_files]


def corpus(lang: str, store_dir: Path, max_files: int) -> sq.Corpus:
    """The language's pages copied into `store_dir/corpus-<lang>/<source>/...`."""
    root = store_dir / f"corpus-{lang}"
    wanted = {root / s.name / p.relative_to(s.folder): p for s, p in pages(lang, max_files)}
    if root.is_dir():  # a page no longer chosen would stay indexed
        for old in [p for p in root.rglob("*") if p.is_file() and p not in wanted]:
            old.unlink()
    for dest, page in wanted.items():
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page.resolve(), dest)
    return sq.Corpus(lang, root)


# ---------------------------------------------------------------------------------------
# Queries.


def _regex():
    import regex

    return regex


def word_tokens(text: str) -> set[str]:
    """The whole words of a folded text: runs of letters and combining marks."""
    return set(_regex().findall(r"[\p{L}\p{M}]+", text))


def word_candidates(lang: str, paragraph: str) -> list[str]:
    """The words of one paragraph (as written) that may be a word query (`KINDS`)."""
    rx = _regex()
    if lang in UNSPACED:
        runs = [m for m in rx.findall(r"\p{Han}+", paragraph) if 2 <= len(m) <= 4]
        if lang == "ja":
            runs += [m for m in rx.findall(r"[\p{Katakana}ー]+", paragraph) if 3 <= len(m) <= 10]
        return runs
    script = WORD_SCRIPT.get(lang, "Latin")
    least = 3 if script == "Hangul" else MIN_WORD_CHARS
    return [
        w
        for w in rx.findall(r"[\p{L}\p{M}]+", paragraph)
        if len(w) >= least and rx.fullmatch(rf"[\p{{{script}}}\p{{M}}]+", w)
    ]


def candidates(
    lang: str, source: Source, rel: str, tree, rng: random.Random
) -> list[tuple[sq.Query, str]]:
    """Every candidate query of one page with the text whose language it is judged by
    (itself, or the paragraph of a word or partial sentence); uniqueness and language come
    later."""
    out = []
    for node in tree.iter(*source.headings):
        text = _NUMBER.sub("", flat(node.text_content()))
        if len(text.split()) >= 2 or len(_CJK.findall(text)) >= 4:
            kind = "questions" if "?" in folded(text) else "headings"
            out.append((sq.Query(kind, text, rel), text))
    every = [flat(p.text_content()) for p in tree.iter("p")]
    for p in every:
        out += [(sq.Query("words", w, rel), p) for w in dict.fromkeys(word_candidates(lang, p))]
    if lang in UNSPACED:
        paragraphs = [p for p in every if len(p) >= MIN_PARAGRAPH_CHARS]
    else:
        paragraphs = [p for p in every if len(p.split()) >= sq.MIN_PARAGRAPH_WORDS]
    for p in rng.sample(paragraphs, k=min(len(paragraphs), max(1, len(paragraphs) // 3))):
        if lang in UNSPACED:
            start = (len(p) - PARTIAL_CHARS) // 2
            end = start + PARTIAL_CHARS
            while start < end and _LATIN.match(p[start - 1 : start + 1]):
                start += 1  # no Latin word cut at either end
            while end > start and _LATIN.match(p[end - 1 : end + 1]):
                end -= 1
            window = p[start:end].strip()
            if len(_CJK.findall(window)) * 2 < len(window):
                continue
        else:
            words = p.split()
            start = (len(words) - sq.PARTIAL_WORDS) // 2
            window = " ".join(words[start : start + sq.PARTIAL_WORDS])
        out.append((sq.Query("partial sentences", window, rel), p))
    return out


def english_words(max_files: int) -> set[str]:
    """The words of the English corpus's pages (folded): a word query in another language
    is none of them."""
    return {
        w
        for _, page in pages("en", max_files)
        for w in word_tokens(folded(text_of(page).text_content()))
    }


def build_queries(
    lang: str, c: sq.Corpus, per_kind: int, english: set[str], seed: int = 42
) -> dict[str, int]:
    """`c.queries`: at most `per_kind` of each kind, each occurring in its answer's text
    only and detected in `lang`; returns how many candidates each filter dropped."""
    import py3langid

    rng = random.Random(seed)
    found: list[tuple[sq.Query, str]] = []
    texts: dict[str, str] = {}
    tokens: dict[str, set[str]] = {}
    for page in sorted(p for p in c.root.rglob("*.html") if p.is_file()):
        rel = page.relative_to(c.root).as_posix()
        source = next(s for s in LANGUAGES[lang] if rel.startswith(s.name + "/"))
        tree = text_of(page)
        texts[rel] = folded(tree.text_content())
        tokens[rel] = word_tokens(texts[rel])
        found += candidates(lang, source, rel, tree, rng)
    dropped = {"not unique": 0, "other language": 0, "an English word": 0}
    kept: dict[str, list[sq.Query]] = {kind: [] for kind in KINDS}
    seen: set[tuple[str, str]] = set()
    rng.shuffle(found)  # drawn in this order until `per_kind` of a kind pass the filters
    for q, language_text in found:
        needle = folded(q.text)
        if len(kept[q.kind]) >= per_kind or (q.kind, needle) in seen:
            continue
        seen.add((q.kind, needle))
        if q.kind == "words" and lang not in UNSPACED:
            if lang != "en" and needle in english:
                dropped["an English word"] += 1
                continue
            where = sum(needle in t for t in tokens.values())
        else:
            where = sum(needle in t for t in texts.values())
        if where != 1:
            dropped["not unique"] += 1
        elif py3langid.classify(language_text)[0] != langid_code(lang):
            dropped["other language"] += 1
        else:
            kept[q.kind].append(q)
    for kind in KINDS:
        c.queries += sorted(kept[kind], key=lambda q: (q.target, q.text))
    return dropped


def digest(queries: list[sq.Query]) -> str:
    return hashlib.sha256(
        json.dumps([(q.kind, q.text, q.target) for q in queries], ensure_ascii=False).encode()
    ).hexdigest()[:12]


def scores(queries: list[sq.Query], ranks: dict[str, list[int | None]]) -> dict:
    """kind (and "all") -> mode -> metrics."""
    out: dict[str, dict] = {"all": {m: sq.metrics(r) for m, r in ranks.items()}}
    for kind in KINDS:
        idx = [i for i, q in enumerate(queries) if q.kind == kind]
        if idx:
            out[kind] = {m: sq.metrics([r[i] for i in idx]) for m, r in ranks.items()}
    return out


# ---------------------------------------------------------------------------------------
# Contenders.


def code_revision() -> dict:
    """The revision of the attnswitch that is imported, and whether its src/ is edited."""
    src = Path(attnswitch.__file__).resolve().parents[1]
    git = ["git", "-C", str(src)]
    commit = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    edited = subprocess.run(
        [*git, "status", "--porcelain", "--", "."], capture_output=True, text=True, check=False
    ).stdout.strip()
    subject = subprocess.run(
        [*git, "log", "-1", "--format=%s"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "commit": commit,
        "subject": subject if len(subject) <= 72 else subject[:71] + "…",
        "src_edited": bool(edited),
    }


def optional_module(name: str):
    """The module `name`, or None where this revision has none."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def evaluate(c: sq.Corpus, db: str, diagnoses: bool = True) -> dict[str, list[int | None]]:
    """mode -> the answer's file rank per query, for the three modes of `attnswitch.search`;
    with `diagnoses`, where the code has them, hybrid under the other weights of
    `FOREIGN_WEIGHTS` and keyword with no stop word dropped."""
    search_module = optional_module(SEARCH_MODULE) if diagnoses else None
    shipped = getattr(search_module, "FOREIGN_DENSE_WEIGHT", None)
    analyzer = optional_module(ANALYZER_MODULE) if diagnoses else None
    stop_words = getattr(analyzer, "_stop_words", None)
    runs = [(m, m, None) for m in MODES]
    if shipped is not None:
        runs += [(f"hybrid w={w:g}", "hybrid", w) for w in FOREIGN_WEIGHTS if w != shipped]
    if stop_words is not None:
        runs.append((KEPT_STOP_WORDS, "keyword", None))
    ranks: dict[str, list[int | None]] = {}
    try:
        for name, mode, weight in runs:
            if shipped is not None:
                search_module.FOREIGN_DENSE_WEIGHT = shipped if weight is None else weight
            if stop_words is not None:  # a diagnosis: the same search, no stop word dropped
                analyzer._stop_words = (
                    (lambda language: frozenset()) if name == KEPT_STOP_WORDS else stop_words
                )
            for q in c.queries:
                hits = attnswitch.search(q.text, db=db, k=sq.HITS, mode=mode)
                files = {i: h.path for i, h in enumerate(hits)}
                ranks.setdefault(name, []).append(
                    sq.file_rank([(i, 0.0) for i in files], files, q.target)
                )
    finally:
        if shipped is not None:
            search_module.FOREIGN_DENSE_WEIGHT = shipped
        if stop_words is not None:
            analyzer._stop_words = stop_words
    if shipped is not None:  # the shipped weight's column is hybrid's own
        ranks[f"hybrid w={shipped:g}"] = ranks["hybrid"]
    return ranks


def run_attnswitch(args, corpora: list[tuple[sq.Corpus, dict]], done: dict) -> dict:
    out = {}
    with sq.stores(args.store, args.store_dir) as location:
        for c, dropped in corpora:
            if c.name in done:
                out[c.name] = done[c.name]
                print(c.name, "kept from", args.out, flush=True)
                continue
            db = str(location(c.name))
            summary = attnswitch.index(c.root, db=db).to_dict()
            print(
                c.name,
                "indexed",
                {
                    k: summary.get(k)
                    for k in ("indexed", "failed", "chunks_stored", "wall_s", "engine", "precision")
                },
                flush=True,
            )
            ranks = evaluate(c, db, args.diagnoses)
            out[c.name] = language_result(c, dropped, ranks, summary.get("chunks_stored"))
            out[c.name]["index"] = {
                k: summary.get(k)
                for k in ("indexed", "failed", "skipped", "chunks_stored", "engine", "precision")
            }
            print(
                c.name,
                json.dumps(
                    {k: round(v["mrr_at_10"], 3) for k, v in out[c.name]["scores"]["all"].items()}
                ),
                flush=True,
            )
            save_partial(args, out)
    return out


def run_langchain(args, corpora: list[tuple[sq.Corpus, dict]], done: dict) -> dict:
    import search_quality_peers as peers
    from langchain_vs_attnswitch import model_folder

    work = args.store_dir / "langchain"
    work.mkdir(parents=True, exist_ok=True)
    out = {}
    for c, dropped in corpora:
        if c.name in done:
            out[c.name] = done[c.name]
            continue
        got = peers.run_peer(
            "langchain", c, args.peers_venv, model_folder(), work, False, modes=MODES
        )
        ranks = {
            m: [
                sq.file_rank([(i, 0.0) for i in range(len(hits))], dict(enumerate(hits)), q.target)
                for q, hits in zip(c.queries, got["ranked_files_by_mode"][m], strict=True)
            ]
            for m in MODES
        }
        out[c.name] = language_result(c, dropped, ranks, got["chunks"])
        out[c.name]["files_read"] = got["files_read"]
        print(
            c.name,
            json.dumps(
                {k: round(v["mrr_at_10"], 3) for k, v in out[c.name]["scores"]["all"].items()}
            ),
            flush=True,
        )
        save_partial(args, out)
    return out


def language_result(c: sq.Corpus, dropped: dict, ranks: dict, chunks) -> dict:
    return {
        "files": sum(1 for p in c.root.rglob("*") if p.is_file()),
        "chunks": chunks,
        "sources": [s.package for s in LANGUAGES[c.name]],
        "queries": {k: sum(q.kind == k for q in c.queries) for k in KINDS},
        "query_digest": digest(c.queries),
        "dropped_candidates": dropped,
        "scores": scores(c.queries, ranks),
    }


def save_partial(args, languages: dict) -> None:
    """The languages done so far, to `--out`.partial (a stopped run keeps them: `--resume`)."""
    if args.out:
        Path(f"{args.out}.partial").write_text(
            json.dumps(
                {"languages": languages, "code": args.code, "store": args.store_name},
                ensure_ascii=False,
            )
        )


# ---------------------------------------------------------------------------------------
# The report: runs side by side.

INTRO = """# Search per language

Known-item search in twelve languages on documents Debian ships translated, each
contender in its own process with its default settings (`benchmarks/multilingual_search.py`;
its module doc says how the corpora and the queries are made). Commands, from the
repository's root, S a scratch folder:

    make multilingual-sources                     # as root: the Debian packages
    git worktree add S/before 6af1396             # the parent of ffaa53b, which added the analyzer
    python benchmarks/multilingual_search.py --store-dir S/after --label after \\
        --out S/after-sqlite.json
    python benchmarks/multilingual_search.py --store postgres --store-dir S/after-pg \\
        --label after --out S/after-postgres.json
    PYTHONPATH=S/before/src python benchmarks/multilingual_search.py --store-dir S/before \\
        --label before --out S/before-sqlite.json
    make bench-peers-env
    python benchmarks/multilingual_search.py --langchain --store-dir S/langchain \\
        --out S/langchain.json
    # the English benchmarks at both revisions, each run from its own tree:
    (cd S/before && PYTHONPATH=src python benchmarks/search_quality.py --python-docs 110 \\
        --store-dir S/sq-before --json S/sq-before.json)
    (cd S/before && PYTHONPATH=src python benchmarks/retrieval_quality.py \\
        --json S/retrieval-before.json)
    python benchmarks/search_quality.py --python-docs 110 --store-dir S/sq-after \\
        --json S/sq-after.json
    python benchmarks/retrieval_quality.py --json S/retrieval-after.json
    python benchmarks/multilingual_search.py --report S/after-sqlite.json \\
        S/after-postgres.json S/before-sqlite.json S/langchain.json \\
        --english-search S/sq-before.json S/sq-after.json \\
        --english-retrieval S/retrieval-before.json S/retrieval-after.json \\
        --md docs/results/multilingual_search.md --json docs/results/multilingual_search.json \\
        --plot docs/results/multilingual_search.png

(`python` is the project's venv's, `HF_HUB_OFFLINE=1`; the peers' venv is only called by
the `--langchain` run.)

- Corpora: Debian's reference manual (en, de, fr, es, ja, zh-cn) and Debian's FAQ (en, de,
  fr, it, nl, pt, ru, ja, zh-cn, ko), one folder per language holding both where both
  exist, their tables of contents left out; Hindi, which neither is translated into:
  the 150 pages of LibreOffice's Hindi help with the most Devanagari letters (a fifth of
  their letters; the rest of that help is English).
- Queries (none written by hand), four kinds: words (a word of the language one file
  holds), headings (section titles), questions (titles with a question mark, the FAQ's)
  and partial sentences (8 words from the middle of a paragraph; in Chinese and Japanese
  12 characters), each found in one file only, its answer, and in the corpus's language
  (py3langid); at most 50 of each kind a language, the same for every run.
- Score: MRR@10 of the answer file, a hit list of 50 chunks collapsed to files.
  Checks: keyword MRR@10 at least 0.9 times English's (English's corpus is manual and FAQ
  together: the ratio compares different corpora), and hybrid at most 0.01 below the
  better of keyword and dense.
- Model: all-MiniLM-L6-v2 (its card declares English only), default options, offline.
"""

TABLES_START, TABLES_END = "<!-- tables -->", "<!-- /tables -->"


def label(run: dict) -> str:
    if run["system"] == "langchain":
        return "LangChain's recipe"
    return f"{run['label']} ({run['store']})"


def mrr(run: dict, lang: str, mode: str, kind: str = "all") -> float | None:
    got = run["languages"].get(lang, {}).get("scores", {}).get(kind, {}).get(mode)
    return got["mrr_at_10"] if got else None


def cell(value: float | None, digits: int = 3, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def checks(run: dict, lang: str) -> tuple[float | None, float | None]:
    """(keyword MRR@10 / English's, hybrid − the better of keyword and dense)."""
    english = mrr(run, "en", "keyword")
    kw, de, hy = (mrr(run, lang, m) for m in MODES)
    ratio = kw / english if english and kw is not None else None
    margin = hy - max(kw, de) if None not in (kw, de, hy) else None
    return ratio, margin


def checks_table(run: dict) -> list[str]:
    """Per language: the three modes, keyword against English, hybrid against its better
    half, with the issue's two checks."""
    lines = [
        (
            "| language | files | chunks | queries (w/h/q/p) | keyword | dense | hybrid "
            f"| keyword / English | ≥ {KEYWORD_RATIO} | hybrid − better half "
            f"| within {HYBRID_SLACK} |"
        ),
        "|---|---:|---:|---|---:|---:|---:|---:|:-:|---:|:-:|",
    ]
    for lang, r in run["languages"].items():
        kw, de, hy = (mrr(run, lang, m) for m in MODES)
        ratio, margin = checks(run, lang)
        n = r["queries"]
        lines.append(
            f"| {lang} | {r['files']} | {r.get('chunks') or '-'} | {sum(n.values())} "
            f"({'/'.join(str(n.get(k, 0)) for k in KINDS)}) | {cell(kw)} | {cell(de)} | "
            f"{cell(hy)} | {cell(ratio, 2)} | "
            f"{'yes' if ratio is not None and ratio >= KEYWORD_RATIO else 'no'} | "
            f"{cell(margin, sign=True)} | "
            f"{'yes' if margin is not None and margin >= -HYBRID_SLACK else 'no'} |"
        )
    return lines


def before_after_table(before: dict, after: dict, kind: str = "all") -> list[str]:
    lines = [
        (
            "| language | queries | keyword before | keyword after | Δ | dense before "
            "| dense after | Δ | hybrid before | hybrid after | Δ |"
        ),
        "|---|---:|" + "---:|" * 9,
    ]
    for lang in after["languages"]:
        if kind not in after["languages"][lang]["scores"]:
            continue
        cells = []
        for m in MODES:
            b, a = mrr(before, lang, m, kind), mrr(after, lang, m, kind)
            cells += [cell(b), cell(a), cell(a - b if None not in (a, b) else None, sign=True)]
        n = after["languages"][lang]["scores"][kind]["keyword"]["queries"]
        lines.append(f"| {lang} | {n} | " + " | ".join(cells) + " |")
    return lines


def kinds_table(runs: list[dict]) -> list[str]:
    """Per language and kind, each mode's MRR@10 in each run."""
    columns = [(r, m) for r in runs for m in MODES]
    lines = [
        "| language | kind | queries | "
        + " | ".join(f"{m}, {label(r)}" for r, m in columns)
        + " |",
        "|---|---|---:|" + "---:|" * len(columns),
    ]
    langs = runs[0]["languages"]
    for lang in langs:
        for kind in KINDS:
            if kind not in langs[lang]["scores"]:
                continue
            n = next(iter(langs[lang]["scores"][kind].values()))["queries"]
            cells = [cell(mrr(r, lang, m, kind)) for r, m in columns]
            lines.append(f"| {lang} | {kind} | {n} | " + " | ".join(cells) + " |")
    return lines


def all_scores(run: dict) -> dict:
    """The modes' metrics over all queries of the run's first language."""
    return next(iter(run["languages"].values()))["scores"]["all"]


def weights_table(run: dict) -> list[str]:
    names = [f"hybrid w={w:g}" for w in FOREIGN_WEIGHTS]
    lines = [
        "| language | keyword | dense | " + " | ".join(names) + " |",
        "|---|---:|---:|" + "---:|" * len(names),
    ]
    for lang in run["languages"]:
        lines.append(
            f"| {lang} | {cell(mrr(run, lang, 'keyword'))} | "
            f"{cell(mrr(run, lang, 'dense'))} | "
            + " | ".join(cell(mrr(run, lang, n)) for n in names)
            + " |"
        )
    return lines


def stop_words_table(after: dict) -> list[str]:
    """Keyword MRR@10 per language and kind: as shipped, and with no stop word dropped from
    the query."""
    lines = [
        "| language | kind | queries | keyword | stop words kept | dropped − kept |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for lang, r in after["languages"].items():
        for kind in ("all", *KINDS):
            if kind not in r["scores"]:
                continue
            a, kept = mrr(after, lang, "keyword", kind), mrr(after, lang, KEPT_STOP_WORDS, kind)
            lines.append(
                f"| {lang} | {kind} | {r['scores'][kind]['keyword']['queries']} | "
                f"{cell(a)} | {cell(kept)} | "
                f"{cell(a - kept if None not in (a, kept) else None, sign=True)} |"
            )
    return lines


def langchain_table(lc: dict, ours: dict) -> list[str]:
    lines = [
        (
            "| language | queries | LangChain keyword (BM25) | attnswitch keyword "
            "| LangChain dense | attnswitch dense | LangChain hybrid (ensemble) "
            "| attnswitch hybrid | LangChain chunks | attnswitch chunks |"
        ),
        "|---|---:|" + "---:|" * 8,
    ]
    for lang, r in lc["languages"].items():
        same = ours["languages"].get(lang, {}).get("query_digest") == r["query_digest"]
        cells = []
        for m in MODES:
            cells += [cell(mrr(lc, lang, m)), cell(mrr(ours, lang, m)) if same else "-"]
        lines.append(
            f"| {lang} | {sum(r['queries'].values())} | "
            + " | ".join(cells)
            + f" | {r['chunks']} | {ours['languages'].get(lang, {}).get('chunks') or '-'} |"
        )
    return lines


def english_search_table(before: dict, after: dict) -> list[str]:
    lines = [
        (
            "| corpus | kind | queries | mode | MRR@10 before | MRR@10 after | Δ "
            "| R@10 before | R@10 after |"
        ),
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for name, kinds in after["results"].items():
        for kind, by in kinds.items():
            for m in ("keyword", "dense", "hybrid"):
                b = before["results"].get(name, {}).get(kind, {}).get(m)
                a = by[m]
                lines.append(
                    f"| {name} | {kind} | {a['queries']} | {m} | "
                    f"{cell(b and b['mrr_at_10'])} | {cell(a['mrr_at_10'])} | "
                    f"{cell(a['mrr_at_10'] - b['mrr_at_10'] if b else None, sign=True)} | "
                    f"{cell(b and b['recall_at_10'])} | {cell(a['recall_at_10'])} |"
                )
    return lines


def english_retrieval_table(before: dict, after: dict) -> list[str]:
    lines = [
        (
            "| mode | queries before / after | MRR@10 before | MRR@10 after | Δ "
            "| R@10 before | R@10 after |"
        ),
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for m in ("keyword", "dense", "hybrid"):
        b, a = before["modes"][m], after["modes"][m]
        lines.append(
            f"| {m} | {before['queries']} / {after['queries']} | "
            f"{cell(b['mrr_at_10'])} | {cell(a['mrr_at_10'])} | "
            f"{cell(a['mrr_at_10'] - b['mrr_at_10'], sign=True)} | "
            f"{cell(b['recall_at_10'])} | {cell(a['recall_at_10'])} |"
        )
    return lines


def plot(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    langs = list(runs[0]["languages"])
    fig, axes = plt.subplots(3, 1, figsize=(12, 9), sharex=True)
    width = 0.8 / len(runs)
    for ax, mode in zip(axes, MODES, strict=True):
        for i, r in enumerate(runs):
            values = [mrr(r, lang, mode) or 0.0 for lang in langs]
            ax.bar(np.arange(len(langs)) + i * width, values, width, label=label(r))
        ax.set_ylabel(f"{mode} MRR@10")
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
    axes[-1].set_xticks(np.arange(len(langs)) + width * (len(runs) - 1) / 2, langs)
    axes[0].legend(fontsize=8, ncol=len(runs), loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def report(args) -> None:
    runs = [json.loads(Path(p).read_text()) for p in args.report]
    ours = [r for r in runs if r["system"] == "attnswitch"]
    for lang in {lang for r in runs for lang in r["languages"]}:
        if len({r["languages"][lang]["query_digest"] for r in runs if lang in r["languages"]}) != 1:
            raise SystemExit(f"--report: the runs were not given the same queries in {lang}")
    by = {(r["label"], r["store"]): r for r in ours}
    code = {r["label"]: r["code"] for r in ours}
    lines = [
        f"Runs: {', '.join(label(r) for r in runs)}. Code: "
        + "; ".join(
            f"{name} = {c['commit'][:7]} ({c['subject']}"
            + (", src edited" if c["src_edited"] else "")
            + ")"
            for name, c in code.items()
        )
        + f". CPU: {runs[0]['cpu']}, shared with other work (quality figures do not "
        "depend on the load).",
        "",
    ]
    for r in ours:
        lines += [f"### Checks: {label(r)}", "", *checks_table(r), ""]
    for store in ("sqlite", "postgres"):
        if ("before", store) in by and ("after", store) in by:
            lines += [
                f"### Before and after the analyzer, {store} (MRR@10, all kinds)",
                "",
                *before_after_table(by["before", store], by["after", store]),
                "",
            ]
    for lc in (r for r in runs if r["system"] == "langchain"):
        ref = by.get(("after", "sqlite")) or ours[0]
        lines += [
            f"### LangChain's recipe beside {label(ref)} (MRR@10, all kinds)",
            "",
            *langchain_table(lc, ref),
            "",
        ]
    for store in ("sqlite", "postgres"):
        same = [r for r in ours if r["store"] == store]
        if same:
            lines += [f"### By kind of query, {store} (MRR@10)", "", *kinds_table(same), ""]
    lc_runs = [r for r in runs if r["system"] == "langchain"]
    if lc_runs and ("after", "sqlite") in by:
        lines += [
            "### By kind of query, LangChain's recipe beside after (sqlite) (MRR@10)",
            "",
            *kinds_table([by["after", "sqlite"], *lc_runs]),
            "",
        ]
    for r in (r for r in ours if "hybrid w=0" in all_scores(r)):
        lines += [
            f"### Hybrid's dense weight outside the model's languages: {label(r)}",
            "",
            (
                "(w: the dense half's weight for a query or chunk in a language the "
                "model does not declare; shipped 0.2, the hybrid column above.)"
            ),
            "",
            *weights_table(r),
            "",
        ]
    for r in (r for r in ours if KEPT_STOP_WORDS in all_scores(r)):
        lines += [
            f"### Stop words dropped from keyword queries: {label(r)} (MRR@10)",
            "",
            *stop_words_table(r),
            "",
        ]
    english: dict = {}
    if args.english_search:
        before, after = (json.loads(Path(p).read_text()) for p in args.english_search)
        english["search_quality"] = {"before": before, "after": after}
        lines += [
            (
                f"### English: search_quality.py --python-docs 110 ({after['store']}), "
                "before and after"
            ),
            "",
            *english_search_table(before, after),
            "",
        ]
    if args.english_retrieval:
        before, after = (json.loads(Path(p).read_text()) for p in args.english_retrieval)
        english["retrieval_quality"] = {"before": before, "after": after}
        lines += [
            (
                "### English: retrieval_quality.py (section headings against their "
                "section's body, heading removed; sqlite), before and after"
            ),
            "",
            *english_retrieval_table(before, after),
            "",
        ]
    tables = "\n".join(lines)
    print(tables)
    if args.md:
        page = args.md.read_text() if args.md.exists() else ""
        if TABLES_START in page and TABLES_END in page:
            head, rest = page.split(TABLES_START, 1)
            tail = rest.split(TABLES_END, 1)[1]
        else:
            head, tail = INTRO + "\n", "\n"
        args.md.write_text(f"{head}{TABLES_START}\n\n{tables}\n{TABLES_END}{tail}")
    if args.json:
        args.json.write_text(
            json.dumps({"runs": runs, "english": english}, indent=1, ensure_ascii=False) + "\n"
        )
    if args.plot:
        plot([r for r in runs if r["store"] in ("sqlite", "faiss")], args.plot)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--languages", default=",".join(LANGUAGES))
    ap.add_argument("--per-kind", type=int, default=50)
    ap.add_argument("--max-files", type=int, default=150)
    ap.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--store-dir", type=Path, default=sq.ROOT / ".bench" / "multilingual")
    ap.add_argument("--label", default="after", help="this run's name in the report")
    ap.add_argument("--out", type=Path, help="this run's JSON")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="keep the languages of OUT.partial scored with the same queries and code",
    )
    ap.add_argument(
        "--diagnoses",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also score hybrid under FOREIGN_WEIGHTS and keyword with no stop "
        "word dropped, where the code has them",
    )
    ap.add_argument(
        "--queries-only",
        action="store_true",
        help="build and print the queries, index and search nothing",
    )
    ap.add_argument(
        "--langchain",
        action="store_true",
        help="run LangChain's recipe (in --peers-venv) instead of attnswitch",
    )
    ap.add_argument("--peers-venv", type=Path, default=sq.ROOT / ".bench" / "peers-venv")
    ap.add_argument("--report", nargs="+", metavar="RUN.json")
    ap.add_argument(
        "--english-search",
        nargs=2,
        metavar=("BEFORE.json", "AFTER.json"),
        help="search_quality.py --json of the two revisions",
    )
    ap.add_argument(
        "--english-retrieval",
        nargs=2,
        metavar=("BEFORE.json", "AFTER.json"),
        help="retrieval_quality.py --json of the two revisions",
    )
    ap.add_argument("--md", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    if args.report:
        report(args)
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args.store_dir.mkdir(parents=True, exist_ok=True)
    args.code = None if args.langchain else code_revision()
    args.store_name = "faiss" if args.langchain else args.store
    english = english_words(args.max_files)
    corpora = []
    for lang in args.languages.split(","):
        c = corpus(lang, args.store_dir, args.max_files)
        dropped = build_queries(lang, c, args.per_kind, english)
        print(
            f"{lang}: {sum(1 for p in c.root.rglob('*') if p.is_file())} files, "
            f"{len(c.queries)} queries {digest(c.queries)} "
            f"({', '.join(f'{k} {sum(q.kind == k for q in c.queries)}' for k in KINDS)}), "
            f"dropped {dropped}",
            flush=True,
        )
        corpora.append((c, dropped))
        if args.queries_only:
            for q in c.queries:
                print(f"  {q.kind:<17} {q.target:<40} {q.text}")
    if args.queries_only:
        return
    done: dict = {}
    partial = Path(f"{args.out}.partial") if args.out else None
    if args.resume and partial and partial.exists():
        old = json.loads(partial.read_text())
        if old["code"] == args.code and old["store"] == args.store_name:
            done = {
                c.name: old["languages"][c.name]
                for c, _ in corpora
                if old["languages"].get(c.name, {}).get("query_digest") == digest(c.queries)
            }
    if args.langchain:
        run = {
            "system": "langchain",
            "label": "langchain",
            "store": "faiss",
            "languages": run_langchain(args, corpora, done),
        }
    else:
        run = {
            "system": "attnswitch",
            "label": args.label,
            "store": args.store,
            "code": args.code,
            "languages": run_attnswitch(args, corpora, done),
        }
    run.update(
        cpu=cpu(), per_kind=args.per_kind, max_files=args.max_files, model="all-MiniLM-L6-v2"
    )
    if args.out:
        args.out.write_text(json.dumps(run, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
