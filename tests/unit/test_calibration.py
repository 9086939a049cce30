"""Unit tests of course_lib.calibration: bins, reliability, ECE, mean NLL, the plot helper."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from course_lib import calibration  # noqa: E402


def test_bin_index_edges():
    got = calibration.bin_index([0.0, 0.0999, 0.1, 0.55, 0.999, 1.0], bins=10)
    assert got.tolist() == [0, 0, 1, 5, 9, 9]


def test_ece_by_hand():
    # two bins used: (0.9, 0.9, right, wrong) -> |1 - 1.8| ; (0.3, right) -> |1 - 0.3|
    conf = [0.9, 0.9, 0.3]
    correct = [1, 0, 1]
    sums = calibration.group_bins(conf, correct, group=[0, 0, 1], n_groups=2, bins=10)
    assert calibration.ece(sums) == pytest.approx((0.8 + 0.7) / 3)
    # rows select and repeat groups, as a bootstrap does
    assert calibration.ece(sums, [1]) == pytest.approx(0.7)
    assert calibration.ece(sums, [1, 1]) == pytest.approx(0.7)
    assert calibration.ece(sums, [0]) == pytest.approx(0.8 / 2)


def test_calibrated_predictions_have_small_ece_and_overconfident_large():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.05, 1.0, 200_000)
    correct = rng.uniform(size=conf.size) < conf  # right with exactly the stated probability
    group = rng.integers(0, 100, conf.size)
    calibrated = calibration.group_bins(conf, correct, group, 100)
    assert calibration.ece(calibrated) < 0.01
    over = calibration.group_bins(np.minimum(conf + 0.2, 1.0), correct, group, 100)
    assert calibration.ece(over) > 0.15


def test_reliability_curve_and_shares():
    sums = calibration.group_bins([0.15, 0.15, 0.85], [1, 0, 1], [0, 1, 1], 2, bins=2)
    curve = calibration.reliability(sums)
    assert np.allclose(curve["confidence"], [0.15, 0.85])
    assert np.allclose(curve["accuracy"], [0.5, 1.0])
    assert np.allclose(curve["share"], [2 / 3, 1 / 3])
    empty_bin = calibration.reliability(calibration.group_bins([0.9], [1], [0], 1, bins=4))
    assert np.isnan(empty_bin["accuracy"][0]) and empty_bin["accuracy"][3] == 1.0


def test_mean_nll_per_prediction():
    sums = calibration.group_bins([0.5, 0.5, 0.5], [1, 1, 0], [0, 0, 1], 2, nll=[1.0, 2.0, 6.0])
    assert calibration.mean_nll(sums) == pytest.approx(3.0)
    assert calibration.mean_nll(sums, [0]) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="nll"):
        calibration.mean_nll(calibration.group_bins([0.5], [1], [0], 1))


def test_bad_inputs_say_what_to_do():
    with pytest.raises(ValueError, match="probabilities"):
        calibration.bin_index([1.5])
    with pytest.raises(ValueError, match="probabilities"):
        calibration.bin_index([-0.1])
    with pytest.raises(ValueError, match="positive int"):
        calibration.bin_index([0.5], bins=0)
    with pytest.raises(ValueError, match="1-D"):
        calibration.group_bins([[0.5]], [1], [0], 1)
    with pytest.raises(ValueError, match="correct has 1 values for 2"):
        calibration.group_bins([0.5, 0.6], [1], [0, 0], 1)
    with pytest.raises(ValueError, match="n_groups"):
        calibration.group_bins([0.5], [1], [3], 2)
    with pytest.raises(ValueError, match="n_groups must be"):
        calibration.group_bins([0.5], [1], [0], 0)
    with pytest.raises(TypeError, match="group_bins"):
        calibration.ece({"correct": np.zeros((1, 2))})
    sums = calibration.group_bins([0.5], [1], [0], 2)
    with pytest.raises(ValueError, match="undefined"):
        calibration.ece(sums, [1])
    with pytest.raises(ValueError, match="empty"):
        calibration.reliability_plot({}, ax=None)


def test_reliability_plot_draws_each_model_and_the_diagonal():
    rng = np.random.default_rng(1)
    conf = rng.uniform(0, 1, 1000)
    sums = calibration.group_bins(conf, rng.uniform(size=1000) < conf, np.zeros(1000, int), 1)
    fig, (ax, ax_share) = plt.subplots(2, 1)
    calibration.reliability_plot({"a": sums, "b": sums}, ax=ax, ax_share=ax_share)
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[-1] == "calibrated" and labels[0].startswith("a: ECE ")
    assert len(ax.get_lines()) == 3 and len(ax_share.patches) == 2
    for patch in ax_share.patches:  # one step per bin, the last bin drawn up to confidence 1
        values, edges = patch.get_data()[:2]
        assert len(values) == 15 and edges[0] == 0 and edges[-1] == 1
        np.testing.assert_allclose(values, calibration.reliability(sums)["share"])
    plt.close(fig)
