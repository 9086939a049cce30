"""Unit tests of course_lib.attention against hand computations and PyTorch's own modules."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.attention import (
    SDPA_BACKENDS,
    AdditiveAttention,
    KVCache,
    MultiHeadAttention,
    SelfAttention,
    check_mask,
    fused_attention,
    scaled_dot_product_attention,
    sdpa_backends,
    which_sdpa_kernel,
)
from course_lib.masks import causal_mask, padding_mask
from course_lib.positional import alibi_bias

ATOL = 1e-5


def close(a, b, atol=ATOL):
    return torch.allclose(a, b, atol=atol, rtol=0)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def qkv(batch=(2, 3), lq=4, lk=5, d=8, dv=None):
    q = torch.randn(*batch, lq, d)
    k = torch.randn(*batch, lk, d)
    v = torch.randn(*batch, lk, dv or d)
    return q, k, v


def random_mask(*shape):
    """A random boolean mask in which every query row may attend to at least one key."""
    m = torch.rand(*shape) > 0.5
    m[..., 0] = True
    return m


# --------------------------------------------------------------------------- scaled dot-product
class TestScaledDotProductAttention:
    def test_matches_torch_without_mask_4d(self):
        q, k, v = qkv(dv=6)
        out, weights = scaled_dot_product_attention(q, k, v)
        assert out.shape == (2, 3, 4, 6) and weights.shape == (2, 3, 4, 5)
        assert close(out, F.scaled_dot_product_attention(q, k, v))

    @pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
    def test_matches_torch_for_any_leading_dims(self, batch):
        q, k, v = qkv(batch=batch)
        out, _ = scaled_dot_product_attention(q, k, v)
        assert close(out, F.scaled_dot_product_attention(q, k, v))

    def test_matches_torch_with_causal_mask(self):
        q, k, v = qkv(lq=5, lk=5)
        mask = causal_mask(5)
        out, _ = scaled_dot_product_attention(q, k, v, mask=mask)
        assert close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
        assert close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))

    @pytest.mark.parametrize("mask_shape", [(4, 5), (2, 1, 4, 5), (2, 3, 4, 5), (2, 1, 1, 5)])
    def test_matches_torch_with_broadcast_boolean_masks(self, mask_shape):
        q, k, v = qkv()
        mask = random_mask(*mask_shape)
        out, _ = scaled_dot_product_attention(q, k, v, mask=mask)
        assert close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))

    def test_mask_changes_the_result(self):
        q, k, v = qkv()
        mask = random_mask(4, 5)
        assert not close(
            scaled_dot_product_attention(q, k, v, mask=mask)[0],
            scaled_dot_product_attention(q, k, v)[0],
        )

    def test_matches_torch_with_float_bias(self):
        q, k, v = qkv()
        bias = torch.randn(3, 4, 5)  # one per head, broadcast over the batch
        out, _ = scaled_dot_product_attention(q, k, v, bias=bias)
        assert close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=bias))

    def test_matches_torch_with_mask_and_bias(self):
        q, k, v = qkv()
        bias = torch.randn(3, 4, 5)
        mask = random_mask(2, 1, 4, 5)
        out, _ = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias)
        expected = F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias.masked_fill(~mask, float("-inf"))
        )
        assert close(out, expected)

    def test_weights_are_the_scaled_softmax(self):
        q, k, v = qkv(batch=(2,), d=16)
        _, weights = scaled_dot_product_attention(q, k, v)
        expected = torch.softmax(q @ k.transpose(-2, -1) / 4.0, dim=-1)  # sqrt(16) = 4
        assert close(weights, expected)

    def test_output_is_weights_times_values(self):
        q, k, v = qkv()
        out, weights = scaled_dot_product_attention(q, k, v, mask=random_mask(4, 5))
        assert close(out, weights @ v)

    def test_weights_rows_sum_to_one(self):
        q, k, v = qkv()
        for mask in (None, random_mask(2, 3, 4, 5)):
            _, weights = scaled_dot_product_attention(q, k, v, mask=mask)
            assert close(weights.sum(-1), torch.ones(2, 3, 4))
            assert (weights >= 0).all()

    def test_masked_positions_get_zero_weight(self):
        q, k, v = qkv()
        mask = random_mask(2, 3, 4, 5)
        _, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        assert (weights[~mask] == 0).all()
        assert (weights[mask] > 0).all()

    def test_fully_masked_row_gives_zeros_not_nan(self):
        q, k, v = qkv()
        mask = random_mask(4, 5)
        mask[2] = False  # query 2 may attend to nothing
        out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        assert not out.isnan().any() and not weights.isnan().any()
        assert (out[..., 2, :] == 0).all()
        assert (weights[..., 2, :] == 0).all()
        # the other rows are untouched
        keep = [0, 1, 3]
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        assert close(out[..., keep, :], ref[..., keep, :])
        assert close(weights[..., keep, :].sum(-1), torch.ones(2, 3, 3))

    def test_fully_masked_row_with_bias_gives_zeros(self):
        q, k, v = qkv()
        mask = torch.ones(4, 5, dtype=torch.bool)
        mask[0] = False
        out, weights = scaled_dot_product_attention(q, k, v, mask=mask, bias=torch.randn(3, 4, 5))
        assert (out[..., 0, :] == 0).all() and (weights[..., 0, :] == 0).all()
        assert not out.isnan().any()

    def test_gradients_are_finite_with_a_fully_masked_row(self):
        q, k, v = (t.requires_grad_() for t in qkv())
        mask = random_mask(4, 5)
        mask[1] = False
        out, _ = scaled_dot_product_attention(q, k, v, mask=mask)
        out.sum().backward()
        for t in (q, k, v):
            assert torch.isfinite(t.grad).all()
        assert (q.grad[..., 1, :] == 0).all()
        assert q.grad.abs().sum() > 0

    def test_dropout_zeroes_or_rescales_weights(self):
        q, k, v = qkv()
        _, clean = scaled_dot_product_attention(q, k, v)
        torch.manual_seed(1)
        out, dropped = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
        kept = dropped != 0
        assert kept.any() and (~kept).any()
        assert close(dropped[kept], 2 * clean[kept])
        assert close(out, dropped @ v)

    def test_mismatched_q_k_last_dimension(self):
        q, k, v = torch.randn(2, 4, 8), torch.randn(2, 5, 6), torch.randn(2, 5, 6)
        with pytest.raises(ValueError, match=r"d_k.*\(2, 4, 8\).*\(2, 5, 6\)"):
            scaled_dot_product_attention(q, k, v)

    def test_mismatched_k_v_length(self):
        q, k, v = torch.randn(2, 4, 8), torch.randn(2, 5, 8), torch.randn(2, 6, 8)
        with pytest.raises(ValueError, match=r"Lk.*\(2, 5, 8\).*\(2, 6, 8\)"):
            scaled_dot_product_attention(q, k, v)

    def test_non_tensor_input(self):
        q, k, v = qkv()
        with pytest.raises(TypeError, match="k must be a torch.Tensor, got list"):
            scaled_dot_product_attention(q, k.tolist(), v)

    def test_one_dimensional_input(self):
        with pytest.raises(ValueError, match=r"q must have shape \[\.\.\., L, d\].*\(8,\)"):
            scaled_dot_product_attention(torch.randn(8), torch.randn(5, 8), torch.randn(5, 8))

    @pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
    def test_non_boolean_mask(self, dtype):
        q, k, v = qkv()
        mask = torch.ones(4, 5, dtype=dtype)
        with pytest.raises(TypeError, match=f"mask must be boolean.*{dtype}"):
            scaled_dot_product_attention(q, k, v, mask=mask)

    def test_mask_that_cannot_broadcast(self):
        q, k, v = qkv()
        with pytest.raises(ValueError, match=r"mask of shape \(5, 4\).*\(2, 3, 4, 5\)"):
            scaled_dot_product_attention(q, k, v, mask=torch.ones(5, 4, dtype=torch.bool))

    def test_mask_that_would_enlarge_the_scores(self):
        # [4, 2, 3, 4, 5] broadcasts with the scores but would add a dimension to them
        q, k, v = qkv()
        with pytest.raises(ValueError, match=r"\(4, 2, 3, 4, 5\)"):
            scaled_dot_product_attention(q, k, v, mask=torch.ones(4, 2, 3, 4, 5, dtype=torch.bool))

    def test_bias_must_be_float(self):
        q, k, v = qkv()
        with pytest.raises(TypeError, match="bias must be a float.*torch.bool"):
            scaled_dot_product_attention(q, k, v, bias=torch.ones(4, 5, dtype=torch.bool))
        with pytest.raises(TypeError, match="bias must be a float torch.Tensor, got float"):
            scaled_dot_product_attention(q, k, v, bias=1.0)

    def test_bias_that_cannot_broadcast(self):
        q, k, v = qkv()
        with pytest.raises(ValueError, match=r"bias of shape \(4, 4\)"):
            scaled_dot_product_attention(q, k, v, bias=torch.zeros(4, 4))


class TestCheckMask:
    def test_accepts_broadcastable_boolean(self):
        check_mask(torch.ones(1, 5, dtype=torch.bool), (2, 4, 5))  # no error

    def test_names_the_parameter(self):
        with pytest.raises(TypeError, match="memory_mask must be boolean"):
            check_mask(torch.ones(4, 5), (4, 5), name="memory_mask")
        with pytest.raises(TypeError, match="memory_mask must be a boolean torch.Tensor, got list"):
            check_mask([[True]], (4, 5), name="memory_mask")
        with pytest.raises(ValueError, match="memory_mask of shape"):
            check_mask(torch.ones(3, dtype=torch.bool), (4, 5), name="memory_mask")


# --------------------------------------------------------------------------- fused
class TestFusedAttention:
    def test_equals_explicit_without_mask(self):
        q, k, v = qkv()
        assert close(fused_attention(q, k, v), scaled_dot_product_attention(q, k, v)[0])

    def test_equals_explicit_with_mask(self):
        q, k, v = qkv()
        mask = random_mask(2, 1, 4, 5)
        assert close(
            fused_attention(q, k, v, mask=mask), scaled_dot_product_attention(q, k, v, mask=mask)[0]
        )

    def test_equals_explicit_with_bias(self):
        q, k, v = qkv()
        bias = torch.randn(3, 4, 5)
        assert close(
            fused_attention(q, k, v, bias=bias), scaled_dot_product_attention(q, k, v, bias=bias)[0]
        )

    @pytest.mark.parametrize("mask_shape", [(4, 5), (2, 1, 1, 5), (2, 3, 4, 5)])
    def test_equals_explicit_with_mask_and_bias(self, mask_shape):
        q, k, v = qkv()
        bias = alibi_bias(3, 5)[:, :4, :]  # [h, Lq, Lk]
        mask = random_mask(*mask_shape)
        assert close(
            fused_attention(q, k, v, mask=mask, bias=bias),
            scaled_dot_product_attention(q, k, v, mask=mask, bias=bias)[0],
        )

    @pytest.mark.parametrize("with_bias", [False, True])
    def test_fully_masked_rows_give_zeros(self, with_bias):
        q, k, v = qkv()
        mask = random_mask(2, 1, 4, 5)
        mask[0, :, 3] = False
        mask[1, :, 0] = False
        bias = torch.randn(3, 4, 5) if with_bias else None
        out = fused_attention(q, k, v, mask=mask, bias=bias)
        assert not out.isnan().any()
        assert (out[0, :, 3] == 0).all() and (out[1, :, 0] == 0).all()
        assert close(out, scaled_dot_product_attention(q, k, v, mask=mask, bias=bias)[0])

    def test_fully_masked_rows_give_zeros_whatever_the_kernel(self, monkeypatch):
        # Some kernels (older PyTorch, some GPU backends) return NaN for a row with nothing
        # to attend to; torch 2.13 on CPU returns zeros. Simulate the NaN kernel.
        def nan_kernel(q, k, v, attn_mask=None, dropout_p=0.0):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if attn_mask is not None and attn_mask.dtype == torch.bool:
                scores = scores.masked_fill(~attn_mask, float("-inf"))
            elif attn_mask is not None:
                scores = scores + attn_mask
            return torch.softmax(scores, dim=-1) @ v  # NaN rows

        monkeypatch.setattr(F, "scaled_dot_product_attention", nan_kernel)
        q, k, v = qkv()
        mask = random_mask(4, 5)
        mask[1] = False
        for bias in (None, torch.randn(3, 4, 5)):
            out = fused_attention(q, k, v, mask=mask, bias=bias)
            assert not out.isnan().any() and (out[..., 1, :] == 0).all()

    def test_rejects_mismatched_q_k_v(self):
        q = torch.randn(2, 4, 8)
        with pytest.raises(ValueError, match=r"d_k.*\(2, 4, 8\).*\(2, 5, 6\)"):
            fused_attention(q, torch.randn(2, 5, 6), torch.randn(2, 5, 6))
        with pytest.raises(ValueError, match=r"Lk.*\(2, 5, 8\).*\(2, 6, 8\)"):
            fused_attention(q, torch.randn(2, 5, 8), torch.randn(2, 6, 8))
        with pytest.raises(TypeError, match="v must be a torch.Tensor"):
            fused_attention(q, q, None)

    def test_rejects_bad_mask_and_bias(self):
        q, k, v = qkv()
        with pytest.raises(TypeError, match="mask must be boolean"):
            fused_attention(q, k, v, mask=torch.ones(4, 5))
        with pytest.raises(ValueError, match=r"mask of shape \(3, 5\)"):
            fused_attention(q, k, v, mask=torch.ones(3, 5, dtype=torch.bool))
        with pytest.raises(ValueError, match=r"bias of shape \(4, 4\)"):
            fused_attention(q, k, v, bias=torch.zeros(4, 4))


# --------------------------------------------------------------------------- which kernel
MATH_KERNEL = "aten::_scaled_dot_product_attention_math"
CPU_FUSED_KERNEL = "aten::_scaled_dot_product_flash_attention_for_cpu"


class TestWhichSdpaKernel:
    def test_three_dim_inputs_take_the_math_path_on_cpu(self):
        q, k, v = qkv(batch=(2,))  # [B, L, d]
        assert which_sdpa_kernel(q, k, v) == MATH_KERNEL

    @pytest.mark.parametrize("batch", [(2, 3), (1, 1)])
    def test_four_dim_inputs_take_the_fused_kernel_on_cpu(self, batch):
        q, k, v = qkv(batch=batch)  # [B, h, L, d]
        assert which_sdpa_kernel(q, k, v) == CPU_FUSED_KERNEL

    def test_names_the_kernel_that_sdpa_kernel_forces(self):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        q, k, v = qkv(batch=(2, 3))
        with sdpa_kernel(SDPBackend.MATH):
            assert which_sdpa_kernel(q, k, v) == MATH_KERNEL

    def test_passes_keyword_arguments_to_the_call(self):
        q, k, v = qkv(batch=(2, 3), lq=5, lk=5)
        assert which_sdpa_kernel(q, k, v, is_causal=True) == CPU_FUSED_KERNEL
        mask = causal_mask(5)
        assert which_sdpa_kernel(q, k, v, attn_mask=mask) == CPU_FUSED_KERNEL
        with pytest.raises(TypeError, match="not_an_argument"):  # reaches the call itself
            which_sdpa_kernel(q, k, v, not_an_argument=1)

    def test_profiler_notes_do_not_reach_stderr(self, capfd):
        q, k, v = qkv(batch=(2, 3))
        which_sdpa_kernel(q, k, v)
        assert "profiler" not in capfd.readouterr().err

    def test_rejects_mismatched_q_k_v(self):
        q = torch.randn(2, 4, 8)
        with pytest.raises(ValueError, match="d_k"):
            which_sdpa_kernel(q, torch.randn(2, 5, 6), torch.randn(2, 5, 6))
        with pytest.raises(TypeError, match="v must be a torch.Tensor"):
            which_sdpa_kernel(q, q, None)


class TestSdpaBackends:
    """Each backend allowed alone: the kernel it ran, or PyTorch's reason for refusing it."""

    GPU_ONLY = ("EFFICIENT_ATTENTION", "CUDNN_ATTENTION")

    def test_names_every_backend(self):
        q, k, v = qkv(batch=(2, 3))
        assert tuple(sdpa_backends(q, k, v)) == SDPA_BACKENDS

    def test_four_dim_inputs_on_cpu_run_flash_and_math(self):
        found = sdpa_backends(*qkv(batch=(2, 3)))  # [B, h, L, d]
        assert found["FLASH_ATTENTION"] == CPU_FUSED_KERNEL
        assert found["MATH"] == MATH_KERNEL
        for name in self.GPU_ONLY:  # on a CPU, PyTorch tries only flash and math
            assert found[name].startswith("unavailable: "), found[name]

    def test_three_dim_inputs_are_refused_the_fused_kernel_with_pytorchs_reason(self):
        found = sdpa_backends(*qkv(batch=(2,)))  # [B, L, d]
        assert found["MATH"] == MATH_KERNEL
        reason = found["FLASH_ATTENTION"]
        assert reason.startswith("unavailable: ") and "4 dimensional" in reason, reason
        assert "Triggered internally" not in reason and "because:" not in reason

    def test_restores_the_selection_and_keeps_warnings_in(self, recwarn):
        q, k, v = qkv(batch=(2,))
        sdpa_backends(q, k, v)
        assert not recwarn.list, [str(w.message) for w in recwarn.list]
        q4, k4, v4 = qkv(batch=(2, 3))
        assert which_sdpa_kernel(q4, k4, v4) == CPU_FUSED_KERNEL  # every backend allowed again

    def test_passes_keyword_arguments_to_the_call(self):
        q, k, v = qkv(batch=(2, 3), lq=5, lk=5)
        assert sdpa_backends(q, k, v, is_causal=True)["FLASH_ATTENTION"] == CPU_FUSED_KERNEL
        with pytest.raises(TypeError, match="not_an_argument"):
            sdpa_backends(q, k, v, not_an_argument=1)

    def test_rejects_mismatched_q_k_v(self):
        with pytest.raises(ValueError, match="d_k"):
            sdpa_backends(torch.randn(2, 4, 8), torch.randn(2, 5, 6), torch.randn(2, 5, 6))


