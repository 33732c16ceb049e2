"""benchmarks/search_quality.py with one query-side variant of the keyword analyzer, to tell
what each part of the analyzer costs or buys (docs/results/english_analyzer.md):

    python benchmarks/analyzer_variants.py VARIANT [search_quality.py's options]

VARIANT: `stopwords-kept` (the query's stop words are looked for too: meaningful on the
code that dropped them, up to the commit that stopped it, which has no `_stop_words`),
`no-stems` (the query looks for its words as written only), `both`. The index is the
same (the store in `--store-dir` is reused); only the query's terms change."""

import runpy
import sys

from attnswitch.indexing import analyzer

variant = sys.argv.pop(1)
if variant == "stopwords-kept":
    analyzer._stop_words = lambda language: frozenset()
elif variant == "no-stems":
    original = analyzer.query_terms
    analyzer.query_terms = lambda text, languages: (original(text, languages)[0], [])
elif variant == "both":
    analyzer._stop_words = lambda language: frozenset()
    original = analyzer.query_terms
    analyzer.query_terms = lambda text, languages: (original(text, languages)[0], [])
sys.argv[0] = "benchmarks/search_quality.py"
runpy.run_path("benchmarks/search_quality.py", run_name="__main__")
