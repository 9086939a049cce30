"""Calibration: does a model that says 70% turn out right 70% of the time?

Per prediction we need its **confidence** (the probability of the top class) and whether
the top class was **correct**. A reliability diagram bins the predictions by confidence and
plots each bin's accuracy against its mean confidence; the **expected calibration error**
(ECE) is the gap between the two, averaged over the bins weighted by their share of
predictions (Guo et al. 2017, equal-width bins).

Predictions often come in groups (the tokens of one sentence), and a bootstrap should
resample whole groups. ``group_bins`` therefore sums per (group, bin); ``ece`` and
``mean_nll`` take the rows of groups to score, repeats allowed:

    sums = calibration.group_bins(confidence, correct, group, n_groups, nll=nll)
    calibration.ece(sums)                                   # every group once
    stats.bootstrap(lambda rows: calibration.ece(sums, rows), np.arange(n_groups))
    calibration.reliability_plot({"model": sums}, ax=ax)
"""

from __future__ import annotations

import numpy as np

from .checks import positive_int


def _as_1d(name: str, values, dtype=float) -> np.ndarray:
    array = np.asarray(values, dtype=dtype)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one value per prediction), got shape {array.shape}")
    return array


def bin_index(confidence, bins: int = 15) -> np.ndarray:
    """The equal-width bin of each confidence in [0, 1]: 0 .. bins - 1 (1.0 goes to the last)."""
    positive_int("bins", bins)
    confidence = _as_1d("confidence", confidence)
    if confidence.size and (np.isnan(confidence).any() or confidence.min() < 0
                            or confidence.max() > 1):
        raise ValueError("confidence must be probabilities in [0, 1]: pass the softmax of the "
                         "top class, not a logit")
    return np.minimum((confidence * bins).astype(int), bins - 1)


def group_bins(confidence, correct, group, n_groups: int, bins: int = 15, nll=None) -> dict:
    """Sums per (group, confidence bin): ``correct``, ``confidence``, ``count`` [n_groups, bins];
    with ``nll`` (one value per prediction) also ``nll`` [n_groups], summed per group."""
    which = bin_index(confidence, bins)
    confidence = _as_1d("confidence", confidence)
    correct = _as_1d("correct", correct)
    group = _as_1d("group", group, dtype=np.int64)
    n = confidence.shape[0]
    for name, array in (("correct", correct), ("group", group)):
        if array.shape[0] != n:
            raise ValueError(f"{name} has {array.shape[0]} values for {n} confidences")
    positive_int("n_groups", n_groups)
    if n and (group.min() < 0 or group.max() >= n_groups):
        raise ValueError(f"group ids must lie in [0, n_groups={n_groups}), "
                         f"got {group.min()} .. {group.max()}")
    cell = group * bins + which

    def total(weights):
        return np.bincount(cell, weights, minlength=n_groups * bins).reshape(n_groups, bins)

    sums = dict(correct=total(correct), confidence=total(confidence),
                count=total(np.ones(n)))
    if nll is not None:
        nll = _as_1d("nll", nll)
        if nll.shape[0] != n:
            raise ValueError(f"nll has {nll.shape[0]} values for {n} confidences")
        sums["nll"] = np.bincount(group, nll, minlength=n_groups)
    return sums


def _rows(sums, rows):
    if not isinstance(sums, dict) or not {"correct", "confidence", "count"} <= set(sums):
        raise TypeError("sums must be the dict that calibration.group_bins returns")
    return slice(None) if rows is None else np.asarray(rows, dtype=np.int64)


def reliability(sums, rows=None) -> dict:
    """Per bin: ``confidence`` (mean), ``accuracy``, ``share`` of predictions; empty bins NaN."""
    r = _rows(sums, rows)
    count = sums["count"][r].sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return dict(confidence=sums["confidence"][r].sum(0) / count,
                    accuracy=sums["correct"][r].sum(0) / count, share=count / count.sum())


def ece(sums, rows=None) -> float:
    """Expected calibration error of the groups ``rows`` (all when None; repeats allowed):
    sum over bins of |correct - confidence| / predictions."""
    r = _rows(sums, rows)
    count = sums["count"][r].sum()
    if count == 0:
        raise ValueError("no predictions in these rows: ECE is undefined")
    gap = np.abs(sums["correct"][r].sum(0) - sums["confidence"][r].sum(0))
    return float(gap.sum() / count)


def mean_nll(sums, rows=None) -> float:
    """Mean negative log-likelihood per prediction of the groups ``rows`` (needs ``nll``)."""
    if "nll" not in sums:
        raise ValueError("these sums have no nll: call group_bins(..., nll=...)")
    r = _rows(sums, rows)
    return float(sums["nll"][r].sum() / sums["count"][r].sum())


def reliability_plot(models: dict, ax, ax_share=None, colors=None):
    """Reliability diagram of each ``{name: sums}`` on ``ax`` (accuracy against confidence, the
    diagonal = calibrated); with ``ax_share`` also the share of predictions per bin."""
    if not models:
        raise ValueError("models is empty: pass {name: group_bins(...)}")
    colors = colors or ["#0072B2", "#D55E00", "#009E73", "#CC79A7"]
    for (name, sums), color in zip(models.items(), colors):
        curve = reliability(sums)
        used = ~np.isnan(curve["accuracy"])
        ax.plot(curve["confidence"][used], curve["accuracy"][used], marker="o", color=color,
                label=f"{name}: ECE {ece(sums):.3f}")
        if ax_share is not None:
            edges = np.linspace(0, 1, sums["count"].shape[1] + 1)
            ax_share.stairs(curve["share"], edges, color=color)  # every bin its full width
    ax.plot([0, 1], [0, 1], ls="--", color="grey", label="calibrated")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy of the top token")
    ax.legend(loc="upper left", fontsize=9)
    target = ax_share if ax_share is not None else ax
    target.set_xlabel("confidence (probability of the top token)")
    if ax_share is not None:
        ax_share.set_ylabel("share")
    return ax