# --------------------------------------------------------------------------- one head
class TestSelfAttention:
    def test_equals_manual_computation(self):
        sa = SelfAttention(input_dim=6, embed_dim=4)
        x = torch.randn(2, 5, 6)
        out, weights = sa(x)
        Q, K, V = x @ sa.W_q.weight.T, x @ sa.W_k.weight.T, x @ sa.W_v.weight.T
        A = torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(4), dim=-1)
        assert out.shape == (2, 5, 4) and weights.shape == (2, 5, 5)
        assert close(weights, A)
        assert close(out, (A @ V) @ sa.W_o.weight.T)

    def test_projections_have_no_bias(self):
        sa = SelfAttention(3, 4)
        assert all(lin.bias is None for lin in (sa.W_q, sa.W_k, sa.W_v, sa.W_o))

    def test_mask_and_bias_are_used(self):
        sa = SelfAttention(6, 4)
        x = torch.randn(2, 5, 6)
        _, weights = sa(x, mask=causal_mask(5))
        assert (weights.triu(1) == 0).all() and (weights[:, causal_mask(5)] > 0).all()
        bias = torch.randn(5, 5)
        out_b, w_b = sa(x, bias=bias)
        Q, K = sa.W_q(x), sa.W_k(x)
        assert close(w_b, torch.softmax(Q @ K.transpose(1, 2) / 2 + bias, dim=-1))

    def test_wrong_input_dim(self):
        sa = SelfAttention(input_dim=6, embed_dim=4)
        with pytest.raises(ValueError, match="x has 5 features.*input_dim=6"):
            sa(torch.randn(2, 3, 5))


