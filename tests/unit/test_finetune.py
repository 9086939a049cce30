"""Unit tests of course_lib.finetune and of what it needs from course_lib.gpt.

- gpt.GPT: ``features`` is what the head reads; ``causal=False`` builds an encoder whose
  position t sees later tokens, refuses the KV cache, generation and the next-token loss, and
  saves and loads as one; a causal config's dict and repr are what they were.
- SequenceClassifier: the last real position, not the pad slot; padding changes nothing.
- LoRA: B = 0 gives the base exactly; merged = unmerged; the same as peft's LoRA.
- label_budget_sample: balanced, deterministic, nested across budgets.
- mask_tokens: BERT's 80/10/10, never a special or a pad; masked-LM training runs.
- scripts/pretrain_encoder.py runs at smoke size into the folder it is given.
"""

import copy
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib import finetune as ft
from course_lib import gpt, lm
from course_lib.gpt import GPT, CachedStepFn, GPTConfig

ROOT = Path(__file__).resolve().parents[2]
V, PAD = 50, 0


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def small(**kw):
    args = dict(vocab_size=V, max_len=16, d_model=32, num_heads=4, num_layers=2, d_ff=64,
                dropout=0.0)
    return GPT(GPTConfig(**{**args, **kw})).eval()


def padded_batch():
    """Two right-padded rows: 4 real ids then 2 pads; 6 real ids. Ids 1.. are text."""
    return torch.tensor([[3, 4, 5, 6, PAD, PAD], [7, 8, 9, 10, 11, 12]])


# --------------------------------------------------------------------------- gpt.GPT
def test_forward_is_unchanged_and_features_are_what_the_head_reads():
    model = small()
    tokens = torch.randint(0, V, (3, 10))
    x = model.embed(tokens)
    for block in model.blocks:  # GPT.forward as it was written before features existed
        x, _ = block(x, mask=model.mask[:10, :10], need_weights=False)
    before = model.head(model.final_norm(x))
    assert torch.equal(model(tokens), before)
    assert torch.equal(model.run_blocks(tokens), x)
    assert torch.equal(model.head(model.features(tokens)), model(tokens))
    assert model.features(tokens).shape == (3, 10, 32)


def test_keep_hides_right_padding_without_changing_a_causal_models_real_positions():
    model = small()
    tokens = padded_batch()
    keep = tokens != PAD
    assert torch.allclose(model.features(tokens, keep=keep)[keep], model.features(tokens)[keep],
                          atol=1e-6)
    with pytest.raises(ValueError, match="keep must be a bool tensor shaped like tokens"):
        model.features(tokens, keep=keep.long())
    with pytest.raises(ValueError, match="keep must be a bool tensor shaped like tokens"):
        model.features(tokens, keep=keep[:, :3])


def test_a_causal_configs_dict_and_repr_are_as_before_and_an_encoders_say_so():
    config = GPTConfig(vocab_size=V)
    assert "causal" not in config.to_dict() and "causal" not in repr(config)
    assert GPTConfig(**config.to_dict()).causal is True  # saved GPTs still load as GPTs
    assert repr(config).startswith("GPTConfig(vocab_size=50, max_len=33,")
    encoder = GPTConfig(vocab_size=V, causal=False)
    assert encoder.to_dict()["causal"] is False and "causal=False" in repr(encoder)
    with pytest.raises(TypeError, match="causal must be True"):
        GPTConfig(vocab_size=V, causal="no")


def test_the_encoder_sees_later_tokens_and_the_gpt_does_not():
    tokens = torch.randint(1, V, (2, 12))
    changed = tokens.clone()
    changed[:, 9] = (changed[:, 9] % (V - 1)) + 1  # another id at position 9
    for causal in (True, False):
        model = small(causal=causal)
        a, b = model(tokens), model(changed)
        earlier = torch.allclose(a[:, :9], b[:, :9], atol=1e-6)
        assert earlier is causal, f"causal={causal}: positions 0..8 " \
            f"{'changed' if causal else 'did not change'} when position 9 did"
    encoder = small(causal=False)
    assert torch.equal(encoder.mask, torch.ones(16, 16, dtype=torch.bool))


def test_the_encoder_refuses_the_cache_generation_and_the_next_token_loss():
    encoder = small(causal=False)
    tokens = torch.randint(0, V, (2, 5))
    for call in (lambda: encoder.step_fn(), lambda: CachedStepFn(encoder),
                 lambda: encoder.forward_cached(tokens), lambda: encoder.loss(tokens)):
        with pytest.raises(ValueError, match="built with causal=False"):
            call()
    assert small().forward_cached(tokens)[0].shape == (2, 5, V)  # the GPT still has them


