"""The student edition (tools/make_student_edition.py, nbgrader's release of the chapters): in
sync, stubbed, convention kept. The nbgrader marks themselves: tests/book/test_assignments.py."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools import make_student_edition as se  # noqa: E402
from tools.colab_cell import repository_url  # noqa: E402

URL, BRANCH = "https://github.com/example-owner/example-course", "main"


def _notebook(*cells, papermill=True):
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                  "language": "python"},
                   "language_info": {"name": "python"}}
    if papermill:
        nb.metadata["papermill"] = {"duration": 12.3, "parameters": {}}
    for i, cell in enumerate(cells):
        cell.id = f"c{i}"
        nb.cells.append(cell)
    return nb


def _code(source, tags=(), outputs=True):
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": list(tags),
                                                       "papermill": {"duration": 0.1}})
    if outputs:
        cell.execution_count = 7
        cell.outputs = [nbformat.v4.new_output("stream", text="printed\n"),
                        nbformat.v4.new_output("execute_result", {"text/plain": "42"},
                                               execution_count=7)]
    return cell


def _chapter(solution_tags=("solution", "hide-cell")):
    return _notebook(
        nbformat.v4.new_markdown_cell("# 3. A chapter\n\nWhat it is about."),
        _code("# Colab set-up: does nothing here\nimport os", tags=["remove-cell"]),
        _code("x = 1\nprint(x)"),
        nbformat.v4.new_markdown_cell("## Exercises\n\n**1.** Double x."),
        _code("# Solution 1 (short)\ny = 2 * x\nassert y == 2\nprint(y)", tags=solution_tags),
        _code("print(x)"),
    )


def _by_id(nb, cell_id):
    return next(c for c in nb.cells if c.id == cell_id)


# --------------------------------------------------------------------------- the repository
def test_committed_student_edition_is_in_sync():
    problems = se.check()
    assert not problems, ("student/ does not match notebooks/: " + "; ".join(problems)
                          + ". Run `make student` and commit student/.")


def test_readme_and_setup_page_link_every_student_notebook():
    url, branch = repository_url(), se.repository_branch()
    for page in (ROOT / "README.md", ROOT / "book" / "setup.md"):
        text = page.read_text(encoding="utf-8")
        missing = [p.name for p in se.chapter_notebooks()
                   if se.colab_url(p.name, url, branch) not in text]
        assert not missing, (f"{page.relative_to(ROOT)} has no Colab link to student/ for "
                             f"{missing}; `python tools/make_student_edition.py --links` prints "
                             "the table")


# --------------------------------------------------------------------------- one notebook
def test_solution_cell_becomes_an_empty_exercise_cell():
    student = se.student_notebook(_chapter(), "03_x.ipynb", URL, BRANCH)
    stub = _by_id(student, "c4")
    assert stub.cell_type == "code"
    assert stub.source == "# Exercise 1: your solution here\n"
    assert stub.metadata["tags"] == ["solution"]
    assert set(stub.metadata) == {"tags", "nbgrader", "deletable"}  # nbgrader's release
    assert stub.metadata["nbgrader"]["solution"] and stub.metadata["nbgrader"]["grade_id"] \
        == "exercise-1"
    assert stub.outputs == [] and stub.execution_count is None


def test_other_cells_keep_their_source_and_lose_outputs():
    original = _chapter()
    student = se.student_notebook(original, "03_x.ipynb", URL, BRANCH)
    for cell in original.cells:
        if "solution" in cell.metadata.get("tags", []):
            continue
        copy = _by_id(student, cell.id)
        assert copy.source == cell.source and copy.cell_type == cell.cell_type
        if copy.cell_type == "code":
            assert copy.outputs == [] and copy.execution_count is None
            assert "papermill" not in copy.metadata
    assert _by_id(student, "c1").metadata == {"tags": ["remove-cell"]}  # the Colab cell
    assert _by_id(student, "c2").metadata == {}
    assert set(student.metadata) == {"kernelspec", "language_info"}


def test_note_follows_the_title_and_links_the_full_notebook():
    student = se.student_notebook(_chapter(), "03_x.ipynb", URL, BRANCH)
    assert [c.id for c in student.cells[:3]] == ["c0", se.NOTE_ID, "c1"]
    note = student.cells[1].source
    assert "Student edition" in note and "do not edit" in note
    assert f"{URL}/blob/{BRANCH}/notebooks/03_x.ipynb" in note


def test_untagged_solution_cell_is_an_error():
    with pytest.raises(se.ConventionError, match=r"03_x\.ipynb, cell 4 \(id c4\).*not tagged"):
        se.student_notebook(_chapter(solution_tags=("hide-input",)), "03_x.ipynb", URL, BRANCH)


def test_solution_tag_without_solution_line_is_an_error():
    nb = _chapter()
    nb.cells[2].metadata["tags"] = ["solution"]  # "x = 1", not "# Solution N"
    with pytest.raises(se.ConventionError, match=r"cell 2 \(id c2\).*'# Solution N'"):
        se.student_notebook(nb, "03_x.ipynb", URL, BRANCH)


def test_later_cell_that_needs_a_solution_is_an_error():
    nb = _chapter()
    nb.cells[5].source = "print(y)"  # y exists only in the solution
    with pytest.raises(se.ConventionError, match=r"cell 5 \(id c5\).*\['y'\].*solution cell 4"):
        se.student_notebook(nb, "03_x.ipynb", URL, BRANCH)
    nb.cells[5].source = "for y in range(3):\n    print(y)"  # binds y itself: fine
    se.student_notebook(nb, "03_x.ipynb", URL, BRANCH)


# --------------------------------------------------------------------------- files
def test_write_check_and_determinism(tmp_path):
    src, dst = tmp_path / "notebooks", tmp_path / "student"
    src.mkdir()
    nbformat.write(_chapter(), src / "03_x.ipynb")
    plain = _notebook(nbformat.v4.new_markdown_cell("# 4. No exercises"), _code("z = 3\nz"))
    nbformat.write(plain, src / "04_plain.ipynb")
    (src / "notes.ipynb").write_text("not a chapter", encoding="utf-8")  # not NN_*: ignored

    assert se.check(src, dst, URL, BRANCH) == ["03_x.ipynb: missing", "04_plain.ipynb: missing"]
    assert len(se.write(src, dst, URL, BRANCH)) == 2
    first = {p.name: p.read_bytes() for p in dst.iterdir()}
    assert set(first) == {"03_x.ipynb", "04_plain.ipynb"}
    assert se.check(src, dst, URL, BRANCH) == []
    assert se.write(src, dst, URL, BRANCH) == []  # nothing to do
    assert {p.name: p.read_bytes() for p in dst.iterdir()} == first  # byte-identical

    copy = nbformat.read(dst / "04_plain.ipynb", as_version=4)  # no exercises: copied, cleared
    code = [c for c in copy.cells if c.cell_type == "code"]
    assert [c.source for c in code] == ["z = 3\nz"]
    assert code[0].outputs == [] and code[0].execution_count is None
    assert "papermill" not in copy.metadata

    changed = nbformat.read(src / "04_plain.ipynb", as_version=4)
    changed.cells[1].source = "z = 4\nz"
    nbformat.write(changed, src / "04_plain.ipynb")
    (dst / "05_gone.ipynb").write_text("{}", encoding="utf-8")
    assert se.check(src, dst, URL, BRANCH) == [
        "04_plain.ipynb: out of date", "05_gone.ipynb: no notebooks/05_gone.ipynb (left over)"]
    se.write(src, dst, URL, BRANCH)
    assert not (dst / "05_gone.ipynb").exists()
    assert se.check(src, dst, URL, BRANCH) == []


def test_outputs_alone_do_not_make_the_copy_stale(tmp_path):
    src, dst = tmp_path / "notebooks", tmp_path / "student"
    src.mkdir()
    nbformat.write(_chapter(), src / "03_x.ipynb")
    se.write(src, dst, URL, BRANCH)
    rerun = nbformat.read(src / "03_x.ipynb", as_version=4)  # a re-run: new outputs, timings
    rerun.cells[2].outputs = [nbformat.v4.new_output("stream", text="other\n")]
    rerun.cells[2].metadata["papermill"] = {"duration": 9.9}
    rerun.metadata["papermill"]["duration"] = 99.0
    nbformat.write(rerun, src / "03_x.ipynb")
    assert se.check(src, dst, URL, BRANCH) == []


def test_a_broken_notebook_stops_everything_and_every_error_is_listed(tmp_path):
    src, dst = tmp_path / "notebooks", tmp_path / "student"
    src.mkdir()
    nbformat.write(_chapter(), src / "01_fine.ipynb")
    nbformat.write(_chapter(solution_tags=()), src / "02_bad.ipynb")
    nbformat.write(_chapter(solution_tags=("hide-input",)), src / "03_bad.ipynb")
    both = r"(?s)02_bad\.ipynb, cell 4.*03_bad\.ipynb, cell 4"
    with pytest.raises(se.ConventionError, match=both):
        se.write(src, dst, URL, BRANCH)
    assert not dst.exists() or not list(dst.iterdir())  # nothing written
    with pytest.raises(se.ConventionError):
        se.check(src, dst, URL, BRANCH)


# --------------------------------------------------------------------------- check cells
CHECK_SOURCE = ("# Check 1\nwith exercises.check(1) as c:\n"
                "    c.that(y == 2 * x, 'double x, do not add 2')")


def _chapter_with_check(check_source=CHECK_SOURCE, check_tags=("check", "hide-input"),
                        before_solution=False):
    nb = _chapter()
    check = _code(check_source, tags=check_tags)
    at = 4 if before_solution else 5  # cell 4 is '# Solution 1'
    nb.cells.insert(at, check)
    for i, cell in enumerate(nb.cells):
        cell.id = f"c{i}"
    return nb


def test_check_cell_is_kept_in_the_student_copy_without_outputs():
    nb = _chapter_with_check()
    student = se.student_notebook(nb, "03_x.ipynb", URL, BRANCH)
    check = _by_id(student, "c5")
    assert check.source == CHECK_SOURCE  # kept word for word: it fails until answered
    assert check.metadata["tags"] == ["check", "hide-input"]
    assert set(check.metadata) == {"tags", "nbgrader", "deletable", "editable"}
    assert check.metadata["nbgrader"]["grade"] and check.metadata["nbgrader"]["locked"]
    assert check.outputs == [] and check.execution_count is None
    assert _by_id(student, "c4").source == "# Exercise 1: your solution here\n"


def test_check_cell_may_use_the_names_of_its_solution():
    nb = _chapter_with_check()  # uses y, defined only by '# Solution 1'
    assert se.check_convention(nb, "03_x.ipynb") == {4: 1}


def test_the_same_lines_without_the_check_tag_are_an_error():
    nb = _chapter_with_check(check_tags=())
    with pytest.raises(se.ConventionError, match=r"cell 5 \(id c5\).*\['y'\]"):
        se.student_notebook(nb, "03_x.ipynb", URL, BRANCH)


@pytest.mark.parametrize("source", [
    "# Check 2\nprint(y)",  # no '# Solution 2'
    "# check 1\nprint(y)",  # not '# Check N'
    "with exercises.check(1) as c:\n    c.that(y, 'x')",  # no first line at all
])
def test_check_tag_needs_the_check_line_of_an_earlier_solution(source):
    nb = _chapter_with_check(check_source=source)
    with pytest.raises(se.ConventionError, match=r"cell 5 \(id c5\).*'# Check N'"):
        se.student_notebook(nb, "03_x.ipynb", URL, BRANCH)


def test_check_cell_before_its_solution_is_an_error():
    nb = _chapter_with_check(before_solution=True)
    with pytest.raises(se.ConventionError, match=r"cell 4 \(id c4\).*follow the cell"):
        se.student_notebook(nb, "03_x.ipynb", URL, BRANCH)


def test_cells_after_a_check_still_may_not_use_solution_names():
    nb = _chapter_with_check()
    nb.cells[-1].source = "print(y)"  # after the check: the student copy would fail here
    with pytest.raises(se.ConventionError, match=r"\['y'\].*solution cell 4"):
        se.student_notebook(nb, "03_x.ipynb", URL, BRANCH)


def test_chapters_with_checks_import_the_checker_before_the_first_check():
    for path in se.chapter_notebooks():
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        checks = [i for i, c in enumerate(code) if "check" in c.metadata.get("tags", [])]
        if not checks:
            continue
        imports = [i for i, c in enumerate(code) if "exercises" in c.source
                   and ("import" in c.source) and i < checks[0]]
        assert imports, f"{path.name}: a check cell runs before course_lib.exercises is imported"


# --------------------------------------------------------------------------- MyST for Colab
# Colab and JupyterLab render markdown, HTML and math, not MyST: the student copy's markdown
# cells get what they render (tools/colab_markdown.py).
from tools import colab_markdown as cm  # noqa: E402

DROPDOWN = ("**4.** A more insistent query (predict first). *Before running*, write your "
            "prediction.\n\n:::{dropdown} What a good answer contains\nIt says what "
            "multiplying the query does to $q \\cdot k$.\n:::")
ANSWER = (":::{admonition} What a good answer to exercise 1 says\n:class: dropdown\n"
          "Rung 4 without positions ends at 190.8 against 182.4: worse.\n:::")


def test_a_dropdown_becomes_a_collapsed_details_block_with_markdown_inside():
    out = cm.convert(DROPDOWN)
    assert out.endswith("<details>\n<summary>What a good answer contains</summary>\n\n"
                        "It says what multiplying the query does to $q \\cdot k$.\n\n"
                        "</details>")
    assert out.startswith("**4.** A more insistent query (predict first).")
    assert ":::" not in out and "{dropdown}" not in out


def test_an_answer_in_an_admonition_dropdown_stays_folded_in_the_student_copy():
    """The answer under a predict-first exercise: inside <details> (closed unless `open`),
    never in the open text, also when the book's source asks for it open."""
    for source in (ANSWER, ANSWER.replace(":class: dropdown", ":class: dropdown\n:open:")):
        out = cm.convert(source)
        assert out == ("<details>\n<summary>What a good answer to exercise 1 says</summary>\n\n"
                       "Rung 4 without positions ends at 190.8 against 182.4: worse.\n\n"
                       "</details>")
    nb = _chapter()
    nb.cells[3].source += "\n\n" + ANSWER
    student = se.student_notebook(nb, "03_x.ipynb", URL, BRANCH)
    text = _by_id(student, "c3").source
    before, folded = text.split("<details>")
    assert "190.8" in folded and "190.8" not in before
    assert "<details open" not in text and ":class:" not in text


