"""Point the course at another GitHub repository: ``python tools/set_repository.py URL``.

The repository URL is one setting, ``repository.url`` in ``_config.yml``. It is also written
into places that cannot read that file at run time, and this script rewrites them all, so
that a fork's CI stays green:

- ``_config.yml``: ``repository.url`` (the book's repository, Colab and Binder buttons);
- every ``notebooks/*.ipynb``: the first code cell, the Colab set-up cell that clones the
  repository (a notebook without it gets it inserted as its first code cell), and links to
  the old repository in markdown cells;
- the student edition, ``student/*.ipynb``, regenerated from the notebooks as ``make
  student`` does (its Colab cell and its note link the repository);
- the Chinese catalogues, ``locales/*/LC_MESSAGES/**/*.po``: the ``msgid`` *and* the
  ``msgstr`` of every message that links the old repository, so that each catalogue still
  matches the rewritten English pages (tests/book/test_translations.py); a rewritten field is
  wrapped as Babel (``make po``) writes it, every other line stays as it is;
- every other text file of the repository (``README.md``, ``book/**/*.md``,
  ``CITATION.cff``, ``CONTRIBUTING.md``, ``.github/``, ...; not ``data/``, which holds the
  datasets' own documents, nor build outputs): links and mentions of the old repository
  (``github.com/OWNER/REPO``, Colab's ``.../github/OWNER/REPO``, ``OWNER/REPO`` on its own),
  its book on GitHub Pages (``https://owner.github.io/REPO/``), and the ``cd REPO`` that
  follows a ``git clone`` of it.

The old repository is the one in ``_config.yml``, and also any other that a notebook's or a
student copy's Colab cell still names (left by an earlier, partial run), or that ``--old``
names. Outputs and every other cell are left as they are. ``--check`` changes nothing and
exits 1 if some file does not match the URL (without a URL: the one in ``_config.yml``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.colab_cell import CONFIG, MARKER, ROOT, check_url, colab_cell, repository_url  # noqa: E402

# Folders the text pass leaves alone: handled on their own (notebooks, student edition,
# catalogues), third-party files (the datasets and their documents, the local MathJax), and
# what is built or installed, never committed.
OWN_PASS = ("notebooks", "student", "locales")
NOT_OURS = ("data", "book/_vendor")
BUILT = {".git", ".venv", "_build", "node_modules", "artifacts", "assignments", "ci-output",
         "tmp", "__pycache__", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints"}
TEXT_LIMIT = 2_000_000  # bytes; a larger file is data, not a page
PO_WIDTH = 76  # sphinx-intl's line width (make po), which Babel wraps the catalogues to
_COLAB_REPOSITORY = re.compile(r'^COURSE_REPOSITORY = "([^"]+)"', re.M)


def _owner_repo(url: str) -> str:
    return url.rstrip("/").removesuffix(".git").split("github.com/", 1)[1]


def set_config_url(url: str, config: Path | None = None) -> bool:
    """Rewrite ``repository.url`` in ``_config.yml`` in place, keeping comments and layout."""
    config = CONFIG if config is None else config
    text = config.read_text(encoding="utf-8")
    pattern = re.compile(
        r"(^repository:[ \t]*\n(?:[ \t]+.*\n|[ \t]*\n)*?[ \t]+url[ \t]*:[ \t]*)(\S+)", re.M)
    if not pattern.search(text):
        raise SystemExit(f"{config}: no 'url:' under 'repository:'")
    new = pattern.sub(lambda m: m.group(1) + url, text, count=1)
    if new != text:
        config.write_text(new, encoding="utf-8")
    return new != text


def pages_url(owner_repo: str) -> str:
    """Where GitHub Pages publishes the book of ``OWNER/REPO``: ``https://owner.github.io/REPO/``
    (a repository named ``OWNER.github.io`` is published at the root of that host)."""
    owner, repo = owner_repo.split("/")
    host = f"{owner.lower()}.github.io"
    return f"https://{host}/" if repo.lower() == host else f"https://{host}/{repo}/"


# ------------------------------------------------------------------------- text
def rewrite_text(text: str, old: str, new: str) -> str:
    """``text`` with the repository ``old`` (``OWNER/REPO``) replaced by ``new``: its GitHub
    Pages address, ``OWNER/REPO`` wherever it stands on its own (GitHub and Colab links
    included; GitHub's names are case-insensitive, and so is this), and the folder name in
    a ``cd REPO`` right after a ``git clone`` of it."""
    if old == new:
        return text
    old_repo, new_repo = old.split("/")[1], new.split("/")[1]
    name = re.escape(old)
    if old_repo != new_repo:
        text = re.sub(
            rf"(git clone [^\n]*github\.com/{name}(?:\.git)?/?[ \t]*\r?\n[ \t]*(?:\$ )?cd[ \t]+)"
            rf"{re.escape(old_repo)}(?![\w.-])",
            lambda m: m.group(1) + new_repo, text, flags=re.IGNORECASE)
    old_pages = pages_url(old).rstrip("/")
    if old_pages.count("/") == 2:  # a user site, published at the root of its host
        pattern = rf"{re.escape(old_pages)}(?=/?(?:[\s)>\]\"'`]|$))"
    else:
        pattern = rf"{re.escape(old_pages)}(?![\w.-])"
    text = re.sub(pattern.replace("https", "https?", 1), lambda m: pages_url(new).rstrip("/"),
                  text, flags=re.IGNORECASE)
    # OWNER/REPO not inside a longer name: may be followed by ".git" or a full stop
    return re.sub(rf"(?<![\w.-]){name}(?![\w-])(?!\.(?!git\b)\w)", lambda m: new, text,
                  flags=re.IGNORECASE)


def rewrite_all(text: str, olds, new: str) -> str:
    for old in olds:
        text = rewrite_text(text, old, new)
    return text


def replace_links(path: Path, old, new: str, check: bool = False) -> bool:
    """Rewrite the links to the repository ``old`` (``OWNER/REPO``, or several) into links
    to ``new`` in the text file ``path`` (see ``rewrite_text``); True if it changed."""
    olds = [old] if isinstance(old, str) else list(old)
    text = _read(path)
    updated = rewrite_all(text, olds, new)
    if updated != text and not check:
        _write(path, updated)
    return updated != text


def _read(path: Path) -> str:
    with open(path, encoding="utf-8", newline="") as handle:  # line endings as they are
        return handle.read()


def _write(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)


def _is_text(path: Path) -> bool:
    try:
        if path.stat().st_size > TEXT_LIMIT:
            return False
        data = path.read_bytes()
    except OSError:
        return False
    if b"\0" in data[:8192]:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _skipped(relative: str) -> bool:
    parts = relative.split("/")
    if any(p in BUILT or p.endswith(".egg-info") for p in parts[:-1]):
        return True
    if any(p.startswith(".") and p not in (".github", ".ci") for p in parts[:-1]):
        return True
    return any(relative == d or relative.startswith(d + "/") for d in OWN_PASS + NOT_OURS)


def text_files(root: Path | None = None) -> list[Path]:
    """The repository's text files for the text pass: what git tracks or would track (when
    ``root`` is a git checkout), else every file, less the folders named above, notebooks
    and catalogues."""
    root = ROOT if root is None else root
    names = None
    if (root / ".git").exists():
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached",
                                 "--others", "--exclude-standard"],
                                capture_output=True, text=True)
        if listed.returncode == 0:
            names = sorted({n for n in listed.stdout.split("\0") if n})
    if names is None:
        names = []
        for folder, dirs, files in os.walk(root):
            rel = Path(folder).relative_to(root).as_posix()
            dirs[:] = sorted(d for d in dirs
                             if not _skipped(f"{rel}/{d}/x".removeprefix("./")))
            names += [f"{rel}/{f}".removeprefix("./") for f in files]
        names.sort()
    return [root / n for n in names
            if not _skipped(n) and not n.endswith((".ipynb", ".po", ".pot", ".mo"))
            and (root / n).is_file() and _is_text(root / n)]


# ------------------------------------------------------------------------- notebooks
def set_notebook_cell(path: Path, url: str, check: bool = False) -> str:
    """Make the first code cell of ``path`` the Colab cell for ``url``; say what was done."""
    return update_notebook(path, url, (), check)[0]


def update_notebook(path: Path, url: str, olds=(), check: bool = False) -> tuple[str, int]:
    """The Colab cell of ``path`` for ``url`` and links to ``olds`` in its markdown cells
    rewritten: (what happened to the first code cell, how many markdown cells changed)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    new = _owner_repo(url)
    markdown = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            source = rewrite_all(cell.source, olds, new)
            if source != cell.source:
                markdown += 1
                cell.source = source
    source = colab_cell(url)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if code and MARKER in nb.cells[code[0]].source:
        cell = nb.cells[code[0]]
        what = "ok" if cell.source == source else "updated"
        cell.source = source
    else:
        what = "inserted"
        cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["remove-cell"]})
        nb.cells.insert(code[0] if code else 0, cell)
    if not check and (what != "ok" or markdown):
        nbformat.write(nb, path)
    return what, markdown


