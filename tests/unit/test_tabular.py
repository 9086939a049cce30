"""Tests of course_lib.tabular: preprocessing fitted on train only, the tokenizer, the models."""

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from course_lib.attention import MultiHeadAttention
from course_lib.tabular import (
    FeatureTokenizer,
    MLPRegressor,
    TablePreprocessor,
    TabularTransformer,
    count_parameters,
    fit_regressor,
    predict_regressor,
    skewed_columns,
    split_rows,
    table_views,
)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def frames():
    train = pd.DataFrame({
        "area": [100.0, 200.0, np.nan, 400.0, 300.0],
        "year": [1990, 2000, 2010, 2000, 1980],
        "town": ["A", "B", "A", None, "C"],
        "roof": ["flat", "flat", "gable", "gable", "flat"],
    })
    test = pd.DataFrame({
        "area": [np.nan, 1000.0],
        "year": [2020, 1990],
        "town": ["Z", None],  # Z never seen in training
        "roof": ["flat", "hip"],
    })
    return train, test


def prep_for(train, **kw):
    return TablePreprocessor(["area", "year"], ["town", "roof"], **kw).fit(train)


# --------------------------------------------------------------------------- preprocessing
def test_numeric_uses_training_statistics_only(frames):
    train, test = frames
    prep = prep_for(train)
    x_train = prep.numeric(train)
    assert x_train.dtype == np.float32 and x_train.shape == (5, 2)
    np.testing.assert_allclose(x_train.mean(0), 0, atol=1e-6)
    # the test row's missing area becomes the *training* median (250), then the training scaling
    area = np.array([100, 200, 250, 400, 300.0])
    expected = (250 - area.mean()) / area.std()
    assert prep.numeric(test)[0, 0] == pytest.approx(expected, rel=1e-5)
    # refitting on other rows changes nothing already computed from train
    assert prep.numeric(test)[1, 0] == pytest.approx((1000 - area.mean()) / area.std(), rel=1e-5)


def test_log1p_and_constant_column():
    train = pd.DataFrame({"a": [0.0, 9.0, 99.0], "c": [5.0, 5.0, 5.0]})
    prep = TablePreprocessor(["a", "c"], [], log1p=["a"]).fit(train)
    x = prep.numeric(train)
    logs = np.log1p([0.0, 9.0, 99.0])
    np.testing.assert_allclose(x[:, 0], (logs - logs.mean()) / logs.std(), rtol=1e-5)
    np.testing.assert_allclose(x[:, 1], 0.0)  # constant: centred, not divided by zero
    with pytest.raises(ValueError, match="not numeric"):
        TablePreprocessor(["a"], ["c"], log1p=["c"])


def test_codes_and_onehot_agree(frames):
    train, test = frames
    prep = prep_for(train)
    assert prep.categories_["town"] == ["(missing)", "A", "B", "C"]
    assert prep.cardinalities == [5, 3]  # known categories + code 0
    codes = prep.codes(test)
    assert codes.tolist() == [[0, 1], [1, 0]]  # unseen Z -> 0; missing -> its own category
    onehot = prep.onehot(test)
    assert onehot.shape == (2, len(prep.onehot_names)) == (2, 6)
    assert prep.onehot_names[:2] == ["town=(missing)", "town=A"]
    assert onehot[0].tolist() == [0, 0, 0, 0, 1, 0]  # Z: no town column; flat
    assert onehot[1].tolist() == [1, 0, 0, 0, 0, 0]  # missing town; hip unseen: no roof column


def test_unseen_categories_raise_no_pandas_warning(frames):
    """Unseen values used to go through pd.Categorical, deprecated (an error in pandas 4)."""
    import warnings

    train, test = frames
    prep = prep_for(train)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        codes = prep.codes(test)
    assert codes[0, 0] == 0 and codes[1, 1] == 0  # unseen Z and hip -> code 0


def test_min_frequency_sends_rare_categories_to_zero(frames):
    train, _ = frames
    prep = prep_for(train, min_frequency=2)
    assert prep.categories_["town"] == ["A"]
    assert prep.codes(train)[:, 0].tolist() == [1, 0, 1, 0, 0]


def test_preprocessor_errors(frames):
    train, _ = frames
    with pytest.raises(RuntimeError, match="fit"):
        TablePreprocessor(["area"], []).numeric(train)
    with pytest.raises(KeyError, match="nope"):
        TablePreprocessor(["nope"], []).fit(train)
    with pytest.raises(ValueError, match="both"):
        TablePreprocessor(["area"], ["area"])


