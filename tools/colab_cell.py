"""The first code cell of every chapter notebook, kept in this one place.

On Google Colab a notebook opened from GitHub arrives alone: no ``course_lib``, no data. The
cell below clones the repository next to it, installs it and points the course at its data,
then says which device PyTorch has and, without a GPU, how to ask Colab for one. Anywhere
else (JupyterLab, papermill, nbval, CI) it does nothing at all.

The install is ``pip install -e`` of the clone, with its dependencies: every lower bound in
``pyproject.toml`` is at or below Colab's own version (requirements-colab.txt pins Colab's;
tests/test_minimum_versions.py checks it), so pip keeps Colab's PyTorch (a CUDA build) and
libraries and adds only the course and what Colab lacks (sacrebleu). ``--no-deps`` would
need the list of what Colab lacks written into every notebook, and would go stale silently.
``make test-colab`` installs Colab's versions, runs this same pip command
(``python tools/colab_cell.py --install .``) and fails if it replaced any of them.

The repository it clones is ``repository.url`` in ``_config.yml``, the one setting a fork
changes, with ``python tools/set_repository.py URL`` (which rewrites both); after a change to
the template below, ``python tools/set_repository.py`` (no URL) rewrites every notebook's
first cell, and ``make student`` the student copies.

    from tools.colab_cell import COLAB_CELL, colab_cell
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "_config.yml"

# A line every version of the cell contains, used to recognise it.
MARKER = "# Colab set-up"

# What the cell runs after `python -m` to install the clone (see the module docstring).
PIP_INSTALL = ("pip", "install", "-q", "-e")

TEMPLATE = '''\
# Colab set-up: on Google Colab this fetches the course and installs it; elsewhere it does nothing.
import os
import subprocess
import sys

COURSE_REPOSITORY = "{url}"
if "google.colab" in sys.modules:
    course_home = "/content/" + COURSE_REPOSITORY.rstrip("/").split("/")[-1].removesuffix(".git")
    if not os.path.isdir(course_home):
        subprocess.run(["git", "clone", "--depth", "1", COURSE_REPOSITORY, course_home], check=True)
        # keeps Colab's own PyTorch and libraries, adds the course and what Colab lacks
        subprocess.run([sys.executable, "-m", {pip}, course_home],
                       check=True)
    sys.path.insert(0, course_home)
    os.environ["COURSE_DATA_DIR"] = os.path.join(course_home, "data")
    os.chdir(os.path.join(course_home, "notebooks"))
    import torch

    if torch.cuda.is_available():
        print("PyTorch", torch.__version__, "on the GPU:", torch.cuda.get_device_name(0))
    else:
        print("PyTorch", torch.__version__, "on the CPU. For a GPU: Runtime > Change runtime",
              "type > GPU, then Runtime > Run all.")'''

_URL = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+?/?$")


def check_url(url: str) -> str:
    """Return ``url`` if it is a GitHub repository URL, else raise ``ValueError``."""
    if not _URL.match(url):
        raise ValueError(
            f"repository URL must look like https://github.com/OWNER/REPO, got {url!r} "
            "(Jupyter Book's launch buttons only work with GitHub)"
        )
    return url


def repository_url(config: Path = CONFIG) -> str:
    """``repository.url`` from ``_config.yml``."""
    import yaml

    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    return data["repository"]["url"]


def colab_cell(url: str) -> str:
    """The cell's source for a repository URL."""
    pip = ", ".join(f'"{word}"' for word in PIP_INSTALL)
    return TEMPLATE.format(url=check_url(url), pip=pip)


COLAB_CELL = colab_cell(repository_url()) if CONFIG.exists() else None


# --------------------------------------------------------------------------- make test-colab
def pinned(requirements: Path) -> dict[str, str]:
    """``{name: version}`` of the ``name==version`` lines of a requirements file."""
    found = {}
    for line in requirements.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = (part.strip() for part in line.split("==", 1))
            found[name] = version
    return found


def replaced(pins: dict[str, str]) -> list[str]:
    """The pins that the installed versions no longer match, as ``name: pinned -> installed``
    (a local build label such as ``+cpu`` or ``+cu126`` matches its version)."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    changes = []
    for name, pin in pins.items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            changes.append(f"{name}: {pin} -> not installed")
            continue
        if not SpecifierSet(f"=={pin}").contains(Version(installed), prereleases=True):
            changes.append(f"{name}: {pin} -> {installed}")
    return changes


def install(course_home: str | Path, pins: dict[str, str]) -> list[str]:
    """Install ``course_home`` into this Python exactly as the cell does on Colab; return the
    pins it replaced (``replaced``)."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", *PIP_INSTALL, str(course_home)], check=True)
    return replaced(pins)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        description="Print the Colab cell, or (--install) install the course as it does and "
                    "check that Colab's versions were kept.")
    parser.add_argument("--install", metavar="COURSE_HOME",
                        help="run the cell's pip command on this clone, in this Python")
    parser.add_argument("--pins", type=Path, default=ROOT / "requirements-colab.txt",
                        help="Colab's versions, which the install must keep "
                             "(default: requirements-colab.txt)")
    args = parser.parse_args(argv)
    if not args.install:
        print(COLAB_CELL)
        return 0
    changes = install(args.install, pinned(args.pins))
    for line in changes:
        print(f"error: the Colab cell's install replaced {line}")
    if changes:
        print(f"every dependency's bound in pyproject.toml must be at or below {args.pins.name}")
        return 1
    print(f"the Colab cell's install kept every version of {args.pins.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
