"""Unit tests of course_lib.seq2seq.Seq2SeqTransformer, including equality with nn.Transformer."""

import math
import warnings

import pytest
import torch
from torch import nn

from course_lib import decoding
from course_lib.masks import causal_mask
from course_lib.seq2seq import CachedDecoderStep, Seq2SeqTransformer, count_parameters

V, D, H, FF, PAD = 31, 16, 2, 24, 0


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def make(**kw):
    args = dict(
        vocab_size=V,
        d_model=D,
        num_heads=H,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=FF,
        dropout=0.0,
        pad_id=PAD,
    )
    args.update(kw)
    return Seq2SeqTransformer(**args)


def tokens(lengths, max_len=None):
    """Right-padded random ids in [1, V), one row per length."""
    max_len = max_len or max(lengths)
    out = torch.full((len(lengths), max_len), PAD)
    for i, n in enumerate(lengths):
        out[i, :n] = torch.randint(1, V, (n,))
    return out


def close(a, b, atol=1e-5):
    return torch.allclose(a, b, atol=atol, rtol=0)


def torch_twin(model, norm_first, randomize_norms=True):
    with warnings.catch_warnings():  # "enable_nested_tensor is True, but ... norm_first was True"
        warnings.simplefilter("ignore")
        ref = nn.Transformer(
            D,
            H,
            len(model.encoder_layers),
            len(model.decoder_layers),
            FF,
            dropout=0.0,
            batch_first=True,
            norm_first=norm_first,
        )
    if randomize_norms:  # LayerNorm weights 1 and biases 0 would hide a misplaced norm
        with torch.no_grad():
            for m in ref.modules():
                if isinstance(m, nn.LayerNorm):
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.normal_()
    model.load_from_torch(ref)
    return ref


def torch_logits(model, ref, src, tgt):
    """nn.Transformer between our embeddings and our output projection. Its masks say
    True = blocked: the inverse of ours."""
    out = ref(
        model.embed(src, model.src_embed),
        model.embed(tgt, model.tgt_embed),
        tgt_mask=~causal_mask(tgt.shape[1]),
        tgt_is_causal=True,
        src_key_padding_mask=src == PAD,
        tgt_key_padding_mask=tgt == PAD,
        memory_key_padding_mask=src == PAD,
    )
    return model.generator(out)


# --------------------------------------------------------------------------- structure
def test_output_shape():
    model = make()
    assert model(
        tokens([5, 3]),
        tokens(
            [
                4,
                2,
            ]
        ),
    ).shape == (2, 4, V)


def test_weight_tying_and_parameter_count():
    model = make()
    assert model.generator.weight is model.tgt_embed.weight is model.src_embed.weight
    per_mha = 4 * (D * D + D)
    ffn = D * FF + FF + FF * D + D
    ln = 2 * D
    enc = per_mha + ffn + 2 * ln
    dec = 2 * per_mha + ffn + 3 * ln
    expected = V * D + 2 * enc + 2 * dec + 2 * ln  # one table, two final norms
    assert count_parameters(model) == expected
    untied = make(share_source_embedding=False)
    assert untied.src_embed is not untied.tgt_embed
    assert count_parameters(untied) == expected + V * D


def test_post_norm_has_no_final_norm_by_default():
    assert isinstance(make(norm_first=False).encoder_norm, nn.Identity)
    assert isinstance(make(norm_first=False, final_norm=True).decoder_norm, nn.LayerNorm)
    assert isinstance(make().encoder_norm, nn.LayerNorm)


def test_embedding_initialisation_and_scale():
    model = make(d_model=64, num_heads=4, vocab_size=2000)
    w = model.tgt_embed.weight
    assert (w[PAD] == 0).all()
    assert abs(w[1:].std().item() * math.sqrt(64) - 1) < 0.05  # unit scale after * sqrt(d)
    src = tokens([6])
    expected = w[src] * math.sqrt(64) + model.positions.pe[:6]
    assert close(model.embed(src, model.src_embed), expected)


# --------------------------------------------------------------------------- masks
def test_masks():
    model = make()
    src, tgt = tokens([4, 2]), tokens([3, 1], max_len=3)
    sm = model.source_mask(src)
    assert sm.shape == (2, 1, 1, 4) and sm[1, 0, 0].tolist() == [True, True, False, False]
    tm = model.target_mask(tgt)
    assert tm.shape == (2, 1, 3, 3)
    assert tm[0, 0].equal(causal_mask(3))
    assert tm[1, 0].tolist() == [[True, False, False], [True, False, False], [True, False, False]]
    # with right padding, padding AND causal equals causal on every real (non-pad) query row
    real = tgt != PAD
    assert (tm[:, 0] == causal_mask(3))[real].all()


def test_decoder_is_causal():
    model = make().eval()
    src, tgt = tokens([5]), tokens([6])
    changed = tgt.clone()
    changed[0, 4:] = (changed[0, 4:] % (V - 1)) + 1  # new future tokens
    a, b = model(src, tgt), model(src, changed)
    assert close(a[:, :4], b[:, :4]) and not close(a[:, 4:], b[:, 4:])


