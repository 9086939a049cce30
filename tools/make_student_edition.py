"""Write the student edition: ``student/NN_*.ipynb``, nbgrader's release of ``notebooks/``.

    python tools/make_student_edition.py           # (re)write student/
    python tools/make_student_edition.py --check   # exit 1 if a student copy is missing or stale
    python tools/make_student_edition.py --links   # the Colab links, as a Markdown table

Exit status 2, with every offending notebook and cell listed, when a notebook breaks the
convention below (and then nothing is written).

Each student copy is made by nbgrader (https://nbgrader.readthedocs.io), in two steps:

1. ``source_notebook`` turns the chapter into an nbgrader *source* notebook, marked the
   nbgrader way from the chapter's own convention (the chapters carry no nbgrader metadata):

   - every code cell tagged ``solution`` (its first line is ``# Solution N``) becomes an
     nbgrader solution cell, ``grade_id`` ``exercise-N``: a first line
     ``# Exercise N: your solution here`` and the whole solution between
     ``### BEGIN SOLUTION`` and ``### END SOLUTION``;
   - every cell tagged ``check`` (first line ``# Check N``, after ``# Solution N``) becomes
     an autograder test cell (``grade_id`` ``check-N``, locked, ``POINTS`` points): a visible
     test, which gives the student feedback. An exercise without a check cell is graded by
     hand instead: its solution cell carries the points (a "manually graded answer");
   - in each chapter one check cell (the one with the most conditions, see
     ``hidden_condition``) gets its last condition between ``### BEGIN HIDDEN TESTS`` and
     ``### END HIDDEN TESTS``: graded, but not shown in the student copy;
   - every other cell is kept as it is, but with no outputs, no execution counts and no cell
     metadata other than its tags; the notebook keeps ``kernelspec`` and ``language_info``
     and drops papermill's metadata;
   - a markdown cell's MyST, which Colab and JupyterLab show as raw text, becomes what they
     render (``tools/colab_markdown.py``): a dropdown a collapsed ``<details>`` block (it may
     hold the answer to a predict-first exercise), a citation "(Vaswani et al., 2017)" from
     ``book/references.bib``; a role or directive with no such form is an error naming the
     cell;
   - a note after the title cell says that the copy is generated and links to the full
     notebook.

2. ``nbgrader generate_assignment`` makes the release from it (``release``): the solution
   regions and the hidden tests are removed, outputs cleared, test cells locked, checksums
   recorded. Its release notebook, written as nbformat writes it plus a final newline, is the
   student copy. ``tools/make_assignments.py`` (``make assignments``) builds the same source
   and release in a whole nbgrader course folder, for an instructor to release, collect,
   autograde and give feedback.

So in a student copy each solution cell is the empty exercise cell
``# Exercise N: your solution here`` (same cell id), and each check cell stays: it tests the
student's answer with ``course_lib.exercises.check`` and fails until there is one.

The convention is enforced: a code cell whose first line starts with ``# Solution`` must be
tagged ``solution`` and the other way round, and no later cell may use a name that only a
solution defines (the student copy would fail there). The tool names the notebook and the
cell that break it.

The Colab cell (the first code cell) is copied unchanged. It makes the clone's
``notebooks/`` folder the working directory, and that is right for the student copy too:
``course_lib`` finds the data, the results and the artifacts from the repository root, never
from the working directory, and ``student/`` sits one level below the root like
``notebooks/``.

The output is deterministic: the same notebooks give byte-identical files.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import os
import re
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import colab_markdown  # noqa: E402
from tools.colab_cell import CONFIG, ROOT, repository_url  # noqa: E402

SOURCE_DIR = ROOT / "notebooks"
STUDENT_DIR = ROOT / "student"
NAME = re.compile(r"^\d\d_[\w-]+\.ipynb$")  # NN_topic.ipynb
SOLUTION = re.compile(r"^# Solution (\d+)\b")
SOLUTION_TAG = "solution"
CHECK = re.compile(r"^# Check (\d+)\b")
CHECK_TAG = "check"
NOTE_ID = "student-edition"
KEEP_METADATA = ("kernelspec", "language_info")

# nbgrader's marks and settings (see the module docstring)
STUB = "# Exercise {n}: your solution here"
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
POINTS = 1  # points of one exercise: its check cell's, or its solution's if it has no check
HIDDEN_MIN_CONDITIONS = 3  # a check cell hides a condition only if it has this many
SCHEMA_VERSION = 3  # nbgrader's cell metadata schema
# The nbgrader configuration of the course, {class: {trait: value}}: the release needs
# ClearSolutions.code_stub (our stub line stays above the solution region, the region goes);
# the course folder's nbgrader_config.py holds all of it (tools/make_assignments.py).
NBGRADER_CONFIG = {
    "ClearSolutions": {"code_stub": {"python": ""}},
    # autograde runs a whole chapter; the full profile has cells of several minutes
    "Execute": {"timeout": 1800},
}


class ConventionError(ValueError):
    """A notebook breaks the solution-cell convention."""


# ------------------------------------------------------------------------- settings
def repository_branch(config: Path = CONFIG) -> str:
    """``repository.branch`` from ``_config.yml`` (``main`` if it is not set)."""
    import yaml

    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    return str(data.get("repository", {}).get("branch") or "main")


def owner_repo(url: str) -> str:
    """``https://github.com/OWNER/REPO`` -> ``OWNER/REPO``."""
    return url.rstrip("/").removesuffix(".git").split("github.com/", 1)[1]