def colab_repositories(folder: Path) -> set[str]:
    """The repositories (URLs) that the Colab cells of the notebooks in ``folder`` clone."""
    import nbformat

    found = set()
    for path in sorted(folder.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code" and MARKER in cell.source:
                found.update(_COLAB_REPOSITORY.findall(cell.source))
                break
    return found


def sync_student_edition(url: str, olds=(), check: bool = False) -> list[str]:
    """Regenerate ``student/`` from ``notebooks/`` for ``url`` (``make student``); with
    ``check``, only list what is stale. Without the chapters (a copy for students, whose
    solutions are kept elsewhere: book/instructors.md), the student copies are updated as
    the chapters are (Colab cell, links), never regenerated, nor removed."""
    from tools import make_student_edition as se

    student = ROOT / "student"
    if not student.is_dir():
        return []
    notebooks = ROOT / "notebooks"
    if not se.chapter_notebooks(notebooks):
        changed = []
        for path in se.chapter_notebooks(student):
            what, markdown = update_notebook(path, url, olds, check)
            if what != "ok" or markdown:
                changed.append(f"student/{path.name}: Colab cell and links")
        return changed
    branch = se.repository_branch(CONFIG)
    changed = (se.check if check else se.write)(notebooks, student, url, branch)
    return [f"student/{line}" for line in changed]


# ------------------------------------------------------------------------- catalogues
_PO_FIELD = re.compile(
    r'^(?P<prefix>#~ |#\| |#~\| )?(?P<keyword>msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)'
    r' (?P<string>".*")[ \t]*\r?\n?$')


def rewrite_catalogue_text(text: str, change) -> str:
    """A gettext catalogue with ``change(str) -> str`` applied to every string of it (msgid,
    msgstr, msgctxt, plural forms, and the previous/obsolete ones); a field that changes is
    written again as Babel writes it (``make po``), every other line stays byte for byte."""
    from babel.messages.pofile import normalize, unescape

    lines = text.splitlines(keepends=True)
    out, i = [], 0
    while i < len(lines):
        match = _PO_FIELD.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        prefix = match["prefix"] or ""
        parts, j = [match["string"]], i + 1
        while j < len(lines) and lines[j].startswith(prefix + '"'):
            parts.append(lines[j][len(prefix):].rstrip("\r\n").rstrip())
            j += 1
        value = "".join(unescape(part) for part in parts)
        updated = change(value)
        if updated == value:
            out.extend(lines[i:j])
        else:
            newline = "\r\n" if lines[i].endswith("\r\n") else "\n"
            wrapped = normalize(updated, prefix=prefix, width=PO_WIDTH)
            out.append(f"{prefix}{match['keyword']} {wrapped}\n".replace("\n", newline))
        i = j
    return "".join(out)


def catalogues(root: Path | None = None) -> list[Path]:
    root = ROOT if root is None else root
    return sorted((root / "locales").glob("*/LC_MESSAGES/**/*.po"))


def replace_in_catalogue(path: Path, olds, new: str, check: bool = False) -> bool:
    """Rewrite links to ``olds`` in every msgid and msgstr of the catalogue ``path``."""
    text = _read(path)
    updated = rewrite_catalogue_text(text, lambda s: rewrite_all(s, olds, new))
    if updated != text and not check:
        _write(path, updated)
    return updated != text


# ------------------------------------------------------------------------- all of it
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", help="https://github.com/OWNER/REPO "
                        "(default: the one already in _config.yml)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on a mismatch")
    parser.add_argument("--old", action="append", default=[], metavar="URL",
                        help="another repository whose links to rewrite (the one in "
                        "_config.yml and those the Colab cells name are found by themselves)")
    args = parser.parse_args(argv)

    configured = repository_url(CONFIG)
    url = check_url(args.url.rstrip("/")) if args.url else configured
    new = _owner_repo(url)
    previous = {configured, *map(check_url, args.old)}
    for folder in ("notebooks", "student"):
        if (ROOT / folder).is_dir():
            previous |= colab_repositories(ROOT / folder)
    olds = sorted({_owner_repo(u) for u in previous} - {new})

    stale, status = [], 0
    if url != configured:
        stale.append("_config.yml")
        if not args.check:
            set_config_url(url)
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        what, markdown = update_notebook(nb, url, olds, check=args.check)
        details = ([f"first cell {what}"] if what != "ok" else []) + (
            [f"{markdown} markdown cell(s)"] if markdown else [])
        if details:
            stale.append(f"{nb.relative_to(ROOT)} ({', '.join(details)})")
    try:
        stale += sync_student_edition(url, olds, check=args.check)
    except ValueError as err:  # make_student_edition.ConventionError: a notebook breaks it
        print(f"error: the student edition cannot be made:\n{err}", file=sys.stderr)
        status = 2
    if olds:
        for path in text_files():
            if replace_links(path, olds, new, check=args.check):
                stale.append(str(path.relative_to(ROOT)))
        for path in catalogues():
            if replace_in_catalogue(path, olds, new, check=args.check):
                stale.append(str(path.relative_to(ROOT)))
    verb = "would change" if args.check else "changed"
    for item in stale:
        print(f"{verb}: {item}")
    if not stale:
        print(f"everything already points at {url}")
    if status:
        return status
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
