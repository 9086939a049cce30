"""Unit tests of course_lib.heads: induction and previous-token scores, head ablation."""

import math

import pandas as pd
import pytest
import torch

from course_lib.gpt import GPT, CachedStepFn, GPTConfig
from course_lib.heads import (
    RepeatLoss,
    ablate_head,
    head_ablation_table,
    induction_scores,
    previous_token_scores,
    repeat_loss,
    repeated_random_tokens,
)

V = 30


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def tiny(**kw):
    args = dict(vocab_size=V, max_len=24, d_model=16, num_heads=4, num_layers=2, d_ff=32,
                dropout=0.0)
    args.update(kw)
    return GPT(GPTConfig(**args)).eval()


def probe(length=5, batch=3, bos=None):
    g = torch.Generator().manual_seed(1)
    return repeated_random_tokens(V, length, batch, g, low=1, bos_id=bos)


# --------------------------------------------------------------------------- the probe
def test_repeated_random_tokens_shape_range_and_copies():
    t = probe(length=6, batch=4)
    assert t.shape == (4, 12) and t.dtype == torch.long
    assert torch.equal(t[:, :6], t[:, 6:])
    assert int(t.min()) >= 1 and int(t.max()) < V
    b = probe(length=6, batch=4, bos=0)
    assert b.shape == (4, 13) and (b[:, 0] == 0).all()
    assert torch.equal(b[:, 1:7], b[:, 7:])
    assert torch.equal(probe(), probe())  # the generator decides
    with pytest.raises(ValueError, match="length must be an int >= 2"):
        repeated_random_tokens(V, 1, 2)
    with pytest.raises(ValueError, match="low=30 leaves no ids"):
        repeated_random_tokens(V, 4, 2, low=V)
    with pytest.raises(ValueError, match="bos_id"):
        repeated_random_tokens(V, 4, 2, bos_id=V)


def test_repeat_loss_of_a_tiny_gpt():
    model = tiny()
    for bos in (None, 0):
        r = repeat_loss(model, probe(length=5, bos=bos))
        assert isinstance(r, RepeatLoss) and r.length == 5 and r.offset == (bos is not None)
        assert r.curve.shape == (10 + r.offset,) and math.isnan(r.curve[0])
        assert torch.isfinite(r.curve[1:]).all()
        # an untrained model is near uniform: about log V on both copies
        assert r.first == pytest.approx(math.log(V), rel=0.2)
        assert r.second == pytest.approx(math.log(V), rel=0.2)
        assert r.as_dict() == {"first": r.first, "second": r.second}


class CopyOracle:
    """Uniform logits, except in the second copy, where it predicts the token one copy back:
    a perfect induction model. Loss: log V on the first copy, about 0 on the second."""

    def __init__(self, length, offset):
        self.length, self.offset = length, offset

    def __call__(self, tokens):
        B, T = tokens.shape
        logits = torch.zeros(B, T, V)
        for t in range(self.offset + self.length, T - 1):  # position t predicts token t + 1
            logits[torch.arange(B), t, tokens[:, t + 1 - self.length]] = 100.0
        return logits


@pytest.mark.parametrize("bos", [None, 0])
def test_repeat_loss_positions_by_hand(bos):
    tokens = probe(length=4, bos=bos)
    offset = int(bos is not None)
    r = repeat_loss(CopyOracle(4, offset), tokens)
    assert r.first == pytest.approx(math.log(V))  # uniform there
    assert r.second == pytest.approx(0.0, abs=1e-6)  # its first token excluded
    # the second copy's first token is predicted from the first copy's end: uniform
    assert r.curve[offset + 4] == pytest.approx(math.log(V))


# --------------------------------------------------------------------------- head scores
class FakeMaps:
    """A model whose attention_maps returns the maps it was given (a list of [B, h, T, T])."""

    def __init__(self, maps):
        self.maps = maps

    def attention_maps(self, tokens):
        return self.maps