def test_padding_changes_nothing_and_sentences_are_independent():
    model = make().eval()
    src, tgt = tokens([5, 2]), tokens([4, 3])
    both = model(src, tgt)
    for i, (ls, lt) in enumerate(((5, 4), (2, 3))):
        alone = model(src[i : i + 1, :ls], tgt[i : i + 1, :lt])
        assert close(both[i : i + 1, :lt], alone)
    longer = model(torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], 1), tgt)
    assert close(both[tgt != PAD], longer[tgt != PAD])


# --------------------------------------------------------------------------- nn.Transformer
@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("norm_first", [True, False])
def test_equals_nn_transformer(norm_first):
    model = make(norm_first=norm_first, final_norm=True)
    ref = torch_twin(model, norm_first)
    src, tgt = tokens([6, 3, 5]), tokens([5, 5, 2])
    real = tgt != PAD
    ours, theirs = model(src, tgt), torch_logits(model, ref, src, tgt)
    assert close(ours, theirs)  # training mode (dropout 0): every position agrees
    model.eval(), ref.eval()
    with torch.no_grad():  # eval + no_grad may take PyTorch's fast path: compare real positions
        ours, theirs = model(src, tgt), torch_logits(model, ref, src, tgt)
    assert close(ours[real], theirs[real])


def test_post_norm_final_norm_is_the_difference():
    """nn.Transformer ends Post-Norm stacks with a LayerNorm too; the paper's Post-Norm does not."""
    model = make(norm_first=False)  # final_norm=False, as in the paper
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = nn.Transformer(D, H, 2, 2, FF, dropout=0.0, batch_first=True, norm_first=False)
    with pytest.raises(ValueError, match="final encoder LayerNorm.*final_norm=True"):
        model.load_from_torch(ref)
    ref.encoder.norm, ref.decoder.norm = nn.Identity(), nn.Identity()
    model.load_from_torch(ref)
    src, tgt = tokens([4, 6]), tokens([3, 5])
    assert close(model(src, tgt), torch_logits(model, ref, src, tgt))


def test_load_from_torch_changes_the_output():
    model = make()
    src, tgt = tokens([4]), tokens([3])
    before = model(src, tgt)
    torch_twin(model, True)
    assert not close(before, model(src, tgt), atol=1e-3)


def test_load_from_torch_rejects_other_sizes():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        three = nn.Transformer(D, H, 3, 2, FF, batch_first=True, norm_first=True)
        wide = nn.Transformer(2 * D, H, 2, 2, FF, batch_first=True, norm_first=True)
        post = nn.Transformer(D, H, 2, 2, FF, batch_first=True, norm_first=False)
    with pytest.raises(ValueError, match="layer counts differ"):
        make().load_from_torch(three)
    with pytest.raises(ValueError, match="d_model differs"):
        make().load_from_torch(wide)
    with pytest.raises(ValueError, match="norm position differs"):
        make().load_from_torch(post)


# --------------------------------------------------------------------------- inference helpers
def test_step_fn_equals_forward_last_position():
    model = make().eval()
    src, prefix = tokens([5, 3]), tokens([4, 4])
    step = model.make_step_fn(src)
    assert close(step(prefix), model(src, prefix)[:, -1])


def test_step_fn_with_beams_repeats_batch_major():
    model = make().eval()
    src = tokens([5, 3])
    step = model.make_step_fn(src, beam_size=3)
    prefix = tokens([2, 2, 2, 2, 2, 2])
    logits = step(prefix)
    assert logits.shape == (6, V)
    for row in range(6):
        b = row // 3  # rows 0-2 belong to sentence 0, rows 3-5 to sentence 1
        assert close(logits[row], model(src[b : b + 1], prefix[row : row + 1])[0, -1])
    with pytest.raises(ValueError, match="N = 6"):
        step(prefix[:2])


@pytest.mark.parametrize("norm_first", [True, False])
def test_cached_step_equals_uncached(norm_first):
    model = make(norm_first=norm_first).eval()
    src = tokens([5, 3, 6])
    cached = model.make_step_fn(src, beam_size=2)
    plain = model.make_step_fn(src, beam_size=2, cache=False)
    prefix = torch.full((6, 1), 2)
    for step in range(6):
        a, b = cached(prefix), plain(prefix)
        assert close(a, b), f"step {step}"
        nxt = a.argmax(-1)
        if step == 3:
            nxt[1] = PAD  # a finished row is padded: its padding is masked as a key
        if step in (2, 4):  # beams move within each input, as in beam search
            index = torch.tensor([1, 1, 2, 3, 5, 4])
            cached.reorder(index)
            prefix = prefix[index]
            nxt = nxt[index]
        prefix = torch.cat([prefix, nxt[:, None]], 1)
    assert prefix.shape == (6, 7)


