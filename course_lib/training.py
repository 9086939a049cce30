"""A small, readable training loop: epochs, validation, early stopping, a history table.

    history = fit(model, train_loader, val_loader, loss_fn, optimizer, epochs=20,
                  device=device, patience=5)
    history.plot(x="epoch", y=["train_loss", "val_loss"])

A batch is ``(inputs, target)`` by default: the loss is ``loss_fn(model(inputs), target)``
(for a model that returns ``(output, attention_weights)`` the first element is used). For
anything else pass ``batch_loss(model, batch, device) -> loss``.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable

import pandas as pd
import torch

from .checks import positive_int
from .precision import as_precision
from .runtime import progress


def count_parameters(model: torch.nn.Module) -> int:
    """Trainable parameters, each shared tensor counted once (``parameters()`` de-duplicates)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _to(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(_to(t, device) for t in x)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    return x


def default_batch_loss(loss_fn: Callable) -> Callable:
    """The loss of one ``(inputs, target)`` batch."""

    def batch_loss(model, batch, device):
        inputs, target = _to(batch[0], device), _to(batch[1], device)
        out = model(*inputs) if isinstance(inputs, (list, tuple)) else model(inputs)
        if isinstance(out, tuple):  # (prediction, attention weights)
            out = out[0]
        return loss_fn(out, target)

    return batch_loss


def _batch_size(batch) -> int:
    first = batch[0] if isinstance(batch, (list, tuple)) else batch
    while isinstance(first, (list, tuple)):
        first = first[0]
    return int(first.shape[0]) if isinstance(first, torch.Tensor) else 1


@torch.no_grad()
def evaluate(model, loader, loss_fn=None, device="cpu", batch_loss=None, precision=None) -> float:
    """Mean loss over ``loader`` (weighted by batch size), in eval mode.

    ``precision``: a ``course_lib.precision.Precision`` to evaluate under autocast (None: fp32).
    """
    mp = as_precision(precision, device)  # None: float32
    if batch_loss is None:
        if loss_fn is None:
            raise ValueError("pass loss_fn or batch_loss")
        batch_loss = default_batch_loss(loss_fn)
    model.eval()
    total, count = 0.0, 0
    for batch in loader:
        n = _batch_size(batch)
        with mp.autocast():
            loss = batch_loss(model, batch, device)
        total += float(loss) * n
        count += n
    if count == 0:
        raise ValueError("the evaluation loader yielded no batches")
    return total / count


def fit(
    model,
    train_loader,
    val_loader=None,
    loss_fn=None,
    optimizer=None,
    epochs: int = 10,
    device="cpu",
    scheduler=None,
    patience: int | None = None,
    clip_grad_norm: float | None = None,
    batch_loss: Callable | None = None,
    desc: str = "training",
    show_progress: bool = True,
    min_delta: float = 0.0,
    precision=None,
) -> pd.DataFrame:
    """Train ``model`` and return its history as a DataFrame (one row per epoch).

    - ``scheduler`` is stepped after every optimizer step (per batch), as ``LambdaLR``
      warm-up schedules expect.
    - ``precision``: a ``course_lib.precision.Precision``; the forward pass and the loss then
      run under its autocast (bf16 or fp16) and it does the backward step. None: float32.
    - ``patience``: stop when the validation loss has not improved by ``min_delta`` for that
      many epochs, and restore the weights of the best epoch.
    - columns: epoch, train_loss, val_loss (if a val_loader is given), lr, seconds.
    """
    if optimizer is None:
        raise ValueError("fit needs an optimizer")
    if patience is not None and (not isinstance(patience, int) or patience < 1):
        raise ValueError(f"patience must be a positive int or None, got {patience!r}")
    positive_int("epochs", epochs)
    if patience is not None and val_loader is None:
        raise ValueError("early stopping (patience) needs a val_loader")
    if batch_loss is None:
        if loss_fn is None:
            raise ValueError("pass loss_fn (for (inputs, target) batches) or batch_loss")
        batch_loss = default_batch_loss(loss_fn)
    mp = as_precision(precision, device)  # None: float32
    model.to(device)
    rows, best, best_state, bad_epochs = [], math.inf, None, 0
    bar = progress(range(1, epochs + 1), desc=desc, unit="epoch", disable=not show_progress)
    for epoch in bar:
        model.train()
        start, total, count = time.perf_counter(), 0.0, 0
        for batch in train_loader:
            with mp.autocast():
                loss = batch_loss(model, batch, device)
            if not torch.isfinite(loss):
                raise FloatingPointError(
                    f"loss became {loss.item()} at epoch {epoch}: lower the learning rate"
                )
            optimizer.zero_grad(set_to_none=True)
            mp.step(loss, optimizer, model.parameters(), clip_grad_norm)  # backward, clip, step
            if scheduler is not None:
                scheduler.step()
            n = _batch_size(batch)
            total += loss.item() * n
            count += n
        row = {"epoch": epoch, "train_loss": total / max(count, 1)}
        if val_loader is not None:
            row["val_loss"] = evaluate(model, val_loader, device=device, batch_loss=batch_loss,
                                       precision=precision)
        row["lr"] = optimizer.param_groups[0]["lr"]
        row["seconds"] = time.perf_counter() - start
        rows.append(row)
        if hasattr(bar, "set_postfix"):
            bar.set_postfix({k: f"{v:.4g}" for k, v in row.items() if k.endswith("loss")})
        if val_loader is not None:
            if row["val_loss"] < best - min_delta:
                best, bad_epochs = row["val_loss"], 0
                if patience is not None:
                    best_state = copy.deepcopy(model.state_dict())
            else:
                bad_epochs += 1
                if patience is not None and bad_epochs >= patience:
                    break
    if hasattr(bar, "close"):
        bar.close()
    if best_state is not None:
        model.load_state_dict(best_state)
    return pd.DataFrame(rows)
