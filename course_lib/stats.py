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

Repeated timings are summarised by their median and the middle half around it, which a few
slow repeats on a shared machine do not move (a mean is moved by them):

    q = stats.median_iqr(seconds)     # Quartiles(q25=..., median=..., q75=...)
    q.median, q.spread                # spread: interquartile range / median

Rows that are not independent (the hours of a year: an error at 14:00 says much about the
error at 15:00) make the plain bootstrap too sure of itself, because it treats every row
as new evidence. `block_bootstrap` resamples runs of consecutive rows instead (blocks of a
week of hours, say), so that what neighbouring rows share stays inside a block;
`autocorrelation` says how far apart rows must be before they stop sharing it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

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


# --------------------------------------------------------------------------- repeated measurements
# Three implementations of one definition of the quartiles (below). They round differently
# in the last bits; each caller keeps the one it used, so that its numbers stay bit-identical.
QUANTILE_METHODS = ("numpy", "pandas-groupby", "statistics")


class Quartiles(NamedTuple):
    """The median of repeated measurements and the middle half around it (q25 to q75)."""

    q25: float
    median: float
    q75: float

    @property
    def iqr(self) -> float:
        """The interquartile range, q75 - q25: how wide the middle half of the values is."""
        return self.q75 - self.q25

    @property
    def spread(self) -> float:
        """The interquartile range relative to the median (0.05: the middle half spans 5 %)."""
        if self.median == 0:
            raise ValueError("the spread relative to the median is undefined when the median "
                             "is 0; use .iqr, the interquartile range itself")
        return (self.q75 - self.q25) / self.median


def median_iqr(values, method: str = "numpy") -> Quartiles:
    """``Quartiles(q25, median, q75)`` of a 1-D set of numbers (timings of repeats, say).

    The quartile at fraction p lies at position p * (n - 1) of the sorted values, linearly
    interpolated between the two nearest (R's default, "type 7"; numpy's "linear"; Python's
    ``statistics.quantiles(..., method="inclusive")``). ``method`` says whose code computes
    it; the three differ only in float rounding, by a few units in the last bit:

    - ``"numpy"``: ``np.percentile(values, [25, 75])`` and ``np.median(values)`` (pandas'
      ``Series.quantile`` and ``Series.median`` call them);
    - ``"pandas-groupby"``: pandas' ``groupby(...).quantile`` and ``.median``;
    - ``"statistics"``: ``statistics.quantiles(values, n=4, method="inclusive")`` of Python's
      standard library (its default method, ``"exclusive"``, is another definition).

    The median is the middle value, or the mean of the two middle values, in all three.
    One value gives ``(v, v, v)``. Missing values (NaN), infinities, an empty input and
    anything not 1-D raise a ``ValueError`` that says what to do.
    """
    if method not in QUANTILE_METHODS:
        raise ValueError(f"unknown method {method!r}: use one of {', '.join(QUANTILE_METHODS)}")
    try:
        x = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError("values must be a 1-D sequence of numbers (a list, array or Series "
                        f"of floats); could not read this {type(values).__name__} as one") from None
    if x.ndim != 1:
        raise ValueError(f"values must be 1-D (one number per repeat), got shape {x.shape}; "
                         "summarise one group at a time, or flatten with np.ravel to pool them")
    if x.size == 0:
        raise ValueError("no values: median_iqr needs at least one number")
    if not np.all(np.isfinite(x)):
        bad = "NaN" if np.isnan(x).any() else "an infinite value"
        raise ValueError(f"values contain {bad}: drop missing or failed repeats first "
                         "(e.g. series.dropna()), a quartile of them is undefined")
    if method == "statistics":
        import statistics

        v = sorted(x.tolist())
        if len(v) == 1:
            return Quartiles(v[0], v[0], v[0])
        q25, median, q75 = statistics.quantiles(v, n=4, method="inclusive")
        return Quartiles(q25, median, q75)
    if method == "pandas-groupby":
        import pandas as pd

        groups = pd.Series(x).groupby(np.zeros(x.size, dtype=np.int64))  # one group
        q25, q75 = groups.quantile(0.25).iloc[0], groups.quantile(0.75).iloc[0]
        return Quartiles(float(q25), float(groups.median().iloc[0]), float(q75))
    q25, q75 = np.percentile(x, [25, 75])
    return Quartiles(float(q25), float(np.median(x)), float(q75))