def test_an_encoder_saves_and_loads_as_an_encoder(tmp_path):
    encoder = small(causal=False)
    gpt.save(encoder, tmp_path / "enc.pt", mask_id=V - 1)
    again, saved = gpt.load(tmp_path / "enc.pt")
    tokens = torch.randint(0, V, (2, 7))
    assert again.config.causal is False and saved["mask_id"] == V - 1
    assert torch.equal(again(tokens), encoder(tokens))


# --------------------------------------------------------------------------- the classifier
def test_last_pool_reads_the_last_real_token_not_the_pad_slot():
    model = small()
    clf = ft.SequenceClassifier(model, num_classes=2, pad_id=PAD).eval()
    torch.nn.init.normal_(clf.head.weight)  # a trained-looking head (it starts at zero)
    tokens = padded_batch()
    logits = clf(tokens)  # [2, 2]
    alone = clf(tokens[:1, :4])  # the first text without its padding
    assert torch.allclose(logits[:1], alone, atol=1e-6)
    bug = clf.head(model.features(tokens)[:, -1])  # the classic bug: read position L - 1
    assert not torch.allclose(bug[0], logits[0], atol=1e-3), "the pad slot gave the same answer"
    assert torch.allclose(bug[1], logits[1], atol=1e-6)  # an unpadded row has no pad slot


@pytest.mark.parametrize("pool", ["last", "mean", "first"])
def test_an_encoders_pooled_vector_ignores_the_padding(pool):
    encoder = small(causal=False)
    clf = ft.SequenceClassifier(encoder, num_classes=3, pad_id=PAD, pool=pool).eval()
    tokens = padded_batch()
    assert clf(tokens).shape == (2, 3)
    assert torch.allclose(clf(tokens)[:1], clf(tokens[:1, :4]), atol=1e-5)
    more = torch.cat([tokens, torch.full((2, 3), PAD)], dim=1)  # more padding: same answer
    assert torch.allclose(clf(more), clf(tokens), atol=1e-5)


def test_pool_hidden_and_real_positions():
    h = torch.arange(2 * 4 * 3, dtype=torch.float).view(2, 4, 3)
    tokens = torch.tensor([[PAD, 5, 6, PAD], [PAD, 7, 8, 9]])  # <bos> = pad id, kept as text
    keep = ft.real_positions(tokens, PAD)
    assert keep.tolist() == [[True, True, True, False], [True, True, True, True]]
    assert torch.equal(ft.pool_hidden(h, keep, "last"), torch.stack([h[0, 2], h[1, 3]]))
    assert torch.allclose(ft.pool_hidden(h, keep, "mean"),
                          torch.stack([h[0, :3].mean(0), h[1].mean(0)]))
    assert torch.equal(ft.pool_hidden(h, keep, "first"), h[:, 0])
    with pytest.raises(ValueError, match="pool must be one of"):
        ft.pool_hidden(h, keep, "max")


def test_classifier_loss_trains_the_head():
    clf = ft.SequenceClassifier(small(), num_classes=2, pad_id=PAD)
    loss = clf.loss(padded_batch(), torch.tensor([0, 1]))
    loss.backward()
    assert torch.isfinite(loss) and clf.head.weight.grad.abs().sum() > 0


def test_classifier_errors_say_what_to_do():
    model, tokens = small(), padded_batch()
    clf = ft.SequenceClassifier(model, num_classes=2, pad_id=PAD)
    with pytest.raises(ValueError, match=r"row\(s\) \[1\] of the batch hold only pad_id=0"):
        clf(torch.tensor([[3, 4, PAD], [PAD, PAD, PAD]]))
    with pytest.raises(ValueError, match="label 2 is not a class of this classifier"):
        clf.loss(tokens, torch.tensor([0, 2]))
    with pytest.raises(ValueError, match=r"labels must be a LongTensor \[2\]"):
        clf.loss(tokens, torch.tensor([0.0, 1.0]))
    for bad in (1, 2.0, None):
        with pytest.raises(ValueError, match="num_classes must be an int >= 2"):
            ft.SequenceClassifier(model, num_classes=bad, pad_id=PAD)
    with pytest.raises(ValueError, match="pad_id must be the int id that pads the rows"):
        ft.SequenceClassifier(model, num_classes=2, pad_id=None)
    with pytest.raises(ValueError, match="outside the backbone's 50 ids"):
        ft.SequenceClassifier(model, num_classes=2, pad_id=V)
    with pytest.raises(ValueError, match="pool must be one of"):
        ft.SequenceClassifier(model, num_classes=2, pad_id=PAD, pool="cls")
    with pytest.raises(ValueError, match="pool='first' on a causal model"):
        ft.SequenceClassifier(model, num_classes=2, pad_id=PAD, pool="first")
    with pytest.raises(TypeError, match="needs a method features"):
        ft.SequenceClassifier(nn.Linear(3, 3), num_classes=2, pad_id=PAD)
    with pytest.raises(ValueError, match="tokens must be a LongTensor"):
        ft.real_positions(torch.tensor([1, 2, 3]), PAD)


