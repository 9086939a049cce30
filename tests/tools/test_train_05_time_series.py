"""scripts/train_05_time_series.py: the committed table, runs and weights are the script's,
every run stopped early (none at its cap), and the script runs.

Chapter 5 loads the models this script trained; these tests are what tie the committed
table and weights to the code that claims to have written them.
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
import torch

ROOT = Path(__file__).resolve().parents[2]
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


def load_and_score(meta, weights_path):
    """The saved models' validation MAE, recomputed the script's way, per final run."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import train_05_time_series as script

    from course_lib import data, runtime
    from course_lib import timeseries as ts
    saved = torch.load(weights_path, map_location="cpu", weights_only=True)
    weather = data.load_beijing()
    features = ts.weather_features(weather)
    temp = list(features.columns).index("TEMP")
    splits = ts.year_splits(weather.datetime, script.SPLITS)
    scaler = ts.Standardizer().fit(features.iloc[splits["train"]])
    values = scaler.transform(features)
    X_va, y_va, _ = ts.make_windows(values, values[:, temp], splits["val"], script.WINDOW,
                                    stride=meta["sizes"]["eval_stride"])
    y_c = scaler.inverse(y_va.numpy(), temp)
    runtime.set_seed(0)
    scores = {}
    for run in meta["finals"]:
        model = ts.build_forecaster(run["model"], saved["configs"][run["model"]],
                                    saved["n_features"], saved["temp_index"],
                                    num_heads=saved["num_heads"], window=saved["window"])
        model.load_state_dict(saved["models"][f"{run['model']}|{run['seed']}"])
        scores[run["model"], run["seed"]] = ts.mae(scaler.inverse(ts.predict(model, X_va), temp),
                                                   y_c)
    return scores


def test_the_committed_table_was_written_by_the_committed_script():
    meta, table = read(RESULTS)
    assert meta["script_sha256"] == sha256(SCRIPT), (
        "scripts/train_05_time_series.py changed after it wrote book/results/search/"
        "train_05_time_series.* and data/pretrained/forecasters_05.pt: rerun it (python "
        "scripts/train_05_time_series.py, about 90 minutes on 2 cores) and rerun the chapter, "
        "or undo the change")
    assert meta["profile"] == "full"
    check_table({**meta, "_folder": str(RESULTS)}, table)


def test_converged_not_capped():
    """No committed run, in the search or final, reached its cap or had its best epoch there."""
    meta, table = read(RESULTS)
    assert not table.best_at_cap.any(), table[table.best_at_cap]
    assert not any(run["best_at_cap"] for run in meta["finals"])
    # and every run stopped by its patience, before the cap (searches included)
    cap = meta["sizes"]["max_epochs"]
    assert (table.epochs_run < cap).all(), table[table.epochs_run >= cap]
    assert all(run["epochs_run"] < cap for run in meta["finals"]), [
        (run["model"], run["seed"]) for run in meta["finals"] if run["epochs_run"] >= cap]


def test_the_shipped_weights_give_the_recorded_validation_mae():
    meta, _ = read(RESULTS)
    weights = ROOT / meta["weights"]["file"]
    assert sha256(weights) == meta["weights"]["sha256"]
    for (model, seed), mae in load_and_score(meta, weights).items():
        run = next(r for r in meta["finals"] if r["model"] == model and r["seed"] == seed)
        assert mae == pytest.approx(run["val_mae"], rel=1e-4), (model, seed)


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
