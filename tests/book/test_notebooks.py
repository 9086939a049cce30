"""Checks of the committed chapter notebooks that need no kernel.

Executing the notebooks is nbval's job (``make test`` runs every notebook in the smoke
profile); these tests check what the book is built from: each notebook is committed
executed, without errors, with one ``parameters`` cell, the shared Colab first cell, and a
results card from a full run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools import colab_cell as cc  # noqa: E402
from tools.colab_cell import COLAB_CELL, MARKER, colab_cell, repository_url  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
RESULTS = ROOT / "book" / "results"
CARD_KEYS = {"notebook", "profile", "seed", "device", "torch", "wall_seconds", "params", "metrics"}


def _ids(paths):
    return [p.stem for p in paths]


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _code_cells(nb: dict) -> list[dict]:
    return [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]


# --------------------------------------------------------------------------- structure
@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_committed_executed(path):
    nb = _load(path)  # valid JSON, or this fails with the position of the error
    assert nb.get("nbformat") == 4, f"{path.name}: not an nbformat 4 notebook"
    cells = _code_cells(nb)
    assert cells, f"{path.name}: no code cells"
    unexecuted = [i for i, c in enumerate(cells)
                  if _source(c).strip() and c.get("execution_count") is None]
    assert not unexecuted, (f"{path.name}: code cells {unexecuted} (0-based among code cells) "
                            "were never executed; re-run it with `make full NB=...`")
    errors = [(i, o.get("ename"), o.get("evalue")) for i, c in enumerate(cells)
              for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{path.name}: error outputs in code cells {errors}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_has_one_parameters_cell(path):
    tagged = [c for c in _code_cells(_load(path))
              if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, (f"{path.name}: {len(tagged)} cells tagged 'parameters'; papermill "
                              "needs exactly one")
    assert "PROFILE" in _source(tagged[0]), f"{path.name}: the parameters cell sets no PROFILE"
    injected = [c for c in _code_cells(_load(path))
                if "injected-parameters" in c.get("metadata", {}).get("tags", [])]
    assert not injected, (f"{path.name}: has a papermill injected-parameters cell, which would "
                          "pin PROFILE and make the smoke tests run at full size; re-run it "
                          "with `make full NB=...` (the profile goes through COURSE_PROFILE)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_has_full_results_card(path):
    card_path = RESULTS / f"{path.stem}.json"
    assert card_path.is_file(), (f"no results card {card_path.relative_to(ROOT)}: a full run "
                                 f"(`make full NB={path.relative_to(ROOT)}`) writes it")
    card = _load(card_path)
    missing = CARD_KEYS - card.keys()
    assert not missing, f"{card_path.name}: missing keys {sorted(missing)}"
    assert card["notebook"] == path.stem, f"{card_path.name}: notebook is {card['notebook']!r}"
    assert card["profile"] == "full", f"{card_path.name}: profile is {card['profile']!r}, not full"
    assert isinstance(card["params"], dict) and isinstance(card["metrics"], dict)
    assert card["metrics"], f"{card_path.name}: no metrics"
    assert isinstance(card["wall_seconds"], (int, float)) and card["wall_seconds"] > 0


def _printed_card(nb: dict) -> list[str] | None:
    """The rows of the card table shown by the cell that calls ``results.write_card``."""
    for cell in _code_cells(nb):
        if "results.write_card(" not in _source(cell):
            continue
        for out in cell.get("outputs", []):
            text = out.get("data", {}).get("text/plain")
            if out.get("output_type") == "execute_result" and text:
                lines = ("".join(text) if isinstance(text, list) else text).splitlines()
                return [line.rstrip() for line in lines[2:] if line.strip()]  # skip the header
    return None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_committed_card_equals_the_card_printed_in_the_notebook(path):
    """A re-run that rewrote the notebook but not the card (or the reverse) is caught here."""
    from course_lib.results import card_table

    rows = _printed_card(_load(path))
    assert rows is not None, f"{path.name}: no executed cell shows the results card table"
    committed = card_table(_load(RESULTS / f"{path.stem}.json"))["value"].to_dict()
    stale = f"; re-run {path.name} in the full profile"
    # pandas cuts a long table to its first and last rows, with a '[N rows x 1 columns]'
    # footer; results.card_table prints every row, so a cut card is from an older run
    assert not re.fullmatch(r"\[\d+ rows x \d+ columns\]", rows[-1]), (
        f"{path.name}: the notebook shows a cut card (pandas hid its middle rows){stale}")
    assert len(rows) == len(committed), (f"{path.name}: the notebook prints {len(rows)} card rows, "
                                         f"book/results/{path.stem}.json has {len(committed)}")
    for field, value in committed.items():
        shown = [r[len(field):].strip() for r in rows if r.startswith(field + " ")]
        assert shown, f"{path.name}: the printed card has no row {field!r}"
        ok = any(v == value or (v.endswith("...") and value.startswith(v[:-3])) for v in shown)
        assert ok, (f"{path.name}: {field} is {value} in book/results/{path.stem}.json but "
                    f"{shown[0]} in the notebook; re-run the notebook in the full profile")


def test_every_results_card_belongs_to_a_notebook():
    stems = {p.stem for p in NOTEBOOKS}
    orphans = [p.name for p in RESULTS.glob("*.json") if p.stem not in stems]
    assert not orphans, f"results cards without a notebook: {orphans}"


# --------------------------------------------------------------------------- Colab cell
@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_first_code_cell_is_the_colab_cell(path):
    cells = _code_cells(_load(path))
    first = _source(cells[0]).rstrip("\n") if cells else ""
    assert first == COLAB_CELL, (
        f"{path.name}: the first code cell is not the Colab set-up cell of tools/colab_cell.py; "
        "run `python tools/set_repository.py` to write it"
    )


def _run_cell(monkeypatch, tmp_path, colab: bool, gpu: str | None = None) -> list[list[str]]:
    """Execute COLAB_CELL in a fresh namespace (on Colab: with the GPU named ``gpu``, or
    none); return the commands it would have run."""
    calls: list[list[str]] = []

    def fake_run(cmd, *args, **kwargs):
        if not colab:
            raise AssertionError(f"the Colab cell ran {cmd!r} outside Colab")
        calls.append(list(cmd))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    # setenv first so that monkeypatch restores the variable's absence afterwards: the cell
    # sets COURSE_DATA_DIR, and a leak would point every later test at /content.
    monkeypatch.setenv("COURSE_DATA_DIR", "unset-by-the-test")
    monkeypatch.delenv("COURSE_DATA_DIR")
    monkeypatch.setattr(sys, "path", list(sys.path))
    if colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    with monkeypatch.context() as m:
        if colab:  # Colab's /content does not exist here: pretend, and record the chdir
            m.setattr("os.path.isdir", lambda p: False)
            m.setattr("os.chdir", lambda p: calls.append(["chdir", p]))
            m.setattr("torch.cuda.is_available", lambda: gpu is not None)
            m.setattr("torch.cuda.get_device_name", lambda i=0: gpu)
        exec(compile(COLAB_CELL, "<colab cell>", "exec"), {"__name__": "__main__"})
    return calls


def test_colab_cell_does_nothing_outside_colab(monkeypatch, tmp_path):
    import os

    before = (os.getcwd(), list(sys.path))
    assert _run_cell(monkeypatch, tmp_path, colab=False) == []
    assert (os.getcwd(), list(sys.path)) == before
    assert "COURSE_DATA_DIR" not in os.environ


def test_colab_cell_clones_the_configured_repository(monkeypatch, tmp_path):
    import os

    url = repository_url()
    calls = _run_cell(monkeypatch, tmp_path, colab=True)
    clones = [c for c in calls if c[:2] == ["git", "clone"]]
    assert len(clones) == 1, calls
    assert clones[0][-2] == url, f"clones {clones[0][-2]!r}, _config.yml says {url!r}"
    home = clones[0][-1]
    assert home == "/content/" + url.rstrip("/").split("/")[-1]
    installs = [c for c in calls if "pip" in c]
    assert installs and installs[0][-2:] == ["-e", home], calls
    assert os.environ["COURSE_DATA_DIR"] == f"{home}/data"
    assert ["chdir", f"{home}/notebooks"] in calls
    assert sys.path[0] == home


def test_colab_cell_installs_as_make_test_colab_does(monkeypatch, tmp_path):
    """The pip command in the cell is tools/colab_cell.py's PIP_INSTALL, the one `make
    test-colab` runs (``--install``) and checks against Colab's versions."""
    calls = _run_cell(monkeypatch, tmp_path, colab=True)
    home = "/content/" + repository_url().rstrip("/").split("/")[-1]
    assert [sys.executable, "-m", *cc.PIP_INSTALL, home] in calls, calls
    assert "--no-deps" not in cc.PIP_INSTALL and "-U" not in cc.PIP_INSTALL
    assert "--upgrade" not in cc.PIP_INSTALL


def test_colab_cell_names_the_device_and_how_to_ask_for_a_gpu(monkeypatch, tmp_path, capsys):
    import torch

    _run_cell(monkeypatch, tmp_path, colab=True)
    cpu = capsys.readouterr().out
    assert f"PyTorch {torch.__version__} on the CPU" in cpu
    assert "Runtime > Change runtime type > GPU, then Runtime > Run all" in cpu
    _run_cell(monkeypatch, tmp_path, colab=True, gpu="Tesla T4")
    gpu = capsys.readouterr().out
    assert gpu.strip() == f"PyTorch {torch.__version__} on the GPU: Tesla T4"
    _run_cell(monkeypatch, tmp_path, colab=False)
    assert capsys.readouterr().out == "", "outside Colab the cell prints nothing"


def test_colab_install_check_finds_a_replaced_version(tmp_path, monkeypatch, capsys):
    """`python tools/colab_cell.py --install DIR`: the cell's pip command, then every pin of
    requirements-colab.txt must still be what is installed (a +cpu or +cu126 build of the
    pinned version counts as it)."""
    import pytest as installed_pytest
    import torch

    base = torch.__version__.split("+")[0]
    assert cc.replaced({"pytest": installed_pytest.__version__, "torch": base}) == []
    assert cc.replaced({"pytest": "0.0.1"}) == [f"pytest: 0.0.1 -> {installed_pytest.__version__}"]
    assert cc.replaced({"no-such-package-here": "1.0"}) == [
        "no-such-package-here: 1.0 -> not installed"]
    pins = tmp_path / "requirements-colab.txt"
    pins.write_text(f"# Colab\ntorch=={base}  # a comment\n\npytest==0.0.1\n", encoding="utf-8")
    assert cc.pinned(pins) == {"torch": base, "pytest": "0.0.1"}
    assert set(cc.pinned(ROOT / "requirements-colab.txt")) >= {"torch", "scikit-learn", "numpy"}
    ran = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: ran.append(cmd))
    assert cc.main(["--install", "/somewhere/course", "--pins", str(pins)]) == 1
    assert ran == [[sys.executable, "-m", *cc.PIP_INSTALL, "/somewhere/course"]]
    assert "replaced pytest: 0.0.1 ->" in capsys.readouterr().out
    pins.write_text(f"torch=={base}\n", encoding="utf-8")
    assert cc.main(["--install", "/somewhere/course", "--pins", str(pins)]) == 0


def test_colab_cell_follows_the_config(tmp_path):
    cfg = tmp_path / "_config.yml"
    cfg.write_text("title: x\nrepository:\n"
                   "  url: https://github.com/someone/fork\n  branch: main\n")
    url = repository_url(cfg)
    assert url == "https://github.com/someone/fork"
    assert f'COURSE_REPOSITORY = "{url}"' in colab_cell(url)
    assert MARKER in COLAB_CELL
    with pytest.raises(ValueError, match="github.com"):
        colab_cell("https://gitlab.com/someone/fork")


def test_set_repository_rewrites_config_and_notebooks(tmp_path, monkeypatch):
    import nbformat

    from tools import set_repository

    cfg = tmp_path / "_config.yml"
    cfg.write_text("title: x  # keep me\nrepository:\n  url: https://github.com/a/b  # here\n"
                   "  branch: main\nlaunch_buttons:\n  colab_url: https://colab.research.google.com\n")
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    old = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# T"),
                                          nbformat.v4.new_code_cell(colab_cell("https://github.com/a/b")),
                                          nbformat.v4.new_code_cell("x = 1")])
    bare = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("y = 2")])
    nbformat.write(old, nbdir / "01_x.ipynb")
    nbformat.write(bare, nbdir / "02_y.ipynb")
    readme = tmp_path / "README.md"
    readme.write_text("https://colab.research.google.com/github/a/b/blob/main/notebooks/01_x.ipynb\n")
    monkeypatch.setattr(set_repository, "CONFIG", cfg)
    monkeypatch.setattr(set_repository, "ROOT", tmp_path)
    real_config = (ROOT / "_config.yml").read_bytes()

    assert set_repository.main(["https://github.com/me/fork", "--check"]) == 1
    assert set_repository.main(["https://github.com/me/fork"]) == 0
    text = cfg.read_text()
    assert "url: https://github.com/me/fork  # here" in text and "# keep me" in text
    assert repository_url(cfg) == "https://github.com/me/fork"
    for name in ("01_x.ipynb", "02_y.ipynb"):
        nb = nbformat.read(nbdir / name, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code[0].source == colab_cell("https://github.com/me/fork"), name
    assert len(nbformat.read(nbdir / "01_x.ipynb", as_version=4).cells) == 3
    assert "github/me/fork/blob" in readme.read_text()
    assert set_repository.main(["--check"]) == 0
    assert (ROOT / "_config.yml").read_bytes() == real_config, "the real _config.yml was touched"


def test_colab_cell_test_leaves_the_environment_alone():
    """Runs after the Colab tests in the same process: nothing of theirs may leak."""
    import os

    assert not os.environ.get("COURSE_DATA_DIR", "").startswith("/content")
