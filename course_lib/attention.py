"""Attention, written out: scaled dot-product, one head, many heads, and additive; and the
key-value cache that decoding keeps for multi-head attention (``KVCache``).

Conventions used everywhere in the course:

- tensors are batch-first: ``[B, L, d]`` for a batch of sequences;
- a ``mask`` is boolean and **True means "may attend"** (as in
  ``torch.nn.functional.scaled_dot_product_attention``); it must broadcast to the score
  matrix ``[..., Lq, Lk]``;
- a ``bias`` is a float tensor added to the scores before the softmax (ALiBi uses it);
- a query row that may attend to nothing gets all-zero weights and a zero output, not NaN.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .checks import positive_int
from .machine import quiet_stderr  # the profiler writes start/stop notes to stderr


# --------------------------------------------------------------------------- checks
def _check_tensor(name: str, x) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() < 2:
        raise ValueError(
            f"{name} must have shape [..., L, d] (at least 2 dims), got {tuple(x.shape)}"
        )


def _broadcastable(shape, target) -> bool:
    try:
        return tuple(torch.broadcast_shapes(tuple(shape), tuple(target))) == tuple(target)
    except RuntimeError:
        return False


def check_mask(mask, scores_shape, name: str = "mask") -> None:
    """Raise a clear error unless ``mask`` is boolean and broadcasts to ``scores_shape``."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a boolean torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must be boolean (True = may attend), got dtype {mask.dtype}; "
            f"build it with course_lib.masks or compare, e.g. `tokens != pad_id`. "
            f"To add float values to the scores, pass them as `bias` instead."
        )
    if not _broadcastable(mask.shape, scores_shape):
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} cannot broadcast to the attention scores "
            f"of shape {tuple(scores_shape)} ([..., Lq, Lk])"
        )


def _check_bias(bias, scores_shape) -> None:
    if not isinstance(bias, torch.Tensor):
        raise TypeError(f"bias must be a float torch.Tensor, got {type(bias).__name__}")
    if not bias.is_floating_point():
        raise TypeError(f"bias must be a float tensor added to the scores, got dtype {bias.dtype}")
    if not _broadcastable(bias.shape, scores_shape):
        raise ValueError(
            f"bias of shape {tuple(bias.shape)} cannot broadcast to the attention scores "
            f"of shape {tuple(scores_shape)} ([..., Lq, Lk])"
        )


def _check_qkv(q, k, v) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, t)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same last dimension d_k, "
            f"got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same length Lk (dim -2), "
            f"got k {tuple(k.shape)} and v {tuple(v.shape)}"
        )


# --------------------------------------------------------------------------- the function
def scaled_dot_product_attention(q, k, v, mask=None, bias=None, dropout_p: float = 0.0):
    """softmax(q k^T / sqrt(d_k) + bias, masked) v.

    q: [..., Lq, d_k]   k: [..., Lk, d_k]   v: [..., Lk, d_v]
    mask: bool, True = may attend, broadcastable to [..., Lq, Lk]
    bias: float, added to the scores, broadcastable to [..., Lq, Lk]
    returns (out [..., Lq, d_v], weights [..., Lq, Lk])
    """
    _check_qkv(q, k, v)
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # [..., Lq, Lk]
    if bias is not None:
        _check_bias(bias, scores.shape)
        scores = scores + bias
    if mask is not None:
        check_mask(mask, scores.shape)
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # [..., Lq, Lk]
    if mask is not None:
        # a row with nothing to attend to is all -inf -> NaN after softmax; make it zeros
        weights = weights.masked_fill(~mask, 0.0)
    if dropout_p > 0.0:
        # on the weights, after the softmax, as tensor2tensor and nn.MultiheadAttention do
        # (the paper itself describes dropout only on sub-layer outputs and embedding sums)
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights


# --------------------------------------------------------------------------- one head
class SelfAttention(nn.Module):
    """One attention head over its own input, as in the first listing of the chapter.

    Projects x [B, L, input_dim] to Q, K, V of width ``embed_dim``, attends, and mixes the
    result with an output projection W_o.
    """

    def __init__(self, input_dim: int, embed_dim: int):
        super().__init__()
        self.embed_dim = embed_dim
        self.W_q = nn.Linear(input_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(input_dim, embed_dim, bias=False)
        self.W_v = nn.Linear(input_dim, embed_dim, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, mask=None, bias=None):
        if x.shape[-1] != self.W_q.in_features:
            raise ValueError(
                f"x has {x.shape[-1]} features but this SelfAttention was built with "
                f"input_dim={self.W_q.in_features}"
            )
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)  # each [B, L, embed_dim]
        context, weights = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias)
        return self.W_o(context), weights  # [B, L, embed_dim], [B, L, L]


