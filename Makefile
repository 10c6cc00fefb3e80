# The two entry points a new user needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JOBS ?= auto

.PHONY: demo test test-all bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,ptx]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/hlo-opt testdata/gelu.hlo -o out/gelu.opt.hlo
	cat out/gelu.opt.hlo
	$(VENV)/bin/hlo-run --platform interpreter testdata/gelu.hlo --reference-platform none --print-literals | head -20

test: $(STAMP)
	$(PY) -m pytest -q -n $(JOBS) --durations=15 tests

test-all: $(STAMP)
	$(PY) -m pytest -q -n $(JOBS) -m '' tests

bench: $(STAMP)
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) out build *.egg-info