def test_other_admonitions_become_quotes_with_their_title():
    assert cm.convert(":::{note}\nThe GPU is optional.\n:::") == (
        "> **Note**\n>\n> The GPU is optional.")
    assert cm.convert(":::{admonition} Shapes\n`[B, h, L, d]`\n\nthroughout.\n:::") == (
        "> **Shapes**\n>\n> `[B, h, L, d]`\n>\n> throughout.")


def test_nested_directives_and_code_inside_them():
    source = ("::::{dropdown} Outer\n:::{note}\ninner {cite}`post2018call`\n:::\n"
              "```python\nx = '{cite}`not_a_key`'\n:::\n```\n::::")
    out = cm.convert(source)
    assert out.startswith("<details>\n<summary>Outer</summary>\n\n> **Note**\n>\n> inner (")
    assert "```python\nx = '{cite}`not_a_key`'\n:::\n```" in out  # code as it is
    assert out.endswith("\n\n</details>")


def test_citations_read_as_the_books_author_year_style():
    works = cm.bibliography()
    assert cm.convert("as {cite}`vaswani2017attention` showed", works) == (
        "as ([Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)) showed")
    assert cm.convert("{cite:t}`kneser1995improved` smooth", works) == (
        "[Kneser and Ney (1995)](https://doi.org/10.1109/ICASSP.1995.479394) smooth")
    assert cm.convert("{cite:p}`post2018call, decock2011ames`", works) == (
        "([Post, 2018](https://doi.org/10.18653/v1/W18-6319); "
        "[De Cock, 2011](https://doi.org/10.1080/10691898.2011.11889627))")
    # no author: the title in italics; no year: n.d. (as the book's author_year style)
    assert cm.convert("{cite}`rtorch_ch9`", works) == "(*Chapter 9: Transformer*, n.d.)"


