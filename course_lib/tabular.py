"""Transformers for tables: preprocessing, a per-feature tokenizer, a [CLS] model, an MLP.

A table is not a sentence: its columns are heterogeneous (square feet, a year, a
neighbourhood) and unordered. So instead of one shared embedding for every token,

- each numeric column j gets its own weight and bias vectors: ``token_j = x_j * W_j + b_j``
  (all columns at once, by broadcasting ``[B, F, 1] * [F, d] + [F, d]``);
- each categorical column gets its own embedding table (one row per category);
- a learned feature-identity vector ``e_j`` is added to every token, and a learned [CLS]
  token is put in front; the prediction is read from the [CLS] output.

``TablePreprocessor`` (scikit-learn's ``ColumnTransformer``, ``SimpleImputer``,
``StandardScaler`` and ``OrdinalEncoder`` underneath) is fitted on the training rows only
and gives the three views of a table that the models of the tabular chapter share:
standardized numeric columns, integer category codes (for embedding tables and trees) and
one-hot columns (for linear models and MLPs).

    prep = TablePreprocessor(numeric=[...], categorical=[...]).fit(train_df)
    x_num, x_cat = prep.numeric(df), prep.codes(df)          # [N, n_num], [N, n_cat]
    model = TabularTransformer(prep.n_numeric, prep.cardinalities, d_model=32)
    pred, weights = model(x_num, x_cat, need_weights=True)   # [N], list of [N, h, L, L]
"""

from __future__ import annotations

import hashlib
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, OrdinalEncoder, StandardScaler
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from . import runtime, training
from .blocks import Block
from .checks import positive_int
from .training import count_parameters  # the one shared helper, re-exported here

__all__ = ["TablePreprocessor", "FeatureTokenizer", "TabularTransformer", "MLPRegressor",
           "count_parameters", "split_rows", "skewed_columns", "TableViews", "table_views",
           "fit_regressor", "predict_regressor", "fit_with_validation"]


# --------------------------------------------------------------------------- preprocessing
def _log1p_where(x: np.ndarray, mask: Sequence[bool]) -> np.ndarray:
    """``log(1 + x)`` on the columns where ``mask`` is True (negatives clipped to 0 first)."""
    x = np.array(x, dtype=float)  # a copy: the caller's array is left alone
    x[:, mask] = np.log1p(np.clip(x[:, mask], 0, None))
    return x


def _category_strings(frame: pd.DataFrame) -> pd.DataFrame:
    """Every category as a string, a missing value as the category ``"(missing)"``."""
    return frame.astype(object).where(frame.notna(), TablePreprocessor.MISSING).astype(str)


