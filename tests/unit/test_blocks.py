"""Unit tests of course_lib.blocks: by hand, against torch.nn.TransformerEncoderLayer /
DecoderLayer, chapter 4's switches, and the KV cache."""

import pytest
import torch
from torch import nn

from course_lib.attention import KVCache, MultiHeadAttention
from course_lib.blocks import (
    AblationBlock,
    Block,
    DecoderBlock,
    FeedForward,
    PostNormBlock,
    PostNormDecoderBlock,
)
from course_lib.masks import causal_mask, padding_mask
from course_lib.positional import alibi_bias

D, H, FF = 8, 2, 16


def close(a, b, atol=1e-5):
    return torch.allclose(a, b, atol=atol, rtol=0)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@torch.no_grad()
def jitter(module):
    """Move every weight off its initial value (LayerNorm 1 and 0 would hide a misplaced norm)."""
    for p in module.parameters():
        p.add_(0.1 * torch.randn_like(p))
    return module


@torch.no_grad()
def copy_linear(dst: nn.Linear, src: nn.Linear):
    dst.weight.copy_(src.weight)
    dst.bias.copy_(src.bias)


@torch.no_grad()
def copy_norm(dst: nn.LayerNorm, src: nn.LayerNorm):
    # random affine parameters, so that a misplaced norm shows
    src.weight.copy_(torch.rand_like(src.weight) + 0.5)
    src.bias.copy_(torch.randn_like(src.bias))
    dst.weight.copy_(src.weight)
    dst.bias.copy_(src.bias)