# --------------------------------------------------------------------------- many heads
class MultiHeadAttention(nn.Module):
    """h heads of width d_k = d_model / h, computed at once by reshaping.

    forward(query [B, Lq, d_model], key [B, Lk, d_model], value [B, Lk, d_model],
            mask=None, bias=None) -> (out [B, Lq, d_model], weights [B, h, Lq, Lk])

    ``mask`` (bool, True = may attend) may be [Lq, Lk], [B, Lq, Lk] or [B, 1|h, Lq|1, Lk];
    ``bias`` (float) may be [h, Lq, Lk] (ALiBi) or anything broadcastable to [B, h, Lq, Lk].
    With ``need_weights=False`` PyTorch's fused kernel computes the same output faster and
    ``weights`` is None. ``cache`` (a ``KVCache``, for decoding) keeps the keys and values of
    earlier calls; then ``mask`` is [Lq, L_cached + Lk].
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        positive_int("d_model", d_model)
        positive_int("num_heads", num_heads)
        if d_model % num_heads != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by num_heads={num_heads}: each head gets "
                f"d_model / num_heads dimensions, so choose num_heads among the divisors "
                f"of {d_model}"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x):
        """[B, L, d_model] -> [B, h, L, d_k]"""
        B, L, _ = x.shape
        return x.view(B, L, self.num_heads, self.d_k).transpose(1, 2)

    def merge_heads(self, x):
        """[B, h, L, d_k] -> [B, L, d_model]; contiguous() because transpose left a strided view"""
        B, h, L, d_k = x.shape
        return x.transpose(1, 2).contiguous().view(B, L, h * d_k)

    def _check_inputs(self, query, key, value, cache=None):
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(
                f"cache must be an attention.KVCache (one per layer), got {type(cache).__name__}"
            )
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
            if t.dim() != 3:
                raise ValueError(f"{name} must have shape [B, L, d_model], got {tuple(t.shape)}")
            if t.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} has last dimension {t.shape[-1]} but this MultiHeadAttention was "
                    f"built with d_model={self.d_model}"
                )
        if key.shape[1] != value.shape[1]:
            raise ValueError(
                f"key and value must have the same length, got {key.shape[1]} and {value.shape[1]}"
            )
        if not (query.shape[0] == key.shape[0] == value.shape[0]):
            raise ValueError("query, key and value must have the same batch size")

    def forward(self, query, key, value, mask=None, bias=None, need_weights: bool = True,
                cache: KVCache | None = None):
        self._check_inputs(query, key, value, cache)
        q = self.split_heads(self.q_proj(query))  # [B, h, Lq, d_k]
        if cache is not None and cache.holds_memory:  # cross-attention: projected once
            k, v = cache.keys, cache.values  # [B, h, Lk, d_k] each
        else:
            k = self.split_heads(self.k_proj(key))  # [B, h, Lk, d_k]
            v = self.split_heads(self.v_proj(value))  # [B, h, Lk, d_k]
            if cache is not None:  # decoding: the earlier positions' keys and values first
                k, v = cache.update(k, v)  # [B, h, L_cached + Lk, d_k]
        if mask is not None and isinstance(mask, torch.Tensor) and mask.dim() == 3:
            mask = mask.unsqueeze(1)  # [B, Lq, Lk] -> [B, 1, Lq, Lk]: same mask for every head
        p = self.dropout if self.training else 0.0
        if need_weights:
            context, weights = scaled_dot_product_attention(
                q, k, v, mask=mask, bias=bias, dropout_p=p
            )
        else:
            context, weights = fused_attention(q, k, v, mask=mask, bias=bias, dropout_p=p), None
        return self.out_proj(self.merge_heads(context)), weights

    @torch.no_grad()
    def load_from_torch(self, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of a ``torch.nn.MultiheadAttention``.

        It must be batch_first and of the same sizes.
        """
        if mha.embed_dim != self.d_model or mha.num_heads != self.num_heads:
            raise ValueError(
                f"sizes differ: torch module has embed_dim={mha.embed_dim}, "
                f"num_heads={mha.num_heads}; "
                f"this one d_model={self.d_model}, num_heads={self.num_heads}"
            )
        if not mha._qkv_same_embed_dim:
            raise ValueError(
                "the torch module has kdim/vdim different from embed_dim; only "
                "modules with kdim = vdim = embed_dim can be copied"
            )
        if (mha.in_proj_bias is None) != (self.q_proj.bias is None):
            raise ValueError(
                f"bias differs: torch module has bias={mha.in_proj_bias is not None}, "
                f"this one bias={self.q_proj.bias is not None}; build both the same way"
            )
        w_q, w_k, w_v = mha.in_proj_weight.chunk(3, dim=0)
        for lin, w in ((self.q_proj, w_q), (self.k_proj, w_k), (self.v_proj, w_v)):
            lin.weight.copy_(w)
        self.out_proj.weight.copy_(mha.out_proj.weight)
        if mha.in_proj_bias is not None:
            b_q, b_k, b_v = mha.in_proj_bias.chunk(3, dim=0)
            for lin, b in ((self.q_proj, b_q), (self.k_proj, b_k), (self.v_proj, b_v)):
                lin.bias.copy_(b)
            self.out_proj.bias.copy_(mha.out_proj.bias)
        return self


