"""scripts/train_05_time_series.py runs, and what it writes holds together: equal search
budgets, the same draws for every model, final runs of the winners from new seeds, each
run's best epoch and whether it was the cap.

Its full run (about two hours on two CPU cores) has not been committed yet; when it is,
chapter 5 loads its models, and tests here tie the committed table and weights to the
script as tests/test_search_05_time_series.py does for today's search.
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
SCRIPT = ROOT / "scripts" / "train_05_time_series.py"
RESULTS = ROOT / "book" / "results" / "search"
FAMILIES = ["Transformer (learned PE)", "Transformer (ALiBi)", "LSTM"]


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read(folder):
    meta = json.loads((folder / "train_05_time_series.json").read_text())
    return meta, pd.read_csv(folder / meta["table"])


def check_table(meta, table):
    """What every table of this script must hold, whatever its size."""
    n = meta["sizes"]["search_configs"]
    assert list(table.model.unique()) == FAMILIES
    assert table.groupby("model").size().tolist() == [n] * 3  # equal budgets
    assert (table.epochs_run <= meta["sizes"]["max_epochs"]).all()
    assert (table.best_at_cap == (table.best_epoch == meta["sizes"]["max_epochs"])).all()
    # the same draws for every model: learning rate, depth, dropout (widths are per model)
    draws = [table[table.model == m][["lr", "layers", "dropout"]].to_numpy() for m in FAMILIES]
    assert all(np.array_equal(d, draws[0]) for d in draws)
    assert (table.seed == meta["training_seed"]).all()
    assert (table.sampler_seed == meta["sampler_seed"]).all()
    assert np.isfinite(table.val_mae).all() and (table.val_mae > 0).all()
    assert meta["table_sha256"] == sha256(Path(meta["_folder"]) / meta["table"])
    assert {e["model"] for e in meta["edges"]} == set(FAMILIES)
    # the final runs: each model's winner, from every final seed, none the search's seed
    finals = pd.DataFrame(meta["finals"])
    seeds = meta["sizes"]["final_seeds"]
    assert meta["training_seed"] not in seeds
    winners = table.loc[table.groupby("model").val_mae.idxmin()].set_index("model").config
    for m in FAMILIES:
        runs = finals[finals.model == m]
        assert runs.seed.tolist() == seeds and (runs.config == winners[m]).all()
    for run in meta["finals"]:
        assert len(run["history"]["epoch"]) == run["epochs_run"] <= meta["sizes"]["max_epochs"]
        best = int(np.argmin(run["history"]["val_loss"]))
        assert run["best_epoch"] == run["history"]["epoch"][best]
        assert run["best_at_cap"] == (run["best_epoch"] == meta["sizes"]["max_epochs"])


def test_the_script_runs_at_smoke_size(tmp_path):
    env = {**os.environ, "COURSE_THREADS": "1", "COURSE_PROGRESS": "off"}
    run = subprocess.run([sys.executable, str(SCRIPT), "--profile", "smoke", "--out",
                          str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    meta, table = read(tmp_path)
    assert meta["profile"] == "smoke" and meta["script_sha256"] == sha256(SCRIPT)
    check_table({**meta, "_folder": str(tmp_path)}, table)
    assert meta["weights"]["file"] == "forecasters_05.pt"  # beside the table, not in data/
    assert sha256(tmp_path / "forecasters_05.pt") == meta["weights"]["sha256"]


def test_a_smoke_run_writes_nowhere_in_the_repository():
    run = subprocess.run([sys.executable, str(SCRIPT), "--profile", "smoke"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "--out" in run.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