def test_built_on_scikit_learn_fitted_on_training_rows(frames):
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.preprocessing import OrdinalEncoder, StandardScaler

    train, test = frames
    prep = prep_for(train, min_frequency=2)
    assert isinstance(prep.transformer_, ColumnTransformer)
    numeric = prep.transformer_.named_transformers_["numeric"]
    imputer, scaler = numeric[0], numeric[-1]
    assert isinstance(imputer, SimpleImputer) and imputer.strategy == "median"
    assert isinstance(scaler, StandardScaler)
    # the statistics are the training rows' own, whatever rows are transformed afterwards
    np.testing.assert_allclose(imputer.statistics_, [250.0, 2000.0])
    np.testing.assert_allclose(scaler.mean_, [250.0, 1996.0])
    encoder = prep.transformer_.named_transformers_["categorical"][-1]
    assert isinstance(encoder, OrdinalEncoder)
    assert encoder.handle_unknown == "use_encoded_value" and encoder.min_frequency == 2
    before = prep.numeric(test).copy(), prep.codes(test).copy()
    prep.numeric(pd.concat([train, test]))  # transforming other rows refits nothing
    np.testing.assert_array_equal(prep.numeric(test), before[0])
    np.testing.assert_array_equal(prep.codes(test), before[1])


def test_input_frame_is_left_alone(frames):
    train, test = frames
    copy = test.copy()
    prep = prep_for(train, log1p=["area"])
    prep.numeric(test), prep.codes(test), prep.onehot(test)
    pd.testing.assert_frame_equal(test, copy)


def test_only_numeric_or_only_categorical_columns(frames):
    train, test = frames
    num_only = TablePreprocessor(["area", "year"], []).fit(train)
    assert num_only.codes(test).shape == (2, 0) and num_only.onehot(test).shape == (2, 0)
    assert num_only.cardinalities == []
    cat_only = TablePreprocessor([], ["town"]).fit(train)
    assert cat_only.numeric(test).shape == (2, 0)
    assert cat_only.codes(test).tolist() == [[0], [1]]


def test_a_column_missing_in_every_training_row_is_kept_as_zeros():
    train = pd.DataFrame({"a": [1.0, 2.0, 3.0], "empty": [np.nan] * 3})
    x = TablePreprocessor(["a", "empty"], []).fit(train).numeric(train)
    assert x.shape == (3, 2)  # not silently dropped
    np.testing.assert_allclose(x[:, 1], 0.0)


def test_every_category_rare_gives_code_zero_everywhere(frames):
    train, test = frames
    prep = TablePreprocessor([], ["town"], min_frequency=10).fit(train)
    assert prep.categories_["town"] == [] and prep.cardinalities == [1]
    assert prep.codes(test).tolist() == [[0], [0]]


def test_preprocessor_input_errors(frames):
    train, _ = frames
    with pytest.raises(ValueError, match="negative"):
        TablePreprocessor(["area"], [], log1p=["area"]).fit(train.assign(area=-1.0))
    with pytest.raises(ValueError, match=r"must hold numbers.*town"):
        TablePreprocessor(["town"], []).fit(train)
    with pytest.raises(TypeError, match="DataFrame"):
        prep_for(train).codes(train.to_numpy())
    with pytest.raises(ValueError, match="at least one"):
        TablePreprocessor([], [])
    with pytest.raises(ValueError, match="min_frequency"):
        TablePreprocessor(["area"], [], min_frequency=0)
    with pytest.raises(KeyError, match="roof"):
        prep_for(train).codes(train.drop(columns="roof"))
    with pytest.raises(RuntimeError, match="fit"):
        TablePreprocessor(["area"], ["town"]).codes(train)


# --------------------------------------------------------------------------- tokenizer
def test_numeric_tokens_are_per_feature_affine_maps():
    tok = FeatureTokenizer(n_numeric=3, d_model=4)
    x = torch.randn(2, 3)
    out = tok(x)
    assert out.shape == (2, 3, 4)
    for j in range(3):  # token j = x_j * W_j + b_j + e_j, its own weights per column
        expected = x[:, j : j + 1] * tok.weight[j] + tok.bias[j] + tok.feature_emb[0, j]
        torch.testing.assert_close(out[:, j], expected)


