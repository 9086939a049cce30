"""course_lib.stats: bootstrap intervals, their verdicts, medians and quartiles of repeats."""

import numpy as np
import pytest

from course_lib import stats


def test_interval_of_a_mean_covers_the_mean_and_shrinks_with_rows():
    rng = np.random.default_rng(0)
    small = stats.bootstrap(np.mean, rng.normal(1.0, 1.0, 100))
    large = stats.bootstrap(np.mean, rng.normal(1.0, 1.0, 10_000))
    assert small.low < small.estimate < small.high
    assert large.contains(1.0)
    # the width of a mean's interval falls like 1/sqrt(n): 10x for 100x the rows
    ratio = (small.high - small.low) / (large.high - large.low)
    assert 6 < ratio < 15


def test_width_matches_the_normal_theory_for_a_mean():
    x = np.random.default_rng(1).normal(0.0, 2.0, 2000)
    iv = stats.bootstrap(np.mean, x, n_resamples=4000)
    half = 1.96 * x.std() / np.sqrt(len(x))
    assert (iv.high - iv.low) / 2 == pytest.approx(half, rel=0.1)


def test_paired_bootstrap_sees_a_small_consistent_gap_that_unpaired_noise_hides():
    rng = np.random.default_rng(2)
    difficulty = rng.normal(0, 5, 300)  # shared by both models, large
    a = difficulty + 0.5 + rng.normal(0, 0.1, 300)
    b = difficulty + rng.normal(0, 0.1, 300)
    gap = stats.bootstrap(lambda x, y: np.mean(x - y), a, b)
    assert gap.low > 0.4 and gap.high < 0.6
    assert not gap.contains(0.0)
    assert stats.verdict(gap, lower_is_better=True, names=("a", "b")) == "b is ahead of a"
    assert stats.verdict(gap, lower_is_better=False, names=("a", "b")) == "a is ahead of b"


def test_tie_and_determinism():
    x = np.random.default_rng(3).normal(0, 1, 200)
    one = stats.bootstrap(np.mean, x, seed=5)
    two = stats.bootstrap(np.mean, x, seed=5)
    assert one == two
    assert "tie" in stats.verdict(one)
    assert stats.verdict(one, names=("a", "b"), zero="inconclusive") == (
        "inconclusive: a vs b (the interval contains 0)")
    with pytest.raises(ValueError, match="'tie' or 'inconclusive'"):
        stats.verdict(one, zero="draw")
    assert str(one).startswith(f"{one.estimate:.4g} [")


def test_stable_verdict_needs_every_bootstrap_seed_to_agree():
    ahead = stats.Interval(0.5, 0.2, 0.8, 0.95)  # A - B > 0 throughout: B ahead (lower wins)
    grazing = stats.Interval(0.5, -0.01, 1.0, 0.95)  # the same gap, one end just past 0
    assert stats.stable_verdict([ahead, ahead], names=("a", "b")) == "b is ahead of a"
    mixed = stats.stable_verdict([ahead, grazing, ahead], names=("a", "b"))
    assert mixed.startswith("inconclusive: a vs b") and "3 seeds" in mixed
    assert stats.stable_verdict([grazing] * 2, names=("a", "b")) == (
        "inconclusive: a vs b (the interval contains 0)")
    # with real bootstrap seeds: a clear gap agrees everywhere
    rng = np.random.default_rng(4)
    x, y = rng.normal(1.0, 1, 300), rng.normal(0.0, 1, 300)
    ivs = [stats.bootstrap(lambda p, q: np.mean(p - q), x, y, seed=s) for s in range(4)]
    assert stats.stable_verdict(ivs, lower_is_better=False, names=("x", "y")) == "x is ahead of y"
    for bad in ([], [0.1, 0.2], ahead, [ahead]):
        with pytest.raises(ValueError, match="list of 2"):
            stats.stable_verdict(bad)


