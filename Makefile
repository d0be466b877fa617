# Two set-up commands: `make demo` and `make test`. Both create .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml setup.py src/posenc/core/_kernels.c
	$(BIN)/python -m pip install --quiet -e '.[plot,bfloat16]'
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed requirements-test.txt
	$(BIN)/python -m pip install --quiet -r requirements-test.txt
	$(BIN)/python -m pip install --quiet --no-deps keras-hub==0.32.0
	touch $@

demo: $(VENV)/.installed
	$(BIN)/posenc demo

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/cost_model.py
	$(BIN)/python benchmarks/cost_model.py --readme
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/forward.py
	$(BIN)/python benchmarks/long_context.py
	@if $(BIN)/python -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then \
		$(BIN)/python benchmarks/forward.py --device cuda --json benchmarks/results/forward_cuda.json && \
		$(BIN)/python benchmarks/device_table.py --device cuda && \
		$(BIN)/python benchmarks/device_native.py --device cuda; \
	else echo "no CUDA device: the GPU benchmarks (forward.py --device cuda, device_table.py, device_native.py) did not run"; fi

clean:
	rm -rf $(VENV) build src/*.egg-info src/posenc/*.so src/posenc/core/*.so .pytest_cache .ruff_cache .hypothesis