def test_each_categorical_column_has_its_own_table():
    tok = FeatureTokenizer(n_numeric=1, cardinalities=[3, 2], d_model=4)
    x_num = torch.zeros(2, 1)
    x_cat = torch.tensor([[0, 1], [2, 0]])
    out = tok(x_num, x_cat)
    assert out.shape == (2, 3, 4)
    table = tok.embedding.weight
    # column 0 uses rows 0..2, column 1 rows 3..4: the same code 0 means different vectors
    torch.testing.assert_close(out[0, 1], table[0] + tok.feature_emb[0, 1])
    torch.testing.assert_close(out[1, 2], table[3] + tok.feature_emb[0, 2])
    torch.testing.assert_close(out[0, 2], table[4] + tok.feature_emb[0, 2])


def test_tokenizer_errors():
    tok = FeatureTokenizer(n_numeric=2, cardinalities=[3], d_model=4)
    with pytest.raises(ValueError, match=r"x_num must be \[B, 2\]"):
        tok(torch.zeros(1, 3), torch.zeros(1, 1, dtype=torch.long))
    with pytest.raises(TypeError, match="integer"):
        tok(torch.zeros(1, 2), torch.zeros(1, 1))
    with pytest.raises(ValueError, match="outside"):
        tok(torch.zeros(1, 2), torch.tensor([[3]]))
    with pytest.raises(ValueError, match="at least one column"):
        FeatureTokenizer(0, [], 4)


# --------------------------------------------------------------------------- models
def test_transformer_shapes_and_kept_weights():
    model = TabularTransformer(3, [4, 2], d_model=8, num_heads=2, num_layers=2).eval()
    x_num, x_cat = torch.randn(5, 3), torch.randint(0, 2, (5, 2))
    pred, weights = model(x_num, x_cat, need_weights=True)
    assert pred.shape == (5,)
    assert len(weights) == 2 and all(w.shape == (5, 2, 6, 6) for w in weights)  # F + [CLS] = 6
    torch.testing.assert_close(weights[0].sum(-1), torch.ones(5, 2, 6))
    assert all(isinstance(b.attn, MultiHeadAttention) for b in model.blocks)
    fast, none = model(x_num, x_cat)  # fused kernel: same prediction, no weights
    assert none is None
    torch.testing.assert_close(fast, pred, atol=1e-5, rtol=0)


def test_houses_in_a_batch_do_not_mix():
    """Permuting the rows of a batch permutes the predictions (no mixing between houses)."""
    model = TabularTransformer(3, [], d_model=8, num_heads=2, num_layers=1).eval()
    x = torch.randn(6, 3)
    perm = torch.randperm(6)
    torch.testing.assert_close(model(x[perm])[0], model(x)[0][perm])


def test_transformer_learns_a_simple_function():
    torch.manual_seed(0)
    x = torch.randn(256, 2)
    codes = torch.randint(0, 3, (256, 1))
    y = x[:, 0] * x[:, 1] + torch.tensor([-1.0, 0.0, 1.0])[codes[:, 0]]
    model = TabularTransformer(2, [3], d_model=16, num_heads=2, num_layers=1, dropout=0.0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(300):
        loss = nn.functional.mse_loss(model(x, codes)[0], y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1 * y.var().item()


def test_attention_dropout_is_separate():
    model = TabularTransformer(2, [], d_model=8, num_heads=2, num_layers=2, dropout=0.2,
                               attention_dropout=0.0)
    assert all(b.attn.dropout == 0.0 for b in model.blocks)


def test_mlp_and_parameter_count():
    mlp = MLPRegressor(10, hidden=16, depth=2, dropout=0.0)
    assert mlp(torch.randn(4, 10)).shape == (4,)
    assert count_parameters(mlp) == (10 * 16 + 16) + (16 * 16 + 16) + (16 + 1)


def test_first_attention_sees_unnormalized_tokens():
    model = TabularTransformer(2, [], d_model=8, num_heads=2, num_layers=2)
    assert isinstance(model.blocks[0].norm1, nn.Identity)  # FT-Transformer's choice
    assert isinstance(model.blocks[0].norm2, nn.LayerNorm)
    assert isinstance(model.blocks[1].norm1, nn.LayerNorm)
    with_norm = TabularTransformer(2, [], d_model=8, num_heads=2, num_layers=2, first_norm=True)
    assert isinstance(with_norm.blocks[0].norm1, nn.LayerNorm)


# --------------------------------------------------------------------------- the experiment
def test_split_rows_is_a_seeded_partition():
    split = split_rows(100, seed=0)
    assert [len(split[s]) for s in ("train", "val", "test")] == [70, 15, 15]
    assert sorted(np.concatenate(list(split.values()))) == list(range(100))
    assert all((split_rows(100, 0)[s] == split[s]).all() for s in split)
    assert not (split_rows(100, 1)["train"] == split["train"]).all()
    with pytest.raises(ValueError, match="train \\+ val < 1"):
        split_rows(100, 0, train=0.9, val=0.2)
    with pytest.raises(ValueError, match="n_rows must be an int"):
        split_rows(2.5, 0)


def test_skewed_columns_needs_positive_heavy_tails():
    frame = pd.DataFrame({"tail": [1.0, 1, 1, 1, 1, 1, 50], "even": [1.0, 2, 3, 4, 5, 6, 7],
                          "negative": [-1.0, 0, 0, 0, 0, 0, 60]})
    assert skewed_columns(frame, ["tail", "even", "negative"]) == ["tail"]
    with pytest.raises(KeyError, match="no columns \\['gone'\\]"):
        skewed_columns(frame, ["gone"])


def _table(n=40):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"area": rng.lognormal(5, 1, n), "year": rng.integers(1900, 2000, n),
                          "town": rng.choice(["A", "B", "C"], n)})
    frame.loc[3, "area"] = np.nan
    return frame, np.log(frame["year"].to_numpy(dtype=float))