# --------------------------------------------------------------------------- KV cache
class KVCache:
    """The keys and values one attention layer has computed, kept for the next decoding step.

    Pass one per layer as ``MultiHeadAttention(..., cache=c)``. In self-attention every call
    appends the new positions' keys and values (the new positions come right after the
    cached ones) and the queries attend over all of them. ``KVCache(fixed=True)`` is for
    cross-attention to an encoder's memory: the first call fills it, later calls read it
    without projecting the memory again. ``keys``, ``values``: [B, h, L, d_k] each, None
    until the first call; ``len(cache)`` is L.
    """

    def __init__(self, fixed: bool = False):
        self.fixed = fixed
        self.keys = self.values = None

    def __len__(self) -> int:
        return 0 if self.keys is None else self.keys.shape[2]

    @property
    def holds_memory(self) -> bool:
        """A fixed cache, filled: read it, do not project the memory again."""
        return self.fixed and self.keys is not None

    def update(self, k, v):
        """Append k, v [B, h, n, d_k]; return all the keys and values, [B, h, L + n, d_k]."""
        if self.keys is not None:
            _check_cache_fits(self.keys, k)
            k, v = torch.cat([self.keys, k], dim=2), torch.cat([self.values, v], dim=2)
        self.keys, self.values = k, v
        return k, v

    def reorder(self, index) -> None:
        """Keep the rows ``index`` [N] (beam search's surviving beams)."""
        if self.keys is not None:
            self.keys, self.values = self.keys[index], self.values[index]

    def bytes(self) -> int:
        """Memory held: keys and values."""
        return 0 if self.keys is None else 2 * self.keys.numel() * self.keys.element_size()


def _check_cache_fits(cached, new) -> None:
    same_rows_heads_width = (cached.shape[:2], cached.shape[3]) == (new.shape[:2], new.shape[3])
    if not same_rows_heads_width or cached.dtype != new.dtype:
        raise ValueError(
            f"this KVCache holds keys {tuple(cached.shape)} ({cached.dtype}) [B, h, L, d_k] but "
            f"the new keys are {tuple(new.shape)} ({new.dtype}): use one cache per layer and "
            f"sequence batch, and a new cache (or its reorder) when the batch changes"
        )


# --------------------------------------------------------------------------- fused kernel
def fused_attention(q, k, v, mask=None, bias=None, dropout_p: float = 0.0):
    """The same result as ``scaled_dot_product_attention(...)[0]`` through PyTorch's fused kernel.

    Faster and lighter in memory; it does not return the weights. Rows with nothing to
    attend to give zeros, as in the explicit version.
    """
    _check_qkv(q, k, v)
    scores_shape = (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], k.shape[-2])
    attn_mask = None
    if mask is not None:
        check_mask(mask, scores_shape)
        attn_mask = mask
    if bias is not None:
        _check_bias(bias, scores_shape)
        attn_mask = (
            bias.to(q.dtype)
            if attn_mask is None
            else bias.to(q.dtype).masked_fill(~attn_mask, float("-inf"))
        )
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p)
    if mask is not None:
        empty = ~mask.any(dim=-1, keepdim=True)  # [..., Lq, 1] rows with nothing to attend to
        out = out.masked_fill(empty, 0.0)
    return out


