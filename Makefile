# Attention and Transformers, hands-on: one entry point for every task.
#
#   make book     build the book into _build/html (sets up .venv first if needed)
#   make test     unit tests + every notebook in the smoke profile (sets up .venv first)
#   make test-minimum  the same tests (and chapters 1, 6, 9) at the oldest supported versions
#   make lab      JupyterLab on the notebooks (LAB=student: on the student edition)
#   make full     re-execute every notebook in the full profile, in place (NB=... for one)
#   make smoke    run notebooks in the smoke profile into a temp folder (NB=... for one)
#   make student  regenerate the student edition in student/ from notebooks/ (nbgrader's release)
#   make assignments  the nbgrader course folder assignments/: every chapter an assignment
#   make lint     ruff
#   make clean    remove build outputs (make distclean also removes .venv)
#
# Every target that needs Python creates .venv and installs requirements.txt and the
# course_lib package whenever requirements.txt or pyproject.toml is newer than the last install.

PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.course-installed
NB      ?=
# Folder `make lab` opens.
LAB     ?= notebooks/
# Parallel pytest workers for `make test`; each notebook kernel then uses one CPU thread.
WORKERS ?= 2

NOTEBOOKS := $(wildcard notebooks/*.ipynb)

.PHONY: book test test-minimum lab full smoke student assignments lint clean distclean install

install: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): requirements.txt pyproject.toml | $(PY)
	$(PY) -m pip install --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --disable-pip-version-check -e .
	touch $@

# Warnings are errors; --all rebuilds every page so that no warning hides in a cached page.
book: $(STAMP)
	$(VENV)/bin/jupyter-book build . --warningiserror --nitpick --keep-going --all
	@echo "The book is in _build/html/index.html"

# One pytest run: unit tests in tests/ and (if there are notebooks) every notebook through
# nbval in the smoke profile. --dist loadfile keeps all cells of a notebook on one worker.
# Results cards of the smoke runs go to a temp folder, never into book/results/.
# Exit code 5 ("no tests collected") is not a failure.
test: $(STAMP)
	@results=$$(mktemp -d); \
	COURSE_PROFILE=smoke COURSE_PROGRESS=off COURSE_THREADS=1 OMP_NUM_THREADS=1 \
	COURSE_RESULTS_DIR=$$results \
	$(PY) -m pytest tests $(if $(NOTEBOOKS),notebooks) \
		--nbval-lax --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg \
		--nbval-cell-timeout=600 -n $(WORKERS) --dist loadfile --durations=15 -ra; \
	rc=$$?; rm -rf $$results; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: nothing to fail"; rc=0; fi; \
	exit $$rc

# The oldest versions pyproject.toml allows (requirements-minimum.txt pins them) in a second
# virtual environment, inside .venv/ so that git, ruff, pytest and the book's build already
# leave it alone and `make distclean` removes it. One pip run installs the pins and the package
# together: a pin below a bound of pyproject.toml is an error, not a silent upgrade.
VENV_MIN      ?= .venv/minimum
PY_MIN        := $(VENV_MIN)/bin/python
STAMP_MIN     := $(VENV_MIN)/.course-installed
# Between them these chapters use every library that has a bound: seaborn (1); scikit-learn,
# scipy, threadpoolctl, networkx, pandas (6); tokenizers, sacrebleu (9).
MIN_NOTEBOOKS ?= notebooks/01_attention.ipynb notebooks/06_tabular.ipynb \
                 notebooks/09_translation.ipynb

$(PY_MIN):
	$(PYTHON) -m venv $(VENV_MIN)

$(STAMP_MIN): requirements-minimum.txt pyproject.toml | $(PY_MIN)
	$(PY_MIN) -m pip install --disable-pip-version-check -r requirements-minimum.txt -e .
	touch $@

# `make test` at the minimum versions: the unit tests and MIN_NOTEBOOKS, same settings.
test-minimum: $(STAMP_MIN)
	@results=$$(mktemp -d); \
	COURSE_PROFILE=smoke COURSE_PROGRESS=off COURSE_THREADS=1 OMP_NUM_THREADS=1 \
	COURSE_RESULTS_DIR=$$results \
	$(PY_MIN) -m pytest tests $(MIN_NOTEBOOKS) \
		--nbval-lax --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg \
		--nbval-cell-timeout=600 -n $(WORKERS) --dist loadfile --durations=15 -ra; \
	rc=$$?; rm -rf $$results; exit $$rc

lab: $(STAMP)
	$(VENV)/bin/jupyter lab $(LAB)

full: $(STAMP)
	$(PY) tools/run_notebooks.py --profile full $(NB)

smoke: $(STAMP)
	$(PY) tools/run_notebooks.py --profile smoke $(NB)

# The student edition: nbgrader's release of each chapter, every solution cell emptied, every
# output cleared (see the tool's docstring); `$(PY) tools/make_student_edition.py --check`
# only reports what is stale.
student: $(STAMP)
	$(PY) tools/make_student_edition.py

# The nbgrader course folder (source/, release/, gradebook.db, nbgrader_config.py): run
# nbgrader's own commands from there (book/instructors.md). Rebuilding keeps the gradebook.
ASSIGNMENTS ?= assignments
assignments: $(STAMP)
	$(PY) tools/make_assignments.py --course $(ASSIGNMENTS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf _build ci-output .pytest_cache .ruff_cache *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
