"""Unit tests of course_lib.timeseries: features, splits, scaling, windows, baselines."""

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.preprocessing import StandardScaler
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_lib import positional
from course_lib.timeseries import (
    FORECASTERS,
    WIND_DIRECTIONS,
    ALiBiTransformer,
    Standardizer,
    build_forecaster,
    mae,
    make_windows,
    persistence,
    predict,
    rmse,
    seasonal_naive,
    train_forecaster,
    warmup_cosine,
    weather_features,
    window_starts,
    year_splits,
)


def _frame(hours=96, start="2012-12-30 00:00"):
    times = pd.date_range(start, periods=hours, freq="h")
    rng = np.random.default_rng(0)
    return pd.DataFrame({
        "datetime": times, "hour": times.hour,
        "DEWP": rng.normal(size=hours), "TEMP": np.arange(hours, dtype=float),
        "PRES": 1000 + rng.normal(size=hours),
        "cbwd": pd.Categorical(rng.choice(list(WIND_DIRECTIONS), size=hours)),
        "Iws": rng.uniform(0, 50, size=hours), "Is": 0.0, "Ir": 0.0,
    })


# --------------------------------------------------------------------------- features
def test_weather_features_columns_and_one_hot():
    df = _frame()
    f = weather_features(df)
    assert list(f.columns) == ["DEWP", "TEMP", "PRES", "log_Iws", "Is", "Ir", "wind_NE", "wind_NW",
                               "wind_SE", "wind_cv", "hour_sin", "hour_cos"]
    one_hot = f[[f"wind_{w}" for w in WIND_DIRECTIONS]].to_numpy()
    assert (one_hot.sum(axis=1) == 1).all()
    assert np.allclose(f["log_Iws"], np.log1p(df["Iws"]))
    assert np.allclose(f["hour_sin"] ** 2 + f["hour_cos"] ** 2, 1)
    assert "hour_sin" not in weather_features(df, hour_of_day=False)


def test_weather_features_clear_errors():
    df = _frame()
    with pytest.raises(ValueError, match="missing"):
        weather_features(df.drop(columns=["PRES"]))
    df["cbwd"] = "N"
    with pytest.raises(ValueError, match="unknown wind directions"):
        weather_features(df)


# --------------------------------------------------------------------------- splits
def test_year_splits_are_contiguous_and_ordered():
    df = _frame()  # 48 h of 2012, 48 h of 2013
    sp = year_splits(df["datetime"], {"train": (2012, 2012), "test": (2013, 2013)})
    assert sp["train"] == slice(0, 48) and sp["test"] == slice(48, 96)
    with pytest.raises(ValueError, match="chronological"):
        year_splits(df["datetime"], {"test": (2013, 2013), "train": (2012, 2012)})
    with pytest.raises(ValueError, match="no rows"):
        year_splits(df["datetime"], {"train": (2015, 2016)})


# --------------------------------------------------------------------------- scaling
def test_standardizer_uses_the_fit_rows_only():
    train = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [5.0, 5.0, 5.0]})
    sc = Standardizer().fit(train)
    z = sc.transform(pd.DataFrame({"a": [2.0, 102.0], "b": [5.0, 6.0]}))
    assert z[0, 0] == 0 and z[1, 0] == pytest.approx(100 / np.std([1, 2, 3]))
    assert z[0, 1] == 0 and z[1, 1] == 1  # constant column: centred, divided by 1
    assert sc.inverse(z[:, 0], "a") == pytest.approx([2.0, 102.0])
    assert sc.inverse(z[:, 1], 1) == pytest.approx([5.0, 6.0])
    assert isinstance(sc.scaler_, StandardScaler)  # scikit-learn does the work


def _old_standardize(train, rows):
    """The hand-written scaling the course used before StandardScaler (kept to compare)."""
    arr = np.asarray(train, dtype=np.float64)
    mean, std = arr.mean(axis=0), arr.std(axis=0)  # np.std: population std, ddof=0
    std = np.where(std > 0, std, 1.0)
    return ((np.asarray(rows, dtype=np.float64) - mean) / std).astype(np.float32), mean, std


