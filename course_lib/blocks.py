"""Transformer blocks: attention and a feed-forward network, each on a residual path.

    Pre-Norm  (GPT-2 and later):  x = x + Sublayer(LN(x))    Block, DecoderBlock
    Post-Norm (the 2017 paper):   x = LN(x + Sublayer(x))    PostNormBlock, PostNormDecoderBlock

Every block returns ``(x, attention weights)``; with ``need_weights=False`` the fused kernel
runs and the weights are None. ``cache`` (decoding only) is an ``attention.KVCache`` per
attention layer: the block then gets only the new positions and attends over the cached ones
too. ``AblationBlock`` has chapter 4's switches, to remove or move one part at a time.

The submodules have the names of the chapters' own blocks (``norm1``, ``attn``, ``norm2``,
``ffn``; ``self_attn``, ``cross_attn``, ``norm3`` in a decoder block), so a block written on a
page and the library's load each other's state dicts as they are.
"""

from __future__ import annotations

from torch import nn

from .attention import MultiHeadAttention

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}


class FeedForward(nn.Module):
    """Per-position MLP: Linear(d_model, d_ff) -> activation -> dropout -> Linear(d_ff, d_model)"""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        _check_activation(activation)
        self.net = nn.Sequential(
            nn.Linear(d_model, d_ff),
            ACTIVATIONS[activation](),
            nn.Dropout(dropout),
            nn.Linear(d_ff, d_model),
        )

    def forward(self, x):  # [B, L, d_model] -> [B, L, d_model]
        return self.net(x)


class Block(nn.Module):
    """Pre-Norm block: self-attention, then the feed-forward network, each added back to x.

    forward(x [B, L, d_model], mask=None, bias=None, need_weights=True, cache=None)
        -> (x [B, L, d_model], weights [B, h, L, L] or None)
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 activation: str = "relu"):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff, dropout, activation)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)  # on each sub-layer's output, before x + ...

    def forward(self, x, mask=None, bias=None, need_weights: bool = True, cache=None):
        h = self.norm1(x)  # [B, L, d_model]
        a, weights = self.attn(h, h, h, mask=mask, bias=bias, need_weights=need_weights,
                               cache=cache)
        x = x + self.dropout(a)  # tokens look at each other
        x = x + self.dropout(self.ffn(self.norm2(x)))  # each token on its own
        return x, weights


# Chapters 5 and 6 call it by its role: an encoder's block is this block, with no causal mask.
EncoderBlock = Block


class PostNormBlock(Block):
    """The 2017 paper's order: the LayerNorm after each residual addition. Same modules."""

    def forward(self, x, mask=None, bias=None, need_weights: bool = True, cache=None):
        a, weights = self.attn(x, x, x, mask=mask, bias=bias, need_weights=need_weights,
                               cache=cache)
        x = self.norm1(x + self.dropout(a))
        x = self.norm2(x + self.dropout(self.ffn(x)))
        return x, weights


class DecoderBlock(nn.Module):
    """Pre-Norm decoder block: masked self-attention, cross-attention to the encoder's
    output (``memory``), feed-forward.

    forward(x [B, Lt, d], memory [B, Ls, d], self_mask=None, memory_mask=None,
            need_weights=True, cache=None, memory_cache=None)
        -> (x [B, Lt, d], self_weights [B, h, Lt, Lt], cross_weights [B, h, Lt, Ls])
    ``memory_cache`` is a ``KVCache(fixed=True)``: the memory's keys and values, made once.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 activation: str = "relu"):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, self_mask=None, memory_mask=None, need_weights: bool = True,
                cache=None, memory_cache=None):
        h = self.norm1(x)  # 1. each target position reads the targets up to itself
        a, self_w = self.self_attn(h, h, h, mask=self_mask, need_weights=need_weights,
                                   cache=cache)
        x = x + self.dropout(a)
        h = self.norm2(x)  # 2. queries from the decoder, keys and values from the memory
        a, cross_w = self.cross_attn(h, memory, memory, mask=memory_mask,
                                     need_weights=need_weights, cache=memory_cache)
        x = x + self.dropout(a)
        x = x + self.dropout(self.ffn(self.norm3(x)))  # 3. per position
        return x, self_w, cross_w


class PostNormDecoderBlock(DecoderBlock):
    """The 2017 paper's decoder block: the LayerNorm after each residual addition."""

    def forward(self, x, memory, self_mask=None, memory_mask=None, need_weights: bool = True,
                cache=None, memory_cache=None):
        a, self_w = self.self_attn(x, x, x, mask=self_mask, need_weights=need_weights,
                                   cache=cache)
        x = self.norm1(x + self.dropout(a))
        a, cross_w = self.cross_attn(x, memory, memory, mask=memory_mask,
                                     need_weights=need_weights, cache=memory_cache)
        x = self.norm2(x + self.dropout(a))
        x = self.norm3(x + self.dropout(self.ffn(x)))
        return x, self_w, cross_w


class AblationBlock(nn.Module):
    """``Block`` with chapter 4's switches, to take one part away at a time.

    ``use_ffn=False``: no feed-forward sub-layer (and no ``norm2``); ``use_residual=False``:
    each sub-layer's output replaces x instead of being added to it; ``use_norm=False``: no
    LayerNorms; ``norm_first=False``: Post-Norm. With every switch at its default it computes
    ``Block``, with ``norm_first=False`` alone ``PostNormBlock`` (the tests check both).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = True, use_ffn: bool = True, use_residual: bool = True,
                 use_norm: bool = True, activation: str = "relu"):
        super().__init__()
        _check_switches(norm_first=norm_first, use_ffn=use_ffn, use_residual=use_residual,
                        use_norm=use_norm)
        self.norm_first, self.use_residual = norm_first, use_residual
        self.attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.norm1 = _norm(d_model, use_norm)
        self.ffn = FeedForward(d_model, d_ff, dropout, activation) if use_ffn else None
        self.norm2 = _norm(d_model, use_norm) if use_ffn else None
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None, bias=None, need_weights: bool = True, cache=None):
        h = self.norm1(x) if self.norm_first else x
        a, weights = self.attn(h, h, h, mask=mask, bias=bias, need_weights=need_weights,
                               cache=cache)
        x = self.add(x, self.dropout(a), self.norm1)
        if self.ffn is not None:
            h = self.norm2(x) if self.norm_first else x
            x = self.add(x, self.dropout(self.ffn(h)), self.norm2)
        return x, weights

    def add(self, x, y, norm):
        """x + y (y alone without the residual path), then ``norm`` if Post-Norm."""
        x = x + y if self.use_residual else y
        return x if self.norm_first else norm(x)


def _norm(d_model: int, use_norm: bool) -> nn.Module:
    return nn.LayerNorm(d_model) if use_norm else nn.Identity()


# --------------------------------------------------------------------------- checks
def _check_activation(activation) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")


def _check_switches(**switches) -> None:
    for name, value in switches.items():
        if not isinstance(value, bool):
            hint = " (Pre-Norm) or False (Post-Norm)" if name == "norm_first" else " or False"
            raise TypeError(f"{name} must be True{hint}, got {value!r}")