def test_table_views_build_every_view_from_the_training_rows():
    frame, y = _table()
    views = table_views(frame, ["area", "year"], ["town"], y, split_rows(len(frame), 0),
                        min_frequency=1)
    assert views.num["train"].shape == (28, 2) and views.cat["val"].shape == (6, 1)
    assert views.flat["test"].shape == (6, 2 + 3) and views.tree["train"].shape == (28, 3)
    assert np.isnan(views.tree["train"]).any() == (3 in views.split["train"])
    np.testing.assert_allclose(views.num["train"].mean(0), 0, atol=1e-5)
    np.testing.assert_array_equal(views.y["val"], y[views.split["val"]])
    again = table_views(frame, ["area", "year"], ["town"], y, split_rows(len(frame), 0),
                        min_frequency=1)
    assert views.fingerprint() == again.fingerprint()
    other = table_views(frame, ["area", "year"], ["town"], y, split_rows(len(frame), 1),
                        min_frequency=1)
    assert views.fingerprint() != other.fingerprint()
    with pytest.raises(ValueError, match="y has 39 values for a table of 40 rows"):
        table_views(frame, ["area"], ["town"], y[:-1], split_rows(len(frame), 0))


def test_fit_regressor_is_reproducible_and_predicts_one_value_per_row():
    x = torch.randn(64, 3)
    target = x @ torch.tensor([1.0, -2.0, 0.5])
    train, val = (x[:48], target[:48]), (x[48:], target[48:])

    def build():
        return MLPRegressor(3, hidden=8, depth=1, dropout=0.0)

    runs = [fit_regressor(build, train, val, seed=3, lr=1e-2, epochs=5, patience=None,
                          batch_size=16, show_progress=False) for _ in range(2)]
    (m1, h1), (m2, h2) = runs
    assert len(h1) == 5 and h1["val_loss"].tolist() == h2["val_loss"].tolist()
    p1, p2 = predict_regressor(m1, (x[48:],)), predict_regressor(m2, (x[48:],))
    assert p1.shape == (16,) and np.array_equal(p1, p2) and not m1.training
    tab = TabularTransformer(3, [], d_model=8, num_heads=2, num_layers=1)
    assert predict_regressor(tab, (x[:5],)).shape == (5,)  # (pred, weights) -> pred
    with pytest.raises(ValueError, match="same number of rows"):
        fit_regressor(build, (x, target[:10]), val, seed=0, show_progress=False)
    with pytest.raises(ValueError, match="tuple \\(\\*inputs, target\\)"):
        fit_regressor(build, x, val, seed=0, show_progress=False)


# --------------------------------------------------------------------------- boosting
def _boosting_data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    X[:, 4] = rng.integers(0, 6, n)  # a categorical column
    X[rng.random((n, 5)) < 0.05] = np.nan  # missing values, as in the houses
    y = np.nan_to_num(X[:, 0]) * 2 + np.sin(np.nan_to_num(X[:, 1])) + 0.3 * rng.normal(size=n)
    return X[:300], y[:300], X[300:], y[300:]


