# Attention and Transformers, hands-on: one entry point for every task.
#
#   make book     build both editions of the book: English in _build/html, Chinese in
#                 _build/html/zh (sets up .venv first if needed); make book-en / make book-zh
#                 build one
#   make po       after a change to English prose: regenerate the message templates and update
#                 the Chinese catalogues locales/zh_CN/LC_MESSAGES/*.po (then translate them)
#   make test     every test (tests/unit, tests/book, tests/tools) + every notebook in the smoke
#                 profile (sets up .venv first)
#   make test-unit  only the unit tests of course_lib (tests/unit): what to run while editing it
#   make test-minimum  the unit tests and chapters 1, 6, 9 at the oldest supported versions
#   make test-colab    the course installed as the Colab cell installs it over Colab's versions
#                 (requirements-colab.txt; fails if the install replaces one), then the unit
#                 tests and chapters 1, 3, 6
#   make test-gpu on a CUDA GPU: the unit tests that take a device, then every notebook at
#                 smoke size with COURSE_DEVICE=cuda, stopping at the first error
#                 (tools/test_gpu.py); without a GPU it says so and passes
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

.PHONY: book book-en book-zh gettext po test test-unit test-minimum test-colab test-gpu lab \
        full smoke student assignments \
        lint clean distclean install

install: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

# INSTALLER=uv (what .ci/run uses): the same pins installed by uv, configured as pip is
# (tools/uv_install.py; 58 s instead of pip's 193 s for requirements.txt on the 2-core CI
# machine); if that fails, pip installs them.
INSTALLER ?= pip
UV_TOOL   := $(VENV)/uv

$(STAMP): requirements.txt pyproject.toml | $(PY)
ifeq ($(INSTALLER),uv)
	$(PYTHON) tools/uv_install.py $(VENV) --tool-dir $(UV_TOOL) -r requirements.txt -e . || \
	$(PY) -m pip install --disable-pip-version-check -r requirements.txt -e .
else
	$(PY) -m pip install --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --disable-pip-version-check -e .
endif
	touch $@

# Warnings are errors; --all rebuilds every page so that no warning hides in a cached page.
JB_STRICT := --warningiserror --nitpick --keep-going --all

book: book-en book-zh
	@echo "The book is in _build/html/index.html, its Chinese edition in _build/html/zh/index.html"

book-en: $(STAMP)
	$(VENV)/bin/jupyter-book build . $(JB_STRICT)

# The Chinese edition: the same sources with language zh_CN (the prose from the catalogues in
# locales/; untranslated messages stay English), built in _build/zh and copied to
# _build/html/zh/, so that one upload of _build/html publishes both editions. Its config is
# _config.yml with the settings of book/_ext/editions.py merged in.
ZH_BUILD := _build/zh
book-zh: $(STAMP)
	$(PY) book/_ext/editions.py config zh $(ZH_BUILD)/_config.yml
	$(VENV)/bin/jupyter-book build . --config $(ZH_BUILD)/_config.yml --path-output $(ZH_BUILD) \
		$(JB_STRICT)
	rm -rf _build/html/zh
	mkdir -p _build/html
	cp -r $(ZH_BUILD)/_build/html _build/html/zh
	@echo "The Chinese edition is in _build/html/zh/index.html"

# The message templates (.pot) of every page and notebook, from the current English sources,
# into _build/gettext/_build/gettext/ (one per page: gettext_compact is off).
GETTEXT_BUILD := _build/gettext
gettext: $(STAMP)
	$(VENV)/bin/jupyter-book build . --builder custom --custom-builder gettext \
		--path-output $(GETTEXT_BUILD) --warningiserror --keep-going --all

# Merge the templates into the Chinese catalogues (tools/update_translations.py): a new or
# changed English message comes in untranslated, or fuzzy (sphinx-intl's guess from a similar
# old message: check it, then delete the `#, fuzzy` line); a removed one is deleted
# (--no-obsolete); then the python-format flags Babel puts on prose such as "9.1% of" are
# dropped, so that `msgfmt --check` accepts natural Chinese. tests/book/test_translations.py
# fails until every catalogue matches the sources with 0 untranslated and 0 fuzzy messages.
po: gettext
	$(PY) tools/update_translations.py $(GETTEXT_BUILD)/_build/gettext --locales locales \
		--language zh_CN

