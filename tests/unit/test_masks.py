"""Unit tests of course_lib.masks, and of what the masks do inside attention and blocks."""

import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.attention import MultiHeadAttention
from course_lib.blocks import Block, PostNormBlock
from course_lib.masks import causal_mask, padding_mask, to_blocked


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# --------------------------------------------------------------------------- causal
def test_causal_mask_values():
    expected = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]).bool()
    mask = causal_mask(4)
    assert mask.dtype == torch.bool
    assert torch.equal(mask, expected)
    assert torch.equal(causal_mask(1), torch.tensor([[True]]))


def test_causal_mask_device_argument():
    assert causal_mask(3, device="cpu").device.type == "cpu"
    assert causal_mask(3, device=torch.device("cpu")).device.type == "cpu"


def test_causal_mask_equals_torch_is_causal():
    q, k, v = torch.randn(2, 6, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 8)
    ours = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(6))
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(ours, theirs, atol=1e-6)


def test_causal_mask_to_blocked_equals_torch_square_subsequent_mask():
    theirs = nn.Transformer.generate_square_subsequent_mask(5)  # float, -inf = blocked
    assert torch.equal(to_blocked(causal_mask(5)), theirs == float("-inf"))


@pytest.mark.parametrize("length", [0, -3, 2.0, True, "4", None])
def test_causal_mask_bad_length(length):
    message = f"length must be a positive int, got {length!r}"
    with pytest.raises(ValueError, match=re.escape(message)):
        causal_mask(length)


# --------------------------------------------------------------------------- padding
def test_padding_mask_values_and_shape():
    tokens = torch.tensor([[4, 5, 0, 0], [7, 0, 8, 9]])
    mask = padding_mask(tokens, pad_id=0)
    assert mask.shape == (2, 1, 1, 4) and mask.dtype == torch.bool
    assert mask[:, 0, 0].tolist() == [[True, True, False, False], [True, False, True, True]]
    assert padding_mask(tokens, pad_id=9)[1, 0, 0].tolist() == [True, True, True, False]


def test_padding_mask_broadcasts_to_scores_and_combines_with_causal():
    tokens = torch.tensor([[4, 5, 0], [7, 8, 9]])
    combined = causal_mask(3) & padding_mask(tokens, 0)
    assert combined.shape == (2, 1, 3, 3)
    assert torch.broadcast_shapes(combined.shape, (2, 4, 3, 3)) == (2, 4, 3, 3)
    assert combined[0, 0].tolist() == [
        [True, False, False],
        [True, True, False],
        [True, True, False],
    ]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
def test_padding_mask_accepts_integer_dtypes(dtype):
    assert padding_mask(torch.tensor([[1, 0]], dtype=dtype), 0)[0, 0, 0].tolist() == [True, False]


@pytest.mark.parametrize("shape", [(5,), (2, 3, 4), ()])
def test_padding_mask_wrong_dims(shape):
    tokens = torch.zeros(shape, dtype=torch.long)
    with pytest.raises(ValueError, match=re.escape(f"tokens must have shape [B, L], got {shape}")):
        padding_mask(tokens, 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bool])
def test_padding_mask_non_integer_tokens(dtype):
    with pytest.raises(TypeError, match=f"tokens must hold integer ids, got dtype {dtype}"):
        padding_mask(torch.zeros(2, 3, dtype=dtype), 0)


def test_padding_mask_tokens_not_a_tensor():
    with pytest.raises(TypeError, match="tokens must be a torch.Tensor.*list"):
        padding_mask([[1, 2, 0]], 0)


@pytest.mark.parametrize("pad_id", [0.0, None, True, torch.tensor(0)])
def test_padding_mask_bad_pad_id(pad_id):
    with pytest.raises(TypeError, match="pad_id must be an int"):
        padding_mask(torch.tensor([[1, 0]]), pad_id)


# --------------------------------------------------------------------------- to_blocked
def test_to_blocked_inverts():
    mask = torch.tensor([[True, False], [False, True]])
    assert torch.equal(to_blocked(mask), torch.tensor([[False, True], [True, False]]))


@pytest.mark.parametrize("mask", [torch.ones(2, 2), [[True]]])
def test_to_blocked_rejects_non_boolean(mask):
    with pytest.raises(TypeError, match="mask must be a boolean tensor"):
        to_blocked(mask)


# --------------------------------------------------------------------------- masks at work
def test_causal_mask_hides_the_future_in_multi_head_attention():
    mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(2, 6, 8)
    changed = x.clone()
    changed[:, 4:] = torch.randn(2, 2, 8)  # new "future" tokens 4 and 5
    out, _ = mha(x, x, x, mask=causal_mask(6))
    out_changed, _ = mha(changed, changed, changed, mask=causal_mask(6))
    assert torch.allclose(out[:, :4], out_changed[:, :4], atol=1e-6)
    assert not torch.allclose(out[:, 4:], out_changed[:, 4:], atol=1e-3)
    # without the mask the past does see the change: the test above can fail
    assert not torch.allclose(
        mha(x, x, x)[0][:, :4], mha(changed, changed, changed)[0][:, :4], atol=1e-3
    )


@pytest.mark.parametrize("norm_first", [True, False])
def test_causal_mask_hides_the_future_in_a_block(norm_first):
    block = (Block if norm_first else PostNormBlock)(8, 2, 16).eval()
    x = torch.randn(2, 6, 8)
    changed = x.clone()
    changed[:, 3:] = torch.randn(2, 3, 8)
    out, _ = block(x, mask=causal_mask(6))
    out_changed, _ = block(changed, mask=causal_mask(6))
    assert torch.allclose(out[:, :3], out_changed[:, :3], atol=1e-6)
    assert not torch.allclose(block(x)[0][:, :3], block(changed)[0][:, :3], atol=1e-3)


def test_padding_leaves_real_positions_unchanged():
    mha = MultiHeadAttention(8, 2).eval()
    block = Block(8, 2, 16).eval()
    real = torch.randn(1, 4, 8)
    padded = torch.cat([real, torch.randn(1, 3, 8)], dim=1)  # 3 padding positions, any values
    tokens = torch.tensor([[3, 4, 5, 6, 0, 0, 0]])
    mask = padding_mask(tokens, pad_id=0)
    for module in (mha, block):

        def run(x, m, module=module):
            return module(x, x, x, mask=m)[0] if module is mha else module(x, mask=m)[0]

        assert torch.allclose(run(real, None), run(padded, mask)[:, :4], atol=1e-6)
        assert not torch.allclose(run(real, None), run(padded, None)[:, :4], atol=1e-3)