@pytest.mark.parametrize("call, message", [
    (lambda: stats.bootstrap(np.mean), "at least one array"),
    (lambda: stats.bootstrap(np.mean, [1.0, 2.0], level=95), "level must be between 0 and 1"),
    (lambda: stats.bootstrap(np.mean, [1.0, 2.0], n_resamples=10), "too few"),
    (lambda: stats.bootstrap(lambda a, b: 0.0, [1, 2, 3], [1, 2]), "same number of rows"),
    (lambda: stats.bootstrap(np.mean, [1.0]), "at least 2 rows"),
    (lambda: stats.bootstrap(lambda a: 1 / (a.sum() - a.sum()), np.ones(5)), "non-finite"),
])
def test_bad_inputs_say_what_to_do(call, message):
    with np.errstate(divide="ignore"), pytest.raises(ValueError, match=message):
        call()


HYPS = ["the cat sat on the mat .", "a dog runs in the park", "two men play chess outside",
        "A Woman Is Reading", "children laugh"]
REFS = ["the cat sat on a mat .", "a dog is running in the park", "two men are playing chess",
        "a woman is reading a book", "the children are laughing loudly"]


@pytest.mark.parametrize("metric", [None, "lowercase"])
def test_bleu_from_statistics_equals_sacrebleu_corpus_bleu(metric):
    import sacrebleu

    bleu = sacrebleu.BLEU(lowercase=True) if metric == "lowercase" else sacrebleu.BLEU()
    rows = stats.bleu_statistics(HYPS, REFS, bleu)
    assert rows.shape == (5, 10)
    assert stats.bleu_from_statistics(rows, bleu) == pytest.approx(
        bleu.corpus_score(HYPS, [REFS]).score, abs=1e-9)
    # any subset of rows, repeated rows included (a bootstrap resample), is its own corpus
    idx = [0, 0, 3, 4]
    assert stats.bleu_from_statistics(rows[idx], bleu) == pytest.approx(
        bleu.corpus_score([HYPS[i] for i in idx], [[REFS[i] for i in idx]]).score, abs=1e-9)


def test_bleu_statistics_in_a_paired_bootstrap():
    better = list(REFS[:3]) + HYPS[3:]  # three sentences translated perfectly
    a, b = stats.bleu_statistics(better, REFS), stats.bleu_statistics(HYPS, REFS)
    def gap_of(x, y):
        return stats.bleu_from_statistics(x) - stats.bleu_from_statistics(y)

    gap = stats.bootstrap(gap_of, a, b, n_resamples=200)
    assert gap.estimate > 0 and gap.low <= gap.estimate <= gap.high


@pytest.mark.parametrize("call, error, message", [
    (lambda: stats.bleu_statistics(HYPS, REFS[:2]), ValueError, "one reference string per"),
    (lambda: stats.bleu_statistics([], []), ValueError, "at least one hypothesis"),
    (lambda: stats.bleu_statistics([["the", "cat"]], ["the cat"]), TypeError, "detokenized"),
    (lambda: stats.bleu_from_statistics(np.ones((3, 4))), ValueError, r"shape \[N, 10\]"),
])
def test_bleu_bad_inputs_say_what_to_do(call, error, message):
    with pytest.raises(error, match=message):
        call()


# --------------------------------------------------------------------------- seed_interval
def test_seed_interval_is_the_t_interval_with_the_sample_std():
    x = np.array([1.0, 2.0, 4.0])
    iv = stats.seed_interval(x)
    half = 4.302653 * x.std(ddof=1) / np.sqrt(3)  # t quantile for 2 degrees of freedom
    assert iv.estimate == pytest.approx(7 / 3)
    assert (iv.low, iv.high) == pytest.approx((7 / 3 - half, 7 / 3 + half), rel=1e-5)


