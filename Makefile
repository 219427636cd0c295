# Two entry points: `make demo` and `make test`. Both bootstrap .venv with the pinned set.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt

.PHONY: demo test lint system-deps clean

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

lint: $(VENV)/.test
	$(BIN)/ruff check src tests benchmarks

test: system-deps $(VENV)/.test lint
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
