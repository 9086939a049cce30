"""scripts/search_05_time_series.py: the committed table is the script's, and the script runs.

The chapter trains the winners of a search it does not run itself; these tests are what
ties the committed table to the code that claims to have written it.
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "search_05_time_series.py"
RESULTS = ROOT / "book" / "results" / "search"
FAMILIES = ["Transformer (learned PE)", "Transformer (ALiBi)", "LSTM"]


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read(folder):
    meta = json.loads((folder / "search_05_time_series.json").read_text())
    return meta, pd.read_csv(folder / meta["table"])


def check_table(meta, table):
    """What every table of this script must hold, whatever its size."""
    n = meta["sizes"]["search_configs"]
    assert list(table.model.unique()) == FAMILIES
    assert table.groupby("model").size().tolist() == [n] * 3  # equal budgets
    assert (table.epochs_run <= meta["sizes"]["search_epochs"]).all()
    # the same draws for every model: learning rate, depth, dropout (widths are per model)
    draws = [table[table.model == m][["lr", "layers", "dropout"]].to_numpy() for m in FAMILIES]
    assert all(np.array_equal(d, draws[0]) for d in draws)
    assert (table.seed == meta["training_seed"]).all()
    assert (table.sampler_seed == meta["sampler_seed"]).all()
    assert np.isfinite(table.val_mae).all() and (table.val_mae > 0).all()
    assert meta["table_sha256"] == sha256(Path(meta["_folder"]) / meta["table"])
    assert {e["model"] for e in meta["edges"]} == set(FAMILIES)


def test_the_committed_table_was_written_by_the_committed_script():
    meta, table = read(RESULTS)
    assert meta["script_sha256"] == sha256(SCRIPT), (
        "scripts/search_05_time_series.py changed after it wrote book/results/search/"
        "search_05_time_series.*: rerun it (python scripts/search_05_time_series.py, about "
        "10 minutes) and rerun the chapter, or undo the change")
    assert meta["profile"] == "full"
    check_table({**meta, "_folder": str(RESULTS)}, table)


def test_the_script_runs_at_smoke_size(tmp_path):
    env = {**os.environ, "COURSE_THREADS": "1", "COURSE_PROGRESS": "off"}
    run = subprocess.run([sys.executable, str(SCRIPT), "--profile", "smoke", "--out",
                          str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    meta, table = read(tmp_path)
    assert meta["profile"] == "smoke" and meta["script_sha256"] == sha256(SCRIPT)
    check_table({**meta, "_folder": str(tmp_path)}, table)


def test_a_smoke_run_writes_nowhere_in_the_repository():
    run = subprocess.run([sys.executable, str(SCRIPT), "--profile", "smoke"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "--out" in run.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