def github_url(name: str, url: str, branch: str, folder: str = "notebooks") -> str:
    return f"https://github.com/{owner_repo(url)}/blob/{branch}/{folder}/{name}"


def colab_url(name: str, url: str, branch: str, folder: str = "student") -> str:
    return f"https://colab.research.google.com/github/{owner_repo(url)}/blob/{branch}/{folder}/{name}"


# ------------------------------------------------------------------------- one notebook
def _first_line(cell) -> str:
    return cell.source.split("\n", 1)[0]


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _python(source: str) -> ast.Module | None:
    """The cell's code without IPython magics and shell lines; None if it does not parse."""
    lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _bound(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):  # parameters of functions and lambdas
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def _loaded(tree: ast.Module) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def check_convention(nb, name: str) -> dict[int, int]:
    """Check the solution cells of ``nb``; return {cell index: exercise number}.

    Raises ``ConventionError`` naming the notebook and the cell (index among all cells, and
    id) for: a ``# Solution`` cell without the ``solution`` tag, a ``solution`` cell whose
    first line is not ``# Solution N``, and a later cell that uses a name only a solution
    cell defines.
    """
    exercises: dict[int, int] = {}
    solution_names: dict[str, int] = {}  # name -> index of the solution cell defining it
    defined: set[str] = set()  # names defined by non-solution cells so far
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        where = f"{name}, cell {i} (id {cell.get('id', '?')})"
        first = _first_line(cell)
        tagged = SOLUTION_TAG in _tags(cell)
        if first.startswith("# Solution") and not tagged:
            raise ConventionError(
                f"{where}: its first line is {first!r} but it is not tagged "
                f"{SOLUTION_TAG!r}; tag it ['solution', 'hide-cell'] (or rename the comment)")
        if tagged:
            match = SOLUTION.match(first)
            if not match:
                raise ConventionError(
                    f"{where}: tagged {SOLUTION_TAG!r} but its first line is {first!r}, not "
                    "'# Solution N'")
            exercises[i] = int(match.group(1))
        if CHECK_TAG in _tags(cell):
            # a check cell tests the answer: it may use the solution's names, and in the
            # student copy it fails until the student has answered (course_lib.exercises)
            match = CHECK.match(first)
            if not match or int(match.group(1)) not in exercises.values():
                raise ConventionError(
                    f"{where}: tagged {CHECK_TAG!r} but its first line is {first!r}; it must be "
                    "'# Check N' and follow the cell '# Solution N'")
            continue
        tree = _python(cell.source)
        if tree is None:
            continue
        if tagged:
            for n in _bound(tree) - defined:
                solution_names.setdefault(n, i)
        else:
            own = _bound(tree)  # a name the cell binds itself is not taken from a solution
            used = sorted(n for n in _loaded(tree) & set(solution_names)
                          if n not in defined and n not in own)
            if used:
                raise ConventionError(
                    f"{where}: uses {used}, defined only in the solution cell "
                    f"{solution_names[used[0]]}; the student copy, whose solutions are empty, "
                    "would fail here")
            defined |= own
    return exercises


