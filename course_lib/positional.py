"""Telling attention where things are: sinusoidal, learned, ALiBi and rotary positions.

Attention on its own is permutation-equivariant: shuffle the inputs and the outputs shuffle
the same way. Each scheme below breaks that symmetry differently.
"""

from __future__ import annotations

import torch
from torch import nn

# The chapters show sources that call the shared check by this name.
from .checks import positive_int as _positive_int


class SequenceTooLongError(ValueError):
    """A sequence is longer than a positional table was built for."""


# --------------------------------------------------------------------------- sinusoidal
def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """[max_len, d_model] with PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same).

    i runs over 0 .. d_model/2 - 1: each pair of dimensions is one "clock hand" turning at
    its own frequency.
    """
    _positive_int("max_len", max_len)
    _positive_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(f"d_model must be even for sin/cos pairs, got d_model={d_model}")
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # [L, 1]
    i = torch.arange(0, d_model, 2, dtype=torch.float32)  # 2i = 0, 2, 4, ...
    angle = position / torch.pow(10000.0, i / d_model)  # [L, d/2]
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table to x [B, L, d_model]; works for any length."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0):
        super().__init__()
        self.d_model = d_model
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        L = x.shape[1]
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"x has {x.shape[-1]} features, this encoding has d_model={self.d_model}"
            )
        pe = self.pe if L <= self.pe.shape[0] else sinusoidal_encoding(L, self.d_model).to(x.device)
        return self.dropout(x + pe[:L].to(x.dtype))


# --------------------------------------------------------------------------- learned
class LearnedPositionalEmbedding(nn.Module):
    """A trainable vector per position 0 .. max_len-1, added to x [B, L, d_model].

    It knows nothing about positions it never saw: a longer sequence raises
    ``SequenceTooLongError`` instead of an IndexError deep inside ``nn.Embedding``.
    """

    def __init__(self, max_len: int, d_model: int, dropout: float = 0.0):
        super().__init__()
        _positive_int("max_len", max_len)
        _positive_int("d_model", d_model)
        self.max_len, self.d_model = max_len, d_model
        self.embedding = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, offset: int = 0):
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape [B, L, {self.d_model}], got {tuple(x.shape)}")
        L = x.shape[1]
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be a non-negative int, got {offset!r}")
        if offset + L > self.max_len:
            raise SequenceTooLongError(
                f"sequence length {offset + L} exceeds max_len={self.max_len} of this learned "
                f"positional embedding: it has no vector for positions {self.max_len} and beyond. "
                f"Build it with a larger max_len (and train it), or use sinusoidal or ALiBi "
                f"positions, which are defined for any length."
            )
        pos = torch.arange(offset, offset + L, device=x.device)
        return self.dropout(x + self.embedding(pos))  # [L, d] broadcasts over the batch


# --------------------------------------------------------------------------- ALiBi
def alibi_slopes(num_heads: int) -> torch.Tensor:
    """[h] slopes m_i = 2^(-8 i / h), i = 1..h: head 1 looks near, the last head looks far."""
    _positive_int("num_heads", num_heads)
    i = torch.arange(1, num_heads + 1, dtype=torch.float32)
    return torch.pow(2.0, -8.0 * i / num_heads)


def alibi_bias(num_heads: int, length: int) -> torch.Tensor:
    """[h, L, L] with bias[h, i, j] = -m_h * |i - j| (symmetric: for encoders)."""
    _positive_int("length", length)
    pos = torch.arange(length)
    distance = (pos[:, None] - pos[None, :]).abs().float()  # [L, L]
    return (
        -alibi_slopes(num_heads)[:, None, None] * distance + 0.0
    )  # [h, L, L]; + 0.0 turns -0 into 0


# --------------------------------------------------------------------------- RoPE
def rope(x: torch.Tensor, base: float = 10000.0, offset: int = 0) -> torch.Tensor:
    """Rotary position embedding: rotate each pair (x[2i], x[2i+1]) at position p by p * theta_i.

    x: [..., L, d] with d even; theta_i = base^(-2i/d). Applied to queries and keys, the
    dot product q_m . k_n then depends on m - n only.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() < 2 or x.shape[-1] % 2:
        raise ValueError(f"x must have shape [..., L, d] with d even, got {tuple(x.shape)}")
    L, d = x.shape[-2], x.shape[-1]
    theta = torch.pow(
        base, -torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d
    )  # [d/2]
    angle = (
        torch.arange(offset, offset + L, dtype=torch.float32, device=x.device)[:, None] * theta
    )  # [L, d/2]
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x_even * cos - x_odd * sin
    out[..., 1::2] = x_even * sin + x_odd * cos
    return out
