"""scripts/ladder_search.py: chapter 7's search over each rung's learning rate. The committed
table is the one the committed script wrote, every rung's rate is bracketed and is the table's
best, and the script runs at smoke size (the rungs themselves: tests/unit/test_ladder.py)."""

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

from course_lib import ladder

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "ladder_search.py"
TABLE = ROOT / "book" / "results" / "search" / "ladder_07.csv"
META = ROOT / "book" / "results" / "search" / "ladder_07.json"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("ladder_search", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_search_comes_from_the_committed_script(script):
    meta = json.loads(META.read_text())
    assert meta["script_sha256"] == script.file_sha256(SCRIPT), "rerun the search"
    assert meta["table_sha256"] == script.file_sha256(TABLE)
    assert meta["sizes"]["steps"] == script.SIZES["full"]["steps"]


def test_every_rungs_rate_is_bracketed_and_is_the_tables_best(script):
    table, meta = pd.read_csv(TABLE), json.loads(META.read_text())
    rungs = list(meta["winners"])[:len(ladder.RUNGS)]
    assert rungs == list(ladder.RUNGS)
    searched_controls = [c for c, spec in script.CONTROLS.items() if spec["search"]]
    assert set(meta["winners"]) - set(rungs) <= set(searched_controls)
    searched = table[table["steps"] == meta["sizes"]["steps"]]  # not the longer controls
    for rung, win in meta["winners"].items():
        rows = searched[searched["rung"] == rung]
        best = rows.loc[rows["val_ppl"].idxmin()]
        assert best["lr"] == pytest.approx(win["lr"]), rung
        assert rows["lr"].min() < win["lr"] < rows["lr"].max(), f"{rung}: rate at the edge"
        assert win["lr_bracketed"]


def test_search_runs_at_smoke_size_and_merges(script, tmp_path):
    assert script.main(["--profile", "smoke", "--out", str(tmp_path),
                        "--rungs", "bigram", "heads"]) == 0
    first = pd.read_csv(tmp_path / "ladder_07.csv")
    assert set(first["rung"]) == {"bigram", "heads"}
    assert script.main(["--profile", "smoke", "--out", str(tmp_path), "--rungs", "FFN"]) == 0
    merged = pd.read_csv(tmp_path / "ladder_07.csv")
    assert set(merged["rung"]) == {"bigram", "heads", "FFN"}
    pd.testing.assert_frame_equal(merged[merged["rung"] != "FFN"].reset_index(drop=True),
                                  first.reset_index(drop=True), check_dtype=False)
    meta = json.loads((tmp_path / "ladder_07.json").read_text())
    assert set(meta["winners"]) == {"bigram", "heads", "FFN"}


def test_longer_trains_a_winner_twice_as_long_and_keeps_the_search(script, tmp_path):
    assert script.main(["--profile", "smoke", "--out", str(tmp_path), "--rungs", "bigram"]) == 0
    first = pd.read_csv(tmp_path / "ladder_07.csv")
    winners = json.loads((tmp_path / "ladder_07.json").read_text())["winners"]
    assert script.main(["--profile", "smoke", "--out", str(tmp_path), "--longer", "bigram"]) == 0
    table = pd.read_csv(tmp_path / "ladder_07.csv")
    steps = script.SIZES["smoke"]["steps"]
    longer = table[table["steps"] == 2 * steps]
    assert len(longer) == 1 and longer["lr"].iloc[0] == pytest.approx(winners["bigram"]["lr"])
    pd.testing.assert_frame_equal(table[table["steps"] == steps].reset_index(drop=True),
                                  first.reset_index(drop=True), check_dtype=False)
    assert json.loads((tmp_path / "ladder_07.json").read_text())["winners"] == winners
    assert script.main(["--profile", "smoke", "--out", str(tmp_path), "--longer", "bigram",
                        "--times", "4"]) == 0
    table = pd.read_csv(tmp_path / "ladder_07.csv")
    assert sorted(table[table["rung"] == "bigram"]["steps"].unique()) == [steps, 2 * steps,
                                                                         4 * steps]


def test_controls_change_one_thing_of_their_parent(script, tmp_path):
    out = ["--profile", "smoke", "--out", str(tmp_path)]
    assert script.main(out + ["--rungs", "heads", "blocks", "tied head"]) == 0
    winners = json.loads((tmp_path / "ladder_07.json").read_text())["winners"]
    assert script.main(out + ["--controls", *script.CONTROLS]) == 0
    table = pd.read_csv(tmp_path / "ladder_07.csv")
    undecayed = table[table["rung"] == "blocks, head undecayed"]
    assert len(undecayed) == 1  # one run, at rung 8's own rate, with rung 8's parameters
    assert undecayed["lr"].iloc[0] == pytest.approx(winners["blocks"]["lr"])
    assert undecayed["params"].iloc[0] == table[table["rung"] == "blocks"]["params"].iloc[0]
    wider = table[table["rung"] == "tied head, wider"]
    meta = json.loads((tmp_path / "ladder_07.json").read_text())
    assert meta["winners"]["tied head, wider"]["lr_bracketed"]  # searched like a rung
    assert wider["params"].iloc[0] > table[table["rung"] == "tied head"]["params"].iloc[0]
    bias = table[table["rung"] == "tied head + bias"]
    assert bias["lr"].iloc[0] == pytest.approx(winners["tied head"]["lr"])
    assert bias["params"].iloc[0] == (table[table["rung"] == "tied head"]["params"].iloc[0]
                                      + script.SIZES["smoke"]["vocab_size"])
    residual = table[table["rung"] == "heads + residual"]
    assert residual["lr"].iloc[0] == pytest.approx(winners["heads"]["lr"])
    assert residual["params"].iloc[0] == table[table["rung"] == "heads"]["params"].iloc[0]
    split = table[table["rung"] == "tied head, rung 8's rate, embedding at half"]
    assert split["lr"].iloc[0] == pytest.approx(winners["blocks"]["lr"])  # rung 8's rate
    assert split["params"].iloc[0] == table[table["rung"] == "tied head"]["params"].iloc[0]
    with pytest.raises(SystemExit):
        script.main(out + ["--controls", "no such control"])


def test_search_refuses_to_write_smoke_results_into_the_repository(script):
    with pytest.raises(SystemExit):
        script.main(["--profile", "smoke"])