def encoder_pair(norm_first):
    theirs = nn.TransformerEncoderLayer(
        D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    ours = (Block if norm_first else PostNormBlock)(D, H, FF)
    ours.attn.load_from_torch(theirs.self_attn)
    copy_linear(ours.ffn.net[0], theirs.linear1)
    copy_linear(ours.ffn.net[3], theirs.linear2)
    copy_norm(ours.norm1, theirs.norm1)  # the same names as PyTorch's layers
    copy_norm(ours.norm2, theirs.norm2)
    return ours.eval(), theirs.eval()


def decoder_pair(norm_first):
    theirs = nn.TransformerDecoderLayer(
        D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    ours = (DecoderBlock if norm_first else PostNormDecoderBlock)(D, H, FF)
    ours.self_attn.load_from_torch(theirs.self_attn)
    ours.cross_attn.load_from_torch(theirs.multihead_attn)
    copy_linear(ours.ffn.net[0], theirs.linear1)
    copy_linear(ours.ffn.net[3], theirs.linear2)
    for name in ("norm1", "norm2", "norm3"):
        copy_norm(getattr(ours, name), getattr(theirs, name))
    return ours.eval(), theirs.eval()


# --------------------------------------------------------------------------- feed-forward
def test_feed_forward_equals_manual():
    ffn = FeedForward(D, FF)
    x = torch.randn(2, 5, D)
    lin1, lin2 = ffn.net[0], ffn.net[3]
    assert (lin1.in_features, lin1.out_features, lin2.out_features) == (D, FF, D)
    assert close(ffn(x), lin2(torch.relu(lin1(x))))


def test_feed_forward_gelu():
    ffn = FeedForward(D, FF, activation="gelu")
    x = torch.randn(2, 5, D)
    assert close(ffn(x), ffn.net[3](nn.functional.gelu(ffn.net[0](x))))


def test_feed_forward_bad_activation():
    message = r"activation must be one of \['gelu', 'relu'\], got 'tanh'"
    with pytest.raises(ValueError, match=message):
        FeedForward(D, FF, activation="tanh")
    with pytest.raises(ValueError, match=message):
        Block(D, H, FF, activation="tanh")


# --------------------------------------------------------------------------- Block by hand
def test_block_is_its_two_residual_lines():
    block = jitter(Block(D, H, FF)).eval()
    x = torch.randn(2, 5, D)
    h = block.norm1(x)
    y = x + block.attn(h, h, h)[0]  # x = x + attn(norm1(x))
    y = y + block.ffn(block.norm2(y))  # x = x + ffn(norm2(x))
    out, weights = block(x)
    assert close(out, y) and weights.shape == (2, H, 5, 5)


def test_block_equals_a_hand_computation_to_the_last_matrix():
    """LayerNorm, the heads, softmax, ReLU: every step written out with plain tensor ops."""
    block = jitter(Block(D, H, FF)).eval()
    x = torch.randn(3, 4, D)

    def layer_norm(t, norm):
        mu, var = t.mean(-1, keepdim=True), t.var(-1, correction=0, keepdim=True)
        return (t - mu) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias

    def linear(t, lin):
        return t @ lin.weight.T + lin.bias

    def heads(t):  # [B, L, D] -> [B, H, L, D/H]
        return t.view(3, 4, H, D // H).transpose(1, 2)

    with torch.no_grad():
        a = block.attn
        h = layer_norm(x, block.norm1)
        q, k, v = (heads(linear(h, p)) for p in (a.q_proj, a.k_proj, a.v_proj))
        scores = q @ k.transpose(-2, -1) / (D // H) ** 0.5
        scores = scores.masked_fill(~causal_mask(4), float("-inf"))
        attended = (scores.softmax(-1) @ v).transpose(1, 2).reshape(3, 4, D)
        y = x + linear(attended, a.out_proj)
        hidden = linear(layer_norm(y, block.norm2), block.ffn.net[0]).clamp_min(0)
        expected = y + linear(hidden, block.ffn.net[3])
        out, _ = block(x, mask=causal_mask(4))
    assert close(out, expected)


def test_post_norm_block_by_hand_and_same_modules_as_block():
    post = jitter(PostNormBlock(D, H, FF)).eval()
    x = torch.randn(2, 5, D)
    y = post.norm1(x + post.attn(x, x, x)[0])
    y = post.norm2(y + post.ffn(y))
    assert close(post(x)[0], y)
    pre = Block(D, H, FF).eval()
    pre.load_state_dict(post.state_dict())  # strict: the same names, only forward differs
    assert not close(pre(x)[0], post(x)[0], atol=1e-3)


def test_submodule_names_are_the_pages():
    names = {k.rsplit(".", 1)[0] for k in Block(D, H, FF).state_dict()}
    assert names == {"norm1", "attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.out_proj",
                     "norm2", "ffn.net.0", "ffn.net.3"}
    names = {k.rsplit(".", 1)[0] for k in DecoderBlock(D, H, FF).state_dict()}
    assert {"norm1", "norm2", "norm3", "self_attn.q_proj", "cross_attn.k_proj",
            "ffn.net.0", "ffn.net.3"} <= names


# --------------------------------------------------------------------------- against torch
@pytest.mark.parametrize("norm_first", [True, False])
def test_encoder_block_matches_torch(norm_first):
    ours, theirs = encoder_pair(norm_first)
    x = torch.randn(3, 6, D)
    out, weights = ours(x)
    assert out.shape == (3, 6, D) and weights.shape == (3, H, 6, 6)
    assert close(out, theirs(x))


@pytest.mark.parametrize("norm_first", [True, False])
def test_encoder_block_matches_torch_with_masks(norm_first):
    ours, theirs = encoder_pair(norm_first)
    x = torch.randn(2, 5, D)
    assert close(ours(x, mask=causal_mask(5))[0], theirs(x, src_mask=~causal_mask(5)))
    tokens = torch.tensor([[1, 2, 3, 0, 0], [4, 5, 6, 7, 8]])
    out, _ = ours(x, mask=padding_mask(tokens, 0))
    ref = theirs(x, src_key_padding_mask=tokens == 0)
    assert close(out, ref)


def test_encoder_block_alibi_bias_matches_torch_float_mask():
    ours, theirs = encoder_pair(True)
    x = torch.randn(2, 5, D)
    bias = alibi_bias(H, 5)
    out, _ = ours(x, bias=bias)
    assert close(out, theirs(x, src_mask=bias.repeat(2, 1, 1)))  # [B * h, L, L]


def test_encoder_block_need_weights_false():
    ours, _ = encoder_pair(True)
    x = torch.randn(2, 5, D)
    out, weights = ours(x, mask=causal_mask(5), need_weights=False)
    assert weights is None
    assert close(out, ours(x, mask=causal_mask(5))[0])


@pytest.mark.parametrize("cls", [Block, PostNormBlock, AblationBlock])
def test_block_gradients_flow(cls):
    block = cls(D, H, FF)
    x = torch.randn(2, 5, D, requires_grad=True)
    block(x)[0].pow(2).sum().backward()
    assert x.grad.abs().sum() > 0
    for name, p in block.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_block_dropout_only_in_training():
    block = Block(D, H, FF, dropout=0.5)
    x = torch.randn(2, 5, D)
    block.train()
    assert not close(block(x)[0], block(x)[0])
    block.eval()
    assert torch.equal(block(x)[0], block(x)[0])


def test_block_bad_inputs_give_clear_errors():
    block = Block(D, H, FF)
    with pytest.raises(RuntimeError, match=r"expected input with shape \[\*, 8\]"):
        block(torch.randn(2, 3, 5))  # the first LayerNorm says it
    with pytest.raises(ValueError, match=r"last dimension 5 but .* built with d_model=8"):
        PostNormBlock(D, H, FF)(torch.randn(2, 3, 5))  # the attention says it
    with pytest.raises(ValueError, match=r"shape \[B, L, d_model\]"):
        block(torch.randn(3, D))
    with pytest.raises(TypeError, match="mask must be boolean"):
        block(torch.randn(2, 3, D), mask=torch.ones(3, 3))
    with pytest.raises(TypeError, match="cache must be an attention.KVCache"):
        block(torch.randn(2, 3, D), cache=(torch.zeros(1), torch.zeros(1)))


def test_block_sizes_are_checked():
    for cls in (Block, PostNormBlock, AblationBlock, DecoderBlock, PostNormDecoderBlock):
        with pytest.raises(ValueError, match=r"d_model=8.*num_heads=3"):
            cls(8, 3, 16)


# --------------------------------------------------------------------------- KV cache
@pytest.mark.parametrize("cls", [Block, PostNormBlock, AblationBlock])
def test_block_cache_equals_no_cache(cls):
    block = jitter(cls(D, H, FF)).eval()
    x = torch.randn(2, 9, D)
    full, _ = block(x, mask=causal_mask(9))
    cache = KVCache()
    out, _ = block(x[:, :4], mask=causal_mask(4), cache=cache)  # a prompt at once
    outs = [out]
    for t in range(4, 9):  # then one position at a time, over everything cached
        out, _ = block(x[:, t:t + 1], cache=cache)
        outs.append(out)
    assert len(cache) == 9 and cache.keys.shape == (2, H, 9, D // H)
    assert close(torch.cat(outs, 1), full)


@pytest.mark.parametrize("cls", [DecoderBlock, PostNormDecoderBlock])
def test_decoder_block_cache_equals_no_cache(cls):
    block = jitter(cls(D, H, FF)).eval()
    x, memory = torch.randn(2, 6, D), torch.randn(2, 7, D)
    src = torch.tensor([[3, 4, 5, 6, 0, 0, 0], [7, 8, 9, 1, 2, 3, 4]])
    memory_mask = padding_mask(src, 0)
    full, _, _ = block(x, memory, self_mask=causal_mask(6), memory_mask=memory_mask)
    cache, memory_cache = KVCache(), KVCache(fixed=True)
    outs = []
    for t in range(6):
        out, _, cross_w = block(x[:, t:t + 1], memory, memory_mask=memory_mask, cache=cache,
                                memory_cache=memory_cache)
        outs.append(out)
    assert close(torch.cat(outs, 1), full)
    assert len(cache) == 6 and len(memory_cache) == 7  # the memory was projected once
    assert (cross_w[0, ..., 4:] == 0).all()


def test_fixed_cache_is_read_not_recomputed():
    block = DecoderBlock(D, H, FF).eval()
    x, memory = torch.randn(1, 1, D), torch.randn(1, 4, D)
    memory_cache = KVCache(fixed=True)
    first, _, _ = block(x, memory, cache=KVCache(), memory_cache=memory_cache)
    keys = memory_cache.keys
    again, _, _ = block(x, torch.zeros_like(memory), cache=KVCache(), memory_cache=memory_cache)
    assert memory_cache.keys is keys and close(first, again)  # other memory, same cache


def test_cache_that_does_not_fit_gives_a_clear_error():
    block = Block(D, H, FF).eval()
    cache = KVCache()
    block(torch.randn(2, 3, D), mask=causal_mask(3), cache=cache)
    with pytest.raises(ValueError, match=r"KVCache holds keys \(2, 2, 3, 4\).*one cache per layer"):
        block(torch.randn(3, 1, D), cache=cache)  # another batch size


def test_cache_reorder_and_bytes():
    block = Block(D, H, FF).eval()
    cache = KVCache()
    assert len(cache) == 0 and cache.bytes() == 0
    block(torch.randn(3, 2, D), mask=causal_mask(2), cache=cache)
    assert cache.bytes() == 2 * 3 * H * 2 * (D // H) * 4  # keys and values, float32
    keys = cache.keys.clone()
    cache.reorder(torch.tensor([2, 2, 0]))
    assert torch.equal(cache.keys, keys[[2, 2, 0]])


# --------------------------------------------------------------------------- ablation switches
def test_ablation_block_with_default_switches_is_block():
    block = jitter(Block(D, H, FF)).eval()
    ablation = AblationBlock(D, H, FF).eval()
    ablation.load_state_dict(block.state_dict())  # strict: the same names
    x = torch.randn(2, 5, D)
    assert torch.equal(ablation(x, mask=causal_mask(5))[0], block(x, mask=causal_mask(5))[0])


def test_ablation_block_post_norm_is_post_norm_block():
    post = jitter(PostNormBlock(D, H, FF)).eval()
    ablation = AblationBlock(D, H, FF, norm_first=False).eval()
    ablation.load_state_dict(post.state_dict())
    x = torch.randn(2, 5, D)
    assert torch.equal(ablation(x)[0], post(x)[0])


def test_use_ffn_false_removes_the_feed_forward():
    block = AblationBlock(D, H, FF, use_ffn=False).eval()
    assert block.ffn is None and block.norm2 is None
    assert not any(isinstance(m, FeedForward) for m in block.modules())
    x = torch.randn(2, 5, D)
    h = block.norm1(x)
    assert close(block(x)[0], x + block.attn(h, h, h)[0])  # Pre-Norm attention sublayer only


@pytest.mark.parametrize("norm_first", [True, False])
def test_use_residual_false_drops_the_skip_connections(norm_first):
    block = AblationBlock(D, H, FF, use_residual=False, norm_first=norm_first).eval()
    n1, n2 = block.norm1, block.norm2
    x = torch.randn(2, 5, D)

    def attn(h):
        return block.attn(h, h, h)[0]

    if norm_first:
        y = attn(n1(x))
        expected = block.ffn(n2(y))
    else:
        y = n1(attn(x))
        expected = n2(block.ffn(y))
    assert close(block(x)[0], expected)
    with_residual = AblationBlock(D, H, FF, norm_first=norm_first).eval()
    with_residual.load_state_dict(block.state_dict())
    assert not close(with_residual(x)[0], expected, atol=1e-3)


def test_use_norm_false_removes_layer_norms():
    block = AblationBlock(D, H, FF, use_norm=False).eval()
    assert not any(isinstance(m, nn.LayerNorm) for m in block.modules())
    assert sum(isinstance(m, nn.LayerNorm) for m in AblationBlock(D, H, FF).modules()) == 2
    post = AblationBlock(D, H, FF, use_norm=False, norm_first=False).eval()
    post.load_state_dict(block.state_dict())
    x = torch.randn(2, 5, D)
    y = x + block.attn(x, x, x)[0]
    expected = y + block.ffn(y)
    # without norms, Pre-Norm and Post-Norm are the same plain residual stack
    assert close(block(x)[0], expected) and close(post(x)[0], expected)


def test_ablation_switches_keep_the_initial_weights_of_the_parts_that_stay():
    # chapter 4's ablations compare models built from one seed: removing the FFN must not
    # change the attention's initial weights nor what is drawn after the block
    torch.manual_seed(1)
    full = AblationBlock(D, H, FF)
    after_full = torch.rand(1)
    torch.manual_seed(1)
    no_ffn = AblationBlock(D, H, FF, use_ffn=False)
    after_no_ffn = torch.rand(1)
    assert torch.equal(full.attn.q_proj.weight, no_ffn.attn.q_proj.weight)
    assert not torch.equal(after_full, after_no_ffn)  # the FFN drew its weights, none here
    torch.manual_seed(1)
    assert torch.equal(Block(D, H, FF).ffn.net[3].weight, full.ffn.net[3].weight)


@pytest.mark.parametrize("norm_first", ["pre", 1, None])
def test_norm_first_must_be_bool(norm_first):
    with pytest.raises(TypeError, match=f"norm_first must be True.*got {norm_first!r}"):
        AblationBlock(D, H, FF, norm_first=norm_first)


@pytest.mark.parametrize("switch", ["use_ffn", "use_residual", "use_norm"])
def test_other_switches_must_be_bool(switch):
    with pytest.raises(TypeError, match=f"{switch} must be True or False, got 'no'"):
        AblationBlock(D, H, FF, **{switch: "no"})


# --------------------------------------------------------------------------- decoder
@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_block_matches_torch_with_causal_mask(norm_first):
    ours, theirs = decoder_pair(norm_first)
    x, memory = torch.randn(2, 5, D), torch.randn(2, 7, D)
    out, self_w, cross_w = ours(x, memory, self_mask=causal_mask(5))
    ref = theirs(x, memory, tgt_mask=~causal_mask(5))
    assert out.shape == (2, 5, D)
    assert self_w.shape == (2, H, 5, 5) and cross_w.shape == (2, H, 5, 7)
    assert close(out, ref)
    assert (self_w.triu(1) == 0).all()


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_block_matches_torch_with_memory_padding(norm_first):
    ours, theirs = decoder_pair(norm_first)
    x, memory = torch.randn(2, 4, D), torch.randn(2, 6, D)
    src = torch.tensor([[3, 4, 5, 6, 0, 0], [7, 8, 9, 1, 2, 0]])
    out, _, cross_w = ours(x, memory, self_mask=causal_mask(4), memory_mask=padding_mask(src, 0))
    ref = theirs(x, memory, tgt_mask=~causal_mask(4), memory_key_padding_mask=src == 0)
    assert close(out, ref)
    assert (cross_w[0, ..., 4:] == 0).all() and (cross_w[1, ..., 5] == 0).all()


def test_decoder_block_uses_its_memory():
    block = DecoderBlock(D, H, FF).eval()
    x = torch.randn(1, 3, D)
    assert not close(block(x, torch.randn(1, 4, D))[0], block(x, torch.randn(1, 4, D))[0], 1e-3)


def test_decoder_block_need_weights_false():
    ours, _ = decoder_pair(True)
    x, memory = torch.randn(2, 5, D), torch.randn(2, 7, D)
    out, self_w, cross_w = ours(x, memory, self_mask=causal_mask(5), need_weights=False)
    assert self_w is None and cross_w is None
    assert close(out, ours(x, memory, self_mask=causal_mask(5))[0])


def test_decoder_block_structure():
    block = DecoderBlock(D, H, FF)
    assert isinstance(block.self_attn, MultiHeadAttention)
    assert isinstance(block.cross_attn, MultiHeadAttention)
    assert sum(isinstance(m, nn.LayerNorm) for m in block.modules()) == 3
    post = PostNormDecoderBlock(D, H, FF)
    post.load_state_dict(block.state_dict())  # the same modules, only forward differs
