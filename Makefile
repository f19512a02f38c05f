# The README's two commands are `make run` and `make test`; everything else is a helper.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.powercontext-installed
MEMBERS := runtime shared_hook_kit codex_plugin claude_code_plugin
PYPROJECTS := pyproject.toml $(addsuffix /pyproject.toml,$(MEMBERS))

.PHONY: install browser run test lint format openapi docs ui-screenshots seekdb bench clean

install: $(STAMP)

$(STAMP): $(PYPROJECTS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(addprefix -e ./,$(MEMBERS)) -e './runtime[semantic]' -e '.[dev]'
	@touch $(STAMP)

# The web console's end-to-end tests drive Debian's headless Chromium through its WebDriver
# (selenium, in the dev extra). Quick when both are there; installs them where apt-get can
# (root, as in CI); elsewhere it says so and those tests skip (outside CI; under CI they fail).
BROWSER_PACKAGES := chromium chromium-driver fonts-noto-cjk
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing $(BROWSER_PACKAGES) for the web console tests"; \
		apt-get update -q >/dev/null && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			$(BROWSER_PACKAGES) >/dev/null; \
	else echo "note: no chromium/chromedriver (apt-get install $(BROWSER_PACKAGES)); the browser tests skip"; fi

run: install
	$(BIN)/powercontext serve

test: install browser
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

# Retake the web console's screenshots in docs/images/ (docs/ui.md) from the browser test.
ui-screenshots: install browser
	POWERCONTEXT_UI_SCREENSHOTS=docs/images $(BIN)/python -m pytest -q tests/e2e/test_console_browser.py

seekdb: install
	$(BIN)/python tools/seekdb.py

# Every benchmark (≈ 1 h on 2 cores), then the summary table at the top of bench/RESULTS.md.
bench: install
	$(BIN)/python bench/run_all.py --write-results $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
