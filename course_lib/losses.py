"""Losses for sequence models: cross-entropy against a label-smoothed target.

Label smoothing {Szegedy et al. 2016} trains against a softened target instead of a one-hot
vector. There are two common ways to spread the mass ``eps`` that the true token gives up:

- this module (the seed's variant, as in the Annotated Transformer): the true token gets
  ``1 - eps``, the padding token gets **0**, and each of the other ``V - 2`` tokens gets
  ``eps / (V - 2)``;
- PyTorch's ``CrossEntropyLoss(label_smoothing=eps)``: every one of the ``V`` tokens, the
  true one and the padding token included, gets ``eps / V`` on top of ``1 - eps`` for the
  true token.

Both are cross-entropies ``-sum_j q_j log p_j`` with the smoothed target ``q``; positions
whose target is the padding token are ignored (they add nothing to the loss or its mean).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

REDUCTIONS = ("mean", "sum", "none")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class LabelSmoothingLoss(nn.Module):
    """Cross-entropy with a smoothed target that gives the padding token nothing.

    forward(logits [..., V], target [...]) -> loss

    - target token: ``1 - smoothing``; ``pad_id``: 0; every other token:
      ``smoothing / (vocab_size - 2)``;
    - positions whose target is ``pad_id`` are ignored;
    - ``reduction``: ``"mean"`` (per non-padding target token, the default), ``"sum"``, or
      ``"none"`` (one value per position, 0 at padding).

    With ``smoothing=0`` it is ``F.cross_entropy(..., ignore_index=pad_id)``. The [N, V]
    target is never built: since ``q`` takes only three values, the loss is
    ``-(1 - eps) log p_y - eps / (V - 2) * (sum_j log p_j - log p_y - log p_pad)``.
    ``target_distribution`` builds it explicitly, for plots and tests.
    """

    def __init__(
        self, vocab_size: int, pad_id: int, smoothing: float = 0.1, reduction: str = "mean"
    ):
        super().__init__()
        if not _is_int(vocab_size) or vocab_size < 3:
            raise ValueError(
                f"vocab_size must be an int >= 3 (the true token, the padding token and at least "
                f"one other share the mass), got {vocab_size!r}"
            )
        if not _is_int(pad_id) or not 0 <= pad_id < vocab_size:
            raise ValueError(
                f"pad_id must be an int in [0, vocab_size={vocab_size}), got {pad_id!r}"
            )
        if (
            isinstance(smoothing, bool)
            or not isinstance(smoothing, (int, float))
            or not 0.0 <= smoothing < 1.0
        ):
            raise ValueError(f"smoothing must be a number in [0, 1), got {smoothing!r}")
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
        self.vocab_size, self.pad_id = vocab_size, pad_id
        self.smoothing, self.reduction = float(smoothing), reduction
        self.confidence = 1.0 - self.smoothing  # mass of the true token
        self.other = self.smoothing / (vocab_size - 2)  # mass of each token that is neither

    def extra_repr(self) -> str:
        return (
            f"vocab_size={self.vocab_size}, pad_id={self.pad_id}, smoothing={self.smoothing}, "
            f"reduction={self.reduction!r}"
        )

    def _check(self, logits, target) -> None:
        if not isinstance(logits, torch.Tensor) or not isinstance(target, torch.Tensor):
            raise TypeError("logits and target must be torch.Tensors")
        if not logits.is_floating_point():
            raise TypeError(f"logits must be a float tensor, got dtype {logits.dtype}")
        if logits.shape[-1] != self.vocab_size:
            raise ValueError(
                f"logits have {logits.shape[-1]} classes in their last dimension but this loss was "
                f"built with vocab_size={self.vocab_size}"
            )
        if target.is_floating_point() or target.dtype == torch.bool:
            raise TypeError(f"target must hold integer token ids, got dtype {target.dtype}")
        if tuple(logits.shape[:-1]) != tuple(target.shape):
            raise ValueError(
                f"logits [..., V] and target [...] must agree in every dimension but the last: "
                f"got logits {tuple(logits.shape)} and target {tuple(target.shape)}"
            )
        if target.numel() and (int(target.min()) < 0 or int(target.max()) >= self.vocab_size):
            raise ValueError(
                f"target ids must lie in [0, {self.vocab_size}), got min {int(target.min())} "
                f"and max {int(target.max())}"
            )

    def target_distribution(self, target: torch.Tensor) -> torch.Tensor:
        """The smoothed target q, [..., V]; rows whose target is padding are all zero."""
        if target.is_floating_point() or target.dtype == torch.bool:
            raise TypeError(f"target must hold integer token ids, got dtype {target.dtype}")
        q = torch.full((*target.shape, self.vocab_size), self.other, device=target.device)
        q.scatter_(-1, target.unsqueeze(-1), self.confidence)
        q[..., self.pad_id] = 0.0
        return q * (target != self.pad_id).unsqueeze(-1)

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        self._check(logits, target)
        keep = target != self.pad_id
        if logits.dtype not in (torch.float32, torch.float64):
            logits = logits.float()  # half-precision logits: the softmax in float32
        loss = _SmoothedCrossEntropy.apply(logits, target, self.confidence, self.other,
                                           self.pad_id)  # [...]
        loss = loss * keep
        if self.reduction == "none":
            return loss
        if self.reduction == "sum":
            return loss.sum()
        return loss.sum() / keep.sum().clamp(min=1)  # 0, not NaN, when every target is padding


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Per-position -sum_j q_j log p_j, p = softmax(logits), with its gradient p - q.

    Written as an autograd Function only for speed: autograd would build several [N, V]
    tensors for the gather, the sum and the padding column; the closed-form gradient of
    softmax + cross-entropy, ``p - q``, needs one.
    """

    @staticmethod
    def forward(ctx, logits, target, confidence: float, other: float, pad_id: int):
        log_p = F.log_softmax(logits, dim=-1)  # [..., V]
        log_p_true = log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # [...]
        rest = log_p.sum(-1) - log_p_true - log_p[..., pad_id]  # over the V - 2 other tokens
        ctx.save_for_backward(log_p, target)
        ctx.confidence, ctx.other, ctx.pad_id = confidence, other, pad_id
        return -(confidence * log_p_true + other * rest)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss):
        log_p, target = ctx.saved_tensors
        grad = log_p.exp()  # p, then p - q in place:
        grad -= ctx.other  # every token: q = other ...
        grad[..., ctx.pad_id] += ctx.other  # ... except padding: q = 0
        true_shift = torch.full_like(grad[..., :1], ctx.other - ctx.confidence)
        grad.scatter_add_(-1, target.unsqueeze(-1), true_shift)  # ... and the target: confidence
        grad *= grad_loss.unsqueeze(-1)
        return grad, None, None, None, None
