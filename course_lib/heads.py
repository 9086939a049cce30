"""What attention heads learned, measured (Olsson et al. 2022, "In-context learning and
induction heads").

    tokens = repeated_random_tokens(V, length=50, batch=16, generator=g, low=1, bos_id=0)
    repeat_loss(model, tokens)               # .first, .second: loss on each copy; .curve
    induction_scores(model, tokens)          # [layers, heads]: t attends to t - length + 1
    previous_token_scores(model, tokens)     # [layers, heads]: t attends to t - 1
    with ablate_head(model, layer=1, head=2):
        ...                                  # the model without that head
    head_ablation_table(model, evaluate)     # evaluate(model) with each head removed in turn

The probe: a random sequence, then the same sequence again. Nothing in the first copy can
be predicted (the tokens are random), but in the second copy every token is the one that
followed the same token the first time. A model with *induction heads* notices: its loss
falls on the second copy. An induction head at position t looks back at the token that
followed the earlier occurrence of token t, which sits at t - length + 1; it usually works
with a *previous-token head* in an earlier layer, which attends to t - 1.

A sequence of 2 * length tokens holds no <bos>; one of 2 * length + 1 tokens starts with
one. The functions read ``length`` from the shape and check that the copies are equal.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from dataclasses import dataclass

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention
from .runtime import progress


# --------------------------------------------------------------------------- the probe
def repeated_random_tokens(vocab_size: int, length: int, batch: int,
                           generator: torch.Generator | None = None, low: int = 0,
                           bos_id: int | None = None) -> torch.Tensor:
    """``batch`` random sequences of ``length`` ids, each repeated twice: [B, 2 * length].

    Ids are drawn uniformly from ``low .. vocab_size - 1`` (set ``low`` above the special
    tokens). With ``bos_id`` every row starts with it: [B, 2 * length + 1].
    """
    _check_probe_args(vocab_size, length, batch, low, bos_id)
    first = torch.randint(low, vocab_size, (batch, length), generator=generator)  # [B, length]
    parts = [first, first]
    if bos_id is not None:
        parts.insert(0, torch.full((batch, 1), bos_id, dtype=torch.long))
    return torch.cat(parts, dim=1)  # [B, (1 +) 2 * length]


@dataclass
class RepeatLoss:
    """Next-token loss (nats, mean over the batch) on a sequence repeated twice.

    ``curve[p]``: loss of predicting the token at position p, [T] (NaN at p = 0: nothing
    predicts the first token). ``first``: mean over the first copy's tokens; ``second``: mean
    over the second copy's, without its first token (nothing before it says what it is).
    """

    first: float
    second: float
    curve: torch.Tensor  # [T]
    length: int  # of one copy
    offset: int  # 1 when the rows start with <bos>, else 0

    def as_dict(self) -> dict:
        """The two means, for a results card: ``{"first": ..., "second": ...}``."""
        return {"first": self.first, "second": self.second}


@torch.no_grad()
def repeat_loss(model, tokens: torch.Tensor) -> RepeatLoss:
    """The loss of ``model`` on each copy of ``tokens`` (``repeated_random_tokens``' rows).

    ``model(tokens [B, T])`` gives next-token logits [B, T, V]; it runs in eval mode.
    """
    length, offset = _repeat_layout(tokens)
    with _eval_mode(model):
        logits = model(tokens)  # [B, T, V]
    _check_logits(logits, tokens)
    nll = F.cross_entropy(logits[:, :-1].float().transpose(1, 2), tokens[:, 1:],
                          reduction="none")  # [B, T - 1]: position p predicts token p + 1
    curve = torch.cat([torch.full((1,), math.nan), nll.mean(dim=0).cpu()])  # [T]
    first = curve[max(offset, 1):offset + length]  # the first copy (token 0 unpredicted)
    second = curve[offset + length + 1:]  # the second copy, after its first token
    return RepeatLoss(float(first.mean()), float(second.mean()), curve, length, offset)


# --------------------------------------------------------------------------- head scores
def induction_scores(model, tokens: torch.Tensor) -> torch.Tensor:
    """Mean attention from each token of the second copy to the token after its first
    occurrence (position t to t - length + 1), per head: [num_layers, num_heads].

    1.0 is a perfect induction head; a head that spreads its attention evenly scores about
    1 / t. ``model.attention_maps(tokens)`` gives the weights.
    """
    length, offset = _repeat_layout(tokens)
    maps = _attention_maps(model, tokens)  # [layers, B, h, T, T]
    t = torch.arange(offset + length, offset + 2 * length)  # queries: the second copy
    return maps[..., t, t - length + 1].mean(dim=(1, 3))  # [layers, h]


def previous_token_scores(model, tokens: torch.Tensor) -> torch.Tensor:
    """Mean attention from each position t >= 1 to position t - 1, per head:
    [num_layers, num_heads]. Any tokens [B, T >= 2] do."""
    _check_tokens(tokens, min_length=2)
    maps = _attention_maps(model, tokens)  # [layers, B, h, T, T]
    t = torch.arange(1, tokens.shape[1])
    return maps[..., t, t - 1].mean(dim=(1, 3))  # [layers, h]


# --------------------------------------------------------------------------- ablation
@contextlib.contextmanager
def ablate_head(model, layer: int, head: int):
    """Inside the ``with``, head ``head`` of block ``layer`` adds nothing to the output.

    The head's output, its d_k columns of the attention's merged heads [B, L, d_model], is
    set to zero just before the output projection W_o (a forward pre-hook on ``out_proj``),
    so W_o's other columns, the other heads, are untouched; W_o's bias, shared by all heads,
    stays. Zero is one choice of "removed"; the mean output over a dataset is another. The
    hook is removed on exit, even after an error.
    """
    attn = _attention_of(model, layer, head)
    d_k = attn.d_k
    keep = torch.ones(attn.d_model, device=attn.out_proj.weight.device)
    keep[head * d_k:(head + 1) * d_k] = 0.0  # [d_model]: 0 on this head's columns

    def zero_head(module, args):
        (x, *rest) = args  # x: [B, L, d_model], the heads side by side
        return (x * keep.to(x.dtype), *rest)

    handle = attn.out_proj.register_forward_pre_hook(zero_head)
    try:
        yield model
    finally:
        handle.remove()


def head_ablation_table(model, evaluate, desc: str = "ablating heads") -> pd.DataFrame:
    """``evaluate(model)`` (a number, e.g. validation perplexity) with each head ablated in
    turn: one row per head, columns ``layer``, ``head``, ``metric`` and ``change`` (metric
    minus the metric with nothing ablated, kept in ``table.attrs["baseline"]``).

    ``evaluate`` runs in eval mode under ``torch.no_grad``, as ``lm.train`` calls it.
    """
    if not callable(evaluate):
        raise TypeError(f"evaluate must be a function of the model, got "
                        f"{type(evaluate).__name__}")
    blocks = _blocks_of(model)
    pairs = [(i, h) for i, b in enumerate(blocks) for h in range(b.attn.num_heads)]
    with _eval_mode(model), torch.no_grad():
        baseline = _metric(evaluate(model))
        rows = []
        for layer, head in progress(pairs, desc=desc, unit="head"):
            with ablate_head(model, layer, head):
                metric = _metric(evaluate(model))
            rows.append({"layer": layer, "head": head, "metric": metric,
                         "change": metric - baseline})
    table = pd.DataFrame(rows, columns=["layer", "head", "metric", "change"])
    table.attrs["baseline"] = baseline
    return table


# --------------------------------------------------------------------------- checks
def _check_probe_args(vocab_size, length, batch, low, bos_id):
    for name, value, minimum in (("vocab_size", vocab_size, 2), ("length", length, 2),
                                 ("batch", batch, 1), ("low", low, 0)):
        if not _is_int(value) or value < minimum:
            raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    if low >= vocab_size:
        raise ValueError(f"low={low} leaves no ids to draw below vocab_size={vocab_size}")
    if bos_id is not None and (not _is_int(bos_id) or not 0 <= bos_id < vocab_size):
        raise ValueError(f"bos_id must be None or an id in 0..{vocab_size - 1}, got {bos_id!r}")


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_tokens(tokens, min_length: int):
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
        got = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise ValueError(f"tokens must be a LongTensor [B, T], got {got}")
    if tokens.is_floating_point() or tokens.dtype == torch.bool:
        raise TypeError(f"tokens must hold integer ids, got dtype {tokens.dtype}")
    if tokens.shape[0] < 1 or tokens.shape[1] < min_length:
        raise ValueError(f"tokens must have B >= 1 rows of T >= {min_length} ids, got "
                         f"{tuple(tokens.shape)}")


def _repeat_layout(tokens) -> tuple[int, int]:
    """(length of one copy, offset of the first copy) of rows [B, (1 +) 2 * length]."""
    _check_tokens(tokens, min_length=4)
    offset = tokens.shape[1] % 2  # an odd length: a <bos> first
    length = (tokens.shape[1] - offset) // 2
    first, second = tokens[:, offset:offset + length], tokens[:, offset + length:]
    if not torch.equal(first, second):
        raise ValueError(
            f"tokens {tuple(tokens.shape)} are not a sequence repeated twice: read as "
            f"{'<bos> + ' if offset else ''}2 copies of {length} ids, the copies differ. "
            "Make them with repeated_random_tokens (a <bos>, if any, only at the start)")
    return length, offset


def _attention_maps(model, tokens) -> torch.Tensor:
    """``model.attention_maps(tokens)``, checked and stacked: [layers, B, h, T, T]."""
    if not callable(getattr(model, "attention_maps", None)):
        raise TypeError(f"{type(model).__name__} has no attention_maps(tokens) method; "
                        "use a gpt.GPT (or a model that returns a list of [B, h, T, T])")
    with _eval_mode(model), torch.no_grad():
        maps = list(model.attention_maps(tokens))
    B, T = tokens.shape
    if not maps:
        raise ValueError("attention_maps returned no maps: the model has no attention layers")
    for i, w in enumerate(maps):
        if not isinstance(w, torch.Tensor) or w.dim() != 4 or w.shape[0] != B \
                or w.shape[2:] != (T, T) or w.shape[1] != maps[0].shape[1]:
            got = tuple(w.shape) if isinstance(w, torch.Tensor) else type(w).__name__
            raise ValueError(f"attention map {i} must be [B, h, T, T] = [{B}, h, {T}, {T}] "
                             f"with the same h in every layer, got {got}")
    return torch.stack([w.float().cpu() for w in maps])


def _check_logits(logits, tokens):
    B, T = tokens.shape
    if not isinstance(logits, torch.Tensor) or logits.dim() != 3 or logits.shape[:2] != (B, T):
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"model(tokens) must return next-token logits [B, T, V] = "
                         f"[{B}, {T}, V], got {got}")


def _blocks_of(model):
    blocks = getattr(model, "blocks", None)
    if blocks is None or not all(isinstance(getattr(b, "attn", None), MultiHeadAttention)
                                 for b in blocks):
        raise TypeError(f"{type(model).__name__} must have .blocks, each with an .attn "
                        "MultiHeadAttention (as gpt.GPT has)")
    return blocks


def _attention_of(model, layer, head) -> MultiHeadAttention:
    blocks = _blocks_of(model)
    if not _is_int(layer) or not 0 <= layer < len(blocks):
        raise IndexError(f"layer {layer!r} is out of range: the model has {len(blocks)} "
                         f"blocks (layers 0..{len(blocks) - 1})")
    attn = blocks[layer].attn
    if not _is_int(head) or not 0 <= head < attn.num_heads:
        raise IndexError(f"head {head!r} is out of range: block {layer}'s attention has "
                         f"{attn.num_heads} heads (0..{attn.num_heads - 1})")
    return attn


def _metric(value) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"evaluate(model) must return one number (e.g. a perplexity), got "
                        f"{type(value).__name__}")
    return float(value)


@contextlib.contextmanager
def _eval_mode(model):
    """Eval mode (no dropout) inside, each module's own mode back on exit."""
    if not isinstance(model, nn.Module):
        yield model
        return
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for m, training in modes:
            m.training = training