def test_bibtex_names_and_accents():
    works = cm.parse_bibliography(
        '@article{a2019x,\n  author = {M{\\"u}ller, Rafael and Kaiser, {\\L}ukasz},\n'
        '  title = {{A} Title},\n  year = 2019,\n  month = apr\n}\n'
        '@misc{b,\n  author = "Ada Lovelace and Charles Babbage and Someone Else",\n'
        '  title = {B}\n}\n')
    assert works["a2019x"] == cm.Work(("Müller", "Kaiser"), "2019", "A Title", None)
    assert works["b"].authors == ("Lovelace", "Babbage", "Else") and works["b"].year is None
    assert cm.citation(["b"], textual=True, works=works) == "Lovelace et al. (n.d.)"


def test_inline_code_and_math_are_left_alone():
    source = "`{cite}` is a role; `y_{T-1}` and $x_{i}$ too; ``a`b``."
    assert cm.convert(source, {}) == source


def test_targets_comments_and_text_roles():
    assert cm.convert("(sec-x)=\n# Title\n% a note to authors\nSee {ref}`the table <tab-x>`, "
                      "{math}`\\sqrt{d}`.") == "# Title\nSee the table, $\\sqrt{d}$."


@pytest.mark.parametrize("source, message", [
    ("{glue}`acc`", r"\{glue\}"),
    ("{numref}`fig-x`", r"no text of its own"),
    ("{cite}`nobody2099`", r"nobody2099.*references\.bib"),
    (":::{figure} x.png\n:::", r"\{figure\}"),
    (":::{dropdown} Open\nnever closed", r"never closed"),
])
def test_myst_without_a_colab_form_stops_the_student_edition(source, message):
    nb = _chapter()
    nb.cells[3].source = source
    with pytest.raises(se.ConventionError, match=r"03_x\.ipynb, cell 3 \(id c3\).*" + message):
        se.source_notebook(nb, "03_x.ipynb", URL, BRANCH)