def test_standardizer_gives_the_numbers_of_the_old_code():
    feats = weather_features(_frame(hours=500))  # 12 columns: offsets, one-hots, a constant
    feats["PRES"] += 20.0  # a large offset, as real pressure in hPa
    train, rows = feats.iloc[:300], feats
    sc = Standardizer().fit(train)
    expected, mean, std = _old_standardize(train, rows)
    assert np.allclose(sc.mean_, mean, rtol=1e-12, atol=1e-12)
    assert np.allclose(sc.std_, std, rtol=1e-12)  # ddof=0, as before
    assert not np.allclose(std, np.asarray(train).std(axis=0, ddof=1))  # and not ddof=1
    got = sc.transform(rows)
    assert got.dtype == np.float32 and got.shape == expected.shape
    assert np.allclose(got, expected, rtol=0, atol=1e-6)  # float32 rounding at most
    col = list(feats.columns).index("TEMP")
    assert np.allclose(sc.inverse(got[:, col], "TEMP"), rows["TEMP"], atol=1e-4)


def test_standardizer_scales_windows_of_any_rank():
    rng = np.random.default_rng(1)
    sc = Standardizer().fit(rng.normal(3.0, 2.0, size=(50, 4)))
    X = rng.normal(size=(6, 7, 4))  # [N, L, F]
    flat = sc.transform(X.reshape(-1, 4))
    assert np.array_equal(sc.transform(X), flat.reshape(6, 7, 4))


def test_standardizer_clear_errors():
    train = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [5.0, 5.0, 5.0]})
    with pytest.raises(RuntimeError, match="fit"):
        Standardizer().transform(train)
    with pytest.raises(RuntimeError, match="fit"):
        Standardizer().inverse(np.zeros(2), 0)
    with pytest.raises(RuntimeError, match="fit"):
        Standardizer().mean_
    sc = Standardizer().fit(train)
    with pytest.raises(ValueError, match="expected 2 columns"):
        sc.transform(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="columns differ"):
        sc.transform(pd.DataFrame({"b": [1.0], "a": [2.0]}))  # same count, swapped order
    with pytest.raises(KeyError, match="no column"):
        sc.inverse(np.zeros(2), "c")
    with pytest.raises(ValueError, match="2\\+ rows"):
        Standardizer().fit(train.iloc[:1])
    with pytest.raises(ValueError, match="missing or infinite"):
        Standardizer().fit(train.assign(a=[1.0, np.nan, 3.0]))


# --------------------------------------------------------------------------- windows
def test_windows_never_leave_their_split():
    split = slice(10, 40)
    for length, horizon in ((5, 1), (8, 3), (29, 1)):
        starts = window_starts(split, length, horizon)
        assert starts[0] == 10
        assert starts[-1] + length - 1 + horizon == 39  # the last target is the split's last row
    with pytest.raises(ValueError, match="fewer than"):
        window_starts(split, 30, 1)
    with pytest.raises(ValueError, match="positive int"):
        window_starts(split, 0)


def test_make_windows_matches_a_loop():
    T, F, L, h = 50, 3, 6, 2
    values = torch.randn(T, F)
    target = torch.randn(T)
    split = slice(7, 45)
    X, y, rows = make_windows(values, target, split, L, horizon=h, stride=3)
    starts = list(range(7, 45 - L - h + 1, 3))
    assert X.shape == (len(starts), L, F) and y.shape == (len(starts),)
    for n, s in enumerate(starts):
        assert torch.equal(X[n], values[s : s + L])
        assert y[n] == target[s + L - 1 + h] and rows[n] == s + L - 1 + h
    with pytest.raises(ValueError, match="outside the split"):
        make_windows(values, target, split, L, starts=[40])


def test_baselines_read_the_right_hours():
    series = torch.arange(100, dtype=torch.float32)
    values = series[:, None].repeat(1, 2)
    X, y, _ = make_windows(values, series, slice(0, 100), 72)
    assert torch.equal(persistence(X, 0), y - 1)  # hour 72 of the window
    assert torch.equal(seasonal_naive(X, 0), y - 24)  # the same hour one day earlier
    X3, y3, _ = make_windows(values, series, slice(0, 100), 72, horizon=3)
    assert torch.equal(seasonal_naive(X3, 0, horizon=3), y3 - 24)
    with pytest.raises(ValueError, match="window of at least"):
        seasonal_naive(X[:, -10:], 0)


def test_metrics_and_predict():
    assert mae([1, 2, 3], [1, 1, 1]) == 1.0
    assert rmse([0, 0], [3, 4]) == pytest.approx(np.sqrt(12.5))
    with pytest.raises(ValueError, match="shapes"):
        mae([1, 2], [1, 2, 3])
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 1))
    X = torch.randn(10, 4, 3)
    expected = model(X).squeeze(-1).detach().numpy()
    assert np.allclose(predict(model, X, batch_size=3), expected, atol=1e-6)


