# Two entry points: `make demo` and `make test`. Both bootstrap .venv with the pinned set.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt

.PHONY: demo test lint typecheck system-deps sigstore-stand-ins clean matrix soak trusted-size import-counts

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# An editable install leaves src/ uncompiled, and PYTHONDONTWRITEBYTECODE (set on some
# machines) keeps Python from caching bytecode: compile once, as pip does for a normal install.
$(VENV)/.demo: $(BIN)/python pyproject.toml constraints.txt
	$(PIP) -e '.[jax,plot]'
	$(BIN)/python -m compileall -q src >/dev/null
	touch $@

$(VENV)/.test: $(BIN)/python pyproject.toml constraints.txt
	$(PIP) -e '.[test]'
	$(BIN)/python -m compileall -q src >/dev/null
	touch $@

demo: $(VENV)/.demo
	$(BIN)/jaxcache demo

# Tests use real users, groups, ACLs and mount namespaces; as root, install what they need.
system-deps:
	@sh scripts/system-deps.sh

# The loopback Sigstore the keyless tests sign against (tests/support/sigstore_stack.py): its npm
# packages, as package-lock.json pins them. Without node/npm the keyless tests skip, saying why.
SIGSTORE_STANDINS := tests/support/sigstore
sigstore-stand-ins:
	@if command -v npm >/dev/null 2>&1; then \
	  [ -f $(SIGSTORE_STANDINS)/node_modules/.package-lock.json ] && \
	  cmp -s $(SIGSTORE_STANDINS)/package-lock.json $(SIGSTORE_STANDINS)/.installed-lock || { \
	    (cd $(SIGSTORE_STANDINS) && npm ci --no-audit --no-fund --loglevel=error) && \
	    cp $(SIGSTORE_STANDINS)/package-lock.json $(SIGSTORE_STANDINS)/.installed-lock; }; \
	else echo "sigstore-stand-ins: npm not found (the keyless sealing tests will skip, saying why)"; fi

lint: $(VENV)/.test
	$(BIN)/ruff check src tests benchmarks scripts

# mypy over src/ as pyproject.toml's [tool.mypy] says: strict, but for the modules it lists
typecheck: $(VENV)/.test
	$(BIN)/mypy

# The size of the code that decides whether bytes reach JAX (docs/explanation/security-model.md): the
# modules and functions scripts/trusted_size.py lists, in lines and code lines
trusted-size:
	@$(PYTHON) scripts/trusted_size.py

# How many jaxcache modules `run --sealed` imports, in the wrapper and in the job (a publisher's
# run and a reader's, for real, in a temporary folder): scripts/import_counts.py
import-counts: $(VENV)/.demo
	@$(BIN)/python scripts/import_counts.py

# The suite in TEST_WORKERS processes (pytest-xdist; at most 4, as many as there are CPUs), one
# test file per worker at a time (--dist loadfile), so that a file's module fixtures (the real
# benches most tests of a file judge) run once; session fixtures (the users, the Slurm cluster,
# the object-store servers) start per worker, each on its own free ports and private folders.
# TEST_WORKERS=0: in this process, one test after another.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 4 ] && n=4; echo $$n)
test: system-deps sigstore-stand-ins $(VENV)/.test lint typecheck
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# The JAX-touching tests (marker `matrix`, and tests/jaxcompat/test_jaxcompat.py) on the newest
# patch of every supported JAX line, each in its own venv (reused while its stamp matches the
# version, the interpreter and the constraints: scripts/jax-venv.sh); on 0.12 also the sealed backend's
# suites (scripts/matrix-line.sh). JAX 0.11+ needs Python >= 3.12: with an older $(PYTHON) those
# lines run in a Debian 13 root that scripts/debian-root.sh builds and caches (as root; every
# mount lives in a private namespace). docs/reference/jax-versions.md has its timings.
# MATRIX_SKIP: lines to leave out (.ci/run: the one `make test` just ran).
MATRIX ?= 0.5.3 0.6.2 0.7.2 0.8.3 0.9.2 0.10.2 0.11.2 0.12.0.1
MATRIX_SKIP ?=
# The fault campaign (issue 42; docs/explanation/reliability.md): writers killed before every SOAK_STRIDE-th
# filesystem step (each of SOAK_ROUNDS rounds one step further), disks failing, both object
# stores behind the fault proxy, 8 processes at once; every state checked; prints the table.
# Bounded by counts, not time (docs/explanation/reliability.md has the figures; SOAK_STRIDE=1: every step).
SOAK_ROUNDS ?= 1
SOAK_STRIDE ?= 2
soak: system-deps $(VENV)/.test
	$(BIN)/python scripts/soak.py --rounds $(SOAK_ROUNDS) --stride $(SOAK_STRIDE)

matrix:
	@for v in $(MATRIX); do \
	  case " $(MATRIX_SKIP) " in *" $$v "*) echo "== JAX $$v: left out (MATRIX_SKIP)"; continue;; esac; \
	  echo "== JAX $$v"; \
	  PYTHON=$(PYTHON) sh scripts/matrix-line.sh $$v || exit 1; \
	done

clean:
	rm -rf $(VENV) .venv-jax .pytest_cache .ruff_cache .mypy_cache
