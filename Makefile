# Every target creates .venv and installs the project if needed: a fresh clone
# with only Python on the machine runs `make demo` and `make test` as they are.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck unit bench stress fuzz soak clean browser screenshots

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/actormem demo

lint: $(STAMP)
	$(BIN)/ruff check actormem tests benchmarks examples
	$(BIN)/ruff format --check actormem tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy actormem

unit: $(STAMP) browser
	$(BIN)/pytest -q

# The memory explorer's tests drive Debian's chromium through its chromedriver.
# Installed once when missing (a fresh machine has neither); quick when present.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
		echo "installing chromium and chromium-driver for the UI tests"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
			chromium chromium-driver >/dev/null; \
	fi

# Re-take the README's screenshots of the memory explorer (docs/ui/*.png).
screenshots: $(STAMP) browser
	ACTORMEM_UI_SCREENSHOTS=docs/ui $(BIN)/pytest -q tests/ui/test_browser.py

test: lint typecheck unit

# Peers measured beside actormem in the same run live in their own virtualenv,
# so their dependencies never mix with ours.
PEERS := .venv-peers
$(PEERS)/.stamp:
	@test -x $(PEERS)/bin/python || $(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install -q "agentscope==1.0.21" "mcp<2" greenlet tqdm \
		|| echo "peer install failed: peer columns will say n/a"
	@touch $(PEERS)/.stamp

bench: $(STAMP) $(PEERS)/.stamp
	$(BIN)/python -m benchmarks.run_all

stress: $(STAMP)
	ACTORMEM_STRESS=1 $(BIN)/pytest -q -m "stress or not stress" tests
	$(BIN)/python -m benchmarks.bench_load

fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest -q tests/reliability -k "fuzz or hostile or random"

soak: $(STAMP)
	$(BIN)/python -m benchmarks.soak --minutes $${SOAK_MINUTES:-10}

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