def test_a_backbone_of_your_own_needs_its_width():
    class Bag(nn.Module):  # any module with features(tokens, keep) -> [B, L, d]
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, 8)

        def features(self, tokens, keep=None):
            return self.embedding(tokens)

    with pytest.raises(ValueError, match="pass d_model"):
        ft.SequenceClassifier(Bag(), num_classes=2, pad_id=PAD)
    clf = ft.SequenceClassifier(Bag(), num_classes=2, pad_id=PAD, pool="mean", d_model=8)
    assert clf(padded_batch()).shape == (2, 2)


# --------------------------------------------------------------------------- LoRA
def test_lora_with_zero_B_is_exactly_its_base():
    base = nn.Linear(12, 6)
    lora = ft.LoRALinear(base, r=4, alpha=8)
    x = torch.randn(5, 3, 12)
    assert torch.equal(lora(x), base(x))
    assert lora.scale == 2.0 and lora.A.shape == (4, 12) and lora.B.shape == (6, 4)
    assert torch.equal(lora.B, torch.zeros(6, 4))
    assert lora.A.abs().max() <= 1 / math.sqrt(12)  # Kaiming-uniform, a = sqrt(5): 1/sqrt(in)
    assert not base.weight.requires_grad and lora.A.requires_grad and lora.B.requires_grad


def test_lora_equals_its_merged_linear():
    base = nn.Linear(12, 6)
    lora = ft.LoRALinear(base, r=3, alpha=6)
    nn.init.normal_(lora.B)
    x = torch.randn(4, 12)
    merged = lora.merge()
    assert type(merged) is nn.Linear and merged.bias is not None
    assert torch.allclose(lora(x), merged(x), atol=1e-5)
    assert not torch.allclose(lora(x), base(x), atol=1e-3)
    no_bias = ft.LoRALinear(nn.Linear(12, 6, bias=False), r=2, alpha=2)
    assert no_bias.merge().bias is None


def test_lora_errors():
    with pytest.raises(TypeError, match="LoRA wraps an nn.Linear"):
        ft.LoRALinear(nn.Conv1d(3, 3, 1), r=1, alpha=1)
    with pytest.raises(ValueError, match=r"r must be an int in 1..6"):
        ft.LoRALinear(nn.Linear(12, 6), r=7, alpha=1)
    with pytest.raises(ValueError, match="alpha must be a positive number"):
        ft.LoRALinear(nn.Linear(12, 6), r=2, alpha=0)
    with pytest.raises(ValueError, match="dropout must be in"):
        ft.LoRALinear(nn.Linear(12, 6), r=2, alpha=1, dropout=1.0)


def test_add_lora_freezes_all_but_the_adapters_and_the_head():
    clf = ft.SequenceClassifier(small(), num_classes=2, pad_id=PAD).eval()
    torch.nn.init.normal_(clf.head.weight)  # a trained-looking head: gradients reach LoRA
    tokens = padded_batch()
    before = clf(tokens)
    count = ft.add_lora(clf, r=4, alpha=8, target_names=["q_proj", "v_proj"],
                        trainable=["head"])
    trainable = {n for n, p in clf.named_parameters() if p.requires_grad}
    adapters = {f"backbone.blocks.{i}.attn.{m}.{ab}" for i in range(2)
                for m in ("q_proj", "v_proj") for ab in "AB"}
    assert trainable == adapters | {"head.weight", "head.bias"}  # not the tied backbone.head
    assert count == 2 * 2 * (4 * 32 + 32 * 4) + (32 * 2 + 2)
    assert isinstance(clf.backbone.blocks[0].attn.q_proj, ft.LoRALinear)
    assert torch.equal(clf(tokens), before)  # B = 0: the pretrained model, unchanged
    frozen = clf.backbone.blocks[0].attn.q_proj.base.weight.clone()
    optimizer = torch.optim.SGD([p for p in clf.parameters() if p.requires_grad], lr=0.1)
    clf.loss(tokens, torch.tensor([0, 1])).backward()
    optimizer.step()
    assert torch.equal(clf.backbone.blocks[0].attn.q_proj.base.weight, frozen)
    assert clf.backbone.blocks[0].attn.q_proj.B.abs().sum() > 0