class TablePreprocessor:
    """Fit on the training rows only; then turn any rows into numbers the models can read.

    A thin layer over scikit-learn: ``fit`` fits one ``ColumnTransformer`` (kept as
    ``transformer_``) with two branches,

    - numeric columns: ``SimpleImputer(strategy="median")`` (a missing value becomes the
      training median), ``log(1 + x)`` on the columns named in ``log1p`` (heavy-tailed
      areas), then ``StandardScaler`` (training mean and standard deviation; a constant
      column is only centred);
    - categorical columns: a missing value becomes the category ``"(missing)"``, then
      ``OrdinalEncoder(min_frequency=..., handle_unknown="use_encoded_value")``.

    The codes are shifted so that every category seen at least ``min_frequency`` times in
    the training rows gets a code 1..k (sorted by name) and code 0 means "rare or never
    seen in training". ``codes(df)`` returns these codes, ``onehot(df)`` one 0/1 column per
    code 1..k (a rare or unseen category is then all zeros).
    """

    MISSING = "(missing)"

    def __init__(self, numeric: Sequence[str], categorical: Sequence[str],
                 min_frequency: int = 1, log1p: Sequence[str] = ()):
        self.numeric_columns = list(numeric)
        self.categorical_columns = list(categorical)
        if set(self.numeric_columns) & set(self.categorical_columns):
            both = sorted(set(self.numeric_columns) & set(self.categorical_columns))
            raise ValueError(f"columns cannot be both numeric and categorical: {both}")
        if not self.numeric_columns + self.categorical_columns:
            raise ValueError("name at least one numeric or categorical column")
        unknown = sorted(set(log1p) - set(self.numeric_columns))
        if unknown:
            raise ValueError(f"log1p names columns that are not numeric: {unknown}")
        positive_int("min_frequency", min_frequency)
        self.min_frequency = min_frequency
        self.log1p_columns = list(log1p)
        self.fitted = False

    # -- fitting
    def fit(self, df: pd.DataFrame) -> TablePreprocessor:
        self._check_columns(df)
        for col in self.log1p_columns:
            if (df[col] < 0).any():
                raise ValueError(f"log1p column {col!r} has negative values")
        log_mask = [c in self.log1p_columns for c in self.numeric_columns]
        numeric = make_pipeline(
            SimpleImputer(strategy="median", keep_empty_features=True),  # all-NaN column -> 0
            FunctionTransformer(_log1p_where, kw_args={"mask": log_mask}),
            StandardScaler(),
        )
        categorical = make_pipeline(
            FunctionTransformer(_category_strings),
            OrdinalEncoder(min_frequency=self.min_frequency, handle_unknown="use_encoded_value",
                           unknown_value=-1),
        )
        self.transformer_ = ColumnTransformer(
            [("numeric", numeric, self.numeric_columns),
             ("categorical", categorical, self.categorical_columns)],
            sparse_threshold=0.0,
        ).fit(df)
        self.categories_: dict[str, list[str]] = {}
        if self.categorical_columns:
            encoder = self.transformer_.named_transformers_["categorical"][-1]
            rare = encoder.infrequent_categories_
            for col, seen, rare_j in zip(self.categorical_columns, encoder.categories_, rare):
                rare_j = set() if rare_j is None else set(rare_j)
                self.categories_[col] = [str(c) for c in seen if c not in rare_j]  # sorted
        self.fitted = True
        return self

    # -- the three views
    def numeric(self, df: pd.DataFrame) -> np.ndarray:
        """Standardized numeric columns, float32 ``[N, n_numeric]``."""
        return self._transform(df)[:, : self.n_numeric].astype(np.float32)

    def codes(self, df: pd.DataFrame) -> np.ndarray:
        """Category codes, int64 ``[N, n_categorical]``; 0 = rare or unseen."""
        encoded = self._transform(df)[:, self.n_numeric :].astype(np.int64)  # [N, n_cat]
        # OrdinalEncoder: known 0..k-1, all rare ones k, unseen -1. Ours: known 1..k, else 0.
        known = np.array([len(self.categories_[c]) for c in self.categorical_columns])
        return np.where(encoded < known, encoded + 1, 0)

    def onehot(self, df: pd.DataFrame) -> np.ndarray:
        """One 0/1 column per known category, float32 ``[N, n_onehot]`` (see ``onehot_names``)."""
        codes = self.codes(df)
        blocks = []
        for j, col in enumerate(self.categorical_columns):
            k = len(self.categories_[col])
            blocks.append(codes[:, j : j + 1] == np.arange(1, k + 1)[None, :])
        if not blocks:
            return np.zeros((len(df), 0), dtype=np.float32)
        return np.concatenate(blocks, axis=1).astype(np.float32)

    # -- sizes and names
    @property
    def n_numeric(self) -> int:
        return len(self.numeric_columns)

    @property
    def cardinalities(self) -> list[int]:
        """Size of each categorical column's embedding table: known categories + 1 (code 0)."""
        self._check_fitted()
        return [len(self.categories_[c]) + 1 for c in self.categorical_columns]

    @property
    def onehot_names(self) -> list[str]:
        self._check_fitted()
        return [f"{c}={v}" for c in self.categorical_columns for v in self.categories_[c]]

    @property
    def feature_names(self) -> list[str]:
        """One name per token of the per-column tokenizer: numeric columns, then categorical."""
        return self.numeric_columns + self.categorical_columns

    # -- helpers
    def _transform(self, df):
        self._check_fitted()
        self._check_columns(df)
        return self.transformer_.transform(df)  # [N, n_numeric + n_categorical]

    def _check_columns(self, df):
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"expected a pandas DataFrame, got {type(df).__name__}")
        wanted = self.numeric_columns + self.categorical_columns
        missing = [c for c in wanted if c not in df.columns]
        if missing:
            raise KeyError(f"the table has no columns {missing}")
        not_numbers = [c for c in self.numeric_columns
                       if not pd.api.types.is_numeric_dtype(df[c])]
        if not_numbers:
            raise ValueError(f"numeric columns must hold numbers (NaN allowed), these do not: "
                             f"{not_numbers}; convert them or declare them categorical")

    def _check_fitted(self):
        if not self.fitted:
            raise RuntimeError("call fit(train_df) on the training rows first")


