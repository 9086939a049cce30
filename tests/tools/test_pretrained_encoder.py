"""The shipped masked-LM encoder (data/pretrained/encoder_imdb.pt) is what its card says it is.

- the card and the search come from the committed script (its SHA-256);
- the weights' sha256 is the card's and course_lib.data's; the tokenizer is the shipped GPT's;
- the weights give the card's final validation masked perplexity on the same masked rows;
- the search's chosen rate is inside its grid, not on an edge, and the run used it;
- the script runs end to end at smoke size, writing only into the folder it is given.
"""

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from course_lib import data, gpt, text

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "pretrain_encoder.py"
CARD = ROOT / "book" / "results" / "pretrain" / "encoder_imdb.json"
SEARCH = ROOT / "book" / "results" / "search" / "pretrain_encoder.json"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("pretrain_encoder_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def card():
    return json.loads(CARD.read_text())


def test_card_and_search_come_from_the_committed_script(script, card):
    sha = script.G.file_sha256(SCRIPT)
    meta = json.loads(SEARCH.read_text())
    assert card["script_sha256"] == sha, "the card is from another version of the script: rerun it"
    assert meta["script_sha256"] == sha, "the search is from another version of the script"
    assert meta["table_sha256"] == script.G.file_sha256(SEARCH.with_suffix(".csv"))
    assert card["profile"] == meta["profile"] == "full"


def test_the_search_brackets_its_rate_and_the_run_uses_it(card):
    meta = json.loads(SEARCH.read_text())
    table = pd.read_csv(SEARCH.with_suffix(".csv"))
    best = table.loc[table["val_masked_ppl"].idxmin()]
    assert best["lr"] == meta["winner"]["lr"] == card["lr"]
    assert table["lr"].min() < card["lr"] < table["lr"].max(), "the rate lies on the grid's edge"
    assert np.allclose(table["flops"] / meta["flops_per_configuration"], 1, atol=0.02)


def test_same_size_budget_and_tokenizer_as_the_shipped_gpt(card):
    gpt_card = json.loads((CARD.parent / "gpt_imdb.json").read_text())
    for k in ("d_model", "num_layers", "num_heads", "d_ff", "max_len"):
        assert card["config"][k] == gpt_card["config"][k], k
    assert card["config"]["causal"] is False
    assert card["config"]["vocab_size"] == gpt_card["config"]["vocab_size"] + 1  # <mask>
    assert card["tokens"] == gpt_card["tokens"] and card["steps"] == gpt_card["steps"]
    _, enc_saved = data.load_pretrained_encoder()
    _, gpt_saved = data.load_pretrained_gpt()
    assert enc_saved["tokenizer"] == gpt_saved["tokenizer"]
    assert enc_saved["mask_id"] == card["mask_id"] == gpt_card["config"]["vocab_size"]


def test_weights_are_the_cards_and_the_datas(card):
    path = data.data_file("pretrained/encoder_imdb.pt")  # checks course_lib.data's sha256
    assert data.SHA256["pretrained/encoder_imdb.pt"] == card["weights_sha256"]
    assert path.stat().st_size == card["weights_bytes"] <= 20 * 2**20


def test_card_records_the_run(card):
    for key in ("steps", "tokens", "passes", "flops", "train_minutes", "cpu", "threads",
                "precision", "checkpoints", "best_step", "best_is_last",
                "final_val_masked_ppl", "test_masked_ppl"):
        assert key in card, key
    steps = [c["step"] for c in card["checkpoints"]]
    assert steps == sorted(steps) and steps[-1] == card["steps"]
    assert math.isclose(card["final_val_masked_ppl"], card["checkpoints"][-1]["val_masked_ppl"],
                        rel_tol=1e-4)


def test_shipped_weights_give_the_cards_validation_masked_perplexity(script, card):
    model, saved = data.load_pretrained_encoder()
    assert model.config.to_dict() == card["config"]
    bpe = text.BPETokenizer.from_json(saved["tokenizer"])
    splits = text.imdb_lm_splits(data.load_imdb("train"), data.load_imdb("test"),
                                 val_fraction=0.1, seed=saved["split_seed"])
    val = script.G.take(splits["val"], card["val_reviews"],
                        np.random.default_rng([script.SEED, 1]))
    ids = bpe.encode_batch(list(val["review"]), add_bos=True)
    rows = script.masked_rows(ids, card["context"], card["mask_id"], card["mask_id"],
                              (bpe.bos_id,))
    assert math.isclose(script.masked_ppl(model, rows, "cpu"), card["final_val_masked_ppl"],
                        rel_tol=1e-4)


def test_script_runs_at_smoke_size(script, tmp_path):
    assert script.main(["--profile", "smoke", "--out", str(tmp_path)]) == 0
    small = json.loads((tmp_path / "encoder_imdb.json").read_text())
    assert small["profile"] == "smoke" and small["steps"] >= 2
    model, saved = gpt.load(tmp_path / "encoder_imdb.pt")
    assert model.config.causal is False and "mask_id" in saved
    assert (tmp_path / "search" / "pretrain_encoder.csv").is_file()


def test_script_refuses_to_write_smoke_results_into_the_repository(script):
    with pytest.raises(SystemExit):
        script.main(["--profile", "smoke"])