def test_add_lora_errors_name_the_layers_there_are():
    clf = ft.SequenceClassifier(small(), num_classes=2, pad_id=PAD)
    with pytest.raises(ValueError, match=r"no module of the model is named \['query'\]; its "
                                         r"nn.Linear layers are called \[.*'q_proj'"):
        ft.add_lora(clf, r=2, alpha=2, target_names=["query"])
    with pytest.raises(ValueError, match=r"trainable names \['classifier'\] are not in"):
        ft.add_lora(clf, r=2, alpha=2, target_names=["q_proj"], trainable=["classifier"])
    ft.add_lora(clf, r=2, alpha=2, target_names=["q_proj"])
    with pytest.raises(TypeError, match="LoRA added twice"):
        ft.add_lora(clf, r=2, alpha=2, target_names=["q_proj"])
    with pytest.raises(TypeError, match="target_names must be module names"):
        ft.add_lora(clf, r=2, alpha=2, target_names=[3])


class TwoLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(10, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def test_lora_gives_the_same_forward_as_peft():
    peft = pytest.importorskip("peft")
    ours = TwoLayers()
    theirs = peft.get_peft_model(copy.deepcopy(ours), peft.LoraConfig(
        r=4, lora_alpha=12, target_modules=["fc1", "fc2"], lora_dropout=0.0))
    ft.add_lora(ours, r=4, alpha=12, target_names=["fc1", "fc2"])
    with torch.no_grad():
        for name in ("fc1", "fc2"):
            mine = getattr(ours, name)
            nn.init.normal_(mine.B)  # a trained-looking B; A as initialised
            layer = getattr(theirs.base_model.model, name)
            layer.lora_A["default"].weight.copy_(mine.A)
            layer.lora_B["default"].weight.copy_(mine.B)
            assert layer.scaling["default"] == mine.scale == 3.0
    x = torch.randn(7, 10)
    assert torch.allclose(ours(x), theirs(x), atol=1e-6)
    assert sum(p.numel() for p in ours.parameters() if p.requires_grad) == \
        theirs.get_nb_trainable_parameters()[0]


# --------------------------------------------------------------------------- label budgets
def test_label_budget_sample_is_balanced_deterministic_and_nested():
    labels = pd.Series(["positive"] * 300 + ["negative"] * 500)
    draws = {n: ft.label_budget_sample(labels, n, seed=3) for n in (2, 7, 50, 51, 200, 600)}
    for n, index in draws.items():
        counts = labels.iloc[index].value_counts()
        assert len(index) == len(set(index)) == n and counts.max() - counts.min() <= n % 2
    budgets = sorted(draws)
    for small_n, big_n in zip(budgets, budgets[1:], strict=False):
        assert set(draws[small_n]) <= set(draws[big_n]), (small_n, big_n)
    assert np.array_equal(draws[50], ft.label_budget_sample(labels, 50, seed=3))
    assert not np.array_equal(draws[50], ft.label_budget_sample(labels, 50, seed=4))
    plain = [ft.label_budget_sample(labels.to_numpy(), n, 0, balanced=False) for n in (5, 80)]
    assert set(plain[0]) <= set(plain[1])
    as_tensor = ft.label_budget_sample(torch.tensor([0, 1] * 20), 10, seed=0)
    assert np.array_equal(np.bincount(np.arange(40)[as_tensor] % 2), [5, 5])


def test_label_budget_sample_errors():
    labels = np.array([0] * 8 + [1] * 2)
    with pytest.raises(ValueError, match="n=11 is more than the 10 examples"):
        ft.label_budget_sample(labels, 11, seed=0)
    with pytest.raises(ValueError, match="needs at least one example of each of the 2 classes"):
        ft.label_budget_sample(labels, 1, seed=0)
    with pytest.raises(ValueError, match="class 1 has 2 examples; a balanced draw of 6 needs 3"):
        ft.label_budget_sample(labels, 6, seed=0)
    with pytest.raises(ValueError, match="n must be a positive int"):
        ft.label_budget_sample(labels, 0, seed=0)
    with pytest.raises(ValueError, match="one label per example"):
        ft.label_budget_sample(np.zeros((3, 2)), 2, seed=0)


# --------------------------------------------------------------------------- masked LM
def test_mask_tokens_follows_berts_80_10_10_rule():
    ids = torch.randint(3, 1000, (200, 500))
    ids[:, 0], ids[:, -50:] = 1, PAD  # a special id first, then text, then padding
    inputs, labels = ft.mask_tokens(ids, mask_id=1000, vocab_size=1000,
                                    generator=torch.Generator().manual_seed(0),
                                    special_ids=(1,), pad_id=PAD)
    chosen = labels != -100
    real = (ids != PAD) & (ids != 1)
    assert not chosen[~real].any(), "a special id or a pad was chosen"
    assert abs(chosen[real].float().mean() - 0.15) < 0.005
    assert torch.equal(labels[chosen], ids[chosen])
    assert torch.equal(inputs[~chosen], ids[~chosen])
    masked = (inputs == 1000)[chosen].float().mean()
    replaced = ((inputs != 1000) & (inputs != ids))[chosen].float().mean()
    kept = (inputs == ids)[chosen].float().mean()
    assert abs(masked - 0.8) < 0.015 and abs(replaced - 0.1 * 999 / 1000) < 0.01
    assert abs(kept - (0.1 + 0.1 / 1000)) < 0.01
    again = ft.mask_tokens(ids, 1000, 1000, torch.Generator().manual_seed(0), special_ids=(1,),
                           pad_id=PAD)
    assert torch.equal(again[0], inputs) and torch.equal(again[1], labels)


def test_mask_tokens_errors():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 10, (2, 5))
    with pytest.raises(TypeError, match="integer token ids"):
        ft.mask_tokens(ids.float(), 10, 10, g)
    with pytest.raises(TypeError, match="pass a torch.Generator"):
        ft.mask_tokens(ids, 10, 10, 0)
    with pytest.raises(ValueError, match=r"p \(the share of positions to predict\)"):
        ft.mask_tokens(ids, 10, 10, g, p=15)
    with pytest.raises(ValueError, match="ids already hold mask_id=3"):
        ft.mask_tokens(torch.full((2, 5), 3), 3, 10, g)
    with pytest.raises(ValueError, match="vocab_size must be a positive int"):
        ft.mask_tokens(ids, 10, 0, g)


