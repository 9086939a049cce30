"""Unit tests of course_lib.gpt: the decoder-only model, its causality and its KV cache."""

import pytest
import torch
from torch import nn

from course_lib import decoding
from course_lib.blocks import AblationBlock, PostNormBlock
from course_lib.gpt import (
    GPT,
    CachedStepFn,
    GPTConfig,
    kv_cache_bytes,
    lm_batch_loss,
    load,
    save,
    token_nll,
    warmup_cosine,
)
from course_lib.positional import SequenceTooLongError

V = 50


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def small(**kw):
    args = dict(vocab_size=V, max_len=40, d_model=32, num_heads=4, num_layers=2, d_ff=64,
                dropout=0.0)
    args.update(kw)
    return GPT(GPTConfig(**args)).eval()


def test_shapes_and_parameter_count():
    model = small()
    tokens = torch.randint(0, V, (3, 10))
    assert model(tokens).shape == (3, 10, V)
    d, f, L = 32, 64, 2
    block = 4 * (d * d + d) + (d * f + f) + (f * d + d) + 2 * 2 * d
    expected = V * d + 40 * d + L * block + 2 * d  # tied head adds nothing
    assert sum(p.numel() for p in model.parameters()) == expected
    untied = small(tie_weights=False)
    assert sum(p.numel() for p in untied.parameters()) == expected + d * V + V


def test_weights_are_tied():
    model = small()
    assert model.head.weight is model.token_embedding.weight
    assert model.head.bias is None
    untied = small(tie_weights=False)
    assert untied.head.weight is not untied.token_embedding.weight


def test_causal_no_peeking_at_the_future():
    model = small()
    tokens = torch.randint(0, V, (2, 12))
    changed = tokens.clone()
    changed[:, 7:] = torch.randint(0, V, (2, 5))
    a, b = model(tokens), model(changed)
    assert torch.allclose(a[:, :7], b[:, :7], atol=1e-6)
    assert not torch.allclose(a[:, 7:], b[:, 7:])


def test_gradient_flows_only_from_the_past():
    model = small()
    x = model.embed(torch.randint(0, V, (1, 8))).detach().requires_grad_(True)
    h = x
    for block in model.blocks:
        h, _ = block(h, mask=model.mask[:8, :8])
    h[0, 3].sum().backward()
    grad_per_pos = x.grad[0].abs().sum(dim=-1)
    assert (grad_per_pos[4:] == 0).all() and (grad_per_pos[:4] > 0).all()


def test_attention_maps_are_causal_rows_summing_to_one():
    model = small()
    maps = model.attention_maps(torch.randint(0, V, (2, 9)))
    assert len(maps) == 2 and maps[0].shape == (2, 4, 9, 9)
    for w in maps:
        assert torch.allclose(w.sum(-1), torch.ones(2, 4, 9), atol=1e-5)
        assert (w.triu(1) == 0).all()


def test_too_long_raises_clear_error():
    model = small(max_len=8)
    with pytest.raises(SequenceTooLongError, match="sequence length 9 exceeds max_len=8"):
        model(torch.randint(0, V, (1, 9)))
    _, cache = model.forward_cached(torch.randint(0, V, (1, 6)))
    with pytest.raises(SequenceTooLongError, match="sequence length 9 exceeds max_len=8"):
        model.forward_cached(torch.randint(0, V, (1, 3)), cache)  # positions 6, 7, 8


# --------------------------------------------------------------------------- the page's model
class _PageBlock(nn.Module):
    """Chapter 7's on-page block, in short: its names, its two residual lines."""

    def __init__(self, d, h, d_ff):
        super().__init__()
        from course_lib.attention import MultiHeadAttention

        self.norm1, self.attn = nn.LayerNorm(d), MultiHeadAttention(d, h)
        self.norm2, self.ffn = nn.LayerNorm(d), nn.Module()
        self.ffn.net = nn.Sequential(nn.Linear(d, d_ff), nn.GELU(), nn.Dropout(0.0),
                                     nn.Linear(d_ff, d))

    def forward(self, x, mask):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, mask=mask)[0]
        return x + self.ffn.net(self.norm2(x))