# --------------------------------------------------------------------------- tokenizer
class FeatureTokenizer(nn.Module):
    """One d_model-dimensional token per column of a table.

    forward(x_num [B, n_numeric] float, x_cat [B, n_categorical] long or None) -> [B, F, d_model]
    with F = n_numeric + n_categorical, numeric tokens first.

    - numeric column j:      x_j * W_j + b_j            (``weight``, ``bias``: [n_numeric, d])
    - categorical column j:  row x_j of its own table  (one ``nn.Embedding`` holding all the
      tables one after the other; ``offsets`` says where each column's table starts)
    - every token:           + e_j, the feature-identity embedding ``feature_emb`` [1, F, d]

    e_j is a per-column embedding added to every token of that column. b_j (or, for a
    categorical column, its own table) already differs per column, so e_j folds into them:
    it adds parameters, not expressive power (exercise 4 of chapter 6). It would tell the
    columns apart only if they shared one weight vector or one table.
    """

    def __init__(self, n_numeric: int, cardinalities: Sequence[int] = (), d_model: int = 32):
        super().__init__()
        if n_numeric < 0 or any(c < 1 for c in cardinalities):
            raise ValueError(f"need n_numeric >= 0 and cardinalities >= 1, got {n_numeric}, "
                             f"{list(cardinalities)}")
        if n_numeric + len(cardinalities) == 0:
            raise ValueError("a table needs at least one column")
        self.n_numeric, self.n_categorical = n_numeric, len(cardinalities)
        self.d_model = d_model
        bound = 1 / math.sqrt(d_model)
        self.weight = nn.Parameter(torch.empty(n_numeric, d_model).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(n_numeric, d_model).uniform_(-bound, bound))
        if cardinalities:
            self.embedding = nn.Embedding(int(sum(cardinalities)), d_model)
            nn.init.uniform_(self.embedding.weight, -bound, bound)
            offsets = torch.tensor([0, *np.cumsum(cardinalities)[:-1].tolist()])
            self.register_buffer("offsets", offsets, persistent=False)
            self.register_buffer("cardinalities", torch.tensor(list(cardinalities)),
                                 persistent=False)
        else:
            self.embedding = None
        n_features = n_numeric + len(cardinalities)
        self.feature_emb = nn.Parameter(torch.empty(1, n_features, d_model).uniform_(-bound, bound))

    @property
    def n_features(self) -> int:
        return self.n_numeric + self.n_categorical

    def forward(self, x_num, x_cat=None):
        tokens = []
        if self.n_numeric:
            if x_num is None or x_num.dim() != 2 or x_num.shape[1] != self.n_numeric:
                got = None if x_num is None else tuple(x_num.shape)
                raise ValueError(f"x_num must be [B, {self.n_numeric}], got {got}")
            tokens.append(x_num.unsqueeze(-1) * self.weight + self.bias)  # [B, n_num, d]
        if self.n_categorical:
            if x_cat is None or x_cat.dim() != 2 or x_cat.shape[1] != self.n_categorical:
                got = None if x_cat is None else tuple(x_cat.shape)
                raise ValueError(f"x_cat must be [B, {self.n_categorical}], got {got}")
            if x_cat.dtype not in (torch.int32, torch.int64):
                raise TypeError(f"x_cat must hold integer codes, got dtype {x_cat.dtype}")
            if (x_cat < 0).any() or (x_cat >= self.cardinalities).any():
                raise ValueError("a category code is outside 0..cardinality-1 of its column")
            tokens.append(self.embedding(x_cat + self.offsets))  # [B, n_cat, d]
        return torch.cat(tokens, dim=1) + self.feature_emb  # [B, F, d]


