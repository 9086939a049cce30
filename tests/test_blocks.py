"""Unit tests of course_lib.blocks against torch.nn.TransformerEncoderLayer / DecoderLayer."""

import pytest
import torch
from torch import nn

from course_lib.attention import MultiHeadAttention
from course_lib.blocks import DecoderBlock, EncoderBlock, FeedForward
from course_lib.masks import causal_mask, padding_mask
from course_lib.positional import alibi_bias

D, H, FF = 8, 2, 16


def close(a, b, atol=1e-5):
    return torch.allclose(a, b, atol=atol, rtol=0)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


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
    ours = EncoderBlock(D, H, FF, norm_first=norm_first)
    ours.attn.load_from_torch(theirs.self_attn)
    copy_linear(ours.ffn.net[0], theirs.linear1)
    copy_linear(ours.ffn.net[3], theirs.linear2)
    copy_norm(ours.attn_sub.norm, theirs.norm1)
    copy_norm(ours.ffn_sub.norm, theirs.norm2)
    return ours.eval(), theirs.eval()


def decoder_pair(norm_first):
    theirs = nn.TransformerDecoderLayer(
        D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    ours = DecoderBlock(D, H, FF, norm_first=norm_first)
    ours.self_attn.load_from_torch(theirs.self_attn)
    ours.cross_attn.load_from_torch(theirs.multihead_attn)
    copy_linear(ours.ffn.net[0], theirs.linear1)
    copy_linear(ours.ffn.net[3], theirs.linear2)
    for sub, norm in zip(ours.subs, (theirs.norm1, theirs.norm2, theirs.norm3), strict=True):
        copy_norm(sub.norm, norm)
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


# --------------------------------------------------------------------------- encoder
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


def test_encoder_block_pre_and_post_norm_differ():
    pre, _ = encoder_pair(True)
    post = EncoderBlock(D, H, FF, norm_first=False).eval()
    post.load_state_dict(pre.state_dict())
    x = torch.randn(2, 5, D)
    assert not close(pre(x)[0], post(x)[0], atol=1e-3)


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


def test_encoder_block_gradients_flow():
    block = EncoderBlock(D, H, FF)
    x = torch.randn(2, 5, D, requires_grad=True)
    block(x)[0].pow(2).sum().backward()
    assert x.grad.abs().sum() > 0
    for name, p in block.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_encoder_block_dropout_only_in_training():
    block = EncoderBlock(D, H, FF, dropout=0.5)
    x = torch.randn(2, 5, D)
    block.train()
    assert not close(block(x)[0], block(x)[0])
    block.eval()
    assert torch.equal(block(x)[0], block(x)[0])


# --------------------------------------------------------------------------- switches
def test_use_ffn_false_removes_the_feed_forward():
    block = EncoderBlock(D, H, FF, use_ffn=False).eval()
    assert block.ffn is None and block.ffn_sub is None
    assert not any(isinstance(m, FeedForward) for m in block.modules())
    x = torch.randn(2, 5, D)
    h = block.attn_sub.norm(x)
    assert close(block(x)[0], x + block.attn(h, h, h)[0])  # Pre-Norm attention sublayer only


@pytest.mark.parametrize("norm_first", [True, False])
def test_use_residual_false_drops_the_skip_connections(norm_first):
    block = EncoderBlock(D, H, FF, use_residual=False, norm_first=norm_first).eval()
    n1, n2 = block.attn_sub.norm, block.ffn_sub.norm
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
    with_residual = EncoderBlock(D, H, FF, norm_first=norm_first).eval()
    with_residual.load_state_dict(block.state_dict())
    assert not close(with_residual(x)[0], expected, atol=1e-3)


def test_use_norm_false_removes_layer_norms():
    block = EncoderBlock(D, H, FF, use_norm=False).eval()
    assert not any(isinstance(m, nn.LayerNorm) for m in block.modules())
    assert sum(isinstance(m, nn.LayerNorm) for m in EncoderBlock(D, H, FF).modules()) == 2
    post = EncoderBlock(D, H, FF, use_norm=False, norm_first=False).eval()
    post.load_state_dict(block.state_dict())
    x = torch.randn(2, 5, D)
    y = x + block.attn(x, x, x)[0]
    expected = y + block.ffn(y)
    # without norms, Pre-Norm and Post-Norm are the same plain residual stack
    assert close(block(x)[0], expected) and close(post(x)[0], expected)


@pytest.mark.parametrize("norm_first", ["pre", 1, None])
def test_norm_first_must_be_bool(norm_first):
    with pytest.raises(TypeError, match=f"norm_first must be True.*got {norm_first!r}"):
        EncoderBlock(D, H, FF, norm_first=norm_first)
    with pytest.raises(TypeError, match="norm_first"):
        DecoderBlock(D, H, FF, norm_first=norm_first)


def test_block_sizes_are_checked():
    with pytest.raises(ValueError, match=r"d_model=8.*num_heads=3"):
        EncoderBlock(8, 3, 16)
    with pytest.raises(ValueError, match=r"d_model=8.*num_heads=3"):
        DecoderBlock(8, 3, 16)


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
    assert len(block.subs) == 3
    assert sum(isinstance(m, nn.LayerNorm) for m in block.modules()) == 3
