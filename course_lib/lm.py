"""Training and scoring language models on a stream of token ids (chapter 7).

    stream = token_stream(train_ids)                     # every review, <bos> first, joined
    history = train(model, stream, steps=2000, batch_size=32, window=64, lr=2e-3,
                    checkpoints=[250, 500, ...], evaluate=lambda m: {...})
    nll = target_nll(model, test_ids, window=64, stride=32)  # one value per test target

``model`` is any module that maps ids [B, L] to next-token logits [B, L, V]: the rungs of
chapter 7's ladder and ``gpt.GPT`` alike. Every rung sees the same batches in the same
order (``seed``), so their curves differ only by the model.

``target_nll`` scores every id after the first of each sequence exactly once, in the same
order as ``ngram.sequence_ngrams``, so a GPT and an n-gram model can be compared target by
target (and mixed).

The model lives in ``course_lib.gpt``; its training and scoring live here: the optimizer
(``configure_optimizer``), ``training.fit``'s way of feeding it (``RowBatches`` of token rows,
``lm_batch_loss``) and the scores of rows and sequences (``token_nll``, ``sliding_windows``,
``sliding_nll``). ``gpt`` still answers to those names, as chapters 10 and 11 call them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from . import precision as _precision
from .runtime import progress
from .schedules import warmup_constant


def token_stream(sequences: Iterable[Sequence[int]]) -> torch.Tensor:
    """All sequences joined into one LongTensor [N] (each should start with its <bos>)."""
    parts = [torch.as_tensor(list(s), dtype=torch.long) for s in sequences]
    if not parts or sum(len(p) for p in parts) < 2:
        raise ValueError("token_stream needs sequences holding at least 2 ids in all")
    return torch.cat(parts)


def random_windows(stream: torch.Tensor, batch_size: int, window: int,
                   generator: torch.Generator) -> torch.Tensor:
    """``batch_size`` rows of ``window + 1`` consecutive ids from random places: [B, window+1]."""
    if stream.dim() != 1 or len(stream) <= window + 1:
        raise ValueError(f"need a 1-D stream longer than window + 1 = {window + 1} ids, "
                         f"got shape {tuple(stream.shape)}")
    start = torch.randint(0, len(stream) - window - 1, (batch_size,), generator=generator)
    return torch.stack([stream[s:s + window + 1] for s in start.tolist()])


def configure_optimizer(model: nn.Module, lr: float, weight_decay: float = 0.1,
                        betas=(0.9, 0.95), no_decay: Iterable[nn.Parameter] = (),
                        lr_scale: Mapping[nn.Parameter, float] | None = None
                        ) -> torch.optim.AdamW:
    """AdamW with weight decay on the weight matrices of the blocks only.

    Embeddings (tokens, positions, and so the tied head), LayerNorm parameters and biases are
    not decayed, as in GPT-2 and minGPT; an embedding is known by its module type, not its name.
    ``no_decay`` exempts more of the model's parameters (chapter 7: an untied head);
    ``lr_scale`` gives some parameters their own rate, ``lr`` times a factor (chapter 7: a
    tied embedding at half the rate of the rest).
    """
    kept = {id(p) for m in model.modules() if isinstance(m, (nn.Embedding, nn.LayerNorm))
            for p in m.parameters(recurse=False)}
    own = {id(p) for p in model.parameters()}
    scale, no_decay = {}, list(no_decay)
    for name, params in (("no_decay", no_decay), ("lr_scale", list(lr_scale or {}))):
        for p in params:
            if not isinstance(p, torch.Tensor) or id(p) not in own:
                raise ValueError(f"{name} must list parameters of this model, e.g. "
                                 "[model.head.weight]")
    kept |= {id(p) for p in no_decay}
    for p, factor in (lr_scale or {}).items():
        if not factor > 0:
            raise ValueError(f"lr_scale factors must be positive, got {factor!r}")
        scale[id(p)] = float(factor)
    groups = {}
    for p in model.parameters():  # a tied weight is listed once
        decayed = p.dim() >= 2 and id(p) not in kept
        key = (decayed, scale.get(id(p), 1.0))
        groups.setdefault(key, []).append(p)
    groups.setdefault((True, 1.0), [])  # the two usual groups always exist, in this order
    groups.setdefault((False, 1.0), [])
    order = sorted(groups, key=lambda k: (k[1] != 1.0, not k[0], k[1]))
    return torch.optim.AdamW([{"params": groups[k], "weight_decay": weight_decay if k[0] else 0.0,
                               "lr": lr * k[1]} for k in order], lr=lr, betas=betas)


# Its name here before course_lib.schedules held every schedule.
constant_after_warmup = warmup_constant


def train(model: nn.Module, stream: torch.Tensor, steps: int, *, batch_size: int, window: int,
          lr: float, warmup_steps: int = 100, weight_decay: float = 0.1, clip: float = 1.0,
          checkpoints: Iterable[int] = (), evaluate: Callable[[nn.Module], dict] | None = None,
          seed: int = 0, device="cpu", desc: str = "train", precision="current",
          pairs: Callable[[torch.Tensor], tuple] | None = None,
          schedule: Callable[[int], float] | None = None,
          no_decay: Iterable[nn.Parameter] = (),
          lr_scale: Mapping[nn.Parameter, float] | None = None) -> pd.DataFrame:
    """AdamW on random windows of ``stream``; one history row per checkpoint (and the end).

    Columns: ``step``, ``tokens`` (targets seen), ``seconds`` (training time, evaluation
    excluded), ``train_loss`` (mean since the previous row) and whatever ``evaluate(model)``
    returns (called in eval mode, under ``torch.no_grad``). ``pairs(batch)`` turns rows
    [B, window + 1] into (inputs, targets); the default is the shift by one,
    ``(batch[:, :-1], batch[:, 1:])`` (chapter 7's bug zoo passes a wrong one).
    ``schedule(step)`` is the ``LambdaLR`` factor of the rate (step from 0); the default is
    ``schedules.warmup_constant(warmup_steps)``, e.g. ``schedules.warmup_cosine(warmup, steps)``
    decays it. ``precision`` (``precision.as_precision``): by default ``"current"``, the one
    ``runtime.setup`` chose, so a notebook that calls ``setup(precision="auto")`` trains in it;
    None is float32, as everywhere in course_lib. ``no_decay``: parameters kept out of weight
    decay besides ``configure_optimizer``'s own; ``lr_scale``: parameters trained at ``lr``
    times a factor.
    """
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    marks = sorted({int(c) for c in checkpoints if 0 < int(c) < steps} | {steps})
    prec = _precision.as_precision(precision, device)
    model.to(device)
    optimizer = configure_optimizer(model, lr=lr, weight_decay=weight_decay, no_decay=no_decay,
                                    lr_scale=lr_scale)
    factor = warmup_constant(warmup_steps) if schedule is None else schedule
    if not callable(factor):
        raise TypeError(f"schedule must be a function of the step, got {type(factor).__name__}")
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    generator = torch.Generator().manual_seed(seed)
    rows, losses, seconds = [], [], 0.0
    bar = progress(range(1, steps + 1), desc=desc, unit="step")
    for step in bar:
        model.train()
        t = time.perf_counter()
        batch = random_windows(stream, batch_size, window, generator).to(device)
        x, y = (batch[:, :-1], batch[:, 1:]) if pairs is None else pairs(batch)  # [B, T] each
        optimizer.zero_grad(set_to_none=True)
        with prec.autocast():
            logits = model(x)  # [B, T, V]
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        prec.step(loss, optimizer, model.parameters(), clip_grad_norm=clip)
        schedule.step()
        seconds += time.perf_counter() - t
        losses.append(loss.item())
        if step in marks:
            row = {"step": step, "tokens": step * batch_size * window, "seconds": seconds,
                   "train_loss": float(np.mean(losses))}
            losses = []
            if evaluate is not None:
                model.eval()
                with torch.no_grad():
                    row.update(evaluate(model))
            rows.append(row)
            bar.set_postfix(train_loss=f"{row['train_loss']:.3f}")
    model.eval()
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- batches for training.fit
class RowBatches:
    """Batches of rows [batch_size, L+1] from one shuffled pass after another, ``steps`` per epoch.

    ``training.fit`` counts an epoch as one pass over its loader; this loader makes an
    "epoch" a fixed number of steps, so a long run is checked on the validation set at
    regular intervals and two datasets of different sizes can be compared step for step.
    Each row is used once per pass; a new pass (reshuffled) starts when one runs out.
    """

    def __init__(self, rows: torch.Tensor, batch_size: int, steps: int, seed: int = 0):
        if rows.dim() != 2 or len(rows) < batch_size:
            raise ValueError(f"need rows [N >= batch_size, L+1], got {tuple(rows.shape)} "
                             f"for batch_size={batch_size}")
        self.rows, self.batch_size, self.steps = rows, batch_size, steps
        self.generator = torch.Generator().manual_seed(seed)
        self.order = torch.randperm(len(rows), generator=self.generator)
        self.pos, self.passes = 0, 0

    def __len__(self) -> int:
        return self.steps

    def __iter__(self):
        for _ in range(self.steps):
            if self.pos + self.batch_size > len(self.order):
                self.order = torch.randperm(len(self.rows), generator=self.generator)
                self.pos, self.passes = 0, self.passes + 1
            index = self.order[self.pos:self.pos + self.batch_size]
            self.pos += self.batch_size
            yield (self.rows[index],)

    @property
    def rows_seen(self) -> int:
        return self.passes * len(self.rows) + self.pos


def lm_batch_loss(model: nn.Module, batch, device) -> torch.Tensor:
    """``training.fit``'s ``batch_loss`` for batches of token rows [B, L+1] (or a 1-tuple):
    ``model.loss(rows)``, as ``gpt.GPT`` has it."""
    rows = batch[0] if isinstance(batch, (list, tuple)) else batch
    return model.loss(rows.to(device))


# ---------------------------------------------------------------------- scoring
@torch.no_grad()
def token_nll(model: nn.Module, rows: torch.Tensor, batch_size: int = 256,
              device="cpu") -> tuple[float, int]:
    """Summed next-token negative log-likelihood of ``rows`` [N, L+1], and the number of targets.

    Padding targets (``model.config.pad_id``, a ``gpt.GPT``'s) are skipped.
    perplexity = exp(sum / count).
    """
    model.eval()
    total, count = 0.0, 0
    pad = model.config.pad_id
    for start in range(0, rows.shape[0], batch_size):
        chunk = rows[start:start + batch_size].to(device)
        logits = model(chunk[:, :-1])
        y = chunk[:, 1:]
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
        keep = torch.ones_like(y, dtype=torch.bool) if pad is None else y != pad
        total += float(nll[keep.reshape(-1)].sum())
        count += int(keep.sum())
    return total, count


def sliding_windows(sequences, window: int, stride: int, pad_id: int):
    """Rows [N, window + 1] and a bool mask [N, window] of the targets to score.

    Every id of a sequence after its first is scored exactly once. The first row of a
    sequence scores all its targets; each later row starts ``stride`` ids further on and
    scores only targets not scored before, so each of them is predicted with at least
    ``window - stride`` ids of context.
    """
    if not 1 <= stride <= window:
        raise ValueError(f"stride must be in 1..window={window}, got {stride}")
    rows, scored = [], []
    for seq in sequences:
        seq = list(seq)
        done = 0  # targets 1..done are scored
        start = 0
        while done < len(seq) - 1:
            row = seq[start:start + window + 1]
            row = row + [pad_id] * (window + 1 - len(row))
            positions = torch.arange(window)  # position p predicts seq[start + p + 1]
            mask = (start + positions + 1 > done) & (start + positions + 1 < len(seq))
            rows.append(row)
            scored.append(mask)
            done = min(start + window, len(seq) - 1)
            start += stride
    if not rows:
        empty = torch.empty(0, window + 1, dtype=torch.long)
        return empty, torch.empty(0, window, dtype=torch.bool)
    return torch.tensor(rows, dtype=torch.long), torch.stack(scored)


@torch.no_grad()
def sliding_nll(model: nn.Module, sequences, stride: int, batch_size: int = 256,
                device="cpu") -> tuple[float, int]:
    """Summed NLL of every id after the first of each sequence, each with >= max_len - stride
    ids of context (where the sequence has them); and the number of ids scored.

    The sum of ``target_nll`` over the same windows (one scoring loop for both), for a
    ``gpt.GPT`` (its ``config`` gives ``max_len`` and ``pad_id``).
    """
    pad = 0 if model.config.pad_id is None else model.config.pad_id
    nll = target_nll(model, sequences, model.config.max_len, stride, batch_size=batch_size,
                     device=device, pad_id=pad)
    return float(nll.sum()), len(nll)


@torch.no_grad()
def target_nll(model: nn.Module, sequences: Sequence[Sequence[int]], window: int, stride: int,
               batch_size: int = 128, device="cpu", pad_id: int = 0) -> np.ndarray:
    """Negative log-likelihood (nats) of every id after the first of each sequence: [N].

    Sliding windows of ``window`` ids, ``stride`` apart (``sliding_windows``): a target
    has at least ``window - stride`` ids of context where its sequence has them. The order
    is sequence by sequence, position by position, as in ``ngram.sequence_ngrams``.
    """
    rows, scored = sliding_windows(sequences, window, stride, pad_id=pad_id)
    model.eval()
    out = []
    for start in range(0, rows.shape[0], batch_size):
        chunk = rows[start:start + batch_size].to(device)
        keep = scored[start:start + batch_size].to(device)
        logits = model(chunk[:, :-1]).float()  # [b, W, V]
        nll = F.cross_entropy(logits.transpose(1, 2), chunk[:, 1:], reduction="none")
        out.append(nll[keep].cpu().double())  # row by row; float64 on the CPU (MPS has none)
    return torch.cat(out).numpy() if out else np.empty(0)


def per_sequence(values: np.ndarray, sequences: Sequence[Sequence[int]]) -> np.ndarray:
    """Sum ``values`` (one per target, as ``target_nll`` orders them) within each sequence."""
    lengths = np.array([max(len(s) - 1, 0) for s in sequences])
    if lengths.sum() != len(values):
        raise ValueError(f"{len(values)} values for {lengths.sum()} targets in the sequences: "
                         "score the same sequences")
    return np.add.reduceat(values, np.r_[0, np.cumsum(lengths)[:-1]]) * (lengths > 0)


def target_positions(sequences: Sequence[Sequence[int]]) -> np.ndarray:
    """The position in its sequence (1, 2, ...) of every target, in ``target_nll``'s order."""
    return np.concatenate([np.arange(1, len(s)) for s in sequences if len(s) > 1])


def flops_per_token(config, window: int | None = None) -> float:
    """Training FLOPs per target token of a ``gpt.GPT`` (``config`` its ``GPTConfig``):
    6 N + 6 L T d (Kaplan et al. 2020).

    N counts the parameters used in matrix multiplies: per block 4 d^2 (attention) and
    2 d d_ff (feed-forward), plus the V x d head (tied or not: it is multiplied). The second
    term is attention's own work over a context of T tokens (scores and weighted sum).
    """
    c = config
    T = c.max_len if window is None else window
    n = c.num_layers * (4 * c.d_model ** 2 + 2 * c.d_model * c.d_ff) + c.vocab_size * c.d_model
    return 6.0 * n + 6.0 * c.num_layers * T * c.d_model
