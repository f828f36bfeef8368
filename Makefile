# Two entry points: `make book` builds the executed HTML book, `make test` runs every check.
# Both first create .venv and install requirements.txt (re-installing when it changes).
# `make test` executes every chapter once, through the book build (a chapter whose claims fail, or
# that stops, makes it fail), then checks every rendered page in Chromium.

VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PATH := $(abspath $(VENV))/bin:$(PATH)
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: setup book test lint unit browser notebooks rerun sweep clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

setup: $(STAMP)

book: $(STAMP)
	$(PY) -m lengthgen.book.bookcache build

lint: $(STAMP)
	ruff check .

unit: $(STAMP)
	pytest tests/ --ignore=tests/browser

# The rendered book in a real browser, offline (builds the book first if anything changed).
browser: $(STAMP)
	pytest tests/browser

# Every chapter as a pytest item, without the book (the book build executes them too).
notebooks: $(STAMP)
	pytest --nbmake --nbmake-timeout=1800 book/

test: lint unit book browser

# Rerun one chapter with other parameters, e.g.
#   make rerun NB=book/04_dilution_law.ipynb ARGS="-p seeds 10 -p offsets '[7]'"
rerun: $(STAMP)
	$(PY) -m lengthgen.book.rerun $(NB) $(ARGS)

# Run (or resume) a parameter sweep, e.g. make sweep SPEC=data/sweeps/single_head/spec.yaml
sweep: $(STAMP)
	$(PY) -m lengthgen.book.sweep $(SPEC) $(ARGS)

clean:
	rm -rf _build
