# airlock: `make run` and `make test` are all the set-up a fresh machine needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Images: the base `make images` builds from Debian packages (scripts/base-image.sh);
# set PYTHON_IMAGE=python:3.11-slim-bookworm to use Docker Hub's instead.
PYTHON_IMAGE ?= airlock-base:bookworm
EXTRA_CA ?= $(wildcard /etc/ssl/certs/ca-certificates.crt)

.PHONY: run test lint typecheck unit bench clean system-deps docs docs-check lock images images-smoke

# System tools the suite runs for real (git, gh, redis-server, ripgrep, node, ...):
# installed through apt as root; otherwise the one command to run is printed.
system-deps:
	@scripts/install-system-deps.sh

# Dependencies come from the hash-pinned lock (requirements/dev.lock, `make lock`);
# the editable install then adds anything pyproject.toml gained since the lock
# (a test fails until `make lock` catches up).
$(STAMP): pyproject.toml requirements/dev.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --require-hashes --no-deps -r requirements/dev.lock
	$(BIN)/pip install -q --no-build-isolation -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	@scripts/dev-run.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check daemon proxy client tests bench scripts
	$(BIN)/mypy

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q $(PYTEST_ARGS)

# The whole suite: system tools, lint and types first (cheap, fail fast), then
# every test. pytest exit code 5 ("no tests collected") is a failure here.
test: system-deps $(STAMP) lint
	$(BIN)/pytest -q $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

# docs/reference.md from the models, routers and parsers (a test fails when stale).
docs: $(STAMP)
	$(BIN)/python scripts/gen_reference.py

docs-check: $(STAMP)
	$(BIN)/python scripts/gen_reference.py --check

# requirements/*.lock from pyproject.toml, with hashes (needs uv: pip install uv).
lock:
	scripts/lock.sh

bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

# The four images (sandbox, proxy, orchestrator, redis) on the local base.
images:
	PYTHON_IMAGE=$(PYTHON_IMAGE) EXTRA_CA=$(EXTRA_CA) scripts/images.sh build

# Build, start Redis + two proxies + the sandbox with compose, check health,
# create a session, call the daemon through its socket; always tears down.
images-smoke:
	PYTHON_IMAGE=$(PYTHON_IMAGE) EXTRA_CA=$(EXTRA_CA) scripts/images.sh smoke

clean:
	rm -rf $(VENV) .airlock .mypy_cache .pytest_cache .ruff_cache build *.egg-info
