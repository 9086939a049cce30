"""The first code cell of every chapter notebook, kept in this one place.

On Google Colab a notebook opened from GitHub arrives alone: no ``course_lib``, no data. The
cell below clones the repository next to it, installs it and points the course at its data.
Anywhere else (JupyterLab, papermill, nbval, CI) it does nothing at all.

The repository it clones is ``repository.url`` in ``_config.yml``, the one setting a fork
changes, with ``python tools/set_repository.py URL`` (which rewrites both).

    from tools.colab_cell import COLAB_CELL, colab_cell
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "_config.yml"

# A line every version of the cell contains, used to recognise it.
MARKER = "# Colab set-up"

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
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", course_home],
                       check=True)
    sys.path.insert(0, course_home)
    os.environ["COURSE_DATA_DIR"] = os.path.join(course_home, "data")
    os.chdir(os.path.join(course_home, "notebooks"))'''

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
    return TEMPLATE.format(url=check_url(url))


COLAB_CELL = colab_cell(repository_url()) if CONFIG.exists() else None