# --------------------------------------------------------------------------- bootstrap
def bootstrap(fn: Callable[..., float], *arrays, n_resamples: int = 2000, level: float = 0.95,
              seed: int = 0) -> Interval:
    """Percentile bootstrap interval of `fn(*arrays)`.

    Every array is indexed by the same resampled rows (a paired bootstrap when the arrays
    are the predictions of two models on the same rows). `fn` gets the resampled arrays in
    the order given and returns a number. Rows are the first axis; all arrays need the same
    number of rows. The estimate is `fn` on the original rows, not the bootstrap mean.
    """
    arrays = _check_bootstrap(arrays, n_resamples, level)
    n = len(arrays[0])
    rng = np.random.default_rng(seed)
    return _percentile_interval(fn, arrays, lambda: rng.integers(0, n, size=n), n_resamples,
                                level)


def two_level_bootstrap(fn: Callable[..., float], *arrays, n_resamples: int = 2000,
                        level: float = 0.95, seed: int = 0) -> Interval:
    """Percentile interval of `fn(*arrays)` over two sources of luck: runs and test rows.

    Every array is [runs, rows]: row j is the same test example in each, and run d is paired
    across arrays (e.g. the same draw of training labels for two methods). A resample draws
    runs with replacement and, independently, rows with replacement, the same ones for every
    array, so the interval holds the run-to-run spread and the test set's sampling both. With
    a handful of runs it is still rough: say how many there were beside it.
    """
    arrays = tuple(np.atleast_2d(np.asarray(a, dtype=float)) for a in arrays)
    if not arrays or any(a.ndim != 2 for a in arrays):
        raise ValueError("two_level_bootstrap needs arrays of shape [runs, rows]")
    if len({a.shape for a in arrays}) != 1:
        raise ValueError(f"the arrays must have one shape [runs, rows], got "
                         f"{[a.shape for a in arrays]} (np.broadcast_to a run-free row first)")
    _check_bootstrap([a.T for a in arrays], n_resamples, level)
    runs, n = arrays[0].shape
    rng = np.random.default_rng(seed)
    estimate = float(fn(*arrays))
    values = np.empty(n_resamples)
    for r in range(n_resamples):
        d, i = rng.integers(0, runs, size=runs), rng.integers(0, n, size=n)
        values[r] = fn(*(a[d][:, i] for a in arrays))
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return Interval(estimate, float(low), float(high), level)


def block_bootstrap(fn: Callable[..., float], *arrays, block_length: int,
                    n_resamples: int = 2000, level: float = 0.95, seed: int = 0) -> Interval:
    """Percentile interval of `fn(*arrays)` for rows in time order: a circular block bootstrap.

    Like `bootstrap`, but a resample is made of blocks of `block_length` consecutive rows,
    each starting at a random row, the series read as a circle (a block that runs past the
    last row goes on at the first), concatenated and cut to the original length
    (Politis and Romano's circular version of Kuensch's moving blocks). Rows that lie closer
    than a block length keep their dependence, so the interval widens as much as that
    dependence warrants. Choose a block longer than the lag at which the rows' autocorrelation
    dies out (`autocorrelation`). With `block_length=1` it is the plain bootstrap: the same
    resamples, draw for draw, for the same seed.
    """
    arrays = _check_bootstrap(arrays, n_resamples, level)
    n = len(arrays[0])
    if not isinstance(block_length, (int, np.integer)) or isinstance(block_length, bool) \
            or not 1 <= block_length <= n:
        raise ValueError(f"block_length must be an int from 1 to the number of rows ({n}), "
                         f"got {block_length!r}")
    rng = np.random.default_rng(seed)
    return _percentile_interval(fn, arrays, lambda: block_indices(n, block_length, rng),
                                n_resamples, level)


