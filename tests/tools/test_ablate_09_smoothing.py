"""scripts/ablate_09_smoothing.py: the committed ε = 0 run is chapter 9's code run by the
committed script, it converged (best epoch before the cap), and the script runs.

Chapter 9 shows this run beside its own; these tests tie the committed numbers to the
notebook code and the script that claim to have produced them.
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_lib import results

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "ablate_09_smoothing.py"
NOTEBOOK = ROOT / "notebooks" / "09_translation.ipynb"
COMMITTED = ROOT / "book" / "results" / "search" / "09_smoothing.json"


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def check(run: dict) -> None:
    """What every file of this script must hold, whatever its size."""
    assert run["smoothing"] == 0.0 and run["params"]["smoothing"] == 0.0
    for key in ("best_epoch", "epochs_run", "best_at_cap", "stopped_early", "max_epochs"):
        assert key in run["params"], key
    for key in ("val_loss_best", "val_bleu_greedy_final", "bleu_beam", "ece_final",
                "ece_final_interval", "confidence_minus_accuracy_final"):
        assert key in run["metrics"], key
    assert run["params"]["best_epoch"] <= run["params"]["epochs_run"] <= run["params"]["max_epochs"]


def test_the_committed_run_is_the_notebooks_code_run_by_the_committed_script():
    run = json.loads(COMMITTED.read_text())
    assert run["script_sha256"] == sha256(SCRIPT), (
        "scripts/ablate_09_smoothing.py changed after it wrote book/results/search/"
        "09_smoothing.json: run it again (22 to 24 minutes on 2 threads) or undo the change")
    assert run["notebook_code_sha256"] == results.code_sha256(NOTEBOOK), (
        "a code cell of notebooks/09_translation.ipynb changed after the ablation ran: run "
        "scripts/ablate_09_smoothing.py again (chapter 9 refuses a stale ablation)")
    assert run["profile"] == "full"
    check(run)


def test_the_committed_run_converged():
    run = json.loads(COMMITTED.read_text())
    assert not run["params"]["best_at_cap"], "the ε = 0 model peaked at its cap"
    assert run["params"]["stopped_early"], "the ε = 0 run reached its epoch cap"
    assert run["params"]["epochs_run"] < run["params"]["max_epochs"]


@pytest.mark.runs_chapters
def test_the_script_runs_at_smoke_size(tmp_path):
    out = tmp_path / "ls.json"
    env = {**os.environ, "COURSE_THREADS": "1", "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, str(SCRIPT), "--profile", "smoke", "--out", str(out)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    written = json.loads(out.read_text())
    assert written["profile"] == "smoke" and written["script_sha256"] == sha256(SCRIPT)
    assert written["notebook_code_sha256"] == results.code_sha256(NOTEBOOK)
    check(written)


def test_a_smoke_run_writes_nowhere_in_the_repository():
    run = subprocess.run([sys.executable, str(SCRIPT), "--profile", "smoke"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "--out" in run.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