def test_seed_interval_paired_by_seed_removes_what_the_seeds_share():
    seed_luck = np.array([0.0, 10.0, -10.0, 5.0])
    a, b = seed_luck + 1.0 + np.array([0.1, -0.1, 0.0, 0.05]), seed_luck
    paired = stats.seed_interval(a, b)
    assert 0.8 < paired.low < paired.high < 1.2 and not paired.contains(0.0)
    unpaired_a = stats.seed_interval(a)
    assert unpaired_a.high - unpaired_a.low > 10 * (paired.high - paired.low)


def test_seed_interval_contains_zero_for_noise():
    rng = np.random.default_rng(5)
    assert stats.seed_interval(rng.normal(0, 1, 3), rng.normal(0, 1, 3)).contains(0.0)


@pytest.mark.parametrize("call, message", [
    (lambda: stats.seed_interval([1.0]), "at least 2 seeds"),
    (lambda: stats.seed_interval([1.0, 2.0], [1.0]), "one score per seed"),
    (lambda: stats.seed_interval([1.0, np.nan]), "finite"),
    (lambda: stats.seed_interval([1.0, 2.0], level=95), "between 0 and 1"),
])
def test_seed_interval_bad_inputs(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --------------------------------------------------------------------------- median_iqr
def test_median_iqr_of_a_small_set_by_hand():
    # sorted 1, 2, 3, 4: q25 sits at position (n - 1) * 0.25 = 0.75 of the sorted values,
    # three quarters of the way from 1 to 2; the median halfway between 2 and 3
    q = stats.median_iqr([4.0, 1.0, 3.0, 2.0])
    assert q == stats.Quartiles(1.75, 2.5, 3.25)
    assert (q.q25, q.median, q.q75) == (1.75, 2.5, 3.25)
    assert q.iqr == 1.5 and q.spread == 1.5 / 2.5
    low, mid, high = stats.median_iqr([1.0, 2.0, 3.0, 4.0, 5.0])  # unpacks as a tuple
    assert (low, mid, high) == (2.0, 3.0, 4.0)


@pytest.mark.parametrize("method", stats.QUANTILE_METHODS)
def test_median_iqr_of_one_value_is_that_value(method):
    assert stats.median_iqr([0.25], method=method) == (0.25, 0.25, 0.25)
    assert stats.median_iqr(np.array([0.25]), method=method).spread == 0.0


def test_median_iqr_methods_are_numpy_pandas_and_the_standard_library_bit_for_bit():
    import statistics

    import pandas as pd

    rng = np.random.default_rng(0)
    for n in range(2, 21):
        for _ in range(20):
            x = rng.lognormal(np.log(0.3), 0.3, n)
            q = stats.median_iqr(x)
            assert q == (np.percentile(x, 25), np.median(x), np.percentile(x, 75))
            series = pd.Series(x)
            assert q == (series.quantile(0.25), series.median(), series.quantile(0.75))
            grouped = pd.DataFrame({"name": "a", "s": x}).groupby("name")["s"]
            by_pandas = stats.median_iqr(x, method="pandas-groupby")
            assert by_pandas == (grouped.quantile(0.25)["a"], grouped.median()["a"],
                                 grouped.quantile(0.75)["a"])
            by_python = stats.median_iqr(list(x), method="statistics")
            assert by_python == tuple(statistics.quantiles(x, n=4, method="inclusive"))
            # one definition: the three differ in the last bits only, the medians not at all
            for other in (by_pandas, by_python):
                assert other == pytest.approx(q, rel=1e-14, abs=0)
                assert other.median == q.median == statistics.median(x)


def test_median_iqr_is_not_moved_by_a_few_slow_repeats():
    q = stats.median_iqr([0.1] * 8 + [5.0, 9.0])
    assert q.median == pytest.approx(0.1) and q.q25 == pytest.approx(0.1)
    assert q.q75 == pytest.approx(0.1)


@pytest.mark.parametrize("method", stats.QUANTILE_METHODS)
def test_median_iqr_returns_python_floats_for_any_numbers(method):
    import pandas as pd

    for values in ([3, 1, 2], np.array([1, 2, 3], dtype=np.float32), pd.Series([1, 2, 3])):
        q = stats.median_iqr(values, method=method)
        assert q == (1.5, 2.0, 2.5) and all(type(v) is float for v in q)


def test_spread_of_a_zero_median_says_to_use_the_iqr():
    q = stats.median_iqr([-1.0, 0.0, 1.0])
    assert q.iqr == 1.0
    with pytest.raises(ValueError, match="use .iqr"):
        q.spread


@pytest.mark.parametrize("values, error, message", [
    ([], ValueError, "at least one number"),
    ([0.1, float("nan")], ValueError, "NaN: drop missing"),
    ([0.1, float("inf")], ValueError, "infinite value"),
    (np.ones((2, 3)), ValueError, r"1-D .*shape \(2, 3\).*np.ravel"),
    (0.5, ValueError, r"1-D .*shape \(\)"),
    (["fast", "slow"], TypeError, "sequence of numbers"),
    ([[1.0, 2.0], [3.0]], TypeError, "sequence of numbers"),
])
def test_median_iqr_bad_inputs_say_what_to_do(values, error, message):
    with pytest.raises(error, match=message):
        stats.median_iqr(values)


def test_median_iqr_unknown_method_lists_the_known_ones():
    with pytest.raises(ValueError, match="use one of numpy, pandas-groupby, statistics"):
        stats.median_iqr([1.0, 2.0], method="exclusive")


# ----------------------------------------------------------------- block bootstrap
def _ar1(n, phi, seed):
    rng = np.random.default_rng(seed)
    x, e = np.empty(n), rng.normal(size=n)
    x[0] = e[0]
    for t in range(1, n):
        x[t] = phi * x[t - 1] + e[t]
    return x


def test_block_indices_are_runs_of_consecutive_rows_that_wrap():
    rng = np.random.default_rng(0)
    idx = stats.block_indices(100, 7, rng)
    assert idx.shape == (100,) and idx.dtype.kind == "i"
    assert idx.min() >= 0 and idx.max() < 100
    runs = idx[: 98].reshape(14, 7)  # 14 whole blocks, then the cut
    assert np.all(np.diff(runs, axis=1) % 100 == 1)  # each block: consecutive rows, mod n


def test_block_length_one_is_the_plain_bootstrap_draw_for_draw():
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=500), rng.normal(size=500)
    gap = lambda x, y: float(x.mean() - y.mean())  # noqa: E731
    for seed in (0, 1):
        assert stats.block_bootstrap(gap, a, b, block_length=1, seed=seed) == \
            stats.bootstrap(gap, a, b, seed=seed)