# --------------------------------------------------------------------------- many heads
def pair(d_model=8, num_heads=2, bias=True):
    """A torch.nn.MultiheadAttention and ours with the same weights, both in eval mode."""
    theirs = nn.MultiheadAttention(d_model, num_heads, batch_first=True, bias=bias).eval()
    ours = MultiHeadAttention(d_model, num_heads, bias=bias).load_from_torch(theirs).eval()
    return ours, theirs


class TestMultiHeadAttention:
    def test_self_attention_matches_torch(self):
        ours, theirs = pair()
        x = torch.randn(3, 5, 8)
        out, weights = ours(x, x, x)
        ref, ref_w = theirs(x, x, x, average_attn_weights=False)
        assert out.shape == (3, 5, 8) and weights.shape == (3, 2, 5, 5)
        assert close(out, ref) and close(weights, ref_w)

    def test_cross_attention_matches_torch(self):
        ours, theirs = pair(d_model=12, num_heads=3)
        x, memory = torch.randn(2, 4, 12), torch.randn(2, 7, 12)
        out, weights = ours(x, memory, memory)
        ref, ref_w = theirs(x, memory, memory, average_attn_weights=False)
        assert weights.shape == (2, 3, 4, 7)
        assert close(out, ref) and close(weights, ref_w)

    def test_distinct_key_and_value_match_torch(self):
        ours, theirs = pair()
        q, k, v = torch.randn(2, 3, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 8)
        assert close(ours(q, k, v)[0], theirs(q, k, v)[0])

    def test_without_bias_matches_torch(self):
        ours, theirs = pair(bias=False)
        assert ours.q_proj.bias is None
        x = torch.randn(2, 5, 8)
        assert close(ours(x, x, x)[0], theirs(x, x, x)[0])

    def test_causal_mask_matches_torch(self):
        ours, theirs = pair()
        x = torch.randn(2, 6, 8)
        mask = causal_mask(6)
        out, weights = ours(x, x, x, mask=mask)
        ref, ref_w = theirs(x, x, x, attn_mask=~mask, average_attn_weights=False)  # True = blocked
        assert close(out, ref) and close(weights, ref_w)
        assert (weights.triu(1) == 0).all()

    def test_key_padding_mask_matches_torch(self):
        ours, theirs = pair()
        tokens = torch.tensor([[5, 6, 7, 0, 0], [1, 2, 3, 4, 0]])
        x = torch.randn(2, 5, 8)
        mask = padding_mask(tokens, pad_id=0)
        out, weights = ours(x, x, x, mask=mask)
        ref, ref_w = theirs(x, x, x, key_padding_mask=tokens == 0, average_attn_weights=False)
        assert close(out, ref) and close(weights, ref_w)
        assert (weights[0, :, :, 3:] == 0).all() and (weights[1, :, :, 4] == 0).all()

    def test_causal_and_padding_masks_together_match_torch(self):
        ours, theirs = pair()
        tokens = torch.tensor([[5, 6, 7, 0], [1, 2, 3, 4]])
        x = torch.randn(2, 4, 8)
        mask = causal_mask(4) & padding_mask(tokens, 0)  # [B, 1, L, L]
        out, weights = ours(x, x, x, mask=mask)
        ref, ref_w = theirs(
            x,
            x,
            x,
            attn_mask=~causal_mask(4),
            key_padding_mask=tokens == 0,
            average_attn_weights=False,
        )
        assert close(out, ref) and close(weights, ref_w)

    def test_three_dim_mask_is_broadcast_over_heads(self):
        ours, theirs = pair(d_model=8, num_heads=4)
        x = torch.randn(2, 5, 8)
        mask = random_mask(2, 5, 5)  # a different mask per sample
        out, weights = ours(x, x, x, mask=mask)
        out4, _ = ours(x, x, x, mask=mask[:, None])
        # torch wants [B * h, L, L], True = blocked
        ref, ref_w = theirs(
            x, x, x, attn_mask=(~mask).repeat_interleave(4, dim=0), average_attn_weights=False
        )
        assert close(out, out4)
        assert close(out, ref) and close(weights, ref_w)
        assert (weights[~mask[:, None].expand(2, 4, 5, 5)] == 0).all()

    def test_alibi_bias_matches_torch_float_mask(self):
        ours, theirs = pair(d_model=8, num_heads=4)
        x = torch.randn(2, 5, 8)
        bias = alibi_bias(4, 5)  # [h, L, L]
        out, _ = ours(x, x, x, bias=bias)
        ref, _ = theirs(x, x, x, attn_mask=bias.repeat(2, 1, 1))  # [B * h, L, L], b-major
        assert close(out, ref)
        assert not close(out, ours(x, x, x)[0])

    def test_need_weights_false_gives_same_output(self):
        ours, theirs = pair()
        x, memory = torch.randn(2, 5, 8), torch.randn(2, 6, 8)
        mask = random_mask(2, 1, 5, 6)
        mask[0, 0, 2] = False  # a fully masked row too
        out, _ = ours(x, memory, memory, mask=mask)
        fast, weights = ours(x, memory, memory, mask=mask, need_weights=False)
        assert weights is None
        assert close(fast, out)
        ref, _ = theirs(x, memory, memory, need_weights=False)
        assert close(ours(x, memory, memory, need_weights=False)[0], ref)

    def test_gradients_flow(self):
        mha = MultiHeadAttention(8, 2)
        x = torch.randn(2, 5, 8, requires_grad=True)
        for need_weights in (True, False):
            mha.zero_grad()
            x.grad = None
            out, _ = mha(x, x, x, mask=causal_mask(5), need_weights=need_weights)
            out.pow(2).sum().backward()
            assert x.grad is not None and x.grad.abs().sum() > 0
            for name, p in mha.named_parameters():
                assert p.grad is not None and p.grad.abs().sum() > 0, name
                assert torch.isfinite(p.grad).all(), name

    def test_split_and_merge_heads(self):
        mha = MultiHeadAttention(12, 3)
        x = torch.randn(2, 5, 12)
        heads = mha.split_heads(x)
        assert heads.shape == (2, 3, 5, 4)
        assert torch.equal(heads[:, 1], x[..., 4:8])  # head i holds dims i*d_k .. (i+1)*d_k
        assert torch.equal(mha.merge_heads(heads), x)

    def test_dropout_only_in_training(self):
        mha = MultiHeadAttention(8, 2, dropout=0.5)
        x = torch.randn(2, 5, 8)
        mha.train()
        assert not close(mha(x, x, x)[0], mha(x, x, x)[0])
        mha.eval()
        assert torch.equal(mha(x, x, x)[0], mha(x, x, x)[0])

    def test_d_model_not_divisible_by_num_heads(self):
        with pytest.raises(ValueError, match=r"d_model=10.*num_heads=3"):
            MultiHeadAttention(10, 3)

    @pytest.mark.parametrize(
        ("d_model", "num_heads", "name"),
        [(0, 1, "d_model"), (8, 0, "num_heads"), (8.0, 2, "d_model"), (8, True, "num_heads")],
    )
    def test_sizes_must_be_positive_ints(self, d_model, num_heads, name):
        with pytest.raises(ValueError, match=f"{name} must be a positive int"):
            MultiHeadAttention(d_model, num_heads)

    @pytest.mark.parametrize("dropout", [-0.1, 1.0])
    def test_dropout_range(self, dropout):
        with pytest.raises(ValueError, match=f"dropout must be in \\[0, 1\\), got {dropout}"):
            MultiHeadAttention(8, 2, dropout=dropout)

    def test_bad_inputs(self):
        mha = MultiHeadAttention(8, 2)
        x = torch.randn(2, 5, 8)
        with pytest.raises(ValueError, match=r"query must have shape \[B, L, d_model\].*\(5, 8\)"):
            mha(x[0], x, x)
        with pytest.raises(ValueError, match="key has last dimension 6.*d_model=8"):
            mha(x, torch.randn(2, 5, 6), x)
        with pytest.raises(ValueError, match="same length, got 5 and 4"):
            mha(x, x, x[:, :4])
        with pytest.raises(ValueError, match="same batch size"):
            mha(x, x[:1], x[:1])
        with pytest.raises(TypeError, match="value must be a torch.Tensor"):
            mha(x, x, x.numpy())

    def test_bad_masks(self):
        mha = MultiHeadAttention(8, 2)
        x = torch.randn(2, 5, 8)
        with pytest.raises(TypeError, match="mask must be boolean.*torch.int64"):
            mha(x, x, x, mask=torch.ones(5, 5, dtype=torch.long))
        with pytest.raises(TypeError, match="mask must be boolean.*torch.float32"):
            mha(x, x, x, mask=torch.ones(5, 5), need_weights=False)
        with pytest.raises(ValueError, match=r"mask of shape \(2, 1, 4, 5\)"):
            mha(x, x, x, mask=torch.ones(2, 4, 5, dtype=torch.bool))

    def test_load_from_torch_size_mismatch(self):
        theirs = nn.MultiheadAttention(8, 4, batch_first=True)
        with pytest.raises(ValueError, match=r"num_heads=4.*num_heads=2"):
            MultiHeadAttention(8, 2).load_from_torch(theirs)

    def test_load_from_torch_bias_mismatch(self):
        ours = MultiHeadAttention(8, 2, bias=True)
        with pytest.raises(ValueError, match="bias"):
            ours.load_from_torch(nn.MultiheadAttention(8, 2, batch_first=True, bias=False))
        with pytest.raises(ValueError, match="bias"):
            MultiHeadAttention(8, 2, bias=False).load_from_torch(
                nn.MultiheadAttention(8, 2, batch_first=True)
            )