def test_a_plain_gpt_and_the_library_load_each_others_state_dicts():
    torch.manual_seed(0)
    model = small(max_len=8, dropout=0.0, pad_id=None)
    plain = nn.Module()
    plain.token_embedding, plain.position = nn.Embedding(V, 32), nn.Embedding(8, 32)
    plain.blocks = nn.ModuleList(_PageBlock(32, 4, 64) for _ in range(2))
    plain.final_norm = nn.LayerNorm(32)
    plain.head = nn.Linear(32, V, bias=False)
    plain.head.weight = plain.token_embedding.weight
    plain.load_state_dict(model.state_dict())  # strict, no renaming
    assert sorted(plain.state_dict()) == sorted(model.state_dict())
    idx = torch.randint(0, V, (2, 8))
    x = plain.token_embedding(idx) + plain.position(torch.arange(8))
    for block in plain.blocks:
        x = block(x, torch.ones(8, 8, dtype=torch.bool).tril())
    torch.testing.assert_close(plain.head(plain.final_norm(x)), model(idx), atol=1e-5, rtol=1e-5)
    other = small(max_len=8, dropout=0.0, pad_id=None)
    other.load_state_dict(plain.state_dict())  # and back
    assert torch.equal(other(idx), model(idx))


@pytest.mark.parametrize("bad", [-1, 50, 1000])
def test_out_of_vocabulary_id_raises_clear_error(bad):
    model = small()
    tokens = torch.tensor([[1, 2, bad]])
    with pytest.raises(ValueError, match=f"token id {bad} is outside the vocabulary of 50 tokens"):
        model(tokens)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model.forward_cached(tokens)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model.attention_maps(tokens)


def test_loss_ignores_padding():
    model = small()
    rows = torch.randint(3, V, (2, 9))
    padded = rows.clone()
    padded[1, 5:] = 0  # pad_id
    manual = nn.functional.cross_entropy(model(padded[:, :-1]).reshape(-1, V),
                                         padded[:, 1:].reshape(-1), ignore_index=0)
    assert torch.allclose(model.loss(padded), manual)
    total, count = token_nll(model, padded, batch_size=1)
    assert count == 8 + 4
    assert total / count == pytest.approx(manual.item(), rel=1e-5)


# --------------------------------------------------------------------------- KV cache
def test_cached_logits_equal_uncached():
    model = small()
    tokens = torch.randint(0, V, (3, 30))
    full = model(tokens)
    logits, cache = model.forward_cached(tokens[:, :10])  # a prompt at once
    steps = [logits]
    for t in range(10, 30):  # then one token at a time
        logits, cache = model.forward_cached(tokens[:, t:t + 1], cache)
        steps.append(logits)
    cached = torch.cat(steps, dim=1)
    assert (cached - full).abs().max().item() <= 1e-5
    assert len(cache) == 2 and cache[0].keys.shape == cache[0].values.shape == (3, 4, 30, 8)


@pytest.mark.parametrize("make_block", [lambda: PostNormBlock(32, 4, 64),
                                        lambda: AblationBlock(32, 4, 64, use_ffn=False)])
def test_cached_logits_equal_uncached_for_other_block_wirings(make_block):
    # the cache lives in the attention, so any block's own forward uses it
    model = small()
    for i in range(len(model.blocks)):
        model.blocks[i] = make_block().eval()
    tokens = torch.randint(0, V, (2, 12))
    logits, cache = model.forward_cached(tokens[:, :5])
    steps = [logits]
    for t in range(5, 12):
        logits, cache = model.forward_cached(tokens[:, t:t + 1], cache)
        steps.append(logits)
    assert (torch.cat(steps, 1) - model(tokens)).abs().max().item() <= 1e-5


def test_cached_chunks_equal_uncached():
    model = small()
    tokens = torch.randint(0, V, (2, 20))
    a, cache = model.forward_cached(tokens[:, :7])
    b, cache = model.forward_cached(tokens[:, 7:15], cache)  # several new tokens at once
    c, _ = model.forward_cached(tokens[:, 15:], cache)
    assert (torch.cat([a, b, c], 1) - model(tokens)).abs().max().item() <= 1e-5


def test_cached_generation_equals_uncached():
    model = small()
    prompt = torch.randint(0, V, (4, 3))
    slow = decoding.greedy_decode(model.step_fn(), prompt, 30)
    step = CachedStepFn(model)
    fast = decoding.greedy_decode(step, prompt, 30)
    assert torch.equal(slow, fast)
    assert step.bytes() == kv_cache_bytes(model.config, batch=4, length=32)
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    s1 = decoding.sample(model.step_fn(), prompt, 20, top_p=0.9, generator=g1)
    s2 = decoding.sample(CachedStepFn(model), prompt, 20, top_p=0.9, generator=g2)
    assert torch.equal(s1, s2)


def test_cached_beam_search_equals_uncached():
    model = small()
    prompt = torch.randint(0, V, (2, 4))
    slow = decoding.beam_search(model.step_fn(), prompt, beam_size=3, max_new_tokens=12, eos_id=5)
    fast = decoding.beam_search(CachedStepFn(model), prompt, beam_size=3, max_new_tokens=12,
                                eos_id=5)
    assert torch.equal(slow[0], fast[0])
    assert torch.allclose(slow[1], fast[1], atol=1e-5)