def _boosting(**params):
    from sklearn.ensemble import HistGradientBoostingRegressor

    settings = dict(max_iter=400, early_stopping=True, n_iter_no_change=7, learning_rate=0.2,
                    categorical_features=[False] * 4 + [True], max_features=0.6,
                    random_state=0)
    return HistGradientBoostingRegressor(**{**settings, **params})


def _early_stopped_the_long_way(patience, X, y, X_val, y_val):
    """The reference: every tree to the cap, the scores from staged_predict, and
    scikit-learn's rule: stop when none of the last `patience` scores beats the one before
    them by more than tol (1e-7)."""
    full = _boosting(n_iter_no_change=patience, early_stopping=False).fit(X, y)
    scores = [-0.5 * np.mean((y_val - y.mean()) ** 2)]
    for pred in full.staged_predict(X_val):
        scores.append(-0.5 * np.mean((y_val - pred) ** 2))
        if len(scores) > patience and not any(
                s > scores[-patience - 1] + 1e-7 for s in scores[-patience:]):
            break
    return len(scores) - 1, np.asarray(scores)


@pytest.mark.parametrize("patience", [1, 7, 30])
def test_fit_with_validation_falls_back_to_the_same_trees(monkeypatch, patience):
    """Before scikit-learn 1.7 (fit takes no X_val): warm-started trees, stopped by the rule;
    the same number of trees, scores and predictions as growing them all and cutting."""
    from course_lib import tabular

    monkeypatch.setattr(tabular, "_accepts_validation_set", lambda model: False)
    X, y, X_val, y_val = _boosting_data()
    model = _boosting(n_iter_no_change=patience)
    assert tabular.fit_with_validation(model, X, y, X_val, y_val) is model
    trees, scores = _early_stopped_the_long_way(patience, X, y, X_val, y_val)
    assert 1 < trees < 400, "the test should stop early, before the cap"
    assert model.n_iter_ == trees
    np.testing.assert_allclose(model.validation_score_, scores, rtol=1e-12)
    cut = _boosting(max_iter=trees, early_stopping=False).fit(X, y)
    np.testing.assert_array_equal(model.predict(X_val), cut.predict(X_val))
    # the parameters are the ones it was given
    assert model.get_params() == _boosting(n_iter_no_change=patience).get_params()


def test_fit_with_validation_stops_at_the_cap(monkeypatch):
    from course_lib import tabular

    monkeypatch.setattr(tabular, "_accepts_validation_set", lambda model: False)
    X, y, X_val, y_val = _boosting_data()
    model = tabular.fit_with_validation(_boosting(max_iter=12, n_iter_no_change=5), X, y,
                                        X_val, y_val)
    assert model.n_iter_ == 12 and len(model.validation_score_) == 13


def test_fit_with_validation_refuses_what_the_fallback_cannot_do(monkeypatch):
    from course_lib import tabular

    monkeypatch.setattr(tabular, "_accepts_validation_set", lambda model: False)
    X, y, X_val, y_val = _boosting_data()
    with pytest.raises(ValueError, match="early_stopping=True"):
        tabular.fit_with_validation(_boosting(early_stopping="auto"), X, y, X_val, y_val)
    with pytest.raises(ValueError, match="squared_error"):
        tabular.fit_with_validation(_boosting(loss="absolute_error"), X, y, X_val, y_val)


def test_fit_with_validation_is_sklearns_own_call_where_there_is_one():
    """scikit-learn 1.7+: the helper is fit(X_val=, y_val=) itself, and the fallback builds
    the very model that call builds."""
    from course_lib import tabular

    X, y, X_val, y_val = _boosting_data()
    if not tabular._accepts_validation_set(_boosting()):
        pytest.skip("scikit-learn older than 1.7: fit takes no X_val")
    native = _boosting().fit(X, y, X_val=X_val, y_val=y_val)
    assert tabular.fit_with_validation(_boosting(), X, y, X_val, y_val).n_iter_ == native.n_iter_
    fallback = tabular._fit_early_stopped(_boosting(), X, y, X_val, y_val)
    assert fallback.n_iter_ == native.n_iter_
    np.testing.assert_allclose(fallback.validation_score_, native.validation_score_,
                               rtol=1e-12)
    np.testing.assert_array_equal(fallback.predict(X_val), native.predict(X_val))