def which_sdpa_kernel(q, k, v, **kwargs) -> str:
    """The kernel that ``F.scaled_dot_product_attention(q, k, v, **kwargs)`` runs, by name.

    ``F.scaled_dot_product_attention`` is one function with several kernels behind it, and
    it picks one from its inputs. This runs the call once under ``torch.profiler`` and
    returns the name of the kernel operator it dispatched to, for example
    ``aten::_scaled_dot_product_flash_attention_for_cpu`` (the fused CPU kernel) or
    ``aten::_scaled_dot_product_attention_math`` (the reference path: a matrix product, a
    softmax, a matrix product). In torch 2.13 on a CPU, 3-D inputs ``[B, L, d]`` take the
    math path and 4-D inputs ``[B, h, L, d]`` the fused kernel. ``kwargs`` go to the call
    (``attn_mask``, ``is_causal``, ...); a ``torch.nn.attention.sdpa_kernel`` context
    around this function applies to the call.
    """
    from torch.profiler import ProfilerActivity, profile

    _check_qkv(q, k, v)
    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(q, k, v, **kwargs)
    kernels = [e for e in prof.events() if e.name.startswith("aten::_scaled_dot_product_")]
    if not kernels:
        raise RuntimeError(
            "the profiler saw no aten::_scaled_dot_product_* operator in the call; operators "
            f"it saw: {sorted({e.name for e in prof.events()})}"
        )
    return min(kernels, key=lambda e: e.time_range.start).name  # the outermost one


SDPA_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")


def sdpa_backends(q, k, v, **kwargs) -> dict[str, str]:
    """Each backend of ``F.scaled_dot_product_attention``, allowed alone: what ran, or why not.

    For every name in ``SDPA_BACKENDS`` this runs the call once under
    ``torch.nn.attention.sdpa_kernel(backend)``, which allows that backend and no other, and
    records the kernel operator that ran (``which_sdpa_kernel``'s answer, e.g.
    ``aten::_scaled_dot_product_flash_attention_for_cpu``) or, when PyTorch refuses,
    ``"unavailable: "`` followed by PyTorch's reason: the warning it gives (for 3-D inputs
    on a CPU: "All fused kernels requires query, key and value to be 4 dimensional, ..."),
    else the first sentence of its error. ``kwargs`` go to the call, as in
    ``which_sdpa_kernel``. The backend selection in force before the call is restored.
    """
    import warnings

    from torch.nn.attention import SDPBackend, sdpa_kernel

    _check_qkv(q, k, v)
    found = {}
    for name in SDPA_BACKENDS:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with sdpa_kernel(getattr(SDPBackend, name)):
                    found[name] = which_sdpa_kernel(q, k, v, **kwargs)
            except RuntimeError as error:
                found[name] = "unavailable: " + _refusal_reason(caught, error)
    return found


def _refusal_reason(caught, error) -> str:
    """PyTorch's reason for refusing a backend: its warnings, else its error's first sentence."""
    reasons = []
    for w in caught:
        text = str(w.message).split(" (Triggered internally at")[0].strip()
        if text and not text.endswith("because:"):  # skip "... kernel not used because:"
            reasons.append(text)
    if reasons:
        return " ".join(reasons)
    return str(error).strip().split("\n")[0].split(". ")[0].rstrip(".")


# --------------------------------------------------------------------------- additive
class AdditiveAttention(nn.Module):
    """Bahdanau-style attention: score(q, k) = w^T tanh(W_q q + W_k k).

    forward(q [B, Lq, query_dim], k [B, Lk, key_dim], v [B, Lk, d_v], mask=None)
        -> (out [B, Lq, d_v], weights [B, Lq, Lk])
    It scores every (query, key) pair through a small MLP, so it needs a [B, Lq, Lk, hidden]
    intermediate tensor where dot-product attention needs one matrix product.
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.w = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, q, k, v, mask=None):
        for name, t in (("q", q), ("k", k), ("v", v)):
            _check_tensor(name, t)
        if q.shape[-1] != self.W_q.in_features:
            raise ValueError(
                f"q has last dimension {q.shape[-1]}, expected query_dim={self.W_q.in_features}"
            )
        if k.shape[-1] != self.W_k.in_features:
            raise ValueError(
                f"k has last dimension {k.shape[-1]}, expected key_dim={self.W_k.in_features}"
            )
        if k.shape[-2] != v.shape[-2]:
            raise ValueError(
                f"k and v must have the same length, got {k.shape[-2]} and {v.shape[-2]}"
            )
        hidden = torch.tanh(
            self.W_q(q).unsqueeze(-2) + self.W_k(k).unsqueeze(-3)
        )  # [B, Lq, Lk, hidden]
        scores = self.w(hidden).squeeze(-1)  # [B, Lq, Lk]
        if mask is not None:
            check_mask(mask, scores.shape)
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return weights @ v, weights