def test_cached_step_rebuilds_and_follows_rows_across_inputs():
    model = make().eval()
    src = tokens([5, 3])
    cached, plain = model.make_step_fn(src), model.make_step_fn(src, cache=False)
    prefix = tokens([4, 4])
    assert close(cached(prefix), plain(prefix))  # first call: the cache is built from 4 tokens
    other = tokens([3, 3])
    assert close(cached(other), plain(other))  # not a continuation: rebuilt
    swap = torch.tensor([1, 0])  # rows change input: the memory must follow
    cached.reorder(swap)
    nxt = torch.cat([other[swap], torch.tensor([[7], [9]])], 1)
    expected = model.make_step_fn(src[swap], cache=False)(nxt)
    assert close(cached(nxt), expected)


def test_decoding_with_and_without_cache_agree():
    model = make().eval()
    src = tokens([6, 4, 5])
    prefix = torch.full((3, 1), 2)
    g1 = decoding.greedy_decode(model.make_step_fn(src), prefix, 8, eos_id=3, pad_id=PAD)
    g2 = decoding.greedy_decode(model.make_step_fn(src, cache=False), prefix, 8, eos_id=3,
                                pad_id=PAD)
    assert g1.equal(g2)
    b1, s1 = decoding.beam_search(model.make_step_fn(src, beam_size=3), prefix, 3, 8, eos_id=3,
                                  pad_id=PAD)
    b2, s2 = decoding.beam_search(model.make_step_fn(src, beam_size=3, cache=False), prefix, 3, 8,
                                  eos_id=3, pad_id=PAD)
    assert b1.equal(b2) and close(s1, s2)


def test_step_fn_needs_eval_mode():
    model = make()
    with pytest.raises(RuntimeError, match="model.eval()"):
        model.make_step_fn(tokens([3]))


def test_attention_maps():
    model = make().eval()
    src, tgt = tokens([5, 3]), tokens([4, 2])
    maps = model.attention_maps(src, tgt)
    assert [len(maps[k]) for k in ("encoder", "decoder_self", "cross")] == [2, 2, 2]
    cross = maps["cross"][-1]
    assert cross.shape == (2, H, 4, 5)
    assert (cross[1, :, :, 3:] == 0).all()  # no weight on source padding
    assert close(cross.sum(-1), torch.ones(2, H, 4))
    assert (maps["decoder_self"][0][0].triu(1) == 0).all()
    hidden, _, _ = model.decode(tgt, *model.encode(src), need_weights=True)
    assert close(model.generator(hidden), model(src, tgt))


def test_gradients_reach_every_parameter():
    model = make(dropout=0.1)
    out = model(tokens([5, 4]), tokens([3, 3]))
    out.sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing


def test_learns_to_copy():
    """200 steps on 8 short sequences: the model memorises them (a smoke test of training)."""
    model = make(dropout=0.0)
    bos = 1
    src = torch.randint(2, V, (8, 6))
    tgt = torch.cat([torch.full((8, 1), bos), src], 1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(200):
        logits = model(src, tgt[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, V), tgt[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    model.eval()
    assert model(src, tgt[:, :-1]).argmax(-1).equal(src)


# --------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(num_heads=3), ValueError, "d_model=16 is not divisible by num_heads=3"),
        (dict(pad_id=V), ValueError, r"pad_id must be an int in \[0, vocab_size=31\)"),
        (dict(vocab_size=0), ValueError, "vocab_size must be a positive int"),
        (dict(num_encoder_layers=0), ValueError, "num_encoder_layers must be a positive int"),
        (dict(norm_first="pre"), TypeError, "norm_first must be True"),
        (dict(dropout=1.0), ValueError, r"dropout must be in \[0, 1\)"),
    ],
)
def test_bad_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        make(**kwargs)


def test_bad_calls():
    model = make()
    src, tgt = tokens([4, 3]), tokens([2, 2])
    with pytest.raises(ValueError, match="same batch size, got 2 and 1"):
        model(src, tgt[:1])
    with pytest.raises(TypeError, match="integer token ids"):
        model(src.float(), tgt)
    with pytest.raises(ValueError, match=r"ids outside \[0, vocab_size=31\).*max 31"):
        model(src, tgt.clamp(max=0) + V)
    with pytest.raises(ValueError, match=r"src must have shape \[B, L\]"):
        model(src[0], tgt)
    with pytest.raises(ValueError, match=r"L >= 1"):
        model(src[:, :0], tgt)
    with pytest.raises(TypeError, match="torch.Tensor"):
        model([[1, 2]], tgt)
    memory, mask = model.encode(src)
    with pytest.raises(ValueError, match="repeat_interleave"):
        model.decode(tokens([2, 2, 2]), memory, mask)
    with pytest.raises(ValueError, match=r"memory must have shape \[B, Ls, 16\]"):
        model.decode(tgt, memory[..., :4], mask)
    with pytest.raises(ValueError, match="beam_size must be a positive int"):
        model.make_step_fn(src, beam_size=0)


def test_cached_step_is_the_default_and_refuses_a_training_model():
    model = make(dropout=0.1).eval()
    step = model.make_step_fn(tokens([4, 2]))
    assert isinstance(step, CachedDecoderStep)
    model.train()
    with pytest.raises(RuntimeError, match="model.eval"):
        step(torch.full((2, 1), 2))
