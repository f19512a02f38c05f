# The README's two commands are `make run` and `make test`; everything else is a helper.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.powercontext-installed
MEMBERS := runtime shared_hook_kit codex_plugin claude_code_plugin
PYPROJECTS := pyproject.toml $(addsuffix /pyproject.toml,$(MEMBERS))

.PHONY: install run test lint format openapi docs seekdb bench clean

install: $(STAMP)

$(STAMP): $(PYPROJECTS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(addprefix -e ./,$(MEMBERS)) -e './runtime[semantic]' -e '.[dev]'
	@touch $(STAMP)

run: install
	$(BIN)/powercontext serve

test: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

openapi: install
	$(BIN)/python -m powercontext_runtime.http.openapi_dump runtime/openapi/powercontext.json

# Rewrite every sample output marked `<!-- sample: NAME -->` in README.md and docs/ from a real run.
docs: install
	$(BIN)/python tools/doc_samples.py --write

seekdb: install
	$(BIN)/python tools/seekdb.py

# Every benchmark (≈ 1.5 h on 2 cores), then the summary table at the top of bench/RESULTS.md.
bench: install
	$(BIN)/python bench/run_all.py --write-results $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