def block_indices(n: int, block_length: int, rng: np.random.Generator) -> np.ndarray:
    """Row indices [n] of one circular block resample: ceil(n / block_length) blocks of
    consecutive rows (modulo n), each from a uniformly drawn start, cut to n rows."""
    starts = rng.integers(0, n, size=-(-n // block_length))  # [number of blocks]
    idx = (starts[:, None] + np.arange(block_length)[None, :]) % n  # [blocks, block_length]
    return idx.ravel()[:n]


def autocorrelation(x, max_lag: int) -> np.ndarray:
    """Sample autocorrelation of a series at lags 0..max_lag, [max_lag + 1] (1 at lag 0).

    The usual estimator: sum over t of (x_t - mean)(x_{t+k} - mean), divided by the sum of
    squares, so it shrinks towards 0 at long lags rather than blowing up.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or len(x) < 2:
        raise ValueError(f"autocorrelation needs a 1-D series of 2+ values, got shape {x.shape}")
    if not isinstance(max_lag, (int, np.integer)) or not 0 <= max_lag < len(x):
        raise ValueError(f"max_lag must be an int from 0 to len(x) - 1 = {len(x) - 1}, "
                         f"got {max_lag!r}")
    d = x - x.mean()
    denominator = float(d @ d)
    if denominator == 0:
        raise ValueError("the series is constant: its autocorrelation is undefined")
    return np.array([float(d[: len(d) - k] @ d[k:]) / denominator for k in range(max_lag + 1)])


def _check_bootstrap(arrays, n_resamples, level) -> tuple:
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
    return arrays


def _percentile_interval(fn, arrays, draw_indices, n_resamples, level) -> Interval:
    estimate = float(fn(*arrays))
    draws = np.empty(n_resamples)
    for r in range(n_resamples):
        idx = draw_indices()
        draws[r] = fn(*(a[idx] for a in arrays))
    if not np.all(np.isfinite(draws)):
        raise ValueError("fn returned a non-finite value on a resample; check it handles "
                         "repeated rows (e.g. no division by a count that can be 0)")
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return Interval(estimate, float(low), float(high), level)


def verdict(interval: Interval, lower_is_better: bool = True, names=("A", "B"),
            zero: str = "tie") -> str:
    """Words for an interval of `score(A) - score(B)`: who is ahead, or neither.

    An interval that contains 0 shows no winner; ``zero`` names that case: "inconclusive"
    (the course's word from now on: a tie needs an equivalence margin stated in advance) or
    "tie" (what chapters not yet re-run print).
    """
    if zero not in ("tie", "inconclusive"):
        raise ValueError(f"zero must be 'tie' or 'inconclusive', got {zero!r}")
    a, b = names
    if interval.contains(0.0):
        if zero == "inconclusive":
            return f"inconclusive: {a} vs {b} (the interval contains 0)"
        return f"{a} and {b} tie (the interval contains 0)"
    a_ahead = interval.high < 0 if lower_is_better else interval.low > 0
    return f"{a} is ahead of {b}" if a_ahead else f"{b} is ahead of {a}"


def stable_verdict(intervals, lower_is_better: bool = True, names=("A", "B"),
                   zero: str = "inconclusive") -> str:
    """The verdict that several intervals of the same difference agree on, else inconclusive.

    A percentile interval moves a little with the bootstrap's own seed; when an end sits near
    0, one seed can say "ahead" and another "inconclusive". Pass the intervals of one
    comparison computed with several bootstrap seeds: if every one gives the same
    ``verdict``, that is the answer; if they disagree, no winner is shown.
    """
    intervals = [intervals] if isinstance(intervals, Interval) else list(intervals)
    if len(intervals) < 2 or not all(isinstance(iv, Interval) for iv in intervals):
        raise ValueError("stable_verdict needs a list of 2+ Interval objects, one per "
                         "bootstrap seed, e.g. "
                         "[stats.bootstrap(fn, a, b, seed=s) for s in range(6)]")
    found = {verdict(iv, lower_is_better, names, zero) for iv in intervals}
    if len(found) == 1:
        return found.pop()
    a, b = names
    return (f"inconclusive: {a} vs {b} (the verdict changes with the bootstrap seed, "
            f"{len(intervals)} seeds)")


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


def seed_interval(values, baseline=None, level: float = 0.95) -> Interval:
    """Student-t interval of a mean over random seeds, or of a gap paired by seed.

    `values` holds one score per seed. With `baseline` (one score per seed, the same seeds in
    the same order) the interval is for the mean of `values - baseline`: each seed's run of
    one model is compared with the same seed's run of the other, so what a seed shares (its
    data stream, its luck) cancels. The spread is the sample standard deviation (ddof=1), and
    with few seeds the t quantile makes the interval honest about how little they show: with
    3 seeds it is 4.3 standard errors wide on each side.
    """
    from scipy.stats import t as student_t

    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95), got {level}")
    x = np.asarray(values, dtype=float).ravel()
    if baseline is not None:
        b = np.asarray(baseline, dtype=float).ravel()
        if b.shape != x.shape:
            raise ValueError(f"values and baseline need one score per seed each, got {x.size} "
                             f"and {b.size}: pair them by seed")
        x = x - b
    if x.size < 2:
        raise ValueError(f"need at least 2 seeds for a spread, got {x.size}")
    if not np.all(np.isfinite(x)):
        raise ValueError("the scores must be finite numbers")
    mean = float(x.mean())
    half = float(student_t.ppf(0.5 + level / 2, df=x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))
    return Interval(mean, mean - half, mean + half, level)


@dataclass(frozen=True)
class PowerLaw:
    """y = a * x ** (-b), fitted as a straight line in log-log space."""

    a: float
    b: float

    def __call__(self, x):
        return self.a * np.asarray(x, dtype=np.float64) ** (-self.b)

    def solve(self, y: float) -> float:
        """The x at which the law reaches ``y`` (inf when it never falls that low)."""
        if self.b <= 0 or y <= 0:
            return float("inf")
        return float((self.a / y) ** (1.0 / self.b))


def fit_power_law(x, y) -> PowerLaw:
    """Least squares of log y on log x: y = a x^(-b). Needs at least 2 positive points."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError(f"x and y must be 1-D of the same length >= 2, got {x.shape}, {y.shape}")
    if np.any(x <= 0) or np.any(y <= 0):
        raise ValueError("a power law is fitted in log-log space: x and y must be > 0")
    slope, intercept = np.polyfit(np.log(x), np.log(y), 1)
    return PowerLaw(float(np.exp(intercept)), float(-slope))


def power_law_backtest(x, y, floors=(0.0,), fit_fraction: float = 0.5,
                       target: float | None = None):
    """Fit y = E + a x^(-b) to the first ``fit_fraction`` of the points, for each floor E,
    and compare its predictions with the points it did not see (a backtest).

    One row per floor: ``floor``, ``a``, ``b``, ``fit_points``, ``predicted_last`` and
    ``measured_last`` (y at the last x), ``mean_abs_error`` over the held-out points, and,
    with ``target``, ``target_x``: the x at which the fitted curve reaches ``target`` (inf
    when it never does, e.g. a target at or below the floor): an extrapolation.
    Points are taken in the order of ``x``; at least 2 must be fitted and 1 held out.
    """
    import pandas as pd

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-D of the same length, got {x.shape}, {y.shape}")
    if not 0 < fit_fraction < 1:
        raise ValueError(f"fit_fraction must be in (0, 1), got {fit_fraction!r}")
    order = np.argsort(x)
    x, y = x[order], y[order]
    n_fit = int(round(fit_fraction * len(x)))
    if n_fit < 2 or n_fit >= len(x):
        raise ValueError(f"{len(x)} points with fit_fraction {fit_fraction} leave {n_fit} to "
                         "fit: need at least 2 fitted and 1 held out")
    rows = []
    for floor in floors:
        if np.any(y[:n_fit] <= floor):
            raise ValueError(f"floor {floor} is not below every fitted y (min "
                             f"{y[:n_fit].min():.4g}): choose floors under the curve")
        law = fit_power_law(x[:n_fit], y[:n_fit] - floor)
        predicted = floor + law(x[n_fit:])
        row = {"floor": float(floor), "a": law.a, "b": law.b, "fit_points": n_fit,
               "predicted_last": float(predicted[-1]), "measured_last": float(y[-1]),
               "mean_abs_error": float(np.mean(np.abs(predicted - y[n_fit:])))}
        if target is not None:
            row["target_x"] = law.solve(target - floor) if target > floor else float("inf")
        rows.append(row)
    return pd.DataFrame(rows)


def power_law_crossing(x, y, target: float, n_resamples: int = 2000, level: float = 0.95,
                       seed: int = 0) -> tuple[PowerLaw, Interval]:
    """Fit y = a x^(-b) and extrapolate the x where it reaches ``target``, with an interval.

    The interval resamples the fitted points (a bootstrap over checkpoints). It measures how
    well the points pin the line down, not whether the line goes on: an extrapolation.
    A resample whose line never reaches ``target`` counts as infinitely far.
    """
    law = fit_power_law(x, y)
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_resamples):
        idx = rng.integers(0, len(x), size=len(x))
        if len(np.unique(x[idx])) < 2:
            continue
        draws.append(fit_power_law(x[idx], y[idx]).solve(target))
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(np.array(draws), [tail, 100 - tail])
    return law, Interval(law.solve(target), float(low), float(high), level)