def test_predict_builds_no_autograd_graph():
    seen = []

    class Probe(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 1)

        def forward(self, x):  # x [B, L, F] -> [B]
            seen.append(torch.is_grad_enabled())
            return self.lin(x[:, -1]).squeeze(-1)

    predict(Probe(), torch.randn(5, 4, 3), batch_size=2)
    assert seen == [False, False, False]  # three batches, none tracked by autograd
    assert torch.is_grad_enabled()  # and the caller's mode is restored


# --------------------------------------------------------------------------- forecasters
CONFIG = dict(size=16, layers=2, dropout=0.0)


@pytest.mark.parametrize("name", FORECASTERS)
def test_each_forecaster_starts_from_persistence_and_gives_one_number_per_window(name):
    torch.manual_seed(0)
    model = build_forecaster(name, CONFIG, n_features=5, temp_index=2, window=24).eval()
    X = torch.randn(7, 24, 5)
    out = model(X)
    assert out.shape == (7,)
    # the output is hour L's temperature plus a change that the head computes:
    # with the head's weights and bias zeroed, the forecast is persistence exactly
    torch.nn.init.zeros_(model.head.weight)
    torch.nn.init.zeros_(model.head.bias)
    assert torch.equal(model(X), X[:, -1, 2])


def test_alibi_forecaster_reads_any_length_and_returns_its_weights():
    torch.manual_seed(0)
    model = build_forecaster("Transformer (ALiBi)", CONFIG, 5, 2).eval()
    assert isinstance(model, ALiBiTransformer)
    for length in (10, 72, 144):
        weights = model.attention_weights(torch.randn(3, length, 5))
        assert len(weights) == 2 and weights[-1].shape == (3, 4, length, length)
        assert torch.allclose(weights[-1].sum(-1), torch.ones(3, 4, length))
    learned = build_forecaster("Transformer (learned PE)", CONFIG, 5, 2, window=72)
    with pytest.raises(positional.SequenceTooLongError):
        learned(torch.randn(2, 144, 5))


def test_learned_pe_attention_weights_have_one_row_per_query():
    torch.manual_seed(0)
    model = build_forecaster("Transformer (learned PE)", CONFIG, 5, 2, window=12).eval()
    weights = model.attention_weights(torch.randn(2, 12, 5))
    assert [tuple(w.shape) for w in weights] == [(2, 4, 12, 12)] * 2
    assert torch.allclose(weights[0].sum(-1), torch.ones(2, 4, 12), atol=1e-6)


def test_build_forecaster_clear_errors():
    with pytest.raises(ValueError, match="unknown forecaster"):
        build_forecaster("GRU", CONFIG, 5, 2)
    with pytest.raises(ValueError, match="missing"):
        build_forecaster("LSTM", dict(size=8), 5, 2)


def test_warmup_cosine_rises_then_decays_to_zero():
    f = warmup_cosine(4, 20)
    assert [f(s) for s in range(3)] == pytest.approx([0.25, 0.5, 0.75])  # warm-up
    assert max(f(s) for s in range(20)) < 1.0 + 1e-12
    assert f(10) == pytest.approx(0.5)
    assert f(20) == pytest.approx(0.0) and f(25) == pytest.approx(0.0)
    with pytest.raises(ValueError, match=">= 1"):
        warmup_cosine(0, 10)


def _tiny_data(n=64, length=12, features=3):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, length, features, generator=g)
    y = X[:, -1, 1] + 0.1 * X[:, -2, 0]
    return TensorDataset(X, y), DataLoader(TensorDataset(X[:16], y[:16]), batch_size=8)


def test_train_forecaster_is_reproducible_from_its_seed():
    train_set, val_loader = _tiny_data()
    config = dict(CONFIG, lr=1e-3, size=8, layers=1)
    runs = [train_forecaster("Transformer (ALiBi)", config, train_set, val_loader, 1, seed=s,
                             epochs=2, patience=2, windows_per_epoch=32, batch_size=16)
            for s in (3, 3, 4)]
    (m1, h1), (m2, h2), (_, h3) = runs
    assert list(h1.columns[:3]) == ["epoch", "train_loss", "val_loss"] and len(h1) == 2
    assert h1.val_loss.tolist() == h2.val_loss.tolist()  # the same seed, the same run
    assert all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(),
                                                 m2.state_dict().values()))
    assert h1.val_loss.tolist() != h3.val_loss.tolist()  # another seed, another run
    with pytest.raises(ValueError, match="learning rate"):
        train_forecaster("LSTM", CONFIG, train_set, val_loader, 1, seed=0, epochs=1,
                         patience=1, windows_per_epoch=16)
