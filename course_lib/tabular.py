"""Transformers for tables: preprocessing, a per-feature tokenizer, a [CLS] model, an MLP.

A table is not a sentence: its columns are heterogeneous (square feet, a year, a
neighbourhood) and unordered. So instead of one shared embedding for every token,

- each numeric column j gets its own weight and bias vectors: ``token_j = x_j * W_j + b_j``
  (all columns at once, by broadcasting ``[B, F, 1] * [F, d] + [F, d]``);
- each categorical column gets its own embedding table (one row per category);
- a learned feature-identity vector ``e_j`` is added to every token, and a learned [CLS]
  token is put in front; the prediction is read from the [CLS] output.

``TablePreprocessor`` is fitted on the training rows only and gives the three views of a
table that the models of the tabular chapter share: standardized numeric columns,
integer category codes (for embedding tables and trees) and one-hot columns (for linear
models and MLPs).

    prep = TablePreprocessor(numeric=[...], categorical=[...]).fit(train_df)
    x_num, x_cat = prep.numeric(df), prep.codes(df)          # [N, n_num], [N, n_cat]
    model = TabularTransformer(prep.n_numeric, prep.cardinalities, d_model=32)
    pred, weights = model(x_num, x_cat, need_weights=True)   # [N], list of [N, h, L, L]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from .blocks import EncoderBlock
from .training import count_parameters  # the one shared helper, re-exported here

__all__ = ["TablePreprocessor", "FeatureTokenizer", "TabularTransformer", "MLPRegressor",
           "count_parameters"]


# --------------------------------------------------------------------------- preprocessing
class TablePreprocessor:
    """Fit on the training rows only; then turn any rows into numbers the models can read.

    - numeric columns: missing values -> the training median; columns named in ``log1p``
      -> ``log(1 + x)`` (for heavy-tailed areas); then standardized with the training mean
      and standard deviation (a constant column is only centred).
    - categorical columns: every category seen at least ``min_frequency`` times in the
      training rows gets a code 1..k (sorted by name); code 0 means "rare or never seen in
      training". A missing value is its own category, ``"(missing)"``.
      ``codes(df)`` returns these codes, ``onehot(df)`` one 0/1 column per code 1..k (a rare
      or unseen category is then all zeros).
    """

    MISSING = "(missing)"

    def __init__(self, numeric: Sequence[str], categorical: Sequence[str],
                 min_frequency: int = 1, log1p: Sequence[str] = ()):
        self.numeric_columns = list(numeric)
        self.categorical_columns = list(categorical)
        if set(self.numeric_columns) & set(self.categorical_columns):
            both = sorted(set(self.numeric_columns) & set(self.categorical_columns))
            raise ValueError(f"columns cannot be both numeric and categorical: {both}")
        unknown = sorted(set(log1p) - set(self.numeric_columns))
        if unknown:
            raise ValueError(f"log1p names columns that are not numeric: {unknown}")
        if not isinstance(min_frequency, int) or min_frequency < 1:
            raise ValueError(f"min_frequency must be a positive int, got {min_frequency!r}")
        self.min_frequency = min_frequency
        self.log1p_columns = list(log1p)
        self.fitted = False

    # -- fitting
    def fit(self, df: pd.DataFrame) -> TablePreprocessor:
        self._check_columns(df)
        num = self._numeric_raw(df, fitting=True)
        self.mean_ = num.mean(axis=0)
        std = num.std(axis=0)
        self.std_ = np.where(std > 0, std, 1.0)
        self.categories_: dict[str, list[str]] = {}
        for col in self.categorical_columns:
            counts = self._as_str(df[col]).value_counts()
            self.categories_[col] = sorted(counts.index[counts >= self.min_frequency])
        self.fitted = True
        return self

    # -- the three views
    def numeric(self, df: pd.DataFrame) -> np.ndarray:
        """Standardized numeric columns, float32 ``[N, n_numeric]``."""
        self._check_fitted(df)
        return ((self._numeric_raw(df) - self.mean_) / self.std_).astype(np.float32)

    def codes(self, df: pd.DataFrame) -> np.ndarray:
        """Category codes, int64 ``[N, n_categorical]``; 0 = rare or unseen."""
        self._check_fitted(df)
        out = np.zeros((len(df), len(self.categorical_columns)), dtype=np.int64)
        for j, col in enumerate(self.categorical_columns):
            index = pd.Index(self.categories_[col])
            # get_indexer gives -1 to a value not in the list (rare or unseen): code 0
            out[:, j] = index.get_indexer(self._as_str(df[col])) + 1
        return out

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
    def _numeric_raw(self, df, fitting=False):
        num = df[self.numeric_columns].apply(pd.to_numeric, errors="raise").astype(float)
        if fitting:
            self.median_ = num.median(axis=0).fillna(0.0)
        num = num.fillna(self.median_)
        for col in self.log1p_columns:
            if fitting and (num[col] < 0).any():
                raise ValueError(f"log1p column {col!r} has negative values")
            num[col] = np.log1p(num[col].clip(lower=0))
        return num.to_numpy()

    def _as_str(self, s: pd.Series) -> pd.Series:
        return s.astype(object).where(s.notna(), self.MISSING).astype(str)

    def _check_columns(self, df):
        wanted = self.numeric_columns + self.categorical_columns
        missing = [c for c in wanted if c not in df.columns]
        if missing:
            raise KeyError(f"the table has no columns {missing}")

    def _check_fitted(self, df=None):
        if not self.fitted:
            raise RuntimeError("call fit(train_df) on the training rows first")
        if df is not None:
            self._check_columns(df)


# --------------------------------------------------------------------------- tokenizer
class FeatureTokenizer(nn.Module):
    """One d_model-dimensional token per column of a table.

    forward(x_num [B, n_numeric] float, x_cat [B, n_categorical] long or None) -> [B, F, d_model]
    with F = n_numeric + n_categorical, numeric tokens first.

    - numeric column j:      x_j * W_j + b_j            (``weight``, ``bias``: [n_numeric, d])
    - categorical column j:  row x_j of its own table  (one ``nn.Embedding`` holding all the
      tables one after the other; ``offsets`` says where each column's table starts)
    - every token:           + e_j, the feature-identity embedding ``feature_emb`` [1, F, d]

    For a numeric token b_j and e_j are both a fixed vector per column, so they add up to
    one: the identity embedding is what tells the attention *which* column a token is.
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

    The blocks are ``course_lib.blocks.EncoderBlock``, whose ``MultiHeadAttention`` hands
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
            EncoderBlock(d_model, num_heads, d_ff or 2 * d_model, dropout=dropout, norm_first=True,
                         activation=activation)
            for _ in range(num_layers)
        )
        for block in self.blocks:  # dropout on the attention weights: separate (slow on CPU)
            block.attn.dropout = attention_dropout
        if not first_norm and num_layers:
            # As in the FT-Transformer: no LayerNorm before the first attention. LN(x_j W_j + c_j)
            # would squash a numeric token to the same direction for every large |x_j|.
            self.blocks[0].attn_sub.norm = nn.Identity()
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 1)

    def forward(self, x_num, x_cat=None, need_weights: bool = False):
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
        return self.net(x).squeeze(-1)