def test_block_length_one_agrees_with_the_plain_bootstrap_in_distribution():
    # different seeds, so different resamples: the intervals still agree closely
    x = np.random.default_rng(5).normal(size=2000)
    plain = stats.bootstrap(np.mean, x, n_resamples=4000, seed=1)
    block = stats.block_bootstrap(np.mean, x, block_length=1, n_resamples=4000, seed=2)
    assert (block.high - block.low) == pytest.approx(plain.high - plain.low, rel=0.1)
    assert block.low == pytest.approx(plain.low, abs=0.01)


def test_blocks_widen_the_interval_on_an_ar1_series_as_theory_says():
    # the mean of AR(1) with phi = 0.8 has a standard error sqrt((1 + phi) / (1 - phi)) = 3x
    # the iid one; the plain bootstrap misses that, blocks much longer than 1 / (1 - phi) see it
    x = _ar1(20_000, 0.8, seed=6)
    plain = stats.bootstrap(np.mean, x, n_resamples=1000)
    block = stats.block_bootstrap(np.mean, x, block_length=200, n_resamples=1000)
    ratio = (block.high - block.low) / (plain.high - plain.low)
    assert 2.3 < ratio < 3.7
    # on independent rows the blocks change (almost) nothing
    iid = np.random.default_rng(7).normal(size=20_000)
    b0 = stats.block_bootstrap(np.mean, iid, block_length=200, n_resamples=1000)
    p0 = stats.bootstrap(np.mean, iid, n_resamples=1000)
    r0 = (b0.high - b0.low) / (p0.high - p0.low)
    assert 0.8 < r0 < 1.25


