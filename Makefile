# Setup and the two everyday commands. Each target creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# pip installs the pinned CPU build of torch (from TORCH_INDEX or where pip's own configuration points; uv
# reads neither), then uv installs the package, whose torch range 2.13.0 satisfies, downloading in parallel
# (half pip's time on a fresh machine). Neither compiles every module: Python compiles what it imports.
TORCH := torch==2.13.0
# Where pip looks for torch: e.g. https://download.pytorch.org/whl/cpu for the CPU build anywhere.
TORCH_INDEX ?=
UV = $(BIN)/uv pip install --quiet --python $(BIN)/python

.PHONY: install java demo test docs bench bench-dpsgd clean

$(BIN)/labeldp: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(if $(TORCH_INDEX),$(BIN)/pip install --quiet --no-compile $(TORCH) --index-url $(TORCH_INDEX))
	$(BIN)/pip install --quiet --no-compile uv $(TORCH)
	$(UV) -e '.[test]'
	touch $@

install: $(BIN)/labeldp

demo: install
	$(BIN)/labeldp demo

# Spark (labeldp[spark], in the tests) runs on Java 17 or later: installed from the OS packages where missing
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
java:
	@java -version 2>&1 | grep -qE 'version "(1[7-9]|[2-9][0-9])' || { $(SUDO) apt-get update -qq && \
		$(SUDO) apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless; }

# ruff first: the lint and the format are checked in seconds, before the suite's minutes (mypy, the
# type check, is a test: tests/test_typing.py, run beside the others).
# The suite starts some twenty Python processes (its workers, CLI runs, sweep workers, torchrun ranks):
# with PYTHONDONTWRITEBYTECODE set, each would compile torch's sources anew (~10 s of CPU each), so
# the modules are compiled once, into .venv/pycache, for all of them.
test: install java
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/$(VENV)/pycache $(BIN)/python -m pytest -n 2 --dist worksteal

# the site from docs/ (mkdocs.yml), into site/; --strict: a warning (a broken link, a docstring that does
# not parse) fails the build
$(BIN)/mkdocs: $(BIN)/labeldp
	$(UV) -e '.[docs]'
	touch $@

docs: $(BIN)/mkdocs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: install
	$(BIN)/python benchmarks/mechanisms_speed.py

# Opacus is installed for this comparison only; labeldp itself does not need it.
bench-dpsgd: install
	$(BIN)/pip install --quiet opacus
	$(BIN)/python benchmarks/dpsgd_speed.py

clean:
	rm -rf $(VENV) runs site .pytest_cache
