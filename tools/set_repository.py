"""Point the course at another GitHub repository: ``python tools/set_repository.py URL``.

The repository URL is one setting, ``repository.url`` in ``_config.yml``. It is also written
into places that cannot read that file at run time, and this script rewrites them all:

- ``_config.yml``: ``repository.url`` (the book's repository, Colab and Binder buttons);
- the first code cell of every ``notebooks/*.ipynb`` (the Colab set-up cell, which clones the
  repository; a notebook without it gets it inserted as its first code cell);
- links to the old repository in ``README.md`` and ``book/*.md`` (Colab badges, the CI badge
  and the like), and to its book on GitHub Pages (``https://OWNER.github.io/REPO/``).

Outputs and every other cell are left as they are. ``--check`` changes nothing and exits 1 if
some file does not match the URL in ``_config.yml``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.colab_cell import CONFIG, MARKER, ROOT, check_url, colab_cell, repository_url  # noqa: E402


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


def set_notebook_cell(path: Path, url: str, check: bool = False) -> str:
    """Make the first code cell of ``path`` the Colab cell for ``url``; say what was done."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    source = colab_cell(url)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if code and MARKER in nb.cells[code[0]].source:
        cell = nb.cells[code[0]]
        if cell.source == source:
            return "ok"
        if not check:
            cell.source = source
            nbformat.write(nb, path)
        return "updated"
    if not check:
        cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["remove-cell"]})
        nb.cells.insert(code[0] if code else 0, cell)
        nbformat.write(nb, path)
    return "inserted"


def pages_url(owner_repo: str) -> str:
    """Where GitHub Pages publishes the book of ``OWNER/REPO``: ``https://owner.github.io/REPO/``
    (a repository named ``OWNER.github.io`` is published at the root of that host)."""
    owner, repo = owner_repo.split("/")
    host = f"{owner.lower()}.github.io"
    return f"https://{host}/" if repo.lower() == host else f"https://{host}/{repo}/"


def replace_links(path: Path, old: str, new: str, check: bool = False) -> bool:
    """Replace ``github.com/OLD`` with ``github.com/NEW`` (also in Colab links) and the book's
    GitHub Pages address of OLD with that of NEW, in a text file."""
    text = path.read_text(encoding="utf-8")
    updated = re.sub(rf"(github\.com/|colab\.research\.google\.com/github/){re.escape(old)}\b",
                     lambda m: m.group(1) + new, text)
    updated = re.sub(re.escape(pages_url(old)), lambda m: pages_url(new), updated,
                     flags=re.IGNORECASE)
    if updated != text and not check:
        path.write_text(updated, encoding="utf-8")
    return updated != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", help="https://github.com/OWNER/REPO "
                        "(default: the one already in _config.yml)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on a mismatch")
    args = parser.parse_args(argv)

    old = repository_url(CONFIG)
    url = check_url(args.url.rstrip("/")) if args.url else old
    stale = []
    if url != old:
        stale.append("_config.yml")
        if not args.check:
            set_config_url(url)
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        what = set_notebook_cell(nb, url, check=args.check)
        if what != "ok":
            stale.append(f"{nb.relative_to(ROOT)} (first cell {what})")
    texts = [ROOT / "README.md", *sorted((ROOT / "book").glob("*.md"))]
    for path in texts:
        if path.exists() and old != url and replace_links(path, _owner_repo(old),
                                                         _owner_repo(url), check=args.check):
            stale.append(str(path.relative_to(ROOT)))
    verb = "would change" if args.check else "changed"
    for item in stale:
        print(f"{verb}: {item}")
    if not stale:
        print(f"everything already points at {url}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