def crafted_maps(length, offset, B=2):
    """Layer 0: head 0 attends to t - 1, head 1 is an induction head (t -> t - length + 1
    in the second copy, t -> t elsewhere). Layer 1: both heads uniform over 0..t."""
    T = offset + 2 * length
    prev = torch.zeros(T, T)
    prev[0, 0] = 1.0
    prev[torch.arange(1, T), torch.arange(T - 1)] = 1.0
    induction = torch.eye(T)
    t = torch.arange(offset + length, T)
    induction[t] = 0.0
    induction[t, t - length + 1] = 1.0
    uniform = torch.tril(torch.ones(T, T))
    uniform = uniform / uniform.sum(-1, keepdim=True)
    layer0 = torch.stack([prev, induction]).expand(B, 2, T, T)
    layer1 = torch.stack([uniform, uniform]).expand(B, 2, T, T)
    return [layer0, layer1]


@pytest.mark.parametrize("bos", [None, 0])
def test_scores_of_crafted_maps(bos):
    length, offset = 4, int(bos is not None)
    tokens = probe(length=length, batch=2, bos=bos)
    T = tokens.shape[1]
    fake = FakeMaps(crafted_maps(length, offset))
    ind, prev = induction_scores(fake, tokens), previous_token_scores(fake, tokens)
    assert ind.shape == prev.shape == (2, 2)
    uniform_prev = sum(1 / (t + 1) for t in range(1, T)) / (T - 1)
    uniform_ind = sum(1 / (t + 1) for t in range(offset + length, T)) / length
    expected_ind = torch.tensor([[0.0, 1.0], [uniform_ind, uniform_ind]])
    expected_prev = torch.tensor([[1.0, 0.0], [uniform_prev, uniform_prev]])
    torch.testing.assert_close(ind, expected_ind)
    torch.testing.assert_close(prev, expected_prev)


def test_scores_of_a_tiny_gpt_are_attention_shares():
    model = tiny(num_layers=3)
    tokens = probe(length=6, bos=0)
    for scores in (induction_scores(model, tokens), previous_token_scores(model, tokens)):
        assert scores.shape == (3, 4)
        assert ((scores >= 0) & (scores <= 1)).all()


def test_scores_run_in_eval_mode_and_restore_the_mode():
    model = tiny(dropout=0.5).train()
    tokens = probe(length=5)
    a, b = induction_scores(model, tokens), induction_scores(model, tokens)
    torch.testing.assert_close(a, b)  # no dropout on the weights
    assert model.training and all(m.training for m in model.modules())


def test_score_inputs_are_checked():
    model = tiny()
    with pytest.raises(ValueError, match="not a sequence repeated twice"):
        induction_scores(model, torch.randint(1, V, (2, 10), generator=torch.Generator()
                                              .manual_seed(0)))
    with pytest.raises(ValueError, match=r"LongTensor \[B, T\]"):
        induction_scores(model, probe()[0])  # 1-D
    with pytest.raises(TypeError, match="integer ids"):
        previous_token_scores(model, probe().float())
    with pytest.raises(ValueError, match="T >= 2"):
        previous_token_scores(model, torch.zeros(2, 1, dtype=torch.long))
    with pytest.raises(TypeError, match="no attention_maps"):
        induction_scores(object(), probe())
    bad = FakeMaps([torch.zeros(3, 2, 10, 9)])
    with pytest.raises(ValueError, match=r"attention map 0 must be \[B, h, T, T\]"):
        induction_scores(bad, probe())
    with pytest.raises(ValueError, match=r"\[B, T, V\]"):
        repeat_loss(lambda t: torch.zeros(t.shape[0], V), probe())


# --------------------------------------------------------------------------- ablation
def zero_columns(model, layer, head):
    """A copy of ``model`` whose W_o has zeros in the columns of that head: the reference."""
    other = tiny()
    other.load_state_dict(model.state_dict())
    attn = other.blocks[layer].attn
    with torch.no_grad():
        attn.out_proj.weight[:, head * attn.d_k:(head + 1) * attn.d_k] = 0.0
    return other


def test_ablation_equals_zeroing_that_heads_columns_of_w_o():
    model = tiny()
    tokens = probe(length=5, bos=0)
    reference = zero_columns(model, 1, 2)(tokens)
    with torch.no_grad(), ablate_head(model, 1, 2):
        torch.testing.assert_close(model(tokens), reference)