def _note(name: str, url: str, branch: str) -> str:
    full = github_url(name, url, branch)
    return (
        "> **Student edition.** The exercises' solutions are replaced by empty cells for your "
        "own, and no outputs are stored: run the cells in order, from the top. The full "
        f"chapter, with its outputs and solutions, is [`notebooks/{name}`]({full}).\n"
        ">\n"
        "> This copy is nbgrader's release of the chapter, generated by "
        "`tools/make_student_edition.py` (`make student`): do not edit it in the repository; "
        "change the chapter notebook and regenerate it."
    )


def _clean(cell, tags: list[str] | None = None):
    """A copy of ``cell`` with no outputs, no execution count and only its tags as metadata."""
    tags = _tags(cell) if tags is None else tags
    metadata = {"tags": tags} if tags else {}
    if cell.cell_type == "code":
        new = nbformat.v4.new_code_cell(cell.source, metadata=metadata)
    elif cell.cell_type == "markdown":
        new = nbformat.v4.new_markdown_cell(cell.source, metadata=metadata)
        if cell.get("attachments"):
            new.attachments = cell.attachments
    else:
        new = nbformat.v4.new_raw_cell(cell.source, metadata=metadata)
    return new


def _nbgrader(grade_id: str, *, solution: bool, grade: bool, locked: bool) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked,
            "schema_version": SCHEMA_VERSION, "solution": solution, "task": False}
    if grade:
        meta["points"] = POINTS
    return meta


def _is_condition(stmt: ast.stmt, checker: str) -> bool:
    """``<checker>.that(...)`` or ``<checker>.close(...)`` as a statement of its own."""
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)
            and stmt.value.func.attr in ("that", "close")
            and isinstance(stmt.value.func.value, ast.Name)
            and stmt.value.func.value.id == checker)