# One pytest run: the tests in tests/ (unit/: course_lib; book/: the notebooks as committed,
# both editions, the results page, the prose and the README; tools/: scripts/ and tools/) and
# (if there are notebooks) every notebook through nbval in the smoke profile. --dist loadfile keeps all cells of a notebook on one worker.
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

# The unit tests alone, with the same settings as `make test` (minutes, not the half hour of
# every notebook).
test-unit: $(STAMP)
	COURSE_PROFILE=smoke COURSE_PROGRESS=off COURSE_THREADS=1 OMP_NUM_THREADS=1 \
	$(PY) -m pytest tests/unit -n $(WORKERS) --durations=15 -ra

# What a Colab student on a GPU runtime runs into, on any machine with a CUDA GPU; CI has
# none, so there it only prints that nothing was tested. About 7 minutes on one H200.
test-gpu: $(STAMP)
	$(PY) tools/test_gpu.py

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

# MIN_TORCH=VERSION installs that torch instead of the file's pin (never below the bound):
# .ci/run sets the CPU build on disk, since the only torch 2.9 its machine can reach is PyPI's
# 4 GB CUDA build; GitHub's weekly minimum-versions job installs the pin itself.
MIN_TORCH     ?=
MIN_REQS      := $(VENV_MIN)/requirements-minimum.txt

$(STAMP_MIN): requirements-minimum.txt pyproject.toml | $(PY_MIN)
	sed -E '$(if $(MIN_TORCH),s/^torch==[^ ]+/torch==$(MIN_TORCH)/)' requirements-minimum.txt \
		> $(MIN_REQS)
ifeq ($(INSTALLER),uv)
	$(PYTHON) tools/uv_install.py $(VENV_MIN) --tool-dir $(UV_TOOL) \
		-r $(MIN_REQS) -e . || \
	$(PY_MIN) -m pip install --disable-pip-version-check -r $(MIN_REQS) -e .
else
	$(PY_MIN) -m pip install --disable-pip-version-check -r $(MIN_REQS) -e .
endif
	touch $@

# The unit tests and the notebooks $(2) in the smoke profile, with the Python $(1), as `make
# test` runs them. The tests marked runs_chapters (every chapter's student edition run,
# nbgrader's autograde; about 250 s) are left to `make test`.
define smoke_tests
	@results=$$(mktemp -d); \
	COURSE_PROFILE=smoke COURSE_PROGRESS=off COURSE_THREADS=1 OMP_NUM_THREADS=1 \
	COURSE_RESULTS_DIR=$$results \
	$(1) -m pytest tests $(2) -m "not runs_chapters" \
		--nbval-lax --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg \
		--nbval-cell-timeout=600 -n $(WORKERS) --dist loadfile --durations=15 -ra; \
	rc=$$?; rm -rf $$results; exit $$rc
endef

# `make test` at the minimum versions: the unit tests and MIN_NOTEBOOKS, same settings.
test-minimum: $(STAMP_MIN)
	$(call smoke_tests,$(PY_MIN),$(MIN_NOTEBOOKS))

# What a student on Colab has (requirements-colab.txt: Colab's versions of the libraries, and
# the test tools) in a third virtual environment, inside .venv/ like the minimum one. The
# course goes in as the notebooks' Colab cell installs it (`tools/colab_cell.py --install`
# runs the cell's own pip command), which fails if it replaced any of Colab's versions. Colab
# runs Python 3.12 (the Colab-like workflow uses it; PYTHON=python3.12 here) and a CUDA build
# of torch; the CPU build of the same version tests the same code.
VENV_COLAB      ?= .venv/colab
PY_COLAB        := $(VENV_COLAB)/bin/python
STAMP_COLAB     := $(VENV_COLAB)/.course-installed
# The chapters that were first run on Colab's versions.
COLAB_NOTEBOOKS ?= notebooks/01_attention.ipynb notebooks/03_positional_encoding.ipynb \
                   notebooks/06_tabular.ipynb

$(PY_COLAB):
	$(PYTHON) -m venv $(VENV_COLAB)

$(STAMP_COLAB): requirements-colab.txt pyproject.toml tools/colab_cell.py | $(PY_COLAB)
	$(PY_COLAB) -m pip install --disable-pip-version-check -r requirements-colab.txt
	$(PY_COLAB) tools/colab_cell.py --install .
	touch $@

test-colab: $(STAMP_COLAB)
	$(call smoke_tests,$(PY_COLAB),$(COLAB_NOTEBOOKS))

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
	find locales -name '*.mo' -delete
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