def test_mlm_loss_and_masked_token_nll_score_the_masked_positions_only():
    encoder = small(causal=False, vocab_size=V + 1)  # <mask> = V
    ids = torch.randint(1, V, (6, 16))
    inputs, labels = ft.mask_tokens(ids, V, V, torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = encoder(inputs)
    chosen = labels != -100
    by_hand = F.cross_entropy(logits[chosen], ids[chosen])
    assert torch.allclose(ft.mlm_loss(encoder, inputs, labels), by_hand, atol=1e-6)
    total, count = ft.masked_token_nll(encoder, inputs, labels, batch_size=4)
    assert count == int(chosen.sum()) and math.isclose(total / count, float(by_hand),
                                                       rel_tol=1e-5)


def test_lm_train_with_mlm_pairs_trains_an_encoder():
    W = 12  # a small vocabulary: 1, 2, ..., 11 in turn, so a masked id is its neighbour + 1
    encoder = GPT(GPTConfig(vocab_size=W + 1, max_len=16, d_model=32, num_heads=4,
                            num_layers=1, d_ff=64, dropout=0.0, pad_id=None, causal=False))
    stream = torch.arange(4000) % (W - 1) + 1
    stream[::40] = 0  # <bos> between "reviews": never masked
    pairs = ft.mlm_pairs(mask_id=W, vocab_size=W, seed=0, special_ids=(0,))
    rows = stream[:34].view(2, 17)
    x, y = pairs(rows)
    assert x.shape == y.shape == (2, 16) and (y[rows[:, :-1] == 0] == -100).all()
    history = lm.train(encoder, stream, 150, batch_size=16, window=16, lr=1e-2, warmup_steps=3,
                       pairs=pairs, checkpoints=[25, 125])  # means of 25 steps
    assert np.isfinite(history["train_loss"]).all()
    assert history["train_loss"].iloc[-1] < history["train_loss"].iloc[0] - 1.0


# --------------------------------------------------------------------------- the script
def test_pretrain_encoder_script_runs_at_smoke_size(tmp_path):
    spec = importlib.util.spec_from_file_location("pretrain_encoder_script",
                                                  ROOT / "scripts" / "pretrain_encoder.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--profile", "smoke", "--out", str(tmp_path)]) == 0
    card = json.loads((tmp_path / "encoder_imdb.json").read_text())
    assert card["profile"] == "smoke" and card["objective"] == "mlm" and card["steps"] >= 2
    model, saved = gpt.load(tmp_path / "encoder_imdb.pt")
    assert model.config.causal is False and saved["mask_id"] == model.config.vocab_size - 1
    meta = json.loads((tmp_path / "search" / "pretrain_encoder.json").read_text())
    assert meta["winner"]["lr_bracketed"] and meta["script_sha256"] == card["script_sha256"]
    with pytest.raises(SystemExit):
        script.main(["--profile", "smoke"])  # smoke results never go into the repository


