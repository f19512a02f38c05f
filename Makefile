# The README's two commands are `make run` and `make test`; everything else is a helper.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.powercontext-installed
DEV_STAMP := $(VENV)/.powercontext-dev-installed
MEMBERS := runtime shared_hook_kit codex_plugin claude_code_plugin
PYPROJECTS := pyproject.toml $(addsuffix /pyproject.toml,$(MEMBERS))

.PHONY: install dev-install browser run test lint format openapi docs ui-screenshots seekdb bench clean

# Two installs into one .venv. `install` is what serving needs: the runtime and the plugins
# (`make run`). `dev-install` adds the semantic extra and the development tools (pytest,
# schemathesis, selenium, seekdb's server wheel, …) that `make test` and the helpers below use.
install: $(STAMP)

$(STAMP): $(PYPROJECTS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(addprefix -e ./,$(MEMBERS))
	@touch $(STAMP)

dev-install: $(DEV_STAMP)

$(DEV_STAMP): $(STAMP) $(PYPROJECTS)
	$(BIN)/python -m pip install --quiet -e './runtime[semantic]' -e '.[dev]'
	@touch $(DEV_STAMP)

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

# POWERCONTEXT_PORT=7500 make run serves on another port (every POWERCONTEXT_* setting applies).
run: install
	@echo 'The powercontext command is in $(CURDIR)/$(BIN); to type just `powercontext`, run:'
	@echo '    export PATH="$(CURDIR)/$(BIN):$$PATH"'
	$(BIN)/powercontext serve

# Two pytest workers (TEST_WORKERS=0 runs in one process): the suite spends much of its time
# waiting on real daemons, host CLIs and seekdb, so two workers on two cores cut CI nearly in
# half. Tests are handed out by file, and every test that needs the seekdb server runs on one
# worker (tests/conftest.py), so one server starts and module fixtures are set up once.
TEST_WORKERS ?= 2
test: dev-install browser
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

lint: dev-install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: dev-install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

openapi: install
	$(BIN)/python -m powercontext_runtime.http.openapi_dump runtime/openapi/powercontext.json

# Rewrite every sample output marked `<!-- sample: NAME -->` in README.md and docs/ from a real run.
docs: dev-install
	$(BIN)/python tools/doc_samples.py --write

# Retake the web console's screenshots in docs/images/ (docs/ui.md) from the browser test.
ui-screenshots: dev-install browser
	POWERCONTEXT_UI_SCREENSHOTS=docs/images $(BIN)/python -m pytest -q tests/e2e/test_console_browser.py

seekdb: dev-install
	$(BIN)/python tools/seekdb.py

# Every benchmark (≈ 1 h on 2 cores), then the summary table at the top of bench/RESULTS.md.
bench: dev-install
	$(BIN)/python bench/run_all.py --write-results $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
