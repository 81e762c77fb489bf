# Every target bootstraps .venv on first use, so a fresh clone needs only Python >= 3.11 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test check lint bench matrix crashtest chaos stop clean bytecode typescript

setup: $(STAMP)

$(STAMP): pyproject.toml crashtest/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e './crashtest[pytest,devserver,wire]' -e '.[dev,frameworks]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m crashlab demo

# Where PYTHONDONTWRITEBYTECODE is set (as on these machines), every process a test starts would
# compile the project's modules again from source: compiled once here, each one loads them
# (measured: a fifth of the user CPU of tests/test_crashtest_shapes.py).
bytecode: $(STAMP)
	find . -name '*.py' -not -path './.venv/*' -not -path './.data/*' -not -path '*/build/*' \
		-not -path '*/node_modules/*' -print0 | xargs -0 $(BIN)/python -m compileall -q >/dev/null

# The TypeScript worker crashtest's tests kill on the wire (examples/typescript): its packages,
# pinned by its lockfile, and its build. Where node is missing, said once; those tests skip.
TS := examples/typescript
typescript: $(TS)/lib/worker.js
$(TS)/lib/worker.js: $(TS)/package.json $(TS)/package-lock.json $(TS)/tsconfig.json $(wildcard $(TS)/src/*.ts $(TS)/src/*/*.ts)
	@if command -v node >/dev/null && command -v npm >/dev/null; then \
		cd $(TS) && npm ci --no-audit --no-fund --loglevel=error \
			&& { npm run --silent build >/dev/null 2>&1 || npm run build; }; \
	else echo "node is missing: the TypeScript worker's tests will be skipped"; fi

# mypy (31 s cold, one core) runs beside the servers' tier, which leaves part of the second core
# idle while it waits on timeouts; its verdict is printed, and counted, once both have ended.
# Four test processes on two cores: with fewer, the CPU sat idle while every file that ran
# waited on timeouts (measured here, the servers' tier: 690 s with -n 2, 595 s with -n 3 and 487
# tests; 550 s with -n 3 and 542 s with -n 4, 523 tests, idle 98 and 49 core-s of ~1,000).
test: $(STAMP) bytecode typescript
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy > $(VENV)/mypy.log 2>&1 & types=$$!; \
	$(BIN)/python -m pytest -n 4 --dist loadfile --no-loadscope-reorder -m "not loaded" --durations=15; tests=$$?; \
	wait $$types; typed=$$?; echo "mypy:"; cat $(VENV)/mypy.log; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]
	$(BIN)/python -m infra stop  # the loaded tier starts fresh servers: its load is its own
	$(BIN)/python -m pytest -m loaded

# While you work: lint, types and the in-process tests (no server, no process started; well under
# a minute). `make test` runs these and every test marked `servers` (see conftest.py).
check: $(STAMP) bytecode
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -m "not servers" -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m bench

matrix: $(STAMP)
	$(BIN)/python -m crashlab matrix --engine all

# Many runs through random worker kills and abrupt Postgres and Temporal restarts (about 1.5 min).
chaos: $(STAMP)
	$(BIN)/python -m crashlab chaos --runs 200 --workers 3 --kills 20 --postgres-restarts 2 \
		--temporal-restarts 1

# crashtest on the grocery agent: every activity boundary, killed from outside (KEY_STRATEGY=none
# shows what it catches); on the project's dev server, like every other target (its web UI shows
# every cell's run).
crashtest: $(STAMP)
	TEMPORAL_ADDRESS="$$($(BIN)/python -m infra temporal-address)" \
	$(BIN)/python -m temporal_crashtest run --worker worker:build_worker \
		--workflow workflows.grocery:GroceryAgentWorkflow \
		--input '{"household": "smith", "week": "2026-W49"}' \
		--observe agent.outcome:final_state \
		--data-converter temporalio.contrib.pydantic:pydantic_data_converter

stop:
	if [ -x $(BIN)/python ]; then $(BIN)/python -m infra stop; fi

clean: stop
	rm -rf $(VENV) .data $(TS)/node_modules $(TS)/lib
