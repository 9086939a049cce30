"""course_lib.ladder: chapter 7's rungs, one change each (the search script's table:
tests/tools/test_ladder_search.py)."""

import pytest
import torch

from course_lib import attention, gpt, ladder, masks


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


def test_a_gpt_built_from_the_ladders_blocks_loads_course_lib_gpts_weights():
    torch.manual_seed(0)
    model = ladder.build("tied head", vocab_size=50, window=12, d_model=16, num_layers=2).eval()
    blocks = torch.nn.ModuleList(ladder.Block(16, 4, 64, 12) for _ in range(2))
    expected = {k.removeprefix("blocks.") for k in model.state_dict() if k.startswith("blocks.")}
    got = set(blocks.state_dict())
    assert got == expected, "the page's GPT (chapter 7) loads gpt.GPT's state dict strictly"
