"""course_lib.ladder: chapter 7's rungs, one change each, and the search script's table."""

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from course_lib import attention, gpt, ladder, masks

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "ladder_search.py"
TABLE = ROOT / "book" / "results" / "search" / "ladder_07.csv"
META = ROOT / "book" / "results" / "search" / "ladder_07.json"


@pytest.mark.parametrize("rung", ladder.RUNGS)
def test_every_rung_is_a_causal_language_model(rung):
    torch.manual_seed(0)
    model = ladder.build(rung, vocab_size=50, window=12, d_model=16, num_heads=4,
                         num_layers=2).eval()
    x = torch.randint(0, 50, (3, 12))
    logits = model(x)
    assert logits.shape == (3, 12, 50)
    changed = x.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 50  # change the future of position 6
    assert torch.allclose(model(changed)[:, :7], logits[:, :7], atol=1e-6)


def test_each_rung_adds_what_its_name_says():
    kw = dict(vocab_size=50, window=12, d_model=16, num_heads=4, num_layers=2)
    built = {r: ladder.build(r, **kw) for r in ladder.RUNGS}
    assert built["bigram"].position is None and isinstance(built["bigram"].body, torch.nn.Identity)
    assert built["one head"].body.h == 1 and built["heads"].body.h == 4
    n = {r: sum(p.numel() for p in m.parameters()) for r, m in built.items()}
    assert n["one head"] == n["heads"], "splitting into heads adds no parameters"
    assert n["FFN"] == n["residual"], "a residual connection adds no parameters"
    assert n["LayerNorm"] - n["residual"] == 3 * 2 * 16, "three LayerNorms of d = 16"
    assert built["blocks"].head.weight is not built["blocks"].token_embedding.weight
    assert built["tied head"].head.weight is built["tied head"].token_embedding.weight
    assert n["blocks"] - n["tied head"] == 50 * 16 + 50, "an untied head: V x d and a bias"


def test_causal_self_attention_equals_multi_head_attention_with_a_causal_mask():
    torch.manual_seed(0)
    ours = ladder.CausalSelfAttention(16, 4, max_len=10).eval()
    reference = attention.MultiHeadAttention(16, 4).eval()
    reference.load_state_dict(ours.state_dict())
    x = torch.randn(2, 10, 16)
    expected, _ = reference(x, x, x, mask=masks.causal_mask(10))
    torch.testing.assert_close(ours(x), expected, atol=1e-6, rtol=1e-5)


def test_the_top_rungs_are_course_lib_gpts():
    model = ladder.build("tied head", vocab_size=50, window=12, d_model=16, num_layers=3)
    assert isinstance(model, gpt.GPT) and model.config.num_layers == 3
    assert model.config.d_ff == 64 and model.config.dropout == 0.0


def test_bad_inputs_say_what_to_do():
    with pytest.raises(ValueError, match="choose one of"):
        ladder.build("two heads", vocab_size=50, window=12, d_model=16)
    with pytest.raises(ValueError, match="divisible"):
        ladder.build("heads", vocab_size=50, window=12, d_model=18, num_heads=4)


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


def test_every_rungs_rate_is_bracketed_and_is_the_tables_best():
    table, meta = pd.read_csv(TABLE), json.loads(META.read_text())
    assert list(meta["winners"]) == list(ladder.RUNGS)
    for rung, win in meta["winners"].items():
        rows = table[table["rung"] == rung]
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


def test_search_refuses_to_write_smoke_results_into_the_repository(script):
    with pytest.raises(SystemExit):
        script.main(["--profile", "smoke"])


def test_a_gpt_built_from_the_ladders_blocks_loads_course_lib_gpts_weights():
    torch.manual_seed(0)
    model = ladder.build("tied head", vocab_size=50, window=12, d_model=16, num_layers=2).eval()
    blocks = torch.nn.ModuleList(ladder.Block(16, 4, 64, 12) for _ in range(2))
    expected = {k.removeprefix("blocks.") for k in model.state_dict() if k.startswith("blocks.")}
    got = set(blocks.state_dict())
    assert got == expected, "the page's GPT (chapter 7) loads gpt.GPT's state dict strictly"
