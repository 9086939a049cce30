"""Forecasting from windows of an hourly series: features, chronological splits, baselines.

    feats = weather_features(data.load_beijing())           # one row per hour, all numeric
    splits = year_splits(df["datetime"], {"train": (2010, 2012), "val": (2013, 2013),
                                          "test": (2014, 2014)})
    scaler = Standardizer().fit(feats.iloc[splits["train"]])  # statistics of the training years
    values = scaler.transform(feats)                         # [T, F] float32
    X, y, t = make_windows(values, values[:, temp], splits["val"], length=72)
    # X [N, 72, F] = hours t-72 .. t-1, y [N] = the value at hour t (horizon 1)

No leakage across a split: a window and its target lie entirely inside one split's hours,
so no training window ever sees (or predicts) an hour of the validation or test years.

The neural forecasters of chapter 5 live here too, with their one training recipe
(`build_forecaster`, `train_forecaster`), so that the chapter and its search script
(`scripts/train_05_time_series.py`) train exactly the same models.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from sklearn.preprocessing import StandardScaler
from torch import nn
from torch.utils.data import DataLoader, RandomSampler

from . import blocks, positional, runtime, training
from .checks import positive_int
from .schedules import cosine_capped_by_warmup, warmup_constant

__all__ = [
    "WIND_DIRECTIONS",
    "weather_features",
    "year_splits",
    "Standardizer",
    "window_starts",
    "make_windows",
    "persistence",
    "seasonal_naive",
    "mae",
    "rmse",
    "predict",
    "LearnedPETransformer",
    "ALiBiTransformer",
    "LSTMForecaster",
    "FORECASTERS",
    "build_forecaster",
    "warmup_cosine",
    "warmup_constant",
    "train_forecaster",
]

# The names this module gave its schedules before course_lib.schedules held them all; its
# warmup_cosine is the one whose cosine starts at step 0 (schedules.warmup_cosine's waits).
warmup_cosine = cosine_capped_by_warmup

WIND_DIRECTIONS = ("NE", "NW", "SE", "cv")


# --------------------------------------------------------------------------- features
def weather_features(df: pd.DataFrame, hour_of_day: bool = True) -> pd.DataFrame:
    """The Beijing weather as numeric inputs, one row per hour (``pm2.5`` is left out).

    columns: DEWP, TEMP, PRES (as measured), log_Iws = log(1 + Iws) (the cumulated wind
    speed has a long right tail), Is, Ir (cumulated hours of snow / rain), wind_NE, wind_NW,
    wind_SE, wind_cv (one-hot ``cbwd``: a direction has no order, so no single number), and
    with ``hour_of_day`` hour_sin, hour_cos (the clock hour on a circle: 23 h is next to 0 h).
    """
    required = {"DEWP", "TEMP", "PRES", "cbwd", "Iws", "Is", "Ir", "hour"}
    missing = sorted(required - set(df.columns))
    if missing:
        raise ValueError(f"weather_features needs the columns {sorted(required)}; "
                         f"missing {missing}")
    bad = sorted(set(df["cbwd"].astype(str)) - set(WIND_DIRECTIONS))
    if bad:
        raise ValueError(f"unknown wind directions in cbwd: {bad}; "
                         f"expected {list(WIND_DIRECTIONS)}")
    wind = pd.Categorical(df["cbwd"].astype(str), categories=list(WIND_DIRECTIONS))
    out = pd.DataFrame(index=df.index)
    out["DEWP"] = df["DEWP"].astype("float32")
    out["TEMP"] = df["TEMP"].astype("float32")
    out["PRES"] = df["PRES"].astype("float32")
    out["log_Iws"] = np.log1p(df["Iws"].astype("float64")).astype("float32")
    out["Is"] = df["Is"].astype("float32")
    out["Ir"] = df["Ir"].astype("float32")
    for name in WIND_DIRECTIONS:
        out[f"wind_{name}"] = (wind == name).astype("float32")
    if hour_of_day:
        angle = 2 * np.pi * df["hour"].to_numpy() / 24
        out["hour_sin"] = np.sin(angle).astype("float32")
        out["hour_cos"] = np.cos(angle).astype("float32")
    if out.isna().any().any():
        raise ValueError(f"missing values in {list(out.columns[out.isna().any()])}")
    return out


# --------------------------------------------------------------------------- splits
def year_splits(times, splits: dict[str, tuple[int, int]]) -> dict[str, slice]:
    """Row slices of consecutive, non-overlapping year ranges, in chronological order.

    ``times`` must be sorted; ``splits`` maps a name to (first_year, last_year), inclusive.
    """
    times = pd.DatetimeIndex(pd.to_datetime(times))
    if not times.is_monotonic_increasing:
        raise ValueError("times must be sorted in increasing order")
    years = times.year.to_numpy()
    out, previous_end = {}, -1
    for name, bounds in splits.items():
        if len(bounds) != 2 or bounds[0] > bounds[1]:
            raise ValueError(f"split {name!r} must be (first_year, last_year), got {bounds!r}")
        first, last = bounds
        rows = np.flatnonzero((years >= first) & (years <= last))
        if rows.size == 0:
            raise ValueError(f"split {name!r} ({first}-{last}) holds no rows")
        if rows[0] <= previous_end:
            raise ValueError(f"split {name!r} overlaps or precedes the split before it: "
                             "list the splits in chronological order")
        out[name] = slice(int(rows[0]), int(rows[-1]) + 1)
        previous_end = rows[-1]
    return out


# --------------------------------------------------------------------------- scaling
class Standardizer:
    """(x - mean) / std per column, with the statistics of the rows given to ``fit`` only.

    A thin wrapper around scikit-learn's ``StandardScaler`` (population std, ddof=0; a
    constant column is centred and divided by 1) that returns float32, remembers the column
    names of a DataFrame, and turns one scaled column back into its units (``inverse``).
    """

    def fit(self, frame) -> Standardizer:
        arr = np.asarray(frame, dtype=np.float64)
        if arr.ndim != 2 or len(arr) < 2:
            raise ValueError(f"fit needs a [rows, columns] table with 2+ rows, "
                             f"got shape {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError("fit got missing or infinite values: fill or drop them first")
        self.scaler_ = StandardScaler().fit(arr)  # numpy in, so sklearn sees no names
        self.columns_ = list(frame.columns) if isinstance(frame, pd.DataFrame) else None
        return self

    @property
    def mean_(self) -> np.ndarray:
        """Column means of the fit rows, [F]."""
        return self._fitted().mean_

    @property
    def std_(self) -> np.ndarray:
        """Column standard deviations of the fit rows (ddof=0; 1 for a constant column), [F]."""
        return self._fitted().scale_

    def transform(self, frame) -> np.ndarray:
        """[..., F] -> the same shape, scaled, as float32."""
        scaler = self._fitted("transform")
        arr = np.asarray(frame, dtype=np.float64)
        self._check_columns(frame, arr)
        flat = arr.reshape(-1, arr.shape[-1])  # sklearn wants [rows, F]
        return scaler.transform(flat).reshape(arr.shape).astype(np.float32)

    def inverse(self, values, column: int | str):
        """Scaled values of one column back to its original units."""
        scaler = self._fitted("inverse")
        if isinstance(column, str):
            if self.columns_ is None or column not in self.columns_:
                raise KeyError(f"no column {column!r}; fitted columns: {self.columns_}")
            column = self.columns_.index(column)
        return values * scaler.scale_[column] + scaler.mean_[column]

    # guard rails: clear errors for misuse
    def _fitted(self, action: str = "read the statistics"):
        if not hasattr(self, "scaler_"):
            raise RuntimeError(f"call fit() on the training rows before you {action}")
        return self.scaler_

    def _check_columns(self, frame, arr):
        expected = self.scaler_.n_features_in_
        if arr.ndim == 0 or arr.shape[-1] != expected:
            raise ValueError(f"expected {expected} columns (as in fit), got "
                             f"{arr.shape[-1] if arr.ndim else 0}")
        if isinstance(frame, pd.DataFrame) and self.columns_ is not None \
                and list(frame.columns) != self.columns_:
            raise ValueError(f"columns differ from those given to fit: got "
                             f"{list(frame.columns)}, fitted on {self.columns_}")


# --------------------------------------------------------------------------- windows
def window_starts(split: slice, length: int, horizon: int = 1, stride: int = 1) -> np.ndarray:
    """First rows s of the windows [s, s + length) whose target row s + length - 1 + horizon
    lies inside ``split`` together with the whole window. ``stride`` keeps every stride-th."""
    for name, val in (("length", length), ("horizon", horizon), ("stride", stride)):
        positive_int(name, val)
    last_start = split.stop - length - horizon  # target row = start + length - 1 + horizon
    if last_start < split.start:
        raise ValueError(f"the split has {split.stop - split.start} rows, fewer than "
                         f"length + horizon = {length + horizon}")
    return np.arange(split.start, last_start + 1, stride)


def make_windows(values, target, split: slice, length: int, horizon: int = 1, stride: int = 1,
                 starts=None):
    """Inputs, targets and target rows of every window in ``split``.

    values [T, F], target [T] -> X [N, length, F] (rows s .. s+length-1),
    y [N] (target row s + length - 1 + horizon), rows [N] (those target rows), as float32
    tensors and an int64 numpy array. ``starts`` overrides the windows chosen by
    ``window_starts`` (e.g. to score two lengths on the same targets).
    """
    values = torch.tensor(np.asarray(values, dtype=np.float32))
    target = torch.tensor(np.asarray(target, dtype=np.float32))
    if values.dim() != 2 or target.dim() != 1 or len(values) != len(target):
        raise ValueError(f"values must be [T, F] and target [T], got {tuple(values.shape)} and "
                         f"{tuple(target.shape)}")
    if starts is None:
        starts = window_starts(split, length, horizon, stride)
    starts = np.asarray(starts, dtype=np.int64)
    rows = starts + length - 1 + horizon
    if starts.min() < split.start or rows.max() >= split.stop:
        raise ValueError("a window or its target falls outside the split")
    windows = values.unfold(0, length, 1)  # [T - length + 1, F, length], a view: no copy
    X = windows[torch.as_tensor(starts)].transpose(1, 2).contiguous()  # [N, length, F]
    return X, target[torch.as_tensor(rows)].clone(), rows


# --------------------------------------------------------------------------- baselines
def persistence(X, column: int, horizon: int = 1):
    """Tomorrow looks like now: the last value of ``column`` in each window. [N, L, F] -> [N]"""
    return X[:, -1, column]


def seasonal_naive(X, column: int, horizon: int = 1, period: int = 24):
    """The value one period (24 h) before the target hour. [N, L, F] -> [N]"""
    offset = X.shape[1] - 1 + horizon - period  # position of (target row - period) in the window
    if not 0 <= offset < X.shape[1]:
        raise ValueError(f"period {period} with horizon {horizon} needs a window of at least "
                         f"{period - horizon + 1} rows, got {X.shape[1]}")
    return X[:, offset, column]


def mae(pred, true) -> float:
    """Mean absolute error."""
    pred, true = np.asarray(pred, dtype=np.float64), np.asarray(true, dtype=np.float64)
    if pred.shape != true.shape:
        raise ValueError(f"shapes differ: {pred.shape} and {true.shape}")
    return float(np.mean(np.abs(pred - true)))


def rmse(pred, true) -> float:
    """Root mean squared error."""
    pred, true = np.asarray(pred, dtype=np.float64), np.asarray(true, dtype=np.float64)
    if pred.shape != true.shape:
        raise ValueError(f"shapes differ: {pred.shape} and {true.shape}")
    return float(math.sqrt(np.mean((pred - true) ** 2)))


@torch.no_grad()
@torch.no_grad()
def predict(model, X, batch_size: int = 1024, device="cpu") -> np.ndarray:
    """Model outputs for X [N, L, F] in eval mode, batch by batch, as a numpy array [N].

    A model that returns (prediction, attention weights) has its first element used. No
    autograd graph is built (``torch.no_grad``): inference only, faster, less memory.
    """
    model.eval()
    outs = []
    for i in range(0, len(X), batch_size):
        out = model(X[i : i + batch_size].to(device))
        if isinstance(out, tuple):
            out = out[0]
        outs.append(out.reshape(-1).float().cpu())
    return torch.cat(outs).numpy()


# ------------------------------------------------------------------ neural forecasters
# All three read a window [B, L, F] and forecast the target of the hour after it as the
# last hour's value plus a learned change: persistence is their starting point.
class LearnedPETransformer(nn.Module):
    """Inputs -> linear -> + learned position -> nn.TransformerEncoder -> last hour."""

    def __init__(self, n_features, temp_index, d_model, num_heads, num_layers, d_ff,
                 dropout, max_len=72):
        super().__init__()
        self.temp_index = temp_index
        self.proj = nn.Linear(n_features, d_model)
        self.pos = positional.LearnedPositionalEmbedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers,
                                             enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 1)

    def forward(self, x):  # x [B, L, F]
        runtime.check_device(self, type(self).__name__, x=x)
        z = self.encoder(self.pos(self.proj(x)))  # [B, L, d_model]
        change = self.head(self.norm(z[:, -1])).squeeze(-1)  # [B]
        return x[:, -1, self.temp_index] + change  # hour L's temperature + change

    @torch.no_grad()
    def attention_weights(self, x):
        """Per-layer attention weights [B, h, L, L], recomputed the way each layer
        computes them (nn.TransformerEncoderLayer does not return them)."""
        z, weights = self.pos(self.proj(x)), []
        for layer in self.encoder.layers:
            h = layer.norm1(z) if layer.norm_first else z
            _, w = layer.self_attn(h, h, h, need_weights=True,
                                   average_attn_weights=False)
            weights.append(w)
            z = layer(z)
        return weights


class ALiBiTransformer(nn.Module):
    """Inputs -> linear -> Pre-Norm blocks with an ALiBi bias (no positions) -> last hour."""

    def __init__(self, n_features, temp_index, d_model, num_heads, num_layers, d_ff,
                 dropout):
        super().__init__()
        self.temp_index, self.num_heads = temp_index, num_heads
        self.proj = nn.Linear(n_features, d_model)
        self.blocks = nn.ModuleList(
            blocks.Block(d_model, num_heads, d_ff, dropout)
            for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 1)

    def forward(self, x, need_weights=False):  # x [B, L, F], any L
        runtime.check_device(self, type(self).__name__, x=x)
        bias = positional.alibi_bias(self.num_heads, x.shape[1])  # [h, L, L]
        z, weights = self.proj(x), []  # z [B, L, d_model]: no position added
        for block in self.blocks:  # w: [B, h, L, L], or None
            z, w = block(z, bias=bias.to(x.device), need_weights=need_weights)
            weights.append(w)
        change = self.head(self.norm(z[:, -1])).squeeze(-1)  # [B]
        pred = x[:, -1, self.temp_index] + change
        return (pred, weights) if need_weights else pred

    @torch.no_grad()
    def attention_weights(self, x):
        return self(x, need_weights=True)[1]


class LSTMForecaster(nn.Module):
    """Inputs -> stacked LSTM layers, read in time order -> last hidden state."""

    def __init__(self, n_features, temp_index, hidden, num_layers=1, dropout=0.0):
        super().__init__()
        self.temp_index = temp_index
        self.lstm = nn.LSTM(n_features, hidden, num_layers, batch_first=True,
                            dropout=dropout if num_layers > 1 else 0.0)  # between layers
        self.drop = nn.Dropout(dropout)  # on the last hidden state (one layer too)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):  # x [B, L, F]
        runtime.check_device(self, type(self).__name__, x=x)
        out, _ = self.lstm(x)  # [B, L, hidden]
        change = self.head(self.drop(out[:, -1])).squeeze(-1)  # [B]
        return x[:, -1, self.temp_index] + change


FORECASTERS = ("Transformer (learned PE)", "Transformer (ALiBi)", "LSTM")


def build_forecaster(name: str, config: dict, n_features: int, temp_index: int,
                     num_heads: int = 4, window: int = 72) -> nn.Module:
    """A fresh model of family ``name`` (one of ``FORECASTERS``) with ``config``'s size
    (d_model, or the LSTM's hidden units), layers and dropout; the Transformers' feed-forward
    width is 2 x d_model."""
    if name not in FORECASTERS:
        raise ValueError(f"unknown forecaster {name!r}; choose one of {list(FORECASTERS)}")
    missing = sorted({"size", "layers", "dropout"} - set(config))
    if missing:
        raise ValueError(f"config needs size, layers and dropout; missing {missing}")
    size, layers = int(config["size"]), int(config["layers"])
    dropout = float(config["dropout"])
    if name == "LSTM":
        return LSTMForecaster(n_features, temp_index, size, layers, dropout)
    kwargs = dict(d_model=size, num_heads=num_heads, num_layers=layers, d_ff=2 * size,
                  dropout=dropout)
    if name == "Transformer (ALiBi)":
        return ALiBiTransformer(n_features, temp_index, **kwargs)
    return LearnedPETransformer(n_features, temp_index, max_len=window, **kwargs)


def train_forecaster(name: str, config: dict, train_set, val_loader, temp_index: int,
                     seed: int, epochs: int, patience: int, windows_per_epoch: int,
                     batch_size: int = 128, weight_decay: float = 1e-4, num_heads: int = 4,
                     device="cpu", desc: str = "training", schedule: str = "cosine"):
    """The chapter's one training recipe, for a fresh model of family ``name``.

    ``config`` holds lr, size, layers and dropout; ``train_set`` is a ``TensorDataset`` of
    windows [N, L, F] and targets [N]. The seed fixes the initial weights and the windows
    drawn: AdamW, one warm-up epoch, then (``schedule``) a cosine decay that ends at
    ``epochs`` or a constant rate; ``windows_per_epoch`` training windows drawn without
    replacement each epoch, early stopping on the validation loss with ``patience``, the
    best epoch's weights kept. Returns (model, history), the history as ``training.fit``
    gives it.
    """
    if "lr" not in config:
        raise ValueError("config needs a learning rate, lr, besides size, layers and dropout")
    if schedule not in ("cosine", "constant"):
        raise ValueError(f"schedule must be 'cosine' or 'constant', got {schedule!r}")
    X = train_set.tensors[0]  # [N, L, F]
    runtime.set_seed(seed)
    model = build_forecaster(name, config, X.shape[-1], temp_index, num_heads=num_heads,
                             window=X.shape[1]).to(device)
    sampler = RandomSampler(train_set, num_samples=windows_per_epoch,
                            generator=torch.Generator().manual_seed(seed))
    loader = DataLoader(train_set, batch_size=batch_size, sampler=sampler)
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(config["lr"]),
                                  weight_decay=weight_decay)
    factor = (cosine_capped_by_warmup(len(loader), epochs * len(loader)) if schedule == "cosine"
              else warmup_constant(len(loader)))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    history = training.fit(model, loader, val_loader, nn.MSELoss(), optimizer, epochs=epochs,
                           device=device, scheduler=scheduler, patience=patience, desc=desc)
    return model, history