# --------------------------------------------------------------------------- chapter 12's tools
def tiny(**kw):
    return small(**{**dict(d_model=16, num_heads=2, d_ff=32), **kw})


def separable(n, seed, flip=False):
    """Right-padded rows whose last id says the class (5 or 6): random ids 7.. before it."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 2
    lengths = torch.randint(2, 7, (n,), generator=g).tolist()
    seqs = [torch.randint(7, V, (k,), generator=g).tolist() + [5 + int(y)]
            for k, y in zip(lengths, labels, strict=True)]
    return ft.tail_rows(seqs, 8, PAD, PAD), (1 - labels) if flip else labels


def test_tail_rows_keeps_bos_and_the_end_of_each_text():
    rows = ft.tail_rows([[5, 6, 7, 8, 9, 10], [11, 12], [13], [21, 22, 23]], length=4,
                        bos_id=1, pad_id=PAD)
    assert rows.dtype == torch.long
    assert rows.tolist() == [[1, 8, 9, 10], [1, 11, 12, PAD], [1, 13, PAD, PAD], [1, 21, 22, 23]]
    assert ft.tail_rows([np.array([3, 4])], 3, bos_id=PAD, pad_id=PAD).tolist() == [[0, 3, 4]]
    with pytest.raises(ValueError, match="text 1 has no tokens: drop empty texts"):
        ft.tail_rows([[5], []], 4, bos_id=1, pad_id=PAD)
    for bad in (1, 0, 2.0, True, None):
        with pytest.raises(ValueError, match="length must be an int >= 2"):
            ft.tail_rows([[5]], bad, bos_id=1, pad_id=PAD)


def test_adapt_counts_trains_and_never_touches_the_backbone():
    backbone = tiny()
    before = copy.deepcopy(backbone.state_dict())
    full = ft.adapt(backbone, "full", PAD)
    assert full.backbone is not backbone and isinstance(full, ft.SequenceClassifier)
    assert ft.trainable_parameters(full) == sum(p.numel() for p in full.parameters())
    assert all(torch.equal(full.backbone.state_dict()[k], v) for k, v in before.items())
    lora = ft.adapt(backbone, "lora", PAD, r=2, alpha=4)
    adapters = [p for n, p in lora.named_parameters() if n.endswith((".A", ".B"))]
    assert len(adapters) == 2 * 2 * 2  # 2 layers x (q_proj, v_proj) x (A, B)
    head = 16 * 2 + 2
    assert ft.trainable_parameters(lora) == sum(p.numel() for p in adapters) + head
    assert ft.trainable_parameters(lora) == 2 * 2 * (2 * 16 + 16 * 2) + head
    assert isinstance(lora.backbone.blocks[1].attn.v_proj, ft.LoRALinear)
    random = ft.adapt(backbone, "random", PAD, seed=1)
    state = random.backbone.state_dict()
    assert state.keys() == before.keys()
    for k, v in before.items():
        assert state[k].shape == v.shape
        if v.dim() == 2 and k != "mask":  # weight matrices (LayerNorm and biases start equal)
            assert not torch.equal(state[k], v), f"{k} was not re-initialised"
    again = ft.adapt(backbone, "random", PAD, seed=1)
    assert all(torch.equal(again.state_dict()[k], v) for k, v in random.state_dict().items())
    assert ft.trainable_parameters(random) == ft.trainable_parameters(full)
    assert all(torch.equal(backbone.state_dict()[k], v) for k, v in before.items())
    assert all(p.requires_grad for p in backbone.parameters())  # LoRA froze its copy only
    assert not any(isinstance(m, ft.LoRALinear) for m in backbone.modules())
    with pytest.raises(ValueError, match=r"how must be one of \('full', 'lora', 'random'\)"):
        ft.adapt(backbone, "probe", PAD)


def test_arms_name_known_ways_and_pools():
    assert all(arm["how"] in ft.HOW and arm["pool"] in ft.POOLS for arm in ft.ARMS.values())


def test_predict_logits_is_the_forward_in_eval_mode_and_restores_the_mode():
    clf = ft.SequenceClassifier(tiny(dropout=0.5), num_classes=2, pad_id=PAD)
    rows, _ = separable(5, seed=0)
    clf.train()
    logits = ft.predict_logits(clf, rows, batch_size=2)  # batches of 2, 2, 1
    assert clf.training, "predict_logits left the model in eval mode"
    with torch.no_grad():
        expected = clf.eval()(rows)
    assert logits.shape == (5, 2) and logits.dtype == torch.float32
    assert torch.allclose(logits, expected, atol=1e-6)
    assert torch.allclose(ft.predict_logits(clf, rows), expected, atol=1e-6)
    assert not clf.training  # an eval-mode model stays in eval mode


@pytest.mark.parametrize("pool", ["last", "mean"])
def test_frozen_features_are_the_pooled_hidden_states(pool):
    backbone = tiny()
    rows, _ = separable(5, seed=0)
    features = ft.frozen_features(backbone, rows, PAD, pool, batch_size=2)
    keep = ft.real_positions(rows, PAD)
    with torch.no_grad():
        expected = ft.pool_hidden(backbone.features(rows, keep=keep), keep, pool)
    assert isinstance(features, np.ndarray) and features.shape == (5, 16)
    assert np.allclose(features, expected.numpy(), atol=1e-6)


def _val_loss(clf, rows, labels):
    return float(F.cross_entropy(ft.predict_logits(clf, rows), labels))


def test_fit_classifier_learns_in_rounds_of_whole_epochs():
    clf = ft.adapt(tiny(), "full", PAD)
    rows, labels = separable(12, seed=0)
    val_rows, val_labels = separable(8, seed=1)
    start = _val_loss(clf, val_rows, val_labels)
    fit = ft.fit_classifier(clf, rows, labels, val_rows, val_labels, lr=3e-3, batch_size=5,
                            round_examples=30, max_rounds=3, patience=2)
    assert fit["epochs_per_round"] == math.ceil(30 / 12) == 3
    assert fit["steps"] == fit["rounds"] * 3 * math.ceil(12 / 5)
    assert fit["examples_seen"] == fit["rounds"] * 3 * 12
    losses = [h["val_loss"] for h in fit["history"]]
    assert losses[-1] < losses[0] < start, losses
    assert fit["best_round"] == fit["rounds"] == 3 and fit["at_cap"] is True
    assert fit["val_loss"] == pytest.approx(_val_loss(clf, val_rows, val_labels), abs=1e-6)
    assert fit["val_acc"] == float((ft.predict_logits(clf, val_rows).argmax(-1) ==
                                    val_labels).float().mean())
    assert fit["trained_params"] == ft.trainable_parameters(clf)
    one_epoch = ft.fit_classifier(ft.adapt(tiny(), "full", PAD), rows, labels, val_rows,
                                  val_labels, lr=1e-3, round_examples=5, max_rounds=1)
    assert one_epoch["epochs_per_round"] == 1 and one_epoch["at_cap"] is True


def test_fit_classifier_stops_after_patience_rounds_and_puts_the_best_back():
    clf = ft.adapt(tiny(), "full", PAD)
    rows, labels = separable(12, seed=0)
    val_rows, val_labels = separable(8, seed=1, flip=True)  # learning the task hurts here
    fit = ft.fit_classifier(clf, rows, labels, val_rows, val_labels, lr=3e-3, batch_size=6,
                            round_examples=12, max_rounds=10, patience=2)
    losses = [h["val_loss"] for h in fit["history"]]
    assert fit["best_round"] == 1 and fit["rounds"] == 1 + 2 and fit["at_cap"] is False, losses
    assert losses[-1] > losses[0]
    restored = _val_loss(clf, val_rows, val_labels)
    assert restored == pytest.approx(fit["val_loss"], abs=1e-6) and fit["val_loss"] == losses[0]
    assert restored != pytest.approx(losses[-1], abs=1e-4)  # not the last round's weights


def test_fit_classifier_changes_only_what_requires_grad():
    backbone = tiny()
    before = copy.deepcopy(backbone.state_dict())
    clf = ft.adapt(backbone, "lora", PAD, r=2, alpha=4)
    frozen = {n: p.detach().clone() for n, p in clf.named_parameters() if not p.requires_grad}
    trained = {n: p.detach().clone() for n, p in clf.named_parameters() if p.requires_grad}
    rows, labels = separable(12, seed=0)
    val_rows, val_labels = separable(8, seed=1)
    fit = ft.fit_classifier(clf, rows, labels, val_rows, val_labels, lr=1e-2, batch_size=6,
                            round_examples=12, max_rounds=2, patience=1)
    now = dict(clf.named_parameters())
    assert frozen and all(torch.equal(now[n], p) for n, p in frozen.items())
    changed = {n for n, p in trained.items() if not torch.equal(now[n], p)}
    assert {"head.weight", "backbone.blocks.0.attn.q_proj.B"} <= changed
    assert fit["trained_params"] == ft.trainable_parameters(clf) == sum(
        p.numel() for p in trained.values())
    assert all(torch.equal(backbone.state_dict()[k], v) for k, v in before.items())


@pytest.mark.parametrize("change, message", [
    (dict(labels=torch.tensor([0, 1, 0])), r"rows has 4 rows but its labels are not a "
                                           r"LongTensor \[4\]"),
    (dict(val_labels=torch.tensor([0, 1])), r"val_rows has 3 rows"),
    (dict(val_labels=torch.tensor([0.0, 1.0, 0.0])), r"val_rows has 3 rows"),
    (dict(rows=torch.tensor([3, 4, 5, 6])), r"rows must be a LongTensor \[N, L\]"),
    (dict(lr=0.0), "lr must be > 0, got 0.0"),
    (dict(lr=-1e-3), "lr must be > 0"),
    (dict(patience=0), "patience must be a positive int, got 0"),
    (dict(max_rounds=0), "max_rounds must be a positive int"),
    (dict(batch_size=2.5), "batch_size must be a positive int"),
])
def test_fit_classifier_bad_inputs_say_what_is_wrong(change, message):
    clf = ft.adapt(tiny(), "full", PAD)
    rows, labels = separable(4, seed=0)
    val_rows, val_labels = separable(3, seed=1)
    args = dict(rows=rows, labels=labels, val_rows=val_rows, val_labels=val_labels, lr=1e-3)
    with pytest.raises(ValueError, match=message):
        ft.fit_classifier(clf, **{**args, **change})


def test_fit_classifier_says_so_when_the_validation_loss_is_never_finite():
    clf = ft.adapt(tiny(), "full", PAD)
    rows, labels = separable(4, seed=0)
    with torch.no_grad():
        clf.head.weight.fill_(float("nan"))
    with pytest.raises(ValueError, match=r"never finite \(nan\) in 1 round\(s\): lr=0.001"):
        ft.fit_classifier(clf, rows, labels, rows, labels, lr=1e-3, max_rounds=3, patience=1)


def _ending_logp(model, text, ending):
    x = torch.tensor([list(text) + list(ending)])
    with torch.no_grad():
        logp = torch.log_softmax(model(x)[0], dim=-1)  # [W, V]
    return sum(float(logp[len(text) - 1 + k, e]) for k, e in enumerate(ending))


def test_zero_shot_margin_is_the_log_probability_of_one_ending_minus_the_other():
    model = tiny()
    endings = ([20, 21], [22])  # room for the text: max_len 16 - 2 = 14 ids, <bos> included
    long_text = list(range(23, 23 + 15))  # 15 ids: <bos> and its last 13 fit
    rows = ft.tail_rows([[5, 6, 7], long_text], 16, PAD, PAD)
    margin = ft.zero_shot_margin(model, rows, PAD, endings, batch_size=1)
    assert isinstance(margin, np.ndarray) and margin.shape == (2,)
    short = [PAD, 5, 6, 7]
    by_hand = _ending_logp(model, short, [20, 21]) - _ending_logp(model, short, [22])
    assert margin[0] == pytest.approx(by_hand, abs=1e-4)
    tail = [PAD] + long_text[-13:]
    by_hand = _ending_logp(model, tail, [20, 21]) - _ending_logp(model, tail, [22])
    assert margin[1] == pytest.approx(by_hand, abs=1e-4)
    assert np.allclose(ft.zero_shot_margin(model, rows, PAD, endings), margin, atol=1e-5)
    assert np.allclose(ft.zero_shot_margin(model, ft.tail_rows([long_text], 14, PAD, PAD), PAD,
                                           endings), margin[1:], atol=1e-5)


def test_zero_shot_margin_runs_in_eval_mode_and_refuses_an_encoder_or_no_room():
    model = tiny(dropout=0.5).train()
    rows = ft.tail_rows([[5, 6, 7], [8, 9]], 6, PAD, PAD)
    margin = ft.zero_shot_margin(model, rows, PAD, ([20], [22]))
    assert model.training, "zero_shot_margin left the model in eval mode"
    assert np.allclose(margin, ft.zero_shot_margin(model.eval(), rows, PAD, ([20], [22])))
    with pytest.raises(ValueError, match=r"an encoder \(causal=False\) does not predict"):
        ft.zero_shot_margin(tiny(causal=False), rows, PAD, ([20], [22]))
    for endings in (([20] * 15, [22]), ([], [22])):
        with pytest.raises(ValueError, match=r"each ending needs 1 to 14 ids"):
            ft.zero_shot_margin(model, rows, PAD, endings)


def test_a_new_head_starts_at_zero_so_the_untrained_loss_is_ln_c():
    clf = ft.SequenceClassifier(small(), num_classes=3, pad_id=PAD)
    assert not clf.head.weight.any() and not clf.head.bias.any()
    loss = clf.loss(padded_batch(), torch.tensor([0, 2]))
    assert math.isclose(loss.item(), math.log(3), rel_tol=1e-6)