def hidden_condition(source: str) -> tuple[int, int, int] | None:
    """What a check cell can hide: (its number of conditions, first line, last line).

    A check cell can hold a hidden test when it ends with its ``with exercises.check(N) as
    c:`` block, the block has at least ``HIDDEN_MIN_CONDITIONS`` conditions
    (``c.that(...)``, ``c.close(...)`` statements directly in it) and its last statement is
    one of them, on lines of its own, using no name that the rest of the cell does not use
    too: that condition (lines counted from 1) becomes the hidden test. So the hidden test
    looks again at what the visible ones give feedback on, and the visible ones still fail
    on an empty answer. None otherwise.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    if not tree.body or not isinstance(tree.body[-1], ast.With):
        return None
    block = tree.body[-1]
    item = block.items[0]
    call = item.context_expr
    if (len(block.items) != 1 or not isinstance(item.optional_vars, ast.Name)
            or not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute)
            or call.func.attr != "check"):
        return None
    checker = item.optional_vars.id
    conditions = [s for s in block.body if _is_condition(s, checker)]
    last = block.body[-1]
    lines = source.split("\n")
    if (len(conditions) < HIDDEN_MIN_CONDITIONS or last is not conditions[-1]
            or lines[last.lineno - 1][:last.col_offset].strip()
            or lines[last.end_lineno - 1][last.end_col_offset:].strip()
            or (len(block.body) > 1 and block.body[-2].end_lineno >= last.lineno)):
        return None
    # the hidden test re-checks what the visible ones already look at: every name it uses
    # (other than builtins and names it binds itself) appears in the rest of the cell
    rest = ast.parse("\n".join(lines[:last.lineno - 1] + lines[last.end_lineno:]))
    own = ast.Module(body=[last], type_ignores=[])
    needs = _loaded(own) - _bound(own) - set(dir(builtins))
    if needs - _loaded(rest) - _bound(rest):
        return None
    return len(conditions), last.lineno, last.end_lineno


def _with_hidden(source: str, first: int, last: int) -> str:
    lines = source.split("\n")
    indent = re.match(r"\s*", lines[first - 1]).group(0)
    return "\n".join(lines[:first - 1] + [indent + BEGIN_HIDDEN] + lines[first - 1:last]
                     + [indent + END_HIDDEN] + lines[last:])


def source_notebook(nb, name: str, url: str, branch: str):
    """The nbgrader source version of ``nb`` (a NotebookNode of ``notebooks/<name>``)."""
    exercises = check_convention(nb, name)
    checks = {i: int(CHECK.match(_first_line(c)).group(1)) for i, c in enumerate(nb.cells)
              if c.cell_type == "code" and CHECK_TAG in _tags(c)}
    candidates = {i: hidden_condition(nb.cells[i].source) for i in checks}
    candidates = {i: found for i, found in candidates.items() if found}
    hidden = max(candidates, key=lambda i: (candidates[i][0], -i)) if candidates else None
    out = nbformat.v4.new_notebook()
    out.nbformat, out.nbformat_minor = 4, max(5, int(nb.get("nbformat_minor", 5)))
    out.metadata = {k: nb.metadata[k] for k in KEEP_METADATA if k in nb.metadata}
    grade_ids: set[str] = set()
    for i, cell in enumerate(nb.cells):
        if i in exercises:
            n = exercises[i]
            body = cell.source.rstrip("\n")
            new = nbformat.v4.new_code_cell(
                "\n".join([STUB.format(n=n), BEGIN_SOLUTION, body, END_SOLUTION]),
                metadata={"tags": [SOLUTION_TAG]})
            manual = n not in checks.values()  # no check: the answer is graded by hand
            new.metadata["nbgrader"] = _nbgrader(f"exercise-{n}", solution=True, grade=manual,
                                                 locked=False)
        elif i in checks:
            new = _clean(cell)
            if i == hidden:
                new.source = _with_hidden(cell.source, *candidates[i][1:])
            grade_id = f"check-{checks[i]}"
            k = 2
            while grade_id in grade_ids:  # a second check cell of the same exercise
                grade_id, k = f"check-{checks[i]}-{k}", k + 1
            new.metadata["nbgrader"] = _nbgrader(grade_id, solution=False, grade=True,
                                                 locked=True)
        else:
            new = _clean(cell)
            if new.cell_type == "markdown":
                try:
                    new.source = colab_markdown.convert(cell.source)
                except ValueError as err:
                    raise ConventionError(f"{name}, cell {i} (id {cell.get('id', '?')}): "
                                          f"{err}") from None
        if "nbgrader" in new.metadata:
            grade_ids.add(new.metadata["nbgrader"]["grade_id"])
        new.id = cell.get("id") or f"cell-{i}"  # a 4.4 notebook has no ids: make stable ones
        out.cells.append(new)
    note = nbformat.v4.new_markdown_cell(_note(name, url, branch))
    note.id = NOTE_ID
    if any(c.id == NOTE_ID for c in out.cells):
        raise ConventionError(f"{name}: a cell already has the id {NOTE_ID!r}")
    title = bool(out.cells) and out.cells[0].cell_type == "markdown" \
        and out.cells[0].source.lstrip().startswith("# ")
    out.cells.insert(1 if title else 0, note)
    return out


# ------------------------------------------------------------------------- nbgrader
def nbgrader_config(course_root: Path, course_id: str = "course", database: bool = True):
    """A traitlets ``Config`` for nbgrader's API on the course folder ``course_root``;
    ``database=False`` is ``generate_assignment --no-db`` (no gradebook: a release only)."""
    from traitlets.config import Config

    config = Config()
    config.CourseDirectory.root = str(Path(course_root).resolve())
    config.CourseDirectory.course_id = course_id
    for klass, traits in NBGRADER_CONFIG.items():
        for trait, value in traits.items():
            setattr(config[klass], trait, value)
    if not database:
        config.SaveCells.enabled = False
        config.GenerateAssignment.no_database = True
    return config


def nbgrader_api(course_root: Path, course_id: str = "course", database: bool = True):
    """nbgrader's ``NbGraderAPI`` on ``course_root``, with the course's configuration."""
    try:
        from nbgrader.apps import NbGraderAPI
    except ImportError as err:
        raise RuntimeError(f"nbgrader is not installed ({err}): requirements.txt pins it; "
                           "run `make install` (or pip install -r requirements.txt)") from None
    # nbgrader runs the `alembic` command to open its gradebook: find the one installed
    # beside this Python, also when the virtual environment is not activated
    if database and shutil.which("alembic") is None:
        scripts = [sysconfig.get_path("scripts"), str(Path(sys.executable).parent)]
        os.environ["PATH"] = os.pathsep.join(scripts + [os.environ.get("PATH", "")])
        if shutil.which("alembic") is None:
            raise RuntimeError("nbgrader needs the `alembic` command (installed with it); "
                               f"it is not in {scripts} nor on PATH")
    return NbGraderAPI(config=nbgrader_config(course_root, course_id, database))


def _ok(result: dict, what: str) -> None:
    if not result.get("success"):
        raise RuntimeError(f"nbgrader {what} failed:\n{result.get('log', '')}\n"
                           f"{result.get('error', '')}")


def generate(course_root: Path, sources: dict[str, object], course_id: str = "course",
             api=None) -> dict[str, str]:
    """Write ``sources`` ({file name: source notebook}) as assignments of the nbgrader
    course ``course_root`` (one assignment per notebook, named after its stem), run
    ``nbgrader generate_assignment`` on each and return {file name: text of its release}."""
    api = api or nbgrader_api(course_root, course_id)
    texts = {}
    for name, nb in sources.items():
        stem = Path(name).stem
        folder = Path(course_root) / "source" / stem
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / name, "w", encoding="utf-8", newline="\n") as f:
            f.write(render(nb))
        _ok(api.generate_assignment(stem), f"generate_assignment {stem}")
        released = Path(course_root) / "release" / stem / name
        texts[name] = render(nbformat.read(released, as_version=4))
    return texts


def release(sources: dict[str, object]) -> dict[str, str]:
    """{file name: text of nbgrader's release} of ``sources``, made in a temporary course
    without a gradebook (the release is the same with one, see tools/make_assignments.py)."""
    with tempfile.TemporaryDirectory(prefix="nbgrader-release-") as tmp:
        return generate(Path(tmp), sources, api=nbgrader_api(Path(tmp), database=False))


def student_notebook(nb, name: str, url: str, branch: str):
    """The student edition of ``nb`` (a NotebookNode of ``notebooks/<name>``): nbgrader's
    release of its source version."""
    text = release({name: source_notebook(nb, name, url, branch)})[name]
    return nbformat.reads(text, as_version=4)


def render(nb) -> str:
    """The file's text: nbformat's JSON (sorted keys, indent 1) and a final newline."""
    return nbformat.writes(nb, version=4) + "\n"


def build(source: Path, url: str, branch: str) -> str:
    """The text of the student copy of the notebook file ``source``."""
    nb = nbformat.read(source, as_version=4)
    return release({source.name: source_notebook(nb, source.name, url, branch)})[source.name]


# ------------------------------------------------------------------------- all notebooks
def chapter_notebooks(source_dir: Path = SOURCE_DIR) -> list[Path]:
    return sorted(p for p in source_dir.glob("*.ipynb") if NAME.match(p.name))


def _settings(url: str | None, branch: str | None) -> tuple[str, str]:
    return (url or repository_url(), branch or repository_branch())


def source_notebooks(source_dir: Path = SOURCE_DIR, url: str | None = None,
                     branch: str | None = None) -> dict[str, object]:
    """{file name: nbgrader source notebook} for every chapter notebook.

    Raises one ``ConventionError`` that lists every notebook breaking the convention.
    """
    url, branch = _settings(url, branch)
    sources, errors = {}, []
    for src in chapter_notebooks(source_dir):
        try:
            sources[src.name] = source_notebook(nbformat.read(src, as_version=4), src.name,
                                                url, branch)
        except ConventionError as err:
            errors.append(str(err))
    if errors:
        raise ConventionError("\n".join(errors))
    return sources


def build_all(source_dir: Path = SOURCE_DIR, url: str | None = None,
              branch: str | None = None) -> dict[str, str]:
    """{file name: text of its student copy} for every chapter notebook.

    Raises one ``ConventionError`` that lists every notebook breaking the convention.
    """
    return release(source_notebooks(source_dir, url, branch))


def _left_over(student_dir: Path, names) -> list[Path]:
    return [p for p in sorted(student_dir.glob("*.ipynb")) if NAME.match(p.name)
            and p.name not in names]


def check(source_dir: Path = SOURCE_DIR, student_dir: Path = STUDENT_DIR,
          url: str | None = None, branch: str | None = None) -> list[str]:
    """What is out of date in ``student_dir``, one line each (empty: all in sync).

    A notebook that breaks the convention raises ``ConventionError`` (see ``build_all``).
    """
    texts = build_all(source_dir, url, branch)
    problems = []
    for name, text in texts.items():
        target = student_dir / name
        if not target.exists():
            problems.append(f"{name}: missing")
        elif target.read_text(encoding="utf-8") != text:
            problems.append(f"{name}: out of date")
    for extra in _left_over(student_dir, texts):
        problems.append(f"{extra.name}: no notebooks/{extra.name} (left over)")
    return problems


def write(source_dir: Path = SOURCE_DIR, student_dir: Path = STUDENT_DIR,
          url: str | None = None, branch: str | None = None) -> list[str]:
    """(Re)write every student copy and remove left-over ones; return what changed.

    Writes nothing if any notebook breaks the convention (``ConventionError``).
    """
    texts = build_all(source_dir, url, branch)
    student_dir.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in texts.items():
        target = student_dir / name
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            with open(target, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
            changed.append(f"{name}: written")
    for extra in _left_over(student_dir, texts):
        extra.unlink()
        changed.append(f"{extra.name}: removed (no notebooks/{extra.name})")
    return changed


def links_table(source_dir: Path = SOURCE_DIR, url: str | None = None,
                branch: str | None = None) -> str:
    """A Markdown table: each student copy and its Colab link."""
    url, branch = _settings(url, branch)
    rows = ["| student notebook | Colab |", "|---|---|"]
    for src in chapter_notebooks(source_dir):
        link = colab_url(src.name, url, branch)
        rows.append(f"| `student/{src.name}` | [open in Colab]({link}) |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true",
                      help="change nothing; list stale or missing student copies, exit 1 if any")
    what.add_argument("--links", action="store_true",
                      help="print the Colab links of the student copies as a Markdown table")
    args = parser.parse_args(argv)
    try:
        if args.links:
            print(links_table())
            return 0
        if args.check:
            problems = check()
            for line in problems:
                print(f"student/{line}")
            if problems:
                print("run `make student` (python tools/make_student_edition.py) to regenerate")
                return 1
            print("student/ is up to date")
            return 0
        changed = write()
    except ConventionError as err:
        for line in str(err).splitlines():
            print(f"error: {line}", file=sys.stderr)
        print("nothing written" if not args.check else "fix these first", file=sys.stderr)
        return 2
    for line in changed:
        print(f"student/{line}")
    if not changed:
        print("student/ was already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