# --------------------------------------------------------------------------- additive
class TestAdditiveAttention:
    def test_shapes_and_rows_sum_to_one(self):
        att = AdditiveAttention(query_dim=3, key_dim=5, hidden_dim=7)
        q, k, v = torch.randn(2, 4, 3), torch.randn(2, 6, 5), torch.randn(2, 6, 9)
        out, weights = att(q, k, v)
        assert out.shape == (2, 4, 9) and weights.shape == (2, 4, 6)
        assert close(weights.sum(-1), torch.ones(2, 4))
        assert close(out, weights @ v)

    def test_hand_computed_example(self):
        att = AdditiveAttention(query_dim=2, key_dim=2, hidden_dim=2)
        Wq, Wk, w = [[0.5, -1.0], [0.25, 2.0]], [[1.0, 0.0], [-0.5, 0.5]], [1.5, -2.0]
        with torch.no_grad():
            att.W_q.weight.copy_(torch.tensor(Wq))
            att.W_k.weight.copy_(torch.tensor(Wk))
            att.w.weight.copy_(torch.tensor([w]))
        qs, ks, vs = [[1.0, 2.0]], [[0.0, 1.0], [2.0, -1.0], [1.0, 1.0]], [[1.0], [10.0], [100.0]]
        out, weights = att(torch.tensor([qs]), torch.tensor([ks]), torch.tensor([vs]))

        def lin(W, x):
            return [sum(W[r][c] * x[c] for c in range(2)) for r in range(2)]

        scores = []
        for kk in ks:
            hq, hk = lin(Wq, qs[0]), lin(Wk, kk)
            scores.append(sum(w[j] * math.tanh(hq[j] + hk[j]) for j in range(2)))
        exps = [math.exp(s) for s in scores]
        a = [e / sum(exps) for e in exps]
        expected_out = sum(ai * vi[0] for ai, vi in zip(a, vs, strict=True))
        assert close(weights, torch.tensor([[a]]))
        assert abs(out.item() - expected_out) < 1e-4

    def test_mask(self):
        att = AdditiveAttention(4, 4, 8)
        q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
        mask = random_mask(2, 3, 5)
        mask[1, 2] = False  # nothing to attend to
        out, weights = att(q, k, v, mask=mask)
        assert (weights[~mask] == 0).all()
        assert not out.isnan().any() and (out[1, 2] == 0).all()
        assert close(weights[0].sum(-1), torch.ones(3))
        # masking = removing those keys
        keep = mask[0, 0]
        out_sub, _ = att(q[:1, :1], k[:1, :, :][:, keep], v[:1][:, keep])
        assert close(out[0, 0], out_sub[0, 0])

    def test_unbatched_input(self):
        att = AdditiveAttention(3, 3, 4)
        q, k, v = torch.randn(2, 4, 3), torch.randn(2, 5, 3), torch.randn(2, 5, 2)
        out, weights = att(q, k, v)
        out0, weights0 = att(q[0], k[0], v[0])
        assert close(out0, out[0]) and close(weights0, weights[0])

    def test_bad_inputs(self):
        att = AdditiveAttention(query_dim=3, key_dim=5, hidden_dim=7)
        q, k, v = torch.randn(2, 4, 3), torch.randn(2, 6, 5), torch.randn(2, 6, 9)
        with pytest.raises(ValueError, match="q has last dimension 4, expected query_dim=3"):
            att(torch.randn(2, 4, 4), k, v)
        with pytest.raises(ValueError, match="k has last dimension 3, expected key_dim=5"):
            att(q, torch.randn(2, 6, 3), v)
        with pytest.raises(ValueError, match="same length, got 6 and 2"):
            att(q, k, v[:, :2])
        with pytest.raises(TypeError, match="mask must be boolean"):
            att(q, k, v, mask=torch.ones(4, 6))
        with pytest.raises(TypeError, match="v must be a torch.Tensor"):
            att(q, k, None)


