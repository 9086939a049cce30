"""Unit tests of course_lib.positional: sinusoidal, learned, ALiBi and rotary positions."""

import math
import re

import pytest
import torch

from course_lib.positional import (
    LearnedPositionalEmbedding,
    SequenceTooLongError,
    SinusoidalPositionalEncoding,
    alibi_bias,
    alibi_slopes,
    rope,
    sinusoidal_encoding,
)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# --------------------------------------------------------------------------- sinusoidal
def test_sinusoidal_matches_the_formula():
    max_len, d = 30, 16
    pe = sinusoidal_encoding(max_len, d)
    assert pe.shape == (max_len, d) and pe.dtype == torch.float32
    for p in range(max_len):
        for i in range(d // 2):
            angle = p / 10000 ** (2 * i / d)
            assert abs(pe[p, 2 * i].item() - math.sin(angle)) < 1e-5, (p, i)
            assert abs(pe[p, 2 * i + 1].item() - math.cos(angle)) < 1e-5, (p, i)


def test_sinusoidal_first_pair_and_position_zero():
    pe = sinusoidal_encoding(10, 8)
    p = torch.arange(10, dtype=torch.float32)
    assert torch.allclose(pe[:, 0], torch.sin(p)) and torch.allclose(pe[:, 1], torch.cos(p))
    assert torch.equal(pe[0], torch.tensor([0.0, 1.0] * 4))


def test_sinusoidal_dot_product_depends_only_on_offset():
    pe = sinusoidal_encoding(64, 32)
    for k in (1, 3, 10):
        dots = (pe[:-k] * pe[k:]).sum(-1)  # PE(p) . PE(p + k) for every p
        assert (dots.max() - dots.min()).item() < 1e-4, k
        # = sum_i cos(k * w_i)
        expected = sum(math.cos(k / 10000 ** (2 * i / 32)) for i in range(16))
        assert abs(dots.mean().item() - expected) < 1e-4


@pytest.mark.parametrize("d_model", [1, 7, 33])
def test_sinusoidal_odd_d_model(d_model):
    with pytest.raises(ValueError, match=f"d_model must be even.*d_model={d_model}"):
        sinusoidal_encoding(10, d_model)
    with pytest.raises(ValueError, match=f"d_model={d_model}"):
        SinusoidalPositionalEncoding(d_model)


@pytest.mark.parametrize(
    ("max_len", "d_model", "name"),
    [(0, 8, "max_len"), (10, 0, "d_model"), (10.0, 8, "max_len"), (10, -2, "d_model")],
)
def test_sinusoidal_bad_sizes(max_len, d_model, name):
    with pytest.raises(ValueError, match=f"{name} must be a positive int"):
        sinusoidal_encoding(max_len, d_model)


def test_sinusoidal_module_adds_the_table():
    enc = SinusoidalPositionalEncoding(d_model=8, max_len=20)
    x = torch.randn(2, 5, 8)
    assert torch.allclose(enc(x) - x, sinusoidal_encoding(5, 8).expand(2, 5, 8), atol=1e-6)


def test_sinusoidal_module_beyond_its_buffer():
    enc = SinusoidalPositionalEncoding(d_model=8, max_len=4)
    x = torch.zeros(1, 12, 8)
    assert torch.allclose(enc(x)[0], sinusoidal_encoding(12, 8), atol=1e-6)


def test_sinusoidal_module_keeps_dtype_and_checks_width():
    enc = SinusoidalPositionalEncoding(d_model=8)
    assert enc(torch.zeros(1, 3, 8, dtype=torch.float64)).dtype == torch.float64
    with pytest.raises(ValueError, match="x has 6 features.*d_model=8"):
        enc(torch.zeros(1, 3, 6))


# --------------------------------------------------------------------------- learned
def test_learned_adds_one_vector_per_position():
    emb = LearnedPositionalEmbedding(max_len=10, d_model=4)
    x = torch.randn(3, 6, 4)
    assert torch.allclose(emb(x), x + emb.embedding.weight[:6])


def test_learned_offset():
    emb = LearnedPositionalEmbedding(max_len=10, d_model=4)
    x = torch.randn(2, 3, 4)
    assert torch.allclose(emb(x, offset=5), x + emb.embedding.weight[5:8])
    assert emb(torch.randn(1, 10, 4)).shape == (1, 10, 4)  # exactly max_len is fine
    assert emb(x, offset=7).shape == (2, 3, 4)


def test_learned_too_long_raises_a_clear_error():
    emb = LearnedPositionalEmbedding(max_len=8, d_model=4)
    with pytest.raises(SequenceTooLongError, match=r"sequence length 9 exceeds max_len=8") as info:
        emb(torch.randn(2, 9, 4))
    assert isinstance(info.value, ValueError)
    assert not isinstance(info.value, IndexError)
    with pytest.raises(SequenceTooLongError, match=r"sequence length 10 exceeds max_len=8"):
        emb(torch.randn(2, 4, 4), offset=6)


def test_learned_bad_input_and_sizes():
    emb = LearnedPositionalEmbedding(max_len=8, d_model=4)
    with pytest.raises(ValueError, match=re.escape("x must have shape [B, L, 4], got (2, 3, 5)")):
        emb(torch.randn(2, 3, 5))
    with pytest.raises(ValueError, match=re.escape("got (3, 4)")):
        emb(torch.randn(3, 4))
    with pytest.raises(ValueError, match="max_len must be a positive int, got 0"):
        LearnedPositionalEmbedding(0, 4)
    with pytest.raises(ValueError, match="d_model must be a positive int, got 4.5"):
        LearnedPositionalEmbedding(8, 4.5)


def test_learned_is_trainable():
    emb = LearnedPositionalEmbedding(max_len=8, d_model=4)
    emb(torch.randn(2, 5, 4)).sum().backward()
    grad = emb.embedding.weight.grad
    assert (grad[:5] != 0).all() and (grad[5:] == 0).all()


# --------------------------------------------------------------------------- ALiBi
def test_alibi_slopes_for_eight_heads():
    assert alibi_slopes(8).tolist() == [1 / 2**i for i in range(1, 9)]


@pytest.mark.parametrize("h", [1, 2, 4, 6, 12])
def test_alibi_slopes_formula(h):
    expected = torch.tensor([2 ** (-8 * i / h) for i in range(1, h + 1)])
    assert alibi_slopes(h).shape == (h,)
    assert torch.allclose(alibi_slopes(h), expected, rtol=1e-6, atol=0)


def test_alibi_bias_matches_the_printed_matrix():
    bias = alibi_bias(2, 3)
    assert bias.shape == (2, 3, 3)
    head1 = [[0, -0.0625, -0.125], [-0.0625, 0, -0.0625], [-0.125, -0.0625, 0]]
    head2 = [
        [0, -0.00390625, -0.0078125],
        [-0.00390625, 0, -0.00390625],
        [-0.0078125, -0.00390625, 0],
    ]
    assert torch.equal(bias, torch.tensor([head1, head2]))
    assert not torch.signbit(bias.diagonal(dim1=1, dim2=2)).any()  # 0, not -0


def test_alibi_bias_is_minus_slope_times_distance():
    bias = alibi_bias(4, 6)
    slopes = alibi_slopes(4)
    for h in range(4):
        for i in range(6):
            for j in range(6):
                assert bias[h, i, j].item() == pytest.approx(-slopes[h].item() * abs(i - j))


def test_alibi_bad_sizes():
    with pytest.raises(ValueError, match="length must be a positive int, got 0"):
        alibi_bias(2, 0)
    with pytest.raises(ValueError, match="num_heads must be a positive int, got 0"):
        alibi_bias(0, 3)
    with pytest.raises(ValueError, match="num_heads must be a positive int, got 2.0"):
        alibi_slopes(2.0)


# --------------------------------------------------------------------------- RoPE
def test_rope_scores_depend_only_on_relative_position():
    d, L = 16, 24
    q, k = torch.randn(d), torch.randn(d)
    rq, rk = rope(q.expand(L, d)), rope(k.expand(L, d))
    scores = rq @ rk.T  # scores[m, n] = rope(q, m) . rope(k, n)
    for diff in range(-L + 1, L):
        diag = scores.diagonal(offset=-diff)  # entries with m - n = diff
        assert (diag.max() - diag.min()).item() < 1e-5, diff
    assert not torch.allclose(scores.diagonal(0)[0], scores.diagonal(-1)[0])


def test_rope_preserves_norms_and_position_zero():
    x = torch.randn(2, 3, 10, 8)
    out = rope(x)
    assert out.shape == x.shape
    assert torch.allclose(out.norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    assert torch.equal(out[..., 0, :], x[..., 0, :])
    assert not torch.allclose(out[..., 1:, :], x[..., 1:, :])


def test_rope_equals_complex_rotation():
    L, d, base = 7, 6, 100.0
    x = torch.randn(L, d, dtype=torch.float64)
    out = rope(x, base=base)
    z = torch.view_as_complex(x.reshape(L, d // 2, 2).contiguous())
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = torch.arange(L, dtype=torch.float64)[:, None] * theta
    expected = torch.view_as_real(z * torch.polar(torch.ones_like(angle), angle)).reshape(L, d)
    assert torch.allclose(out, expected, atol=1e-5)


def test_rope_offset():
    x = torch.randn(2, 5, 8)
    padded = torch.cat([torch.randn(2, 3, 8), x], dim=1)
    assert torch.allclose(rope(x, offset=3), rope(padded)[:, 3:], atol=1e-6)


def test_rope_bad_inputs():
    with pytest.raises(ValueError, match=re.escape("d even, got (4, 7)")):
        rope(torch.randn(4, 7))
    with pytest.raises(ValueError, match=re.escape("got (8,)")):
        rope(torch.randn(8))
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got list"):
        rope([[1.0, 2.0]])
