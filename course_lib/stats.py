"""Uncertainty for the course's comparisons: bootstrap intervals, paired or not.

A test set is one sample of the data the model will meet. The bootstrap asks how much a
score would move on another sample of the same size: draw the rows again with replacement,
recompute the score, and read off the middle 95% of the recomputed scores.

For a comparison of two models, resample the rows *once* for both (a paired bootstrap):
both models are scored on the same resampled rows, so the interval is for their difference
and the shared difficulty of each row cancels out.

    import numpy as np
    from course_lib import stats

    def rmse(y, p):
        return float(np.sqrt(np.mean((y - p) ** 2)))

    gap = stats.bootstrap(lambda y, a, b: rmse(y, a) - rmse(y, b), y_test, pred_a, pred_b)
    gap.estimate, gap.low, gap.high   # "a is ahead" only if the whole interval is below 0
    gap.contains(0.0)                 # True: the prose says "tied"
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided percentile interval around it."""

    estimate: float
    low: float
    high: float
    level: float = 0.95

    def contains(self, value: float = 0.0) -> bool:
        """True when `value` lies inside the interval (ends included)."""
        return self.low <= value <= self.high

    def __str__(self) -> str:
        return f"{self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}]"


def bootstrap(fn: Callable[..., float], *arrays, n_resamples: int = 2000, level: float = 0.95,
              seed: int = 0) -> Interval:
    """Percentile bootstrap interval of `fn(*arrays)`.

    Every array is indexed by the same resampled rows (a paired bootstrap when the arrays
    are the predictions of two models on the same rows). `fn` gets the resampled arrays in
    the order given and returns a number. Rows are the first axis; all arrays need the same
    number of rows. The estimate is `fn` on the original rows, not the bootstrap mean.
    """
    if not arrays:
        raise ValueError("bootstrap needs at least one array of rows to resample, "
                         "e.g. bootstrap(np.mean, scores)")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95), got {level}")
    if n_resamples < 100:
        raise ValueError(f"n_resamples={n_resamples} is too few for a percentile interval; "
                         "use at least 100 (1,000 or more for a 95% interval)")
    arrays = tuple(np.asarray(a) for a in arrays)
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise ValueError("all arrays must have the same number of rows, got "
                         f"{[len(a) for a in arrays]}: resample them together only if row i "
                         "of each one describes the same example")
    if n < 2:
        raise ValueError(f"need at least 2 rows to bootstrap, got {n}")
    rng = np.random.default_rng(seed)
    estimate = float(fn(*arrays))
    draws = np.empty(n_resamples)
    for r in range(n_resamples):
        idx = rng.integers(0, n, size=n)
        draws[r] = fn(*(a[idx] for a in arrays))
    if not np.all(np.isfinite(draws)):
        raise ValueError("fn returned a non-finite value on a resample; check it handles "
                         "repeated rows (e.g. no division by a count that can be 0)")
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return Interval(estimate, float(low), float(high), level)


def verdict(interval: Interval, lower_is_better: bool = True, names=("A", "B")) -> str:
    """Words for an interval of `score(A) - score(B)`: who is ahead, or a tie."""
    a, b = names
    if interval.contains(0.0):
        return f"{a} and {b} tie (the interval contains 0)"
    a_ahead = interval.high < 0 if lower_is_better else interval.low > 0
    return f"{a} is ahead of {b}" if a_ahead else f"{b} is ahead of {a}"


def bleu_statistics(hypotheses, references, metric=None) -> np.ndarray:
    """Per-sentence BLEU counts, [N, 2 + 2 * order]: system length, reference length, the
    matched n-grams for n = 1..order, then the hypothesis n-grams for n = 1..order.

    Corpus BLEU is not a mean of sentence scores: it sums these counts over the corpus and
    then takes the geometric mean of the precisions. Summed over any set of rows (a bootstrap
    resample, say), they give that set's corpus BLEU through `bleu_from_statistics`, without
    tokenizing again. `metric` is a `sacrebleu.BLEU` (default: `sacrebleu.BLEU()`); its
    tokenizer and casing are used, one reference per sentence.
    """
    import sacrebleu

    metric = sacrebleu.BLEU() if metric is None else metric
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(f"got {len(hypotheses)} hypotheses and {len(references)} references: "
                         "give one reference string per hypothesis, in the same order")
    if not hypotheses:
        raise ValueError("no sentences: bleu_statistics needs at least one hypothesis")
    rows = []
    for hyp, ref in zip(hypotheses, references):
        if not isinstance(hyp, str) or not isinstance(ref, str):
            raise TypeError("hypotheses and references must be strings (detokenized text), got "
                            f"{type(hyp).__name__} and {type(ref).__name__}")
        s = metric.corpus_score([hyp], [[ref]])
        rows.append([s.sys_len, s.ref_len, *s.counts, *s.totals])
    return np.asarray(rows, dtype=np.int64)


def bleu_from_statistics(statistics, metric=None) -> float:
    """Corpus BLEU (0-100) of the rows of `bleu_statistics`, summed: equal to
    `metric.corpus_score(hypotheses, [references]).score` for the same sentences."""
    from sacrebleu.metrics.bleu import BLEU

    metric = BLEU() if metric is None else metric
    statistics = np.asarray(statistics)
    order = metric.max_ngram_order
    if statistics.ndim != 2 or statistics.shape[1] != 2 + 2 * order:
        raise ValueError(f"expected rows of bleu_statistics, shape [N, {2 + 2 * order}], got "
                         f"{statistics.shape}; compute them with the same metric")
    total = statistics.sum(0)
    return BLEU.compute_bleu(correct=total[2:2 + order].tolist(),
                             total=total[2 + order:].tolist(), sys_len=int(total[0]),
                             ref_len=int(total[1]), smooth_method=metric.smooth_method,
                             smooth_value=metric.smooth_value,
                             effective_order=metric.effective_order,
                             max_ngram_order=order).score