# --------------------------------------------------------------------------- the model
class TabularTransformer(nn.Module):
    """Feature tokens + [CLS] -> Pre-Norm encoder blocks -> LayerNorm -> Linear on [CLS].

    forward(x_num, x_cat=None, need_weights=False)
        -> (prediction [B], weights: list with one [B, h, F+1, F+1] per block, or None)

    The blocks are ``course_lib.blocks.Block`` (Pre-Norm), whose ``MultiHeadAttention`` hands
    its weights back; with ``need_weights=False`` the fused kernel is used (faster).
    Position 0 of the sequence is [CLS]; position 1 + j is column j of the tokenizer.
    """

    def __init__(self, n_numeric: int, cardinalities: Sequence[int] = (), d_model: int = 32,
                 num_heads: int = 4, num_layers: int = 2, d_ff: int | None = None,
                 dropout: float = 0.1, attention_dropout: float = 0.0, activation: str = "gelu",
                 first_norm: bool = False):
        super().__init__()
        self.tokenizer = FeatureTokenizer(n_numeric, cardinalities, d_model)
        bound = 1 / math.sqrt(d_model)
        self.cls_token = nn.Parameter(torch.empty(1, 1, d_model).uniform_(-bound, bound))
        self.blocks = nn.ModuleList(
            Block(d_model, num_heads, d_ff or 2 * d_model, dropout=dropout, activation=activation)
            for _ in range(num_layers)
        )
        for block in self.blocks:  # dropout on the attention weights: separate (slow on CPU)
            block.attn.dropout = attention_dropout
        if not first_norm and num_layers:
            # As in the FT-Transformer: no LayerNorm before the first attention. LN(x_j W_j + c_j)
            # would squash a numeric token to the same direction for every large |x_j|.
            self.blocks[0].norm1 = nn.Identity()
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 1)

    def forward(self, x_num, x_cat=None, need_weights: bool = False):
        runtime.check_device(self, "TabularTransformer", x_num=x_num, x_cat=x_cat)
        tokens = self.tokenizer(x_num, x_cat)  # [B, F, d]
        cls = self.cls_token.expand(tokens.shape[0], -1, -1)  # [B, 1, d]
        x = torch.cat([cls, tokens], dim=1)  # [B, F+1, d]
        weights = []
        for block in self.blocks:
            x, w = block(x, need_weights=need_weights)  # w: [B, h, F+1, F+1] or None
            weights.append(w)
        out = self.head(self.norm(x[:, 0])).squeeze(-1)  # [B]: read the [CLS] position
        return out, (weights if need_weights else None)


class MLPRegressor(nn.Module):
    """The baseline: [Linear -> ReLU -> Dropout] x depth -> Linear, on one flat feature vector.

    forward(x [B, d_in]) -> prediction [B]
    """

    def __init__(self, d_in: int, hidden: int = 256, depth: int = 2, dropout: float = 0.1):
        super().__init__()
        layers, width = [], d_in
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
            width = hidden
        layers.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        runtime.check_device(self, "MLPRegressor", x=x)
        return self.net(x).squeeze(-1)


# --------------------------------------------------------------------------- the experiment
# The tabular chapter and its search script (scripts/search_06_tabular.py) share these, so
# that the split, the views and the training loop are one implementation, not two copies.
def split_rows(n_rows: int, seed: int, train: float = 0.70, val: float = 0.15
               ) -> dict[str, np.ndarray]:
    """A random split of ``n_rows`` rows: ``{"train", "val", "test"}`` -> row indices.

    The first ``int(train * n_rows)`` rows of one permutation (``default_rng(seed)``) are the
    training rows, the next ``int(val * n_rows)`` the validation rows, the rest the test rows.
    """
    if isinstance(n_rows, bool) or not isinstance(n_rows, (int, np.integer)) or n_rows < 3:
        raise ValueError(f"n_rows must be an int of at least 3, got {n_rows!r}")
    if not (0 < train < 1 and 0 < val < 1 and train + val < 1):
        raise ValueError(f"train and val are fractions with train + val < 1 (the rest is the "
                         f"test set), got train={train}, val={val}")
    order = np.random.default_rng(seed).permutation(n_rows)
    n_train, n_val = int(train * n_rows), int(val * n_rows)
    return {"train": order[:n_train], "val": order[n_train : n_train + n_val],
            "test": order[n_train + n_val :]}


