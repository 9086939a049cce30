"""scripts/search_06_tabular.py: the committed table is the one this script wrote, and the
script runs end to end at the smoke size.

The table (book/results/search/search_06_tabular.csv) and its meta file record the SHA-256
of the script that wrote them; editing the script without running it again, or editing the
table by hand, fails here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_lib import tuning

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "search_06_tabular.py"
TABLE = ROOT / "book" / "results" / "search" / "search_06_tabular.csv"
MODELS = ("ridge", "gradient boosting", "MLP", "Transformer")


def _check_table(table, meta):
    for model in MODELS:
        rows = table[table.model == model]
        assert len(rows) == meta["budgets"][model] + (model == "Transformer"), (
            f"{model}: {len(rows)} rows for a budget of {meta['budgets'][model]}")
        search = rows[rows.stage == "search"]
        assert sorted(search["rank"]) == list(range(1, len(search) + 1))
        assert search["val_rmse"].notna().all() and (search["val_rmse"] > 0).all()
        best = search.sort_values("rank").iloc[0]
        assert best["val_rmse"] == pytest.approx(meta["winners"][model]["val_rmse"], rel=1e-5)
        assert set(meta["edge_checks"][model][0]) >= set(tuning.COLUMNS)
        if model != "ridge":
            assert (rows["seed"] == meta["seed"]).all(), f"{model}: a row without its seed"
    tokens = table[(table.model == "Transformer") & (table.stage == "tokenization")]
    assert len(tokens) == 2 and meta["tokenization"]["kept"] in set(tokens["tokenization"])


def test_committed_table_was_written_by_this_script():
    table, meta = tuning.read_search(TABLE, script=SCRIPT)  # raises if either hash differs
    assert meta["profile"] == "full" and meta["script"] == "scripts/search_06_tabular.py"
    assert meta["budgets"] == {"ridge": 17, "gradient boosting": 40, "MLP": 20,
                               "Transformer": 10}
    _check_table(table, meta)


def _sklearn_takes_x_val() -> bool:
    import inspect

    from sklearn.ensemble import HistGradientBoostingRegressor

    return "X_val" in inspect.signature(HistGradientBoostingRegressor.fit).parameters


# The script calls HistGradientBoostingRegressor.fit(X_val=, y_val=), new in scikit-learn 1.7;
# the course's bound is Colab's 1.6.1, where chapter 6 reads the committed table and never runs
# the script. tabular.fit_with_validation does the same fit on 1.6; the script moves to it the
# next time its search is run (changing the script changes its SHA-256, which the table records).
@pytest.mark.skipif(not _sklearn_takes_x_val(),
                    reason="scripts/search_06_tabular.py needs scikit-learn 1.7's fit(X_val=)")
def test_script_runs_at_smoke_size(tmp_path):
    env = {**os.environ, "COURSE_PROGRESS": "off", "COURSE_THREADS": "1",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(SCRIPT), "--profile", "smoke", "--out",
                           str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    table, meta = tuning.read_search(tmp_path / TABLE.name, script=SCRIPT)
    assert meta["profile"] == "smoke"
    _check_table(table, meta)
