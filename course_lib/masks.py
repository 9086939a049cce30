"""Masks say which keys each query may look at. Boolean, and **True = may attend**.

PyTorch's APIs disagree on the convention: ``F.scaled_dot_product_attention`` uses
True = may attend (as here), ``nn.MultiheadAttention`` and ``nn.Transformer*`` use
True = blocked. ``to_blocked`` converts ours to theirs.
"""

from __future__ import annotations

import torch


def causal_mask(length: int, device=None) -> torch.Tensor:
    """bool[L, L], lower triangle True: position i may attend to positions 0..i."""
    if not isinstance(length, int) or isinstance(length, bool) or length < 1:
        raise ValueError(f"length must be a positive int, got {length!r}")
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """bool[B, 1, 1, L]: True where the key is a real token, False where it is padding.

    The two singleton dimensions let it broadcast over heads and queries:
    [B, h, Lq, Lk].
    """
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(
            f"tokens must be a torch.Tensor of token ids, got {type(tokens).__name__}"
        )
    if tokens.dim() != 2:
        raise ValueError(f"tokens must have shape [B, L], got {tuple(tokens.shape)}")
    if tokens.is_floating_point() or tokens.dtype == torch.bool:
        raise TypeError(f"tokens must hold integer ids, got dtype {tokens.dtype}")
    if not isinstance(pad_id, int) or isinstance(pad_id, bool):
        raise TypeError(f"pad_id must be an int, got {type(pad_id).__name__}")
    return (tokens != pad_id)[:, None, None, :]


def to_blocked(mask: torch.Tensor) -> torch.Tensor:
    """Our convention (True = may attend) -> nn.MultiheadAttention's (True = blocked)."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError("mask must be a boolean tensor")
    return ~mask
