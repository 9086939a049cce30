"""scripts/finetune_search.py: the committed table is the one this script wrote, every
winner is its group's best validation loss, and the script runs end to end at smoke size."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from course_lib import finetune

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "finetune_search.py"
META = ROOT / "book" / "results" / "search" / "finetune_12.json"


def sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _check(meta, table, budgets):
    assert set(table["arm"]) == set(finetune.ARMS) == set(meta["winners"])
    for arm, by_budget in meta["winners"].items():
        assert sorted(int(b) for b in by_budget) == sorted(budgets)
        for b, winner in by_budget.items():
            rows = table[(table["arm"] == arm) & (table["budget"] == int(b))]
            assert len(rows) >= 3, f"{arm}, {b}: fewer rates than the grid"
            best = rows.loc[rows["val_loss"].idxmin()]
            # rel=1e-12: the oldest pandas reads a CSV float one ulp away from json's
            assert math.isclose(best["lr"], winner["lr"], rel_tol=1e-12), (
                f"{arm}, {b}: the winner is not the best row")
            inside = rows["lr"].min() < winner["lr"] < rows["lr"].max()
            assert winner["bracketed"] == inside
    assert (table["draw"] == 0).all(), "the search tunes on draw 0, which the chapter never reports"


def test_committed_search_is_this_scripts():
    meta = json.loads(META.read_text())
    table = pd.read_csv(META.with_suffix(".csv"))
    assert meta["script_sha256"] == sha(SCRIPT), "the table is from another version of the script"
    assert meta["table_sha256"] == sha(META.with_suffix(".csv")), "the table was edited by hand"
    assert meta["profile"] == "full" and meta["sizes"]["fit"] == finetune.SIZES["full"]["fit"]
    _check(meta, table, finetune.SIZES["full"]["budgets"])


def test_script_runs_at_smoke_size(tmp_path):
    env = {**os.environ, "COURSE_PROGRESS": "off", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(SCRIPT), "--profile", "smoke", "--out",
                           str(tmp_path)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    meta = json.loads((tmp_path / META.name).read_text())
    _check(meta, pd.read_csv(tmp_path / META.with_suffix(".csv").name),
           finetune.SIZES["smoke"]["budgets"])


def test_script_refuses_to_write_smoke_results_into_the_repository():
    done = subprocess.run([sys.executable, str(SCRIPT), "--profile", "smoke"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
