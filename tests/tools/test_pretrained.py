"""The shipped pretrained GPT (data/pretrained/gpt_imdb.pt) is what its card says it is.

- the card, the search table and the weights come from the committed script (its SHA-256);
- the weights' sha256 is the card's and course_lib.data's;
- the weights give the card's final validation perplexity on the same validation reviews;
- the search's chosen rate is inside its grid, not on an edge;
- the script runs end to end at smoke size (seconds), writing only into the folder it is given.
"""

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from course_lib import data, gpt, lm, text

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "pretrain_gpt.py"
CARD = ROOT / "book" / "results" / "pretrain" / "gpt_imdb.json"
SEARCH = ROOT / "book" / "results" / "search" / "pretrain_gpt.json"
SEARCH_TABLE = SEARCH.with_suffix(".csv")


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("pretrain_gpt_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def card():
    return json.loads(CARD.read_text())


def test_card_and_search_come_from_the_committed_script(script, card):
    sha = script.file_sha256(SCRIPT)
    meta = json.loads(SEARCH.read_text())
    assert card["script_sha256"] == sha, "the card is from another version of the script: rerun it"
    assert meta["script_sha256"] == sha, "the search is from another version of the script"
    assert meta["table_sha256"] == script.file_sha256(SEARCH_TABLE)
    assert card["profile"] == meta["profile"] == "full"


def test_the_search_brackets_its_rate_and_the_run_uses_the_winner(card):
    meta = json.loads(SEARCH.read_text())
    table = pd.read_csv(SEARCH_TABLE)
    winner = meta["winner"]
    best = table.loc[table["val_ppl"].idxmin()]
    assert (best["size"], best["lr"]) == (winner["size"], winner["lr"])
    rates = table.loc[table["size"] == winner["size"], "lr"]
    assert rates.min() < winner["lr"] < rates.max(), "the chosen rate lies on the grid's edge"
    assert meta["winner"]["lr_bracketed"]
    flops = table["flops"] / meta["flops_per_configuration"]
    assert np.allclose(flops, 1, atol=0.02), "every configuration gets the same compute"
    assert card["lr"] == winner["lr"]
    assert (card["config"]["d_model"], card["config"]["num_layers"]) == \
        (winner["d_model"], winner["layers"])


def test_weights_are_the_cards_and_the_datas(card):
    path = data.data_file("pretrained/gpt_imdb.pt")  # checks course_lib.data's sha256
    assert data.SHA256["pretrained/gpt_imdb.pt"] == card["weights_sha256"]
    assert path.stat().st_size == card["weights_bytes"] <= 20 * 2**20


def test_card_records_the_run(card):
    for key in ("steps", "tokens", "passes", "flops", "train_minutes", "cpu", "threads",
                "precision", "checkpoints", "best_step", "best_is_last", "final_val_ppl"):
        assert key in card, key
    steps = [c["step"] for c in card["checkpoints"]]
    assert steps == sorted(steps) and steps[-1] == card["steps"]
    assert card["final_val_ppl"] == card["checkpoints"][-1]["val_ppl"] or \
        math.isclose(card["final_val_ppl"], card["checkpoints"][-1]["val_ppl"], rel_tol=1e-4)
    assert math.isclose(card["passes"], card["tokens"] / card["train_stream_tokens"],
                        rel_tol=1e-3)


def test_shipped_weights_give_the_cards_validation_perplexity(script, card):
    model, saved = data.load_pretrained_gpt()
    assert model.config.to_dict() == card["config"]
    bpe = text.BPETokenizer.from_json(saved["tokenizer"])
    splits = text.imdb_lm_splits(data.load_imdb("train"), data.load_imdb("test"),
                                 val_fraction=0.1, seed=saved["split_seed"])
    val = script.take(splits["val"], card["val_reviews"],
                      np.random.default_rng([script.SEED, 1]))
    ids = bpe.encode_batch(list(val["review"]), add_bos=True)
    nll = lm.target_nll(model, ids, card["context"], card["stride"])
    assert math.isclose(math.exp(nll.mean()), card["final_val_ppl"], rel_tol=1e-4)


def test_script_runs_at_smoke_size(script, tmp_path):
    assert script.main(["--profile", "smoke", "--out", str(tmp_path)]) == 0
    small = json.loads((tmp_path / "gpt_imdb.json").read_text())
    assert small["profile"] == "smoke" and small["steps"] >= 2
    model, saved = gpt.load(tmp_path / "gpt_imdb.pt")
    assert "tokenizer" in saved and model.config.max_len == small["context"]
    assert (tmp_path / "search" / "pretrain_gpt.csv").is_file()


def test_script_refuses_to_write_smoke_results_into_the_repository(script):
    with pytest.raises(SystemExit):
        script.main(["--profile", "smoke"])
