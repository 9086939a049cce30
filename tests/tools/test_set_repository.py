"""A fork stays green: ``tools/set_repository.py URL`` on a copy of the repository.

The module's fixture copies the repository's files (what git tracks or would track, less the
datasets, which nothing here reads) into a temporary folder, runs the copy's
``tools/set_repository.py`` there with a new address, and the tests look at the copy:

- no trace of the old repository is left in any file (its ``OWNER/REPO``, its GitHub Pages
  address), the catalogues' messages included, where a long address is split across lines;
- the new one is everywhere a fork needs it (config, Colab cells, student copies, README
  badge and links, the set-up page's ``git clone`` and ``cd``, CITATION.cff);
- ``tools/make_student_edition.py --check`` and ``tools/set_repository.py --check``, run in
  the copy, find nothing stale;
- the Chinese catalogues still match the English: without a gettext build (minutes), the
  templates of the rewritten sources are the original catalogues' messages with the address
  replaced (the catalogues match the sources in the repository: tests/book/test_translations.py),
  and every message the tool rewrote is found, as rewritten, in its page or notebook; then
  test_translations' ``compare`` finds no problem the original catalogues did not have, no
  catalogue has format flags, and the translations keep the numbers of their English
  (test_prose_numbers' rule).

About 20 s on a 2-core machine, most of it nbgrader making the student edition twice.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "book"))  # test_translations, test_prose_numbers

from tools import set_repository as sr  # noqa: E402
from tools.colab_cell import colab_cell, repository_url  # noqa: E402

NEW = "https://github.com/Fork-Owner/my-course"  # another owner, another name, capitals
NEW_NAME = "Fork-Owner/my-course"
NEW_PAGES = "https://fork-owner.github.io/my-course/"
LOCALES = Path("locales") / "zh_CN" / "LC_MESSAGES"


# --------------------------------------------------------------------------- the copy
def _files() -> list[str]:
    """The repository's files, relative to ROOT, without the datasets (their documents
    stay: they are text the old address must not be in either)."""
    listed = None
    if (ROOT / ".git").exists() and shutil.which("git"):
        done = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                               "--exclude-standard"], capture_output=True, text=True)
        if done.returncode == 0:
            listed = [n for n in done.stdout.split("\0") if n]
    if listed is None:  # not a git checkout: every file, less what is built or installed
        listed = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if p.is_file()]
        listed = [n for n in listed if not any(
            part in sr.BUILT or part.endswith(".egg-info")
            or (part.startswith(".") and part not in (".github", ".ci"))
            for part in n.split("/")[:-1])]
    return sorted(n for n in listed if (ROOT / n).is_file()
                  and not (n.startswith("data/") and not n.endswith(".md")))


class Fork:
    def __init__(self, root: Path, old: str, output: str):
        self.root, self.old, self.output = root, old, output
        self.old_name = sr._owner_repo(old)
        self.old_pages = sr.pages_url(self.old_name)


@pytest.fixture(scope="module")
def fork(tmp_path_factory) -> Fork:
    pytest.importorskip("babel", reason="the catalogues are read and written with Babel")
    pytest.importorskip("nbgrader", reason="the student edition is made by nbgrader")
    root = tmp_path_factory.mktemp("fork") / "course"
    for name in _files():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, root / name)
    old = repository_url(ROOT / "_config.yml")
    assert sr._owner_repo(old).lower() != NEW_NAME.lower()
    done = _run(root, "tools/set_repository.py", NEW)
    assert done.returncode == 0, done.stdout + done.stderr
    return Fork(root, old, done.stdout)


def _run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True,
                          timeout=300)


def _po_strings(path: Path) -> list[str]:
    from babel.messages.pofile import read_po

    with path.open(encoding="utf-8") as handle:
        catalogue = read_po(handle)
    found = []
    for message in list(catalogue) + list(catalogue.obsolete.values()):
        for value in (message.id, message.string, message.context):
            found += [value] if isinstance(value, str) else [v for v in value or () if v]
    return [s for s in found if s]


# --------------------------------------------------------------------------- the tests
def test_no_trace_of_the_old_repository_is_left(fork):
    name = re.compile(rf"(?<![\w.-]){re.escape(fork.old_name)}(?![\w-])", re.IGNORECASE)
    pages = fork.old_pages.rstrip("/").lower()
    left = []
    for path in sorted(p for p in fork.root.rglob("*") if p.is_file()):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        texts = [text] + (_po_strings(path) if path.suffix == ".po" else [])
        if any(name.search(t) or pages in t.lower() for t in texts):
            left.append(path.relative_to(fork.root).as_posix())
    assert not left, f"still naming {fork.old_name} after set_repository.py {NEW}: {left}"


def test_the_new_address_is_everywhere_a_fork_needs_it(fork):
    import nbformat

    from tools import make_student_edition as se

    root = fork.root
    assert repository_url(root / "_config.yml") == NEW
    chapters = se.chapter_notebooks(root / "notebooks")
    assert chapters
    for folder in ("notebooks", "student"):
        for path in sorted((root / folder).glob("*.ipynb")):
            code = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
            assert code[0].source.rstrip("\n") == colab_cell(NEW), f"{folder}/{path.name}"
    readme = (root / "README.md").read_text(encoding="utf-8")
    top = "\n".join(readme.splitlines()[:6])
    assert f"{NEW}/actions/workflows/ci.yml/badge.svg" in top and NEW_PAGES in top
    branch = se.repository_branch(root / "_config.yml")
    for page in (root / "README.md", root / "book" / "setup.md"):
        text = page.read_text(encoding="utf-8")
        missing = [p.name for p in chapters if se.colab_url(p.name, NEW, branch) not in text]
        assert not missing, f"{page.name}: no Colab link of the fork to {missing}"
    assert f"git clone {NEW}\ncd my-course\n" in (root / "book" / "setup.md").read_text(
        encoding="utf-8")
    if (root / "CITATION.cff").exists():
        import yaml

        citation = yaml.safe_load((root / "CITATION.cff").read_text(encoding="utf-8"))
        assert citation["repository-code"] == NEW and citation["url"] == NEW_PAGES
    assert f"changed: {LOCALES.as_posix()}/book/setup.po" in fork.output


def test_the_student_edition_is_in_sync_in_the_fork(fork):
    done = _run(fork.root, "tools/make_student_edition.py", "--check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_set_repository_check_finds_nothing_left_in_the_fork(fork):
    done = _run(fork.root, "tools/set_repository.py", "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"everything already points at {NEW}"


def _replace(text: str, fork: Fork) -> str:
    """The address replaced the plain way: the expected message after the rewrite."""
    return text.replace(fork.old_pages, NEW_PAGES).replace(fork.old_name, NEW_NAME)


def _source_text(root: Path, page: str) -> str | None:
    """The English of a catalogue's page (``book/setup``, ``notebooks/01_attention``), its
    whitespace collapsed as in a message; None if the page is neither."""
    import nbformat

    if (root / f"{page}.md").exists():
        text = (root / f"{page}.md").read_text(encoding="utf-8")
    elif (root / f"{page}.ipynb").exists():
        nb = nbformat.read(root / f"{page}.ipynb", as_version=4)
        text = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    else:
        return None
    return " ".join(text.split())


def test_the_catalogues_still_match_the_rewritten_english(fork, tmp_path):
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import read_po, write_po
    from test_prose_numbers import translation_mismatches
    from test_translations import compare

    from tools.update_translations import has_format_flags

    def read(path):
        with path.open(encoding="utf-8") as handle:
            return read_po(handle)

    def problems(reports):
        return sorted((r.name, len(r.untranslated), len(r.fuzzy), len(r.obsolete),
                       len(r.not_in_catalogue), r.missing_catalogue, r.no_page)
                      for r in reports)

    original, copied = ROOT / LOCALES, fork.root / LOCALES
    rewritten = 0
    for which, replace in (("before", lambda s: s), ("after", lambda s: _replace(s, fork))):
        for po in original.rglob("*.po"):  # the templates: the catalogues' English
            template = Catalog(locale=None)
            for message in read(po):
                if message.id:
                    template.add(replace(message.id), context=message.context)
            pot = tmp_path / which / po.relative_to(original).with_suffix(".pot")
            pot.parent.mkdir(parents=True, exist_ok=True)
            with pot.open("wb") as handle:
                write_po(handle, template)
    assert problems(compare(tmp_path / "after", copied)) == \
        problems(compare(tmp_path / "before", original))

    for po in sorted(copied.rglob("*.po")):
        page = po.relative_to(copied).with_suffix("").as_posix()
        before, after = read(original / po.relative_to(copied)), read(po)
        old_ids = {m.id for m in before if m.id}
        new_ids = {m.id for m in after if m.id} - old_ids
        english = _source_text(fork.root, page)
        for message_id in sorted(new_ids):  # rewritten by the tool: as in the page itself
            rewritten += 1
            assert english is not None and " ".join(message_id.split()) in english, (
                f"{po.name}: the rewritten message {message_id[:80]!r} is not in {page}")
        assert not has_format_flags(po.read_text(encoding="utf-8")), po
        assert len(translation_mismatches(after)) == len(translation_mismatches(before)), po
        if new_ids and shutil.which("msgfmt"):
            check = subprocess.run(["msgfmt", "--check", "-o", "/dev/null", str(po)],
                                   capture_output=True, text=True)
            assert check.returncode == 0, check.stderr
    assert rewritten >= 12, f"only {rewritten} messages were rewritten: the check saw nothing"


# --------------------------------------------------------------------------- the parts
OLD = "an-owner/a-course"


@pytest.mark.parametrize("before, after", [
    ("https://github.com/an-owner/a-course", "https://github.com/Me/fork"),
    ("https://github.com/an-owner/a-course.git.", "https://github.com/Me/fork.git."),
    ("https://github.com/An-Owner/A-Course/blob/main/x", "https://github.com/Me/fork/blob/main/x"),
    ("colab.research.google.com/github/an-owner/a-course/blob",
     "colab.research.google.com/github/Me/fork/blob"),
    ("<https://an-owner.github.io/a-course/zh/>", "<https://me.github.io/fork/zh/>"),
    ("(https://an-owner.github.io/a-course)", "(https://me.github.io/fork)"),
    ("fork an-owner/a-course.", "fork Me/fork."),
    ("git clone https://github.com/an-owner/a-course\ncd a-course\n",
     "git clone https://github.com/Me/fork\ncd fork\n"),
    # other repositories are left alone
    ("https://github.com/an-owner/a-course-2", "https://github.com/an-owner/a-course-2"),
    ("https://github.com/xan-owner/a-course", "https://github.com/xan-owner/a-course"),
    ("https://an-owner.github.io/a-course-2/", "https://an-owner.github.io/a-course-2/"),
    ("cd a-course", "cd a-course"),
])
def test_rewrite_text(before, after):
    assert sr.rewrite_text(before, OLD, "Me/fork") == after


def test_rewrite_text_to_and_from_a_user_site():
    assert sr.rewrite_text("<https://an-owner.github.io/a-course/>", OLD, "me/me.github.io") \
        == "<https://me.github.io/>"
    assert sr.rewrite_text("<https://me.github.io/> and https://me.github.io/other/",
                           "me/me.github.io", "a/b") == "<https://a.github.io/b/> and " \
        "https://me.github.io/other/"


CATALOGUE = '''\
msgid ""
msgstr ""
"Content-Type: text/plain; charset=utf-8\\n"

msgid "Untouched, and not wrapped as Babel would wrap it: a long line of text that goes on"
msgstr "原样"

msgid ""
"[open in Colab](https://colab.research.google.com/github/an-"
"owner/a-course/blob/main/student/01_attention.ipynb)"
msgstr ""
"[在 Colab 中打开](https://colab.research.google.com/github/an-owner"
"/a-course/blob/main/student/01_attention.ipynb)"
'''


def test_catalogue_fields_are_rewritten_and_rewrapped_the_rest_kept():
    pytest.importorskip("babel")
    out = sr.rewrite_catalogue_text(CATALOGUE, lambda s: sr.rewrite_text(s, OLD, "Me/fork"))
    assert out.split("\n\n")[:2] == CATALOGUE.split("\n\n")[:2]
    assert "an-owner" not in out
    import io

    from babel.messages.pofile import read_po

    (message,) = [m for m in read_po(io.StringIO(out)) if m.id.startswith("[open")]
    assert message.id == ("[open in Colab](https://colab.research.google.com/github/Me/fork/"
                          "blob/main/student/01_attention.ipynb)")
    assert message.string.startswith("[在 Colab 中打开](https://colab.research.google.com/"
                                     "github/Me/fork/blob/")
    assert sr.rewrite_catalogue_text(out, lambda s: s) == out


def test_a_half_done_fork_is_finished(tmp_path, monkeypatch):
    """An earlier version of the tool rewrote the config and the notebooks, not the student
    edition, nor the rest: the student copies' Colab cell still names the old repository,
    which is how the tool knows what else to rewrite."""
    pytest.importorskip("nbgrader")
    import nbformat

    from tools import make_student_edition as se

    new = "https://github.com/Me/fork"
    cfg = tmp_path / "_config.yml"
    cfg.write_text(f"repository:\n  url: {new}\n  branch: main\n")
    (tmp_path / "notebooks").mkdir()
    for url in (f"https://github.com/{OLD}", new):  # the student copy made before the fork
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 1. X"),
                                             nbformat.v4.new_code_cell(colab_cell(url))])
        nbformat.write(nb, tmp_path / "notebooks" / "01_x.ipynb")
        if url != new:
            se.write(tmp_path / "notebooks", tmp_path / "student", url, "main")
    readme = tmp_path / "README.md"
    readme.write_text(f"See https://github.com/{OLD} and https://an-owner.github.io/a-course/\n")
    monkeypatch.setattr(sr, "CONFIG", cfg)
    monkeypatch.setattr(sr, "ROOT", tmp_path)

    assert sr.colab_repositories(tmp_path / "student") == {f"https://github.com/{OLD}"}
    assert sr.main(["--check"]) == 1
    assert sr.main([]) == 0
    assert readme.read_text() == f"See {new} and https://me.github.io/fork/\n"
    assert se.check(tmp_path / "notebooks", tmp_path / "student", new, "main") == []
    assert sr.main(["--check"]) == 0
    readme.write_text("https://github.com/someone/else\n")  # named by --old only
    assert sr.main(["--check"]) == 0
    assert sr.main(["--check", "--old", "https://github.com/someone/else"]) == 1


def test_a_copy_without_the_chapters_keeps_its_student_edition(tmp_path, monkeypatch):
    """The public copy for students (book/instructors.md: solutions kept private) has
    student/ but no chapters: the student copies are pointed at the new address, not
    regenerated from nothing, nor removed as left-overs."""
    import nbformat

    old, new = f"https://github.com/{OLD}", "https://github.com/Me/fork"
    cfg = tmp_path / "_config.yml"
    cfg.write_text(f"repository:\n  url: {old}\n  branch: main\n")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "README.md").write_text("open student/\n")
    (tmp_path / "student").mkdir()
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(f"# 1. X\n\n> The full chapter is [here]({old}/blob/main"
                                      "/notebooks/01_x.ipynb)."),
        nbformat.v4.new_code_cell(colab_cell(old)),
        nbformat.v4.new_code_cell("# Exercise 1: your solution here")])
    nbformat.write(nb, tmp_path / "student" / "01_x.ipynb")
    monkeypatch.setattr(sr, "CONFIG", cfg)
    monkeypatch.setattr(sr, "ROOT", tmp_path)

    assert sr.main([new, "--check"]) == 1
    assert sr.main([new]) == 0
    copy = nbformat.read(tmp_path / "student" / "01_x.ipynb", as_version=4)
    assert [c.source for c in copy.cells] == [
        f"# 1. X\n\n> The full chapter is [here]({new}/blob/main/notebooks/01_x.ipynb).",
        colab_cell(new), "# Exercise 1: your solution here"]
    assert sr.main(["--check"]) == 0
