"""Write the student edition: ``student/NN_*.ipynb`` from ``notebooks/NN_*.ipynb``.

    python tools/make_student_edition.py           # (re)write student/
    python tools/make_student_edition.py --check   # exit 1 if a student copy is missing or stale
    python tools/make_student_edition.py --links   # the Colab links, as a Markdown table

Exit status 2, with every offending notebook and cell listed, when a notebook breaks the
convention below (and then nothing is written).

A student copy is the chapter without its answers and without outputs:

- every code cell tagged ``solution`` (its first line is ``# Solution N``) becomes an empty
  exercise cell, ``# Exercise N: your solution here``, with the same cell id;
- every other cell is kept as it is, but with no outputs, no execution counts and no cell
  metadata other than its tags (students run the notebook themselves; the files stay small
  and do not change when only the outputs of the chapter change);
- the notebook keeps ``kernelspec`` and ``language_info``, and drops papermill's metadata;
- a note after the title cell says that the copy is generated and links to the full notebook.

A cell tagged ``check`` (first line ``# Check N``, after ``# Solution N``) is kept: it tests
the student's answer with ``course_lib.exercises.check`` and fails until there is one.

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
import re
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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
        "> This copy is generated by `tools/make_student_edition.py` (`make student`): do not "
        "edit it in the repository; change the chapter notebook and regenerate it."
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


def student_notebook(nb, name: str, url: str, branch: str):
    """The student edition of ``nb`` (a NotebookNode of ``notebooks/<name>``)."""
    exercises = check_convention(nb, name)
    out = nbformat.v4.new_notebook()
    out.nbformat, out.nbformat_minor = 4, max(5, int(nb.get("nbformat_minor", 5)))
    out.metadata = {k: nb.metadata[k] for k in KEEP_METADATA if k in nb.metadata}
    for i, cell in enumerate(nb.cells):
        if i in exercises:
            new = nbformat.v4.new_code_cell(f"# Exercise {exercises[i]}: your solution here\n",
                                            metadata={"tags": [SOLUTION_TAG]})
        else:
            new = _clean(cell)
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


def render(nb) -> str:
    """The file's text: nbformat's JSON (sorted keys, indent 1) and a final newline."""
    return nbformat.writes(nb, version=4) + "\n"


def build(source: Path, url: str, branch: str) -> str:
    """The text of the student copy of the notebook file ``source``."""
    nb = nbformat.read(source, as_version=4)
    return render(student_notebook(nb, source.name, url, branch))


# ------------------------------------------------------------------------- all notebooks
def chapter_notebooks(source_dir: Path = SOURCE_DIR) -> list[Path]:
    return sorted(p for p in source_dir.glob("*.ipynb") if NAME.match(p.name))


def _settings(url: str | None, branch: str | None) -> tuple[str, str]:
    return (url or repository_url(), branch or repository_branch())


def build_all(source_dir: Path = SOURCE_DIR, url: str | None = None,
              branch: str | None = None) -> dict[str, str]:
    """{file name: text of its student copy} for every chapter notebook.

    Raises one ``ConventionError`` that lists every notebook breaking the convention.
    """
    url, branch = _settings(url, branch)
    texts, errors = {}, []
    for src in chapter_notebooks(source_dir):
        try:
            texts[src.name] = build(src, url, branch)
        except ConventionError as err:
            errors.append(str(err))
    if errors:
        raise ConventionError("\n".join(errors))
    return texts


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
