"""Every exercise check fails on an empty answer and passes on the chapter's own solution.

For each chapter notebook with check cells (tagged ``check``, first line ``# Check N``):

- the student edition (generated here from the notebook, as ``make student`` does) is run
  in the smoke profile with nbclient, errors allowed: with every solution empty, every
  check cell must raise ``ExerciseCheckFailed``. A check that passes on an empty answer
  checks nothing the student wrote;
- the committed notebook (the full run) must show, under every check cell, the line the
  checker prints when all its conditions hold: ``Exercise N: all K checks pass.``. The
  smoke run of the instructor notebook (nbval, ``make test``) executes the same checks.

The list of notebooks comes from the notebooks themselves, so a chapter that gains check
cells is tested from then on.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools import make_student_edition as se  # noqa: E402

URL, BRANCH = "https://github.com/example-owner/example-course", "main"
PASSED = re.compile(r"^Exercise (\d+): all (\d+) checks? pass\.$", re.M)


def _is_check(cell) -> bool:
    return cell.cell_type == "code" and se.CHECK_TAG in cell.metadata.get("tags", [])


def _number(cell) -> int:
    return int(se.CHECK.match(cell.source.split("\n", 1)[0]).group(1))


WITH_CHECKS = [p for p in se.chapter_notebooks()
               if any(_is_check(c) for c in nbformat.read(p, as_version=4).cells)]


def _ids(paths):
    return [p.stem for p in paths]


def test_some_chapters_have_checks():
    assert WITH_CHECKS, "no chapter notebook has a cell tagged 'check'"


@pytest.mark.parametrize("path", WITH_CHECKS, ids=_ids(WITH_CHECKS))
def test_committed_checks_pass(path):
    nb = nbformat.read(path, as_version=4)
    for cell in filter(_is_check, nb.cells):
        n = _number(cell)
        text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        errors = [o.ename for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"{path.name}: check {n} (cell {cell.id}) failed: {errors}"
        match = PASSED.search(text)
        assert match and int(match.group(1)) == n, (
            f"{path.name}: check {n} (cell {cell.id}) does not show 'Exercise {n}: all ... "
            f"checks pass.' in the committed run; re-run the chapter in the full profile")


@pytest.mark.runs_chapters
@pytest.mark.parametrize("path", WITH_CHECKS, ids=_ids(WITH_CHECKS))
def test_every_check_fails_on_the_empty_student_edition(path, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    for name, value in {"COURSE_PROFILE": "smoke", "COURSE_PROGRESS": "off",
                        "COURSE_THREADS": "1", "OMP_NUM_THREADS": "1",
                        "COURSE_RESULTS_DIR": str(tmp_path / "results"),
                        "COURSE_ARTIFACTS_DIR": str(tmp_path / "artifacts")}.items():
        monkeypatch.setenv(name, value)
    student = se.student_notebook(nbformat.read(path, as_version=4), path.name, URL, BRANCH)
    checks = [c for c in student.cells if _is_check(c)]
    assert checks, f"{path.name}: the student edition lost its check cells"
    NotebookClient(student, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    not_failed = []
    for cell in checks:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if not errors or errors[0].ename != "ExerciseCheckFailed":
            got = errors[0].ename if errors else "no error: it passed"
            not_failed.append(f"check {_number(cell)} (cell {cell.id}): {got}")
    assert not not_failed, (f"{path.name}: with every solution empty these checks should "
                            f"raise ExerciseCheckFailed: {not_failed}")
    other = [(c.id, o.ename) for c in student.cells if c.cell_type == "code"
             and not _is_check(c) for o in c.outputs if o.output_type == "error"]
    assert not other, f"{path.name}: cells other than checks failed in the student edition: {other}"