def test_block_bootstrap_is_paired_and_deterministic():
    rng = np.random.default_rng(8)
    shared = _ar1(3000, 0.9, seed=9) * 5  # a difficulty both models share, serially correlated
    a, b = shared + 0.3 + rng.normal(0, 0.1, 3000), shared + rng.normal(0, 0.1, 3000)
    gap = stats.block_bootstrap(lambda x, y: float(np.mean(x - y)), a, b, block_length=50)
    assert 0.25 < gap.low < gap.estimate < gap.high < 0.35
    again = stats.block_bootstrap(lambda x, y: float(np.mean(x - y)), a, b, block_length=50)
    assert gap == again


@pytest.mark.parametrize("kwargs, message", [
    (dict(block_length=0), "block_length must be an int from 1"),
    (dict(block_length=11), "block_length must be an int from 1"),
    (dict(block_length=2.5), "block_length must be an int from 1"),
    (dict(block_length=True), "block_length must be an int from 1"),
    (dict(block_length=2, n_resamples=10), "too few"),
    (dict(block_length=2, level=1.5), "level must be between 0 and 1"),
])
def test_block_bootstrap_bad_inputs_say_what_to_do(kwargs, message):
    with pytest.raises(ValueError, match=message):
        stats.block_bootstrap(np.mean, np.arange(10.0), **kwargs)


def test_block_bootstrap_needs_a_block_length_and_paired_rows():
    with pytest.raises(TypeError):
        stats.block_bootstrap(np.mean, np.arange(10.0))  # no block_length: a required keyword
    with pytest.raises(ValueError, match="same number of rows"):
        stats.block_bootstrap(lambda x, y: 0.0, np.arange(10.0), np.arange(9.0), block_length=2)


def test_autocorrelation_of_ar1_and_white_noise():
    acf = stats.autocorrelation(_ar1(50_000, 0.6, seed=10), 3)
    assert acf.shape == (4,) and acf[0] == 1.0
    assert acf[1:] == pytest.approx([0.6, 0.36, 0.216], abs=0.02)
    noise = stats.autocorrelation(np.random.default_rng(11).normal(size=50_000), 24)
    assert np.abs(noise[1:]).max() < 0.02


def test_autocorrelation_bad_inputs():
    with pytest.raises(ValueError, match="max_lag must be an int"):
        stats.autocorrelation(np.arange(5.0), 5)
    with pytest.raises(ValueError, match="1-D series"):
        stats.autocorrelation(np.ones((3, 3)), 1)
    with pytest.raises(ValueError, match="constant"):
        stats.autocorrelation(np.ones(10), 2)


def test_power_law_backtest_recovers_a_law_with_a_floor_and_predicts_the_rest():
    x = np.geomspace(1e3, 1e6, 12)
    y = 2.0 + 50.0 * x ** -0.3
    table = stats.power_law_backtest(x, y, floors=(0.0, 2.0), fit_fraction=0.5, target=2.5)
    exact = table.set_index("floor").loc[2.0]
    assert exact["b"] == pytest.approx(0.3) and exact["a"] == pytest.approx(50.0)
    assert exact["mean_abs_error"] < 1e-9 and exact["predicted_last"] == pytest.approx(y[-1])
    assert exact["target_x"] == pytest.approx((50.0 / 0.5) ** (1 / 0.3))
    no_floor = table.set_index("floor").loc[0.0]
    assert no_floor["mean_abs_error"] > 1e-3, "the wrong floor predicts the held-out points worse"
    assert exact["fit_points"] == 6


