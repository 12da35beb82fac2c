# Every target creates .venv and installs the project if needed: a fresh clone
# with only Python on the machine runs `make demo` and `make test` as they are.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck unit bench stress fuzz soak clean browser cluster-tools screenshots test-llamacpp

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
	$(BIN)/mypy actormem benchmarks

unit: $(STAMP) browser cluster-tools
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

# The cluster tests run Ray in a private network namespace (unshare, ip); they
# fail without them (ACTORMEM_SKIP_CLUSTER_TESTS=1 skips them instead).
cluster-tools:
	@if ! PATH="$$PATH:/usr/sbin:/sbin" sh -c 'command -v unshare && command -v ip' >/dev/null; then \
		echo "installing util-linux and iproute2 for the cluster tests"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
			util-linux iproute2 >/dev/null; \
	fi

# Re-take the README's screenshots of the memory explorer (docs/ui/*.png).
screenshots: $(STAMP) browser
	ACTORMEM_UI_SCREENSHOTS=docs/ui $(BIN)/pytest -q tests/ui/test_browser.py

test: lint typecheck unit

# Peers measured beside actormem in the same run live in their own virtualenv,
# so their dependencies never mix with ours.
PEERS := .venv-peers
$(PEERS)/.stamp: Makefile
	@test -x $(PEERS)/bin/python || $(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install -q "agentscope==1.0.21" "mcp<2" greenlet tqdm \
		|| echo "peer install failed: peer columns will say n/a"
	# LangGraph's SqliteStore with sqlite-vec (pysqlite3 can load extensions; pyenv's
	# sqlite3 cannot) and the same WordLlama model: benchmarks/peers/langgraph_peer.py
	$(PEERS)/bin/python -m pip install -q "langgraph==1.2.22" "langgraph-checkpoint-sqlite==3.1.2" \
		"sqlite-vec==0.1.9" "pysqlite3-binary==0.5.4.post2" "wordllama==0.4.0.post1" \
		|| echo "LangGraph peer install failed: its column will say n/a"
	@touch $(PEERS)/.stamp

# actormem against a real llama.cpp server (not part of `make test`): llama-cpp-python
# 0.3.36 is built from source into its own virtualenv (about 10-20 minutes once, niced).
# ggml's AMX code crashes on these Xeon CPUs: build for AVX2 without AMX.
LLAMA := .venv-llamacpp
LLAMA_CMAKE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
$(LLAMA)/.stamp:
	@test -x $(LLAMA)/bin/python || $(PYTHON) -m venv $(LLAMA)
	$(LLAMA)/bin/python -m pip install -q --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE)" CMAKE_BUILD_PARALLEL_LEVEL=2 nice -n 19 \
		$(LLAMA)/bin/python -m pip install -q "llama-cpp-python[server]==0.3.36"
	@touch $(LLAMA)/.stamp

test-llamacpp: $(STAMP) $(LLAMA)/.stamp
	@command -v tmux >/dev/null || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq tmux >/dev/null; }
	ACTORMEM_LLAMACPP=1 ACTORMEM_LLAMACPP_PYTHON=$(LLAMA)/bin/python $(BIN)/pytest -q tests/llamacpp

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
