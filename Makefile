# airlock: `make run` and `make test` are all the set-up a fresh machine needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	@scripts/dev-run.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check daemon proxy client tests bench
	$(BIN)/mypy

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q $(PYTEST_ARGS)

# The whole suite: lint and types first (cheap, fail fast), then every test.
# pytest exit code 5 ("no tests collected") is a failure here, never a pass.
test: $(STAMP) lint
	$(BIN)/pytest -q $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .airlock .mypy_cache .pytest_cache .ruff_cache build *.egg-info