def test_cached_step_fn_restarts_on_a_new_prompt():
    model = small()
    step = CachedStepFn(model)
    a = torch.randint(0, V, (2, 5))
    b = torch.randint(0, V, (2, 5))
    step(a)
    assert torch.allclose(step(b), model(b)[:, -1], atol=1e-5)
    with pytest.raises(ValueError, match="max_len"):
        step(torch.randint(0, V, (1, 41)))


def test_last_only_runs_the_head_at_the_last_position_only():
    model = small()
    tokens = torch.randint(0, V, (3, 12))
    seen = []
    hook = model.head.register_forward_hook(lambda m, args, out: seen.append(args[0].shape))
    with torch.no_grad():
        full, last = model(tokens), model(tokens, last_only=True)
        fair = model.step_fn(last_only=True)(tokens)
    hook.remove()
    assert seen == [(3, 12, 32), (3, 1, 32), (3, 1, 32)]  # d_model 32: the head's input
    assert last.shape == (3, 1, V)
    assert torch.allclose(last[:, 0], full[:, -1], atol=1e-5)
    assert torch.allclose(fair, model.step_fn()(tokens), atol=1e-5)
    slow = decoding.greedy_decode(model.step_fn(), tokens[:, :3], 20)
    assert torch.equal(decoding.greedy_decode(model.step_fn(last_only=True), tokens[:, :3], 20),
                       slow)


def test_uncached_step_fn_slides_past_max_len():
    model = small(max_len=8)
    tokens = torch.randint(0, V, (2, 12))
    assert torch.allclose(model.step_fn()(tokens), model(tokens[:, -8:])[:, -1])
    assert torch.allclose(model.step_fn(last_only=True)(tokens), model(tokens[:, -8:])[:, -1],
                          atol=1e-5)


# --------------------------------------------------------------------------- helpers
def test_save_and_load_round_trip(tmp_path):
    model = small()
    path = tmp_path / "m.pt"
    save(model, path, vocab=["<pad>", "<unk>"])
    loaded, saved = load(path)
    assert saved["vocab"] == ["<pad>", "<unk>"]
    tokens = torch.randint(0, V, (2, 6))
    assert torch.equal(loaded(tokens), model(tokens))
    assert loaded.head.weight is loaded.token_embedding.weight
    assert [f.name for f in tmp_path.iterdir()] == ["m.pt"]  # no temporary file left behind


def test_save_replaces_an_existing_file_whole(tmp_path):
    path = tmp_path / "m.pt"
    save(small(), path, tag="old")
    save(small(), str(path), tag="new")  # a str path works too
    assert load(path)[1]["tag"] == "new"


def test_warmup_cosine_shape():
    f = warmup_cosine(10, 110, final_fraction=0.1)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(60) == pytest.approx(0.55) and f(110) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="warmup_steps"):
        warmup_cosine(10, 10)


def test_config_type_checked():
    with pytest.raises(TypeError, match="GPTConfig"):
        GPT({"vocab_size": 5})


def test_row_batches_cover_every_row_once_per_pass():
    from course_lib.gpt import RowBatches

    rows = torch.arange(10)[:, None].repeat(1, 3)
    loader = RowBatches(rows, batch_size=3, steps=3, seed=0)
    first = torch.cat([b[0][:, 0] for b in loader])
    assert len(loader) == 3 and len(set(first.tolist())) == 9  # no repeats within a pass
    second = torch.cat([b[0][:, 0] for b in loader])  # crosses into a new pass
    assert second.shape == (9,) and loader.passes == 1
    with pytest.raises(ValueError, match="batch_size"):
        RowBatches(rows, batch_size=11, steps=1)


def test_optimizer_decays_only_block_matrices():
    from course_lib.gpt import configure_optimizer

    model = small()
    opt = configure_optimizer(model, lr=1e-3, weight_decay=0.1)
    decayed = {id(p) for p in opt.param_groups[0]["params"]}
    assert id(model.token_embedding.weight) not in decayed
    assert id(model.blocks[0].attn.q_proj.weight) in decayed
    assert id(model.blocks[0].attn.q_proj.bias) not in decayed
    assert id(model.position.weight) not in decayed  # an embedding, whatever its name
    assert id(model.blocks[0].norm1.weight) not in decayed
    assert id(model.blocks[0].ffn.net[0].weight) in decayed
    n = sum(p.numel() for g in opt.param_groups for p in g["params"])
    assert n == sum(p.numel() for p in model.parameters())


