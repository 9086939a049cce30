"""Build the nbgrader course folder: every chapter one assignment (``make assignments``).

    python tools/make_assignments.py                   # (re)build assignments/
    python tools/make_assignments.py --course DIR      # the course folder elsewhere
    python tools/make_assignments.py notebooks/01_attention.ipynb   # only these chapters
    python tools/make_assignments.py --summary         # exercises, points, hidden tests

The folder is an nbgrader course (https://nbgrader.readthedocs.io) for the whole course:

    assignments/
      nbgrader_config.py                    the course's nbgrader settings
      gradebook.db                          nbgrader's gradebook (assignments, grades)
      source/01_attention/01_attention.ipynb    the instructor's version, marked for nbgrader
      release/01_attention/01_attention.ipynb   what students get: the same file as student/
      ...

``source/`` is written by ``tools/make_student_edition.py``'s ``source_notebook`` (solution
regions, autograder test cells made from the check cells, hidden tests, points; its docstring
says how), and ``release/`` by ``nbgrader generate_assignment``, run here for each chapter
with the gradebook. The release is byte for byte the student edition of ``student/`` (which
``make student`` makes the same way, without a gradebook); the tool says so when
``student/`` is stale.

Re-running the tool rewrites ``source/`` and ``release/`` from the chapter notebooks and
keeps everything else: the gradebook with its grades, ``submitted/``, ``autograded/``,
``feedback/``. From there the instructor works with nbgrader's own commands, in the course
folder (``book/instructors.md`` shows the steps): ``nbgrader release_assignment``,
``nbgrader collect``, ``nbgrader autograde``, ``nbgrader generate_feedback``.

The folder is a build output (ignored by git). ``tests/book/test_assignments.py`` builds it in a
temporary folder and autogrades the instructor's solutions and the empty release.
"""

from __future__ import annotations

import argparse
import pprint
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import make_student_edition as se  # noqa: E402

COURSE_DIR = se.ROOT / "assignments"

CONFIG_HEADER = '''\
# nbgrader's settings for this course, written by tools/make_assignments.py
# (`make assignments`); nbgrader reads this file from the folder it runs in.
c = get_config()  # noqa: F821 (nbgrader defines it)
'''


def course_id(url: str | None = None) -> str:
    """The course's nbgrader id: the repository's name (``attention-course``)."""
    return se.owner_repo(url or se.repository_url()).split("/")[1]


def config_text(cid: str) -> str:
    """The text of ``nbgrader_config.py``: ``se.NBGRADER_CONFIG`` and the course id."""
    lines = [CONFIG_HEADER, f"c.CourseDirectory.course_id = {cid!r}"]  # header ends in \n
    for klass, traits in se.NBGRADER_CONFIG.items():
        for trait, value in traits.items():
            lines.append(f"c.{klass}.{trait} = {pprint.pformat(value)}")
    return "\n".join(lines) + "\n"


def build_course(course: Path = COURSE_DIR, notebooks: list[Path] | None = None,
                 url: str | None = None, branch: str | None = None) -> dict[str, str]:
    """Write the course folder ``course`` for ``notebooks`` (default: every chapter) and run
    ``nbgrader generate_assignment`` on each; return {file name: text of its release}.

    Raises ``se.ConventionError`` (nothing written) when a notebook breaks the convention.
    """
    url, branch = url or se.repository_url(), branch or se.repository_branch()
    paths = se.chapter_notebooks() if notebooks is None else [Path(p) for p in notebooks]
    sources, errors = {}, []
    for path in paths:
        try:
            sources[path.name] = se.source_notebook(nbformat.read(path, as_version=4),
                                                    path.name, url, branch)
        except se.ConventionError as err:
            errors.append(str(err))
    if errors:
        raise se.ConventionError("\n".join(errors))
    course = Path(course)
    course.mkdir(parents=True, exist_ok=True)
    cid = course_id(url)
    (course / "nbgrader_config.py").write_text(config_text(cid), encoding="utf-8")
    return se.generate(course, sources, api=se.nbgrader_api(course, cid))


# ------------------------------------------------------------------------- grading
def submit(course: Path, student: str, name: str, nb) -> Path:
    """Place ``nb`` as student ``student``'s submission of chapter ``name`` (a file name),
    where ``nbgrader collect`` would put it: ``submitted/<student>/<stem>/<name>``."""
    folder = Path(course) / "submitted" / student / Path(name).stem
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / name)
    return folder / name