def skewed_columns(frame: pd.DataFrame, columns: Sequence[str], threshold: float = 1.0
                   ) -> list[str]:
    """The columns of ``frame`` with no negative value and a skewness above ``threshold``."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise KeyError(f"the table has no columns {missing}")
    return [c for c in columns if frame[c].min() >= 0 and frame[c].skew() > threshold]


@dataclass
class TableViews:
    """One split of a table and the four views its models read, all keyed by split name.

    ``num`` standardized numeric columns, ``cat`` category codes (the Transformer's inputs),
    ``flat`` numeric + one-hot (ridge, the MLP), ``tree`` raw numeric columns with their
    missing values + category codes (gradient boosting). ``prep`` was fitted on ``train``.
    """

    split: dict[str, np.ndarray]
    frames: dict[str, pd.DataFrame]
    y: dict[str, np.ndarray]
    prep: TablePreprocessor
    skewed: list[str]
    num: dict[str, np.ndarray]
    cat: dict[str, np.ndarray]
    flat: dict[str, np.ndarray]
    tree: dict[str, np.ndarray]

    def tree_view(self, df: pd.DataFrame) -> np.ndarray:
        """Raw numeric columns (NaN kept: the trees handle it) + category codes: [N, F]."""
        numeric = df[self.prep.numeric_columns].to_numpy(dtype=float)
        return np.hstack([numeric, self.prep.codes(df)])

    def fingerprint(self) -> str:
        """SHA-256 of the split, the column names and the targets: equal fingerprints mean
        two programs trained and scored on the same rows and columns."""
        h = hashlib.sha256()
        for name in ("train", "val", "test"):
            h.update(np.ascontiguousarray(self.split[name], dtype=np.int64).tobytes())
            h.update(np.ascontiguousarray(self.y[name], dtype=np.float64).tobytes())
        h.update("|".join(self.prep.feature_names + self.skewed).encode())
        return h.hexdigest()


def table_views(frame: pd.DataFrame, numeric: Sequence[str], categorical: Sequence[str],
                y: np.ndarray, split: dict[str, np.ndarray], min_frequency: int = 10,
                skew_threshold: float = 1.0) -> TableViews:
    """Fit a ``TablePreprocessor`` on the training rows of ``split`` (log1p on the columns
    that are skewed *in training*) and build every view of every split."""
    y = np.asarray(y)
    if len(y) != len(frame):
        raise ValueError(f"y has {len(y)} values for a table of {len(frame)} rows")
    if set(split) != {"train", "val", "test"}:
        raise ValueError(f"split needs exactly the keys train, val, test; got {sorted(split)}")
    frames = {s: frame.iloc[i].reset_index(drop=True) for s, i in split.items()}
    skewed = skewed_columns(frames["train"], numeric, skew_threshold)
    prep = TablePreprocessor(numeric, categorical, min_frequency=min_frequency, log1p=skewed)
    prep.fit(frames["train"])
    views = TableViews(split=split, frames=frames, y={s: y[i] for s, i in split.items()},
                       prep=prep, skewed=skewed, num={}, cat={}, flat={}, tree={})
    for s, f in frames.items():
        views.num[s], views.cat[s] = prep.numeric(f), prep.codes(f)
        views.flat[s] = np.hstack([views.num[s], prep.onehot(f)])
        views.tree[s] = views.tree_view(f)
    return views


def _regression_loss(model, batch, device):
    *inputs, target = (t.to(device) for t in batch)
    pred = model(*inputs)
    pred = pred[0] if isinstance(pred, tuple) else pred  # TabularTransformer: (pred, weights)
    return nn.functional.mse_loss(pred, target)


def fit_regressor(build: Callable[[], nn.Module], train: Sequence[torch.Tensor],
                  val: Sequence[torch.Tensor], *, seed: int, lr: float = 1e-3,
                  weight_decay: float = 1e-5, epochs: int = 100, patience: int | None = 15,
                  batch_size: int = 128, device="cpu", desc: str = "training",
                  show_progress: bool = True):
    """Seed, build, train with AdamW and MSE, early-stop on ``val``; return (model, history).

    ``train`` and ``val`` are tuples ``(*inputs, target)`` of tensors with one row per
    example; the model is called as ``model(*inputs)``. ``runtime.set_seed(seed)`` runs
    before ``build()``, and the training batches are shuffled by a generator seeded with
    ``seed``: the same seed gives the same model. The history is ``training.fit``'s.
    """
    for name, part in (("train", train), ("val", val)):
        if not isinstance(part, (tuple, list)) or len(part) < 2:
            raise ValueError(f"{name} must be a tuple (*inputs, target) of tensors, got "
                             f"{type(part).__name__}")
        if len({len(t) for t in part}) != 1:
            raise ValueError(f"every tensor of {name} needs the same number of rows, got "
                             f"{[len(t) for t in part]}")
    runtime.set_seed(seed)
    model = build().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    shuffled = DataLoader(TensorDataset(*train), batch_size=batch_size, shuffle=True,
                          generator=torch.Generator().manual_seed(seed))
    in_order = DataLoader(TensorDataset(*val), batch_size=batch_size)
    history = training.fit(model, shuffled, in_order, optimizer=optimizer, epochs=epochs,
                           patience=patience, batch_loss=_regression_loss, device=device,
                           desc=desc, show_progress=show_progress)
    return model, history


@torch.no_grad()
def predict_regressor(model: nn.Module, inputs: Sequence[torch.Tensor], device="cpu"
                      ) -> np.ndarray:
    """``model(*inputs)`` in eval mode, all rows in one batch, as a NumPy array ``[N]``."""
    model.eval()
    out = model(*(t.to(device) for t in inputs))
    out = out[0] if isinstance(out, tuple) else out
    return out.cpu().numpy()


# --------------------------------------------------------------------------- boosting
def _accepts_validation_set(model) -> bool:
    """True when ``model.fit`` takes ``X_val=, y_val=`` (scikit-learn 1.7 and newer)."""
    return "X_val" in inspect.signature(model.fit).parameters


def fit_with_validation(model, X, y, X_val, y_val):
    """``model.fit(X, y, X_val=X_val, y_val=y_val)``, also on a scikit-learn older than 1.7.

    ``model`` is a ``HistGradientBoostingRegressor`` with ``early_stopping=True``: it grows
    trees until the loss on ``(X_val, y_val)`` has not improved by more than ``tol`` for
    ``n_iter_no_change`` trees, and keeps them all (``n_iter_`` trees; its
    ``validation_score_[t]`` is minus half the mean squared error after ``t`` trees). Where
    ``fit`` takes ``X_val`` (scikit-learn 1.7+, the course's pinned versions) this is that
    call, nothing else. Before 1.7 (Colab has 1.6.1) it builds the same trees the documented
    way: grown ``n_iter_no_change`` at a time (``warm_start``), the validation loss after
    each tree read from ``staged_predict``, stopped by scikit-learn's own rule, and the trees
    grown past the stop dropped; ``n_iter_`` and ``validation_score_`` are then what 1.7
    gives, and the model's parameters are left as they were. Returns ``model``.
    """
    if _accepts_validation_set(model):
        return model.fit(X, y, X_val=X_val, y_val=y_val)
    return _fit_early_stopped(model, X, y, X_val, y_val)


def _should_stop(scores: list[float], patience: int, tol: float) -> bool:
    """scikit-learn's early-stopping rule (``BaseHistGradientBoosting._should_stop``): stop
    when none of the last ``patience`` scores beats the one before them by more than ``tol``."""
    if len(scores) < patience + 1:
        return False
    reference = scores[-(patience + 1)] + tol
    return not any(score > reference for score in scores[-patience:])


def _fit_early_stopped(model, X, y, X_val, y_val):
    params = model.get_params()
    if params["early_stopping"] is not True:
        raise ValueError("fit_with_validation needs early_stopping=True, got "
                         f"{params['early_stopping']!r}")
    if params["loss"] != "squared_error" or params["scoring"] != "loss":
        raise ValueError("before scikit-learn 1.7 fit_with_validation supports "
                         "loss='squared_error' with scoring='loss' only, got "
                         f"loss={params['loss']!r}, scoring={params['scoring']!r}")
    y_val = np.asarray(y_val, dtype=np.float64)
    patience, cap = params["n_iter_no_change"], params["max_iter"]

    def scores_from(first: int) -> list[float]:
        """The validation scores after tree ``first``, tree ``first + 1``, ..., the last."""
        return [-0.5 * float(np.mean((y_val - pred) ** 2))
                for t, pred in enumerate(model.staged_predict(X_val), 1) if t >= first]

    # the score of the model before any tree: its baseline, the mean of y
    baseline = float(np.mean(np.asarray(y, dtype=np.float64)))
    scores = [-0.5 * float(np.mean((y_val - baseline) ** 2))]
    try:
        grown = stopped = 0
        while not stopped and grown < cap:  # the first fit starts afresh, the others go on
            model.set_params(early_stopping=False, warm_start=grown > 0,
                             max_iter=min(cap, grown + patience)).fit(X, y)
            for score in scores_from(grown + 1):
                scores.append(score)
                if _should_stop(scores, patience, params["tol"]):
                    stopped = len(scores) - 1
                    break
            grown = model.n_iter_
        if stopped:  # the trees grown past the stop go, as 1.7 never grows them
            del model._predictors[stopped:]  # n_iter_ is len(_predictors) (1.0 to 1.6)
    finally:
        model.set_params(**{k: params[k] for k in ("early_stopping", "warm_start",
                                                    "max_iter")})
    model.validation_score_ = np.asarray(scores)
    return model