def test_configure_optimizer_no_decay_exempts_named_parameters_and_rejects_strangers():
    from course_lib import ladder
    from course_lib.lm import configure_optimizer

    torch.manual_seed(0)
    model = ladder.build("blocks", 50, 8, 16, 2, 1)  # untied: its head is an nn.Linear
    decayed = lambda opt: {id(p) for p in opt.param_groups[0]["params"]}  # noqa: E731
    assert id(model.head.weight) in decayed(configure_optimizer(model, lr=1e-3))
    opt = configure_optimizer(model, lr=1e-3, no_decay=[model.head.weight])
    assert id(model.head.weight) not in decayed(opt)
    assert id(model.blocks[0].attn.q_proj.weight) in decayed(opt)  # the rest as before
    n = sum(p.numel() for g in opt.param_groups for p in g["params"])
    assert n == sum(p.numel() for p in model.parameters())
    with pytest.raises(ValueError, match="parameters of this model"):
        configure_optimizer(model, lr=1e-3, no_decay=[torch.nn.Parameter(torch.zeros(3, 3))])


def test_configure_optimizer_lr_scale_gives_parameters_their_own_rate():
    from course_lib import ladder
    from course_lib.lm import configure_optimizer

    torch.manual_seed(0)
    model = ladder.build("tied head", 50, 8, 16, 2, 1)
    emb = model.token_embedding.weight
    opt = configure_optimizer(model, lr=1e-2, lr_scale={emb: 0.5})
    rates = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    assert rates[id(emb)] == pytest.approx(5e-3)
    assert rates[id(model.blocks[0].attn.q_proj.weight)] == pytest.approx(1e-2)
    assert len(rates) == len(list(model.parameters()))  # each parameter once, tied included
    decayed = {id(p) for p in opt.param_groups[0]["params"]}
    assert id(emb) not in decayed and opt.param_groups[0]["weight_decay"] > 0
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.1)  # scales every group
    assert {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}[id(emb)] == \
        pytest.approx(5e-4)
    del sched
    with pytest.raises(ValueError, match="positive"):
        configure_optimizer(model, lr=1e-2, lr_scale={emb: 0.0})
    with pytest.raises(ValueError, match="parameters of this model"):
        configure_optimizer(model, lr=1e-2, lr_scale={torch.nn.Parameter(torch.ones(2)): 2.0})


def test_train_passes_no_decay_to_the_optimizer():
    from course_lib import ladder, lm

    torch.manual_seed(0)
    stream = torch.randint(0, 50, (400,))
    runs = {}
    for name, exempt in (("decayed", ()), ("exempt", True)):
        torch.manual_seed(0)
        m = ladder.build("blocks", 50, 8, 16, 2, 1)
        with torch.no_grad():
            m.head.weight.fill_(1.0)
        lm.train(m, stream, 3, batch_size=2, window=8, lr=1e-3, warmup_steps=1,
                 weight_decay=0.5, device="cpu", precision=None,
                 no_decay=[m.head.weight] if exempt is True else ())
        runs[name] = m.head.weight.detach().clone()
    assert not torch.equal(runs["decayed"], runs["exempt"])  # decay moved the head


def test_sliding_windows_score_every_token_once_with_context():
    from course_lib.gpt import sliding_windows

    seq = list(range(10, 33))  # 23 ids -> 22 targets
    rows, scored = sliding_windows([seq, [5, 6, 7]], window=8, stride=4, pad_id=0)
    targets = rows[:, 1:][scored]
    assert sorted(targets.tolist()) == sorted(seq[1:] + [6, 7])
    # after a sequence's first row, every scored target has >= window - stride of context
    for r in range(1, 5):
        assert scored[r].nonzero().min() >= 4
    assert scored[0].all() and rows.shape[1] == 9
    with pytest.raises(ValueError, match="stride"):
        sliding_windows([seq], window=8, stride=9, pad_id=0)


def test_sliding_nll_with_full_stride_equals_plain_windows():
    from course_lib.gpt import sliding_nll
    from course_lib.text import next_token_windows

    model = small(max_len=8)
    seqs = [torch.randint(3, V, (n,)).tolist() for n in (5, 20, 31)]
    total, count = sliding_nll(model, seqs, stride=8)
    plain_total, plain_count = token_nll(model, next_token_windows(seqs, 8, pad_id=0))
    assert count == plain_count == 4 + 19 + 30
    assert total == pytest.approx(plain_total, rel=1e-5)
    # a shorter stride scores the same tokens, each with more context
    assert sliding_nll(model, seqs, stride=2)[1] == count


def test_lm_batch_loss_is_the_model_loss_for_a_tensor_or_a_1_tuple():
    model = small()
    rows = torch.randint(1, V, (3, 9))
    rows[0, 6:] = 0  # padding targets are ignored
    expected = model.loss(rows)
    assert torch.equal(lm_batch_loss(model, rows, "cpu"), expected)
    assert torch.equal(lm_batch_loss(model, (rows,), "cpu"), expected)  # a DataLoader batch