def autograde(course: Path, student: str, name: str, url: str | None = None) -> None:
    """``nbgrader autograde <stem> --student <student>``; raises ``RuntimeError`` with
    nbgrader's log when it fails. Each notebook runs in the profile of ``COURSE_PROFILE``."""
    api = se.nbgrader_api(Path(course), course_id(url))
    se._ok(api.autograde(Path(name).stem, student), f"autograde {name} for {student}")


def grades(course: Path, student: str, name: str, url: str | None = None) -> dict[str, dict]:
    """{grade id: {"score", "max_score", "needs_manual_grade"}} of an autograded submission."""
    from nbgrader.api import Gradebook

    course = Path(course)
    db = f"sqlite:///{(course / 'gradebook.db').resolve()}"
    with Gradebook(db, course_id(url)) as gb:
        notebook = gb.find_submission_notebook(Path(name).stem, Path(name).stem, student)
        return {g.name: {"score": g.score, "max_score": g.max_score,
                         "needs_manual_grade": g.needs_manual_grade}
                for g in notebook.grades}


def solved(release_text: str, source) -> object:
    """The release notebook with every solution cell filled in with the instructor's
    solution (the lines between the solution marks of ``source``): what a student who
    answers like the instructor submits."""
    nb = nbformat.reads(release_text, as_version=4)
    answers = {}
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            lines = cell.source.split("\n")
            begin, end = lines.index(se.BEGIN_SOLUTION), lines.index(se.END_SOLUTION)
            answers[meta["grade_id"]] = "\n".join(lines[begin + 1:end])
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers.pop(grade_id)
    if answers:
        raise ValueError(f"the release has no solution cells {sorted(answers)}")
    return nb


def summary(notebooks: list[Path] | None = None) -> str:
    """A Markdown table: per chapter, its exercises, their points (autograded by a check
    cell, or graded by hand) and its hidden tests; builds nothing."""
    url, branch = se.repository_url(), se.repository_branch()
    paths = se.chapter_notebooks() if notebooks is None else [Path(p) for p in notebooks]
    rows = ["| assignment | exercises | autograded points | points graded by hand | "
            "hidden tests |", "|---|---|---|---|---|"]
    total = [0, 0, 0, 0]
    for path in paths:
        source = se.source_notebook(nbformat.read(path, as_version=4), path.name, url, branch)
        marks = [c.metadata["nbgrader"] for c in source.cells if "nbgrader" in c.metadata]
        counts = [sum(m["solution"] for m in marks),
                  sum(m.get("points", 0) for m in marks if not m["solution"]),
                  sum(m.get("points", 0) for m in marks if m["solution"]),
                  sum(se.BEGIN_HIDDEN in c.source for c in source.cells)]
        total = [t + n for t, n in zip(total, counts)]
        rows.append(f"| {path.stem} | " + " | ".join(map(str, counts)) + " |")
    rows.append("| all | " + " | ".join(map(str, total)) + " |")
    return "\n".join(rows)


# ------------------------------------------------------------------------- command line
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="chapter notebooks (default: every notebooks/NN_*.ipynb)")
    parser.add_argument("--course", type=Path, default=COURSE_DIR,
                        help=f"the course folder (default: {COURSE_DIR.relative_to(se.ROOT)}/)")
    parser.add_argument("--summary", action="store_true",
                        help="build nothing; print each chapter's exercises, points and "
                             "hidden tests as a Markdown table")
    args = parser.parse_args(argv)
    try:
        if args.summary:
            print(summary(args.notebooks or None))
            return 0
        texts = build_course(args.course, args.notebooks or None)
    except se.ConventionError as err:
        for line in str(err).splitlines():
            print(f"error: {line}", file=sys.stderr)
        print("nothing written", file=sys.stderr)
        return 2
    stale = []
    for name, text in texts.items():
        print(f"{args.course}/release/{Path(name).stem}/{name}")
        student = se.STUDENT_DIR / name
        if not student.exists() or student.read_text(encoding="utf-8") != text:
            stale.append(name)
    if stale:
        print(f"student/ differs from the release for {stale}: run `make student`")
    print(f"nbgrader course folder: {args.course} (nbgrader commands run from there)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
