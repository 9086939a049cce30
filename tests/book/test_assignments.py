"""nbgrader assignments (tools/make_assignments.py, tools/make_student_edition.py).

- The source version of a chapter is marked the nbgrader way from the chapter's own
  convention: solution regions, autograder test cells with points, hidden tests.
- nbgrader's release of it is the student edition; the course folder's release (made with a
  gradebook) is the same file.
- ``nbgrader autograde`` gives the instructor's solutions full marks, hidden tests included,
  and the empty release no marks for any autograded cell, at smoke size, offline. By default
  this runs chapter 1 (``AUTOGRADED``, the quickest chapter with checks, about 15 s a run);
  ``COURSE_AUTOGRADE=all`` runs every chapter that has check cells.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools import make_assignments as ma  # noqa: E402
from tools import make_student_edition as se  # noqa: E402

URL, BRANCH = "https://github.com/example-owner/example-course", "main"
AUTOGRADED = ["01_attention.ipynb"]
# nbgrader 0.9.6's gradebook with SQLAlchemy 2.x: harmless autoflush warnings when it
# records a new submission
pytestmark = pytest.mark.filterwarnings("ignore:Object of type:Warning")


def _notebook(*cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                  "language": "python"},
                   "language_info": {"name": "python"}}
    for i, cell in enumerate(cells):
        cell.id = f"c{i}"
        nb.cells.append(cell)
    return nb


def _code(source, tags=()):
    return nbformat.v4.new_code_cell(source, metadata={"tags": list(tags)})


CHECK_1 = """# Check 1
with exercises.check(1) as c:
    c.that(y == 2 * x, "double x")
    c.that(isinstance(y, int), "an int")
    c.that(y > x,
           "larger than x")"""


def _chapter(check_1=CHECK_1):
    return _notebook(
        nbformat.v4.new_markdown_cell("# 3. A chapter"),
        _code("from course_lib import exercises\nx = 1"),
        _code("# Solution 1\ny = 2 * x\n", tags=["solution", "hide-cell"]),
        _code(check_1, tags=["check", "hide-input"]),
        _code("# Solution 2\nprint('an open question: no check')", tags=["solution"]),
    )


def _by_id(nb, cell_id):
    return next(c for c in nb.cells if c.id == cell_id)


# --------------------------------------------------------------------------- source version
def test_solution_cells_get_a_solution_region_and_nbgrader_metadata():
    source = se.source_notebook(_chapter(), "03_x.ipynb", URL, BRANCH)
    solution = _by_id(source, "c2")
    assert solution.source == ("# Exercise 1: your solution here\n### BEGIN SOLUTION\n"
                               "# Solution 1\ny = 2 * x\n### END SOLUTION")
    assert solution.metadata["tags"] == ["solution"]
    assert solution.metadata["nbgrader"] == {
        "grade": False, "grade_id": "exercise-1", "locked": False, "schema_version": 3,
        "solution": True, "task": False}  # autograded answer: its check carries the points


def test_check_cells_become_locked_test_cells_with_points():
    source = se.source_notebook(_chapter(), "03_x.ipynb", URL, BRANCH)
    check = _by_id(source, "c3")
    assert check.metadata["nbgrader"] == {
        "grade": True, "grade_id": "check-1", "locked": True, "points": se.POINTS,
        "schema_version": 3, "solution": False, "task": False}


def test_an_exercise_without_a_check_is_graded_by_hand():
    source = se.source_notebook(_chapter(), "03_x.ipynb", URL, BRANCH)
    meta = _by_id(source, "c4").metadata["nbgrader"]
    assert meta["solution"] and meta["grade"] and meta["points"] == se.POINTS


def test_the_last_condition_of_a_check_with_three_becomes_a_hidden_test():
    source = se.source_notebook(_chapter(), "03_x.ipynb", URL, BRANCH)
    assert _by_id(source, "c3").source == CHECK_1.replace(
        '    c.that(y > x,\n           "larger than x")',
        '    ### BEGIN HIDDEN TESTS\n    c.that(y > x,\n           "larger than x")\n'
        '    ### END HIDDEN TESTS')


@pytest.mark.parametrize("why, check", [
    ("two conditions only", CHECK_1.rsplit("\n    c.that(y > x", 1)[0]),
    ("the last statement is no condition", CHECK_1 + "\n    print(y)"),
    ("something follows the block", CHECK_1 + "\nprint(y)"),
    ("a name no visible condition uses", CHECK_1.replace("c.that(y > x", "c.that(z > x")),
    ("not on lines of its own", CHECK_1.replace("    c.that(y > x", "    z = 1; c.that(y > x")),
])
def test_no_hidden_test_where_it_would_not_fit(why, check):
    assert se.hidden_condition(check) is None, why
    source = se.source_notebook(_chapter(check), "03_x.ipynb", URL, BRANCH)
    assert se.BEGIN_HIDDEN not in _by_id(source, "c3").source


def test_one_hidden_test_per_chapter_in_the_check_with_most_conditions():
    nb = _chapter()
    nb.cells.insert(4, _code(CHECK_1.replace("# Check 1", "# Check 1 (again)").replace(
        '    c.that(y > x,', '    c.that(y != 0, "not zero")\n    c.that(y > x,'),
        tags=["check"]))
    for i, cell in enumerate(nb.cells):
        cell.id = f"c{i}"
    source = se.source_notebook(nb, "03_x.ipynb", URL, BRANCH)
    hidden = [c.id for c in source.cells if se.BEGIN_HIDDEN in c.source]
    assert hidden == ["c4"]  # four conditions beat three
    assert _by_id(source, "c4").metadata["nbgrader"]["grade_id"] == "check-1-2"


def test_the_chapters_have_a_few_hidden_tests_and_points_for_every_exercise():
    hidden, points = 0, 0
    for path in se.chapter_notebooks():
        nb = nbformat.read(path, as_version=4)
        source = se.source_notebook(nb, path.name, URL, BRANCH)
        n_solutions = sum(se.SOLUTION_TAG in c.metadata.get("tags", []) for c in nb.cells)
        graded = [c for c in source.cells if c.metadata.get("nbgrader", {}).get("grade")]
        numbers = {int(c.metadata["nbgrader"]["grade_id"].split("-")[1]) for c in graded}
        assert len(numbers) == n_solutions, f"{path.name}: an exercise without points"
        hidden += sum(se.BEGIN_HIDDEN in c.source for c in source.cells)
        points += sum(c.metadata["nbgrader"]["points"] for c in graded)
    assert 1 <= hidden <= len(se.chapter_notebooks()), hidden
    assert points > 0


# --------------------------------------------------------------------------- the release
def test_the_release_is_the_student_edition():
    student = se.student_notebook(_chapter(), "03_x.ipynb", URL, BRANCH)
    assert _by_id(student, "c2").source == "# Exercise 1: your solution here\n"
    assert _by_id(student, "c4").source == "# Exercise 2: your solution here\n"
    check = _by_id(student, "c3")
    assert check.source == CHECK_1.rsplit("\n    c.that(y > x", 1)[0]  # hidden test gone
    assert check.metadata["nbgrader"]["checksum"]  # nbgrader's release, not a copy
    assert check.metadata["editable"] is False
    text = "".join(c.source for c in student.cells)
    assert "BEGIN" not in text and "Solution 1" not in text


def test_committed_student_edition_holds_no_solution_and_no_hidden_test():
    for path in se.chapter_notebooks():
        text = (se.STUDENT_DIR / path.name).read_text(encoding="utf-8")
        for mark in (se.BEGIN_SOLUTION, se.END_SOLUTION, se.BEGIN_HIDDEN, se.END_HIDDEN):
            assert mark not in text, f"student/{path.name} contains {mark!r}"


def test_course_folder(tmp_path):
    src = tmp_path / "notebooks"
    src.mkdir()
    nbformat.write(_chapter(), src / "03_x.ipynb")
    texts = ma.build_course(tmp_path / "course", [src / "03_x.ipynb"], URL, BRANCH)
    course = tmp_path / "course"
    assert (course / "source" / "03_x" / "03_x.ipynb").exists()
    release = course / "release" / "03_x" / "03_x.ipynb"
    assert release.read_text(encoding="utf-8") == texts["03_x.ipynb"] == \
        se.build(src / "03_x.ipynb", URL, BRANCH)  # with a gradebook or without: the same
    config = (course / "nbgrader_config.py").read_text(encoding="utf-8")
    assert "c.CourseDirectory.course_id = 'example-course'" in config
    assert "c.ClearSolutions.code_stub = {'python': ''}" in config
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "example-course") as gb:
        notebook = gb.find_notebook("03_x", "03_x")
        assert {c.name: c.max_score for c in notebook.grade_cells} == {
            "check-1": se.POINTS, "exercise-2": se.POINTS}
    # building again keeps the gradebook and gives the same release
    assert ma.build_course(course, [src / "03_x.ipynb"], URL, BRANCH) == texts


# --------------------------------------------------------------------------- autograde
def _with_checks():
    return [p for p in se.chapter_notebooks()
            if any(se.CHECK_TAG in c.metadata.get("tags", [])
                   for c in nbformat.read(p, as_version=4).cells)]


AUTOGRADE = ([p.name for p in _with_checks()] if os.environ.get("COURSE_AUTOGRADE") == "all"
             else AUTOGRADED)


@pytest.mark.runs_chapters
@pytest.mark.parametrize("name", AUTOGRADE)
def test_autograde_full_marks_for_the_solutions_none_for_the_empty_release(
        name, tmp_path, monkeypatch):
    for var, value in {"COURSE_PROFILE": "smoke", "COURSE_PROGRESS": "off",
                       "COURSE_THREADS": "1", "OMP_NUM_THREADS": "1",
                       "COURSE_RESULTS_DIR": str(tmp_path / "results"),
                       "COURSE_ARTIFACTS_DIR": str(tmp_path / "artifacts")}.items():
        monkeypatch.setenv(var, value)
    course, stem = tmp_path / "course", Path(name).stem
    texts = ma.build_course(course, [se.SOURCE_DIR / name], URL, BRANCH)
    source = nbformat.read(course / "source" / stem / name, as_version=4)
    ma.submit(course, "instructor", name, ma.solved(texts[name], source))
    ma.submit(course, "empty", name, nbformat.reads(texts[name], as_version=4))

    tests = {c.metadata["nbgrader"]["grade_id"]: c for c in source.cells
             if c.metadata.get("nbgrader", {}).get("grade")
             and not c.metadata["nbgrader"]["solution"]}
    assert tests, f"{name}: no autograder test cells"
    for student in ("instructor", "empty"):
        ma.autograde(course, student, name, URL)
        got = ma.grades(course, student, name, URL)
        auto = {k: g for k, g in got.items() if k in tests}
        assert set(auto) == set(tests)
        graded = nbformat.read(course / "autograded" / student / stem / name, as_version=4)
        cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in graded.cells}
        for grade_id, cell in tests.items():  # hidden tests are back for grading
            assert cells[grade_id].source == cell.source
        if student == "instructor":
            wrong = {k: g for k, g in auto.items() if g["score"] != g["max_score"]}
            assert not wrong, f"{name}: the instructor's solutions lose points: {wrong}"
        else:
            scored = {k: g for k, g in auto.items() if g["score"] != 0}
            assert not scored, f"{name}: the empty release scores points: {scored}"
            for grade_id in tests:
                errors = [o.ename for o in cells[grade_id].outputs if o.output_type == "error"]
                assert errors == ["ExerciseCheckFailed"], (grade_id, errors)
        manual = {k for k, g in got.items() if k not in tests}
        assert all(got[k]["needs_manual_grade"] for k in manual)
    api = se.nbgrader_api(course, ma.course_id(URL))
    se._ok(api.generate_feedback(stem, "instructor"), "generate_feedback")
    feedback = course / "feedback" / "instructor" / stem / f"{stem}.html"
    assert feedback.exists() and "Exercise 1: all" in feedback.read_text(encoding="utf-8")