@pytest.mark.parametrize("need_weights", [True, False])
def test_kv_cache_step_by_step_equals_causal_forward(need_weights):
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 9, 16)
    full, _ = mha(x, x, x, mask=causal_mask(9))
    cache = KVCache()
    out, _ = mha(x[:, :4], x[:, :4], x[:, :4], mask=causal_mask(4), cache=cache)  # a prompt
    outs = [out]
    for t in range(4, 9):  # then one position at a time, seeing everything cached
        new = x[:, t:t + 1]
        out, weights = mha(new, new, new, need_weights=need_weights, cache=cache)
        outs.append(out)
    assert torch.allclose(torch.cat(outs, 1), full, atol=1e-6)
    assert len(cache) == 9 and cache.keys.shape == cache.values.shape == (2, 4, 9, 4)
    if need_weights:
        assert weights.shape == (2, 4, 1, 9)


def test_fixed_kv_cache_projects_the_memory_once():
    mha = MultiHeadAttention(16, 4).eval()
    q, memory = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    expected, _ = mha(q, memory, memory)
    cache = KVCache(fixed=True)
    first, _ = mha(q[:, :1], memory, memory, cache=cache)
    assert cache.holds_memory and len(cache) == 5
    rest, _ = mha(q[:, 1:], memory, memory, cache=cache)
    assert len(cache) == 5  # read, not appended to
    assert torch.allclose(torch.cat([first, rest], 1), expected, atol=1e-6)


def test_kv_cache_misuse_gives_clear_errors():
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 3, 16)
    with pytest.raises(TypeError, match="cache must be an attention.KVCache"):
        mha(x, x, x, cache=[])
    cache = KVCache()
    mha(x, x, x, cache=cache)
    y = torch.randn(1, 1, 16)
    with pytest.raises(ValueError, match=r"holds keys \(2, 4, 3, 4\).*new keys are \(1, 4, 1, 4\)"):
        mha(y, y, y, cache=cache)