def _outside_code(text: str) -> str:
    """``text`` without its fenced code blocks and inline code."""
    text = re.sub(r"(?ms)^ {0,3}(`{3,}|~{3,})(?!\{).*?^ {0,3}\1\s*$", "", text)
    return re.sub(r"(`+).+?\1", "", text, flags=re.S)


def test_committed_student_edition_has_no_raw_myst():
    """What Colab would show as raw text: no fence of a directive, no role, no target; every
    dropdown of a chapter is a collapsed <details> block in its student copy, with the blank
    lines around its body that make Colab render the markdown in it."""
    for path in se.chapter_notebooks():
        student = nbformat.read(ROOT / "student" / path.name, as_version=4)
        chapter = nbformat.read(path, as_version=4)
        text = "\n".join(c.source for c in student.cells if c.cell_type == "markdown")
        prose = _outside_code(text)
        assert not re.search(r"^ {0,3}:{3,}", prose, re.M), f"{path.name}: a ::: fence"
        assert not re.search(r"\{[a-z][\w:-]*\}`", prose), f"{path.name}: a MyST role"
        assert not re.search(r"^\([\w.:-]+\)=\s*$", prose, re.M), f"{path.name}: a target"
        dropdowns = sum(len(re.findall(r"^ {0,3}:{3,}\{dropdown\}|^:class:.*\bdropdown\b",
                                       c.source, re.M))
                        for c in chapter.cells if c.cell_type == "markdown")
        details = re.findall(r"<details[^>]*>\n<summary>.*?</summary>\n\n.*?\n\n</details>",
                             text, re.S)
        assert len(details) == dropdowns == text.count("<details"), path.name
        assert all(d.startswith("<details>") for d in details), f"{path.name}: one is open"
