# `make run`: all set-up on a fresh machine, then the main job on the embedded default.
# `make test`: all set-up, then the test suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: run test setup doctor bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The CPU build of torch is pinned and installed first: any other spec pulls a CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[all,test]'
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/attnswitch run examples/corpus
	$(VENV)/bin/attnswitch search "how do I update rows in a table" -k 3

test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadgroup -q

doctor: $(STAMP)
	$(VENV)/bin/attnswitch doctor

bench: $(STAMP)
	$(PY) benchmarks/attention_ops.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info src/*.egg-info