def test_ablating_a_head_that_adds_nothing_changes_nothing():
    model = zero_columns(tiny(), 0, 1)
    tokens = probe(length=5)
    with torch.no_grad():
        before = model(tokens)
        with ablate_head(model, 0, 1):
            torch.testing.assert_close(model(tokens), before)
        with ablate_head(model, 0, 0):  # a head that does add something
            assert not torch.allclose(model(tokens), before)


def test_ablation_is_undone_exactly_on_exit_even_after_an_error():
    model = tiny()
    tokens = probe(length=5)
    with torch.no_grad():
        before = model(tokens)
        with ablate_head(model, 1, 3):
            pass
        assert torch.equal(model(tokens), before)
        with pytest.raises(RuntimeError, match="inside"), ablate_head(model, 0, 0):
            raise RuntimeError("inside")
        assert torch.equal(model(tokens), before)
    assert all(not b.attn.out_proj._forward_pre_hooks for b in model.blocks)


def test_ablation_acts_through_that_head_only():
    model = tiny()
    tokens = probe(length=5, bos=0)
    maps = model.attention_maps(tokens)
    with ablate_head(model, 1, 0):  # the last block: no attention map depends on its output
        for a, b in zip(maps, model.attention_maps(tokens), strict=True):
            torch.testing.assert_close(a, b)
    with ablate_head(model, 0, 0):  # the first: block 0's maps stay, block 1's change
        ablated = model.attention_maps(tokens)
    torch.testing.assert_close(ablated[0], maps[0])
    assert not torch.allclose(ablated[1], maps[1])


def test_ablation_applies_to_the_kv_cache_path():
    model = tiny()
    tokens = probe(length=5)
    with torch.no_grad(), ablate_head(model, 0, 2):
        full = model(tokens)[:, -1]
        step = CachedStepFn(model)
        for L in range(1, tokens.shape[1] + 1):
            last = step(tokens[:, :L])
    torch.testing.assert_close(last, full)


def test_head_ablation_table():
    model = tiny()
    model.blocks[1].attn.out_proj.weight.data[:, 0:4] = 0.0  # head (1, 0) adds nothing
    tokens = probe(length=5, bos=0)
    model.train()
    seen_modes = []

    def evaluate(m):
        seen_modes.append((m.training, torch.is_grad_enabled()))
        return repeat_loss(m, tokens).second

    table = head_ablation_table(model, evaluate)
    assert isinstance(table, pd.DataFrame) and list(table.columns) == [
        "layer", "head", "metric", "change"]
    assert table[["layer", "head"]].values.tolist() == [[i, h] for i in range(2)
                                                        for h in range(4)]
    baseline = table.attrs["baseline"]
    assert baseline == pytest.approx(evaluate(model))
    torch.testing.assert_close(torch.tensor(table["change"].values),
                               torch.tensor(table["metric"].values - baseline))
    assert table.query("layer == 1 and head == 0")["change"].item() == pytest.approx(0, abs=1e-6)
    assert (table["change"].abs() > 0).sum() >= 6
    assert set(seen_modes[:9]) == {(False, False)}  # eval mode, no gradients
    assert model.training  # the mode it had
    assert all(not b.attn.out_proj._forward_pre_hooks for b in model.blocks)


def test_ablation_inputs_are_checked():
    model = tiny()
    with pytest.raises(IndexError, match=r"head 4 is out of range: .* 4 heads \(0..3\)"):
        with ablate_head(model, 0, 4):
            pass
    with pytest.raises(IndexError, match=r"layer 2 is out of range: .* 2 blocks"):
        with ablate_head(model, 2, 0):
            pass
    with pytest.raises(IndexError, match="head -1"):
        with ablate_head(model, 0, -1):
            pass
    with pytest.raises(TypeError, match=r"\.blocks"):
        with ablate_head(torch.nn.Linear(2, 2), 0, 0):
            pass
    with pytest.raises(TypeError, match="one number"):
        head_ablation_table(model, lambda m: {"ppl": 1.0})
    with pytest.raises(TypeError, match="function of the model"):
        head_ablation_table(model, 3.0)
