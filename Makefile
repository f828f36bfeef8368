# Two entry points: `make book` builds the executed HTML book, `make test` runs every check.
# Both first create .venv and install requirements.txt (re-installing when it changes).

VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PATH := $(abspath $(VENV))/bin:$(PATH)
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: setup book test lint unit notebooks clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

setup: $(STAMP)

book: $(STAMP)
	$(PY) -m lengthgen.bookcache refresh
	jupyter-book build . --builder html -W -n --keep-going
	$(PY) -m lengthgen.bookcache check
	@echo "book: open _build/html/index.html"

lint: $(STAMP)
	ruff check .

unit: $(STAMP)
	pytest tests/

notebooks: $(STAMP)
	pytest --nbmake --nbmake-timeout=900 book/

test: lint unit notebooks

clean:
	rm -rf _build
