# Two set-up commands: `make demo` and `make test`. Both create .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
WORKERS ?= $(shell nproc 2>/dev/null || echo 2)
PIP := $(BIN)/python -m pip install --quiet
# pip byte-compiles what it installs on one core: 40 s of the test venv's 60. The test installs skip that and
# compileall does it on every core (20 s on 2); a file that does not compile is skipped, as pip skips it.
PIP_FAST := $(PIP) --no-compile
COMPILE_ALL := $(BIN)/python -m compileall -q -j 0

.PHONY: demo test check bench lint docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml setup.py src/posenc/core/_kernels.c
	$(PIP) -e '.[plot,bfloat16]'
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed requirements-test.txt requirements-test-nodeps.txt
	$(PIP_FAST) -r requirements-test.txt
	$(PIP_FAST) --no-deps -r requirements-test-nodeps.txt
	@$(COMPILE_ALL) "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" >/dev/null 2>&1 || true
	touch $@

# The browser of tests/explore/test_browser.py: Debian's chromium and chromium-driver (apt, as root), where missing.
$(VENV)/.installed-browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		if [ "$$(id -u)" != 0 ]; then \
			echo "make test: chromium and chromium-driver are missing; as root: apt-get install chromium chromium-driver" >&2; exit 1; \
		fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	fi
	@mkdir -p $(VENV) && touch $@

# triton 3.6 (torch 2.10/2.11's), apart: tests/torch/test_kernel_compile.py builds the CUDA kernels with it too
$(VENV)/.installed-triton-3.6: $(VENV)/.installed-test
	$(PIP) --no-deps --upgrade --target $(VENV)/triton-3.6 triton==3.6.0
	touch $@

# The API reference needs the test dependencies too: autodoc imports posenc.torch, posenc.jax (Flax), ...
$(VENV)/.installed-docs: $(VENV)/.installed-test requirements-docs.txt
	$(PIP) -r requirements-docs.txt
	touch $@

demo: $(VENV)/.installed
	$(BIN)/posenc demo

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# The API reference, generated from the docstrings: docs/_build/html/index.html (config: docs/conf.py).
# -E reads every docstring again (no warning hidden in a cached page); -W --keep-going: any warning fails
# the build, after listing them all.
docs: $(VENV)/.installed-docs
	$(BIN)/python -m sphinx -b html -E -W --keep-going -q -j 2 docs docs/_build/html

# The whole suite (the CI command), on every core (pytest-xdist): whole files to each worker, the longest
# first (tests/conftest.py LONGEST_FILES), so a module's fixtures are built once and no long file starts last.
# --no-loadscope-reorder: xdist would otherwise hand out the files with the most tests first, whatever order
# the collection has (the sm_90 compiles, three tests, then started last and kept both cores to themselves).
# lint and the API reference are built side by side first (make -j 2).
test: $(VENV)/.installed-docs $(VENV)/.installed-triton-3.6 $(VENV)/.installed-browser
	@$(MAKE) --no-print-directory --output-sync=target -j 2 lint docs
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder

# The contributors' loop: lint and every test not marked slow (tests/conftest.py names the slow tier).
check: lint
	$(BIN)/python -m pytest -n $(WORKERS) --dist worksteal -m "not slow" -q

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/cost_model.py
	$(BIN)/python benchmarks/cost_model.py --doc
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
