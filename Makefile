# Everything the project needs is installed from here: python3 (>=3.11) and pip are enough.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
CONFIG ?= configs/poisson2d.yaml
OUT    ?= runs/poisson2d

.PHONY: demo test venv venv-dev lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed
venv-dev: $(VENV)/.installed-dev

## demo: set up, train the default Poisson config and write its summary and plots
demo: venv
	$(VENV)/bin/pinnkit train $(CONFIG) --out $(OUT) --overwrite
	@echo "results: $(OUT)/summary.json  plots: $(OUT)/plots/"

## test: set up with dev extras and run the whole test suite (TEST_WORKERS processes, a file each)
TEST_WORKERS ?= 2
test: venv-dev
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

lint: venv-dev
	$(VENV)/bin/ruff check .

bench: venv
	$(PY) scripts/bench_train.py

clean:
	rm -rf $(VENV) runs .pytest_cache
