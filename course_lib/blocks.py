"""Transformer blocks: attention + feed-forward, each wrapped in a residual and a LayerNorm.

``EncoderBlock`` and ``DecoderBlock`` take switches so that a chapter can remove one part
at a time (the ablations of chapter 4) or move the LayerNorm (Pre-Norm vs Post-Norm):

    Post-Norm (the 2017 paper):  x = LN(x + Sublayer(x))
    Pre-Norm  (GPT-2 and later): x = x + Sublayer(LN(x))
"""

from __future__ import annotations

from torch import nn

from .attention import MultiHeadAttention


class FeedForward(nn.Module):
    """Per-position MLP: Linear(d_model, d_ff) -> activation -> dropout -> Linear(d_ff, d_model)"""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        acts = {"relu": nn.ReLU, "gelu": nn.GELU}
        if activation not in acts:
            raise ValueError(f"activation must be one of {sorted(acts)}, got {activation!r}")
        self.net = nn.Sequential(
            nn.Linear(d_model, d_ff),
            acts[activation](),
            nn.Dropout(dropout),
            nn.Linear(d_ff, d_model),
        )

    def forward(self, x):  # [B, L, d_model] -> [B, L, d_model]
        return self.net(x)


class _Sublayer(nn.Module):
    """One residual branch with its LayerNorm placed before (pre) or after (post) it."""

    def __init__(
        self, d_model: int, dropout: float, norm_first: bool, use_norm: bool, use_residual: bool
    ):
        super().__init__()
        self.norm = nn.LayerNorm(d_model) if use_norm else nn.Identity()
        self.dropout = nn.Dropout(dropout)
        self.norm_first, self.use_residual = norm_first, use_residual

    def forward(self, x, fn):
        if self.norm_first:
            y = self.dropout(fn(self.norm(x)))
            return x + y if self.use_residual else y
        y = self.dropout(fn(x))
        return self.norm(x + y if self.use_residual else y)


def _check_norm_position(norm_first):
    if not isinstance(norm_first, bool):
        raise TypeError(
            f"norm_first must be True (Pre-Norm) or False (Post-Norm), got {norm_first!r}"
        )


class EncoderBlock(nn.Module):
    """Self-attention then feed-forward, each with residual + LayerNorm.

    forward(x [B, L, d_model], mask=None, bias=None) -> (x [B, L, d_model], weights [B, h, L, L])
    Switches: ``use_ffn``, ``use_residual``, ``use_norm``, ``norm_first`` (Pre-Norm when True).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = True,
        use_ffn: bool = True,
        use_residual: bool = True,
        use_norm: bool = True,
        activation: str = "relu",
    ):
        super().__init__()
        _check_norm_position(norm_first)
        self.attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.attn_sub = _Sublayer(d_model, dropout, norm_first, use_norm, use_residual)
        self.ffn = FeedForward(d_model, d_ff, dropout, activation) if use_ffn else None
        self.ffn_sub = (
            _Sublayer(d_model, dropout, norm_first, use_norm, use_residual) if use_ffn else None
        )

    def forward(self, x, mask=None, bias=None, need_weights: bool = True):
        weights = None

        def self_attn(h):
            nonlocal weights
            out, weights = self.attn(h, h, h, mask=mask, bias=bias, need_weights=need_weights)
            return out

        x = self.attn_sub(x, self_attn)
        if self.ffn is not None:
            x = self.ffn_sub(x, self.ffn)
        return x, weights


class DecoderBlock(nn.Module):
    """Masked self-attention, cross-attention to the encoder output, feed-forward.

    forward(x [B, Lt, d], memory [B, Ls, d], self_mask, memory_mask)
        -> (x [B, Lt, d], self_weights [B, h, Lt, Lt], cross_weights [B, h, Lt, Ls])
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = True,
        activation: str = "relu",
    ):
        super().__init__()
        _check_norm_position(norm_first)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout, activation)
        self.subs = nn.ModuleList(
            _Sublayer(d_model, dropout, norm_first, True, True) for _ in range(3)
        )

    def forward(self, x, memory, self_mask=None, memory_mask=None, need_weights: bool = True):
        w = {}

        def self_attn(h):
            out, w["self"] = self.self_attn(h, h, h, mask=self_mask, need_weights=need_weights)
            return out

        def cross_attn(h):
            out, w["cross"] = self.cross_attn(
                h, memory, memory, mask=memory_mask, need_weights=need_weights
            )
            return out

        x = self.subs[0](x, self_attn)
        x = self.subs[1](x, cross_attn)
        x = self.subs[2](x, self.ffn)
        return x, w["self"], w["cross"]
