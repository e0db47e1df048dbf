# The two set-up commands of the README: `make demo` (the main job, on the embedded simulator)
# and `make test` (the whole suite, browser tests included). Both start from a fresh clone:
# they create .venv and install what they need; re-running them is cheap.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo figures test check lint bench browser-deps clean guidellm-venv

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,ray]'
	touch $@

# Debian's chromium for the real-browser tests (never `playwright install`: no outside downloads here).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium >/dev/null; fi; }

demo: $(BIN)/.installed
	$(BIN)/python -m nito_nb.demo --out out/quickstart.html

# The README's figures, from a run of the notebook that shows them (on the embedded simulator,
# at its default capacity: NITO_SIM_CAPACITY unset; the rest of the notebook as fast as it can).
figures: $(BIN)/.installed
	env -u NITO_API_KEY -u NITO_SIM_CAPACITY NITO_SIM_TPS=0 NITO_SIM_TTFT_MS=0 \
	  $(BIN)/python -m nito_nb.demo --notebook analysis --out out/analysis.html --figure knee-figure=docs/load-knee.png

lint: $(BIN)/.installed
	$(BIN)/ruff check nito_nb tests bench scripts
	$(BIN)/ruff format --check nito_nb tests bench scripts
	$(BIN)/mypy
	$(BIN)/python scripts/module_sizes.py

# The developer's loop: lint, then the tests that start no kernel, no Python process, no browser
# and no Ray (marked `spawns`, `browser`, `ray`; tests/conftest.py fails an unmarked test that
# starts one), in two pytest-xdist workers: most of these tests wait on loopback rather than
# compute, so two workers finish in a bit over half the time even on two cores. Under half the
# time of the non-browser run (docs/DEVELOPING.md has the figures); `make test` stays the whole
# suite, in one process, as CI runs it.
check: $(BIN)/.installed lint
	NITO_FAST_TIER=1 $(BIN)/python -m pytest -n 2 -m "not spawns and not browser and not ray" -q

# The Ray tests run in a pytest of their own too: a local Ray cluster starts a dozen processes,
# and its start-up or its leftovers should neither slow nor warn inside the other tests.
# The browser tests run in a pytest of their own: Playwright's sync API keeps an event loop
# running in the main thread for as long as its browser lives, and asyncio.run() in any later
# test would fail under it.
test: $(BIN)/.installed $(VENV)/ipykernel6/.installed browser-deps lint
	$(BIN)/python -m pytest -m "not browser and not ray"
	$(BIN)/python -m pytest -m ray
	NITO_IPYKERNEL6_SITE=$(CURDIR)/$(VENV)/ipykernel6 $(BIN)/python -m pytest -m browser tests/browser

# ipykernel 6 beside the venv's 7, put first on the kernel's path by the browser test that checks
# the widget on both (the issue asks for both; their threading differs, see docs/JUPYTER.md).
$(VENV)/ipykernel6/.installed: $(BIN)/.installed
	$(BIN)/pip install --quiet --no-deps --target $(VENV)/ipykernel6 'ipykernel==6.29.5'
	touch $@

bench: $(BIN)/.installed
	for b in bench/bench_*.py; do $(BIN)/python $$b || exit 1; done

# guidellm for bench/bench_guidellm.py, in a venv of its own (.venv-guidellm, ignored by git) (it pulls torch,
# which nito_nb does not need). torch's CPU build goes first, else pip takes the CUDA wheels: the
# default finds it where pip's find-links holds a CPU wheel; elsewhere TORCH_PIP='torch --index-url https://download.pytorch.org/whl/cpu'.
GUIDELLM_VENV ?= .venv-guidellm
TORCH_PIP ?= torch==2.13.0
guidellm-venv:
	$(PY) -m venv $(GUIDELLM_VENV)
	$(GUIDELLM_VENV)/bin/pip install --quiet $(TORCH_PIP)
	$(GUIDELLM_VENV)/bin/pip install --quiet guidellm

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
