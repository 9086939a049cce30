"""Pictures of attention and of training: heatmaps, grids of heads, loss curves."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch


def _as_2d(weights, name="weights"):
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().float().cpu().numpy()
    weights = np.asarray(weights)
    if weights.ndim != 2:
        raise ValueError(f"{name} must be a 2-D [Lq, Lk] matrix here, got shape {weights.shape}")
    return weights


def attention_heatmap(
    weights,
    x_labels=None,
    y_labels=None,
    ax=None,
    title=None,
    cmap="viridis",
    annot=False,
    vmin=0.0,
    vmax=None,
    cbar=True,
):
    """One attention matrix [Lq, Lk]: rows are queries, columns are keys."""
    w = _as_2d(weights)
    for name, labels, n in (("x_labels", x_labels, w.shape[1]), ("y_labels", y_labels, w.shape[0])):
        if labels is not None and len(labels) != n:
            raise ValueError(f"{name} has {len(labels)} labels for {n} columns/rows")
    if ax is None:
        _, ax = plt.subplots(
            figsize=(max(3, 0.35 * w.shape[1] + 1.5), max(2.5, 0.35 * w.shape[0] + 1))
        )
    sns.heatmap(
        w,
        ax=ax,
        cmap=cmap,
        vmin=vmin,
        vmax=vmax,
        annot=annot,
        fmt=".2f",
        cbar=cbar,
        square=False,
        xticklabels=x_labels if x_labels is not None else "auto",
        yticklabels=y_labels if y_labels is not None else "auto",
    )
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    if x_labels is not None:
        ax.tick_params(axis="x", labelrotation=90)
    if y_labels is not None:
        ax.tick_params(axis="y", labelrotation=0)
    if title:
        ax.set_title(title)
    return ax


def attention_heads_grid(
    weights,
    x_labels=None,
    y_labels=None,
    ncols=4,
    title=None,
    cmap="viridis",
    head_names=None,
    size=2.6,
):
    """A grid of heatmaps, one per head: weights [h, Lq, Lk]."""
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().float().cpu().numpy()
    weights = np.asarray(weights)
    if weights.ndim != 3:
        raise ValueError(f"weights must be [h, Lq, Lk], got shape {weights.shape}")
    h = weights.shape[0]
    if head_names is not None and len(head_names) != h:
        raise ValueError(f"head_names has {len(head_names)} names for {h} heads")
    ncols = min(ncols, h)
    nrows = math.ceil(h / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols + 1, size * nrows), squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= h:
            ax.axis("off")
            continue
        attention_heatmap(
            weights[i],
            x_labels,
            y_labels,
            ax=ax,
            cmap=cmap,
            cbar=False,
            title=head_names[i] if head_names else f"head {i + 1}",
        )
        if i % ncols:
            ax.set_ylabel("")
        if i < h - ncols:
            ax.set_xlabel("")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_history(history, ax=None, logy=False, title=None, columns=None):
    """Loss curves from ``fit``'s history DataFrame (every column ending in ``loss``)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    columns = columns or [c for c in history.columns if c.endswith("loss")]
    for col in columns:
        ax.plot(history["epoch"], history[col], marker="o", ms=3, label=col.replace("_", " "))
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    if logy:
        ax.set_yscale("log")
    ax.legend()
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title)
    return ax