def test_power_law_backtest_bad_inputs():
    x, y = np.arange(1.0, 9.0), np.linspace(5.0, 4.0, 8)
    with pytest.raises(ValueError, match="floor"):
        stats.power_law_backtest(x, y, floors=(4.8,))
    with pytest.raises(ValueError, match="fit_fraction"):
        stats.power_law_backtest(x, y, fit_fraction=1.0)
    with pytest.raises(ValueError, match="at least 2"):
        stats.power_law_backtest(x[:2], y[:2], fit_fraction=0.5)
    assert stats.power_law_backtest(x, y, floors=(0.0,), target=0.0)["target_x"].iloc[0] == \
        float("inf")


# --------------------------------------------------------------------------- two levels
def _runs(spread, runs=5, rows=200, seed=12):
    """[runs, rows] scores: a per-row difficulty, plus a per-run offset of size `spread`."""
    rng = np.random.default_rng(seed)
    offsets = rng.normal(0, 1, (runs, 1)) * spread
    return rng.normal(0, 1, rows) + offsets + rng.normal(0, 0.1, (runs, rows))


def test_two_level_estimate_is_fn_of_the_original_arrays_and_deterministic():
    a, b = _runs(0.5, seed=13), _runs(0.5, seed=14)
    seen = []

    def gap(x, y):
        seen.append(x.shape)
        return float(np.mean(x) - np.mean(y ** 2))

    iv = stats.two_level_bootstrap(gap, a, b, n_resamples=200, seed=3)
    assert iv.estimate == gap(a, b) and iv.low <= iv.estimate <= iv.high and iv.level == 0.95
    assert set(seen) == {(5, 200)}, "fn must get [runs, rows] arrays"
    assert iv == stats.two_level_bootstrap(gap, a, b, n_resamples=200, seed=3)
    assert iv != stats.two_level_bootstrap(gap, a, b, n_resamples=200, seed=4)


def test_two_level_interval_has_zero_width_without_spread_and_is_paired():
    flat = stats.two_level_bootstrap(np.mean, np.full((3, 10), 0.7), n_resamples=200)
    assert (flat.estimate, flat.low, flat.high) == pytest.approx((0.7, 0.7, 0.7), abs=1e-12)
    a = _runs(2.0)
    gap = stats.two_level_bootstrap(lambda x, y: np.mean(x - y), a, a - 0.25, n_resamples=200)
    assert gap.high - gap.low < 1e-9 and gap.estimate == pytest.approx(0.25)


def test_two_level_interval_widens_with_run_to_run_spread():
    widths = []
    for spread in (0.0, 0.5, 2.0):
        iv = stats.two_level_bootstrap(np.mean, _runs(spread), n_resamples=1000)
        widths.append(iv.high - iv.low)
    assert widths[0] < widths[1] < widths[2], widths
    assert widths[2] > 3 * widths[0]


def test_two_level_with_one_run_is_the_plain_bootstrap_of_the_rows():
    x = np.random.default_rng(15).normal(0, 1, 400)
    two = stats.two_level_bootstrap(np.mean, x[None, :], n_resamples=2000)
    one = stats.bootstrap(np.mean, x, n_resamples=2000)
    assert two.estimate == pytest.approx(one.estimate)
    assert (two.high - two.low) / (one.high - one.low) == pytest.approx(1.0, abs=0.15)


@pytest.mark.parametrize("arrays, kwargs, message", [
    ((), {}, r"needs arrays of shape \[runs, rows\]"),
    ((np.ones((2, 3, 4)),), {}, r"needs arrays of shape \[runs, rows\]"),
    ((np.ones((3, 10)), np.ones((2, 10))), {}, r"must have one shape \[runs, rows\], got "
                                               r"\[\(3, 10\), \(2, 10\)\]"),
    ((np.ones((3, 1)),), {}, "at least 2 rows"),
    ((np.ones((3, 10)),), dict(level=95), "level must be between 0 and 1"),
    ((np.ones((3, 10)),), dict(n_resamples=10), "too few"),
])
def test_two_level_bad_shapes_say_what_to_do(arrays, kwargs, message):
    with pytest.raises(ValueError, match=message):
        stats.two_level_bootstrap(np.mean, *arrays, **kwargs)
