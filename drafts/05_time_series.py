# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 5. Forecasting Beijing's temperature: Transformers against honest baselines
#
# Chapter 1 used 72 hours of Beijing weather to explain attention. Here we use the same data
# for the job it suggests: from the past 72 hours, forecast the temperature of hour 73. A
# forecasting model only means something next to the simple forecasts it has to beat, so
# every model in this chapter is scored on the same unseen year (2014) against four
# baselines: "the next hour is like this hour" (persistence), "like the same hour yesterday"
# (seasonal naive), a ridge regression on every lagged value, and an LSTM trained with the
# same inputs and the same budget as the Transformers. Then we open the Transformers up: what
# do their heads look at, and can a model trained on 72-hour windows read 144 hours?
#
# **After this chapter you will be able to**
#
# - turn an hourly series into supervised windows with a chronological split that does not
#   leak the future into training, and scale it with training statistics only;
# - build and tune (on validation data only) the baselines a forecasting model must beat:
#   persistence, seasonal naive, ridge regression on lags, an LSTM;
# - forecast with PyTorch's `nn.TransformerEncoder` and learned positions, and with the
#   course's own attention and ALiBi, report mean ± std over seeds, and say which model wins;
# - read per-head attention by lag, and tell a pattern from noise;
# - run an ALiBi model zero-shot on windows twice as long as it was trained on, and explain
#   why a learned positional embedding cannot;
# - measure training and inference speed on your own hardware instead of trusting a claim.

# %%
# (Colab set-up cell: replaced by tools/colab_cell.py)

# %% tags=["parameters"]
import os

PROFILE = os.environ.get("COURSE_PROFILE", "full")  # "full" (the book) or "smoke" (the tests)
SEED = 0

# %%
# Every size in this chapter follows from the profile, here and nowhere else. The models have
# the same size in both profiles; the smoke profile only trains on less, for fewer epochs,
# and scores a sample of the hours.
SIZES = {
    "full": dict(windows_per_epoch=8744, epochs=20, patience=5, seeds=[0, 1, 2],
                 eval_stride=1, ridge_alphas=[0.01, 0.1, 1, 3, 10, 30, 100, 1000],
                 ridge_train_stride=1, timing_windows=2000),
    "smoke": dict(windows_per_epoch=256, epochs=2, patience=1, seeds=[0, 1],
                  eval_stride=16, ridge_alphas=[1, 100], ridge_train_stride=16,
                  timing_windows=200),
}[PROFILE]
MODEL = dict(d_model=64, num_heads=4, num_layers=1, d_ff=128, dropout=0.0)  # both Transformers
LSTM_HIDDEN = 64
TRAIN = dict(batch_size=128, lr=2e-3, weight_decay=1e-4)
WINDOW = 72  # hours of history; the target is the temperature one hour later
SIZES

# %%
import inspect
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from IPython.display import Code, display
from sklearn.linear_model import Ridge
from torch import nn
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

from course_lib import blocks, data, positional, results, runtime, training, viz
from course_lib import timeseries as ts

T0 = time.perf_counter()
device = runtime.setup(seed=SEED)
sns.set_theme(style="whitegrid", context="notebook")

# %% [markdown]
# ## 5.1 The data
#
# The UCI "Beijing PM2.5" file {cite}`liang2015pm25` holds one row per hour from 2010-01-01
# to 2014-12-31: the PM2.5 reading of the US embassy and the weather at Beijing airport. The
# series has no gaps and the weather columns have no missing values (only PM2.5 does).

# %%
weather = data.load_beijing()
print(f"{len(weather):,} hours from {weather.datetime.iloc[0]} to {weather.datetime.iloc[-1]}")
weather.head(3)

# %% [markdown]
# Three weeks of March 2014 show the two things any forecast must get right: a strong daily
# cycle (cold nights, warm afternoons) and weather that shifts the whole curve for days (a
# cold front, a warm spell). Dew point and pressure move with those shifts.

# %%
weeks = weather[(weather.datetime >= "2014-03-01") & (weather.datetime < "2014-03-22")]
fig, axes = plt.subplots(3, 1, figsize=(11, 6), sharex=True)
for ax, col, unit, color in zip(axes, ["TEMP", "DEWP", "PRES"], ["°C", "°C", "hPa"],
                                ["tab:red", "tab:blue", "tab:green"]):
    ax.plot(weeks.datetime, weeks[col], color=color, lw=1)
    ax.set_ylabel(f"{col} ({unit})")
axes[0].set_title("Three weeks of hourly weather at Beijing airport (March 2014)")
axes[-1].set_xlabel("date")
fig.tight_layout()
plt.show()

# %%
season = weather.datetime.dt.month.map({12: "winter", 1: "winter", 2: "winter", 3: "spring",
                                        4: "spring", 5: "spring", 6: "summer", 7: "summer",
                                        8: "summer", 9: "autumn", 10: "autumn", 11: "autumn"})
daily = weather.groupby([season.rename("season"), "hour"]).TEMP.mean().unstack(0)
by_day = weather.set_index("datetime").TEMP.resample("D").mean()

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4), gridspec_kw={"width_ratios": [1, 2]})
for name in ["winter", "spring", "summer", "autumn"]:
    ax1.plot(daily.index, daily[name], marker="o", ms=3, label=name)
ax1.set_xlabel("hour of day")
ax1.set_ylabel("mean TEMP (°C)")
ax1.set_title("The daily cycle, by season (2010-2014)")
ax1.set_xticks(range(0, 24, 3))
ax1.legend()
ax2.plot(by_day.index, by_day, lw=0.7, color="tab:red")
ax2.plot(by_day.index, by_day.rolling(30, center=True).mean(), color="black", lw=1.5,
         label="30-day mean")
for (lo, hi), name, color in [(("2010", "2013"), "train", "tab:blue"),
                              (("2013", "2014"), "validation", "tab:orange"),
                              (("2014", "2015"), "test", "tab:green")]:
    ax2.axvspan(pd.Timestamp(lo), pd.Timestamp(hi), color=color, alpha=0.08)
    ax2.text(pd.Timestamp(lo) + pd.Timedelta(days=150), -14, name, color=color)
ax2.set_ylabel("daily mean TEMP (°C)")
ax2.set_xlabel("date")
ax2.set_title("The yearly cycle, and the chronological split")
ax2.legend(loc="upper left")
fig.tight_layout()
plt.show()

# %%
amplitude = daily.max() - daily.min()
print("daily cycle (warmest minus coldest hour, °C):",
      ", ".join(f"{k} {v:.1f}" for k, v in amplitude.items()))
print(f"yearly cycle: daily means from {by_day.min():.1f} °C to {by_day.max():.1f} °C")

# %% [markdown]
# ## 5.2 Inputs, split and windows
#
# **Inputs.** Each hour becomes twelve numbers, built by `course_lib.timeseries.weather_features`:
#
# - `DEWP`, `TEMP`, `PRES` as measured;
# - `log_Iws` $= \log(1 + \mathrm{Iws})$: `Iws` is a running total of wind speed that resets
#   when the wind turns, with a long right tail, so we compress it;
# - `Is`, `Ir`: running counts of hours of snow and of rain;
# - `cbwd` one-hot (`wind_NE`, `wind_NW`, `wind_SE`, `wind_cv`): a direction has no order,
#   so coding it as 0..3 would invent one;
# - `hour_sin`, `hour_cos`: the clock hour on a circle (23 h sits next to 0 h). The clock is
#   known in advance, so this leaks nothing, and it tells every model where in the daily
#   cycle an hour lies.
#
# PM2.5 is left out: it is missing for 4.7% of the hours and is a consequence of the weather
# more than a cause of tomorrow's temperature (exercise 1 adds it back).
#
# **Split.** Train on 2010-2012, choose everything (ridge's alpha, the epoch to stop at,
# model sizes) on 2013, and touch 2014 only to report. The scaler's means and standard
# deviations come from the training years only.
#
# **Windows.** A window is 72 consecutive hours; its target is the temperature of the hour
# after it. Every window and its target lie inside one split: no training window ever sees
# or predicts an hour of 2013 or 2014.

# %%
display(Code(inspect.getsource(ts.make_windows), language="python"))

# %%
# NBVAL_CHECK_OUTPUT
features = ts.weather_features(weather)
FEATURES = list(features.columns)
TEMP = FEATURES.index("TEMP")
splits = ts.year_splits(weather.datetime, {"train": (2010, 2012), "val": (2013, 2013),
                                            "test": (2014, 2014)})
scaler = ts.Standardizer().fit(features.iloc[splits["train"]])  # training years only
values = scaler.transform(features)  # [T, 12], float32
temp_scaled, temp_c = values[:, TEMP], features["TEMP"].to_numpy()

windows = {}
for name, split in splits.items():
    X, y, rows = ts.make_windows(values, temp_scaled, split, WINDOW)
    windows[name] = dict(X=X, y=y, rows=rows)
    t = weather.datetime.iloc
    print(f"{name:5s}: hours {t[split.start]} .. {t[split.stop - 1]} | X {tuple(X.shape)}, "
          f"y {tuple(y.shape)} | first target {t[int(rows[0])]}")
print("features:", FEATURES)

# %% [markdown]
# One window, drawn: the 72 hours of temperature the models see, the hour they must
# forecast, and what the two naive forecasts would say. Below it, all twelve inputs of the
# same window after scaling: this $72 \times 12$ matrix is what a model receives.

# %%
example_time = pd.Timestamp("2014-03-10 15:00")  # the target hour
example = int(np.flatnonzero(weather.datetime.iloc[windows["test"]["rows"]] == example_time)[0])
ex_rows = np.arange(windows["test"]["rows"][example] - WINDOW, windows["test"]["rows"][example])
ex_times = weather.datetime.iloc[ex_rows]

fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 7), gridspec_kw={"height_ratios": [1, 1.2]})
ax1.plot(ex_times, temp_c[ex_rows], marker=".", color="tab:red", label="input: TEMP, hours 1-72")
ax1.scatter([example_time], [temp_c[windows["test"]["rows"][example]]], s=150, marker="*",
            color="black", zorder=3, label="target: TEMP at hour 73")
ax1.scatter([ex_times.iloc[-1]], [temp_c[ex_rows[-1]]], s=80, facecolor="none",
            edgecolor="tab:blue", lw=2, zorder=3, label="persistence uses hour 72")
ax1.scatter([ex_times.iloc[-24]], [temp_c[ex_rows[-24]]], s=80, facecolor="none",
            edgecolor="tab:green", lw=2, zorder=3, label="seasonal naive uses hour 49")
ax1.set_ylabel("TEMP (°C)")
ax1.set_title(f"One window: 72 hours in, the temperature at {example_time} out")
ax1.legend(loc="lower left", fontsize=9)
sns.heatmap(windows["test"]["X"][example].numpy().T, ax=ax2, cmap="RdBu_r", center=0,
            yticklabels=FEATURES, xticklabels=12, cbar_kws={"label": "scaled value"})
ax2.set_xlabel("position in the window (0 = hour 1, 71 = hour 72)")
ax2.set_title("The same window as the model sees it: 72 positions x 12 scaled inputs")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 5.3 Baselines: persistence, seasonal naive, ridge
#
# Persistence says the temperature of hour 73 is that of hour 72; seasonal naive says it is
# that of the same hour yesterday (hour 49 of the window). Neither has a parameter.
#
# Ridge regression gets all $72 \times 12 = 864$ scaled inputs of a window as one flat
# vector and fits a linear forecast with an L2 penalty $\alpha$. We fit it on the training
# windows for each $\alpha$ on a grid and keep the $\alpha$ with the lowest validation MAE.
# All errors are in °C on the test year. (In the smoke profile every model is scored on
# every 16th hour only.)

# %%
def subsample(split, stride):
    w = windows[split]
    return {k: v[::stride] for k, v in w.items()}


val = subsample("val", SIZES["eval_stride"])
test = subsample("test", SIZES["eval_stride"])
y_val_c = scaler.inverse(val["y"].numpy(), TEMP)  # °C
y_test_c = scaler.inverse(test["y"].numpy(), TEMP)


def to_celsius(pred_scaled):
    return scaler.inverse(np.asarray(pred_scaled), TEMP)


preds = {}  # method -> list of test predictions in °C (one per seed for neural models)
preds["persistence"] = [to_celsius(ts.persistence(test["X"], TEMP).numpy())]
preds["seasonal naive"] = [to_celsius(ts.seasonal_naive(test["X"], TEMP).numpy())]

ridge_train = subsample("train", SIZES["ridge_train_stride"])


def flat(X):
    return X.reshape(len(X), -1).numpy()  # [N, 72 * 12]


ridge_rows = []
for alpha in runtime.progress(SIZES["ridge_alphas"], desc="ridge alpha"):
    ridge = Ridge(alpha=alpha, solver="cholesky").fit(flat(ridge_train["X"]), ridge_train["y"])
    ridge_rows.append({"alpha": alpha,
                       "val_mae": ts.mae(to_celsius(ridge.predict(flat(val["X"]))), y_val_c)})
ridge_search = pd.DataFrame(ridge_rows)
best_alpha = float(ridge_search.loc[ridge_search.val_mae.idxmin(), "alpha"])
ridge = Ridge(alpha=best_alpha, solver="cholesky").fit(flat(ridge_train["X"]), ridge_train["y"])
preds["ridge"] = [to_celsius(ridge.predict(flat(test["X"])))]
val_mae = {"ridge": [ridge_search.val_mae.min()],
           "persistence": [ts.mae(to_celsius(ts.persistence(val["X"], TEMP).numpy()), y_val_c)],
           "seasonal naive": [ts.mae(to_celsius(ts.seasonal_naive(val["X"], TEMP).numpy()),
                                     y_val_c)]}

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(ridge_search.alpha, ridge_search.val_mae, marker="o")
ax.axvline(best_alpha, color="gray", ls=":")
ax.set_xscale("log")
ax.set_xlabel("ridge penalty alpha")
ax.set_ylabel("validation MAE (°C)")
ax.set_title("Choosing ridge's alpha on 2013")
plt.tight_layout()
plt.show()
for name in ["persistence", "seasonal naive", "ridge"]:
    print(f"{name:15s} test MAE {ts.mae(preds[name][0], y_test_c):.3f} °C, "
          f"RMSE {ts.rmse(preds[name][0], y_test_c):.3f} °C")
print(f"ridge: alpha = {best_alpha:g} chosen on validation")

# %% [markdown]
# Persistence is already good: the temperature rarely moves more than a degree or two in an
# hour. The same hour yesterday is much worse, because the weather changes from day to day.
# Ridge combines both and everything else in the window, and is clearly better than either.
# It is the bar a neural model has to clear.
#
# ## 5.4 Three neural forecasters, one training recipe
#
# All three read a window `[B, 72, 12]` and forecast the scaled temperature of hour 73 as
# **the temperature of hour 72 plus a learned change**: the network only has to learn how the
# temperature will move, not where it is (persistence is its starting point). They differ
# only in how they read the 72 hours.
#
# 1. **Transformer, learned positions** (the seed's model): a linear map of the 12 inputs to
#    $d_{model} = 64$, plus a learned vector per position
#    (`course_lib.positional.LearnedPositionalEmbedding`), then PyTorch's
#    `nn.TransformerEncoder`; the output at the last position (hour 72) summarises the window
#    and a linear head turns it into the forecast.
# 2. **Transformer, ALiBi**: the same, but with no positional vector at all. Instead each head
#    $i$ subtracts $m_i \cdot |i - j|$ from its attention scores {cite}`press2022train`, with
#    slopes $m = 2^{-2}, 2^{-4}, 2^{-6}, 2^{-8}$ for the four heads: head 1 is pushed to look
#    at the last few hours, head 4 can look across the whole window. It is built from
#    `course_lib.blocks.EncoderBlock`, so the attention weights can be read out.
# 3. **LSTM**: one recurrent layer reads the 72 hours in order; its last hidden state feeds
#    the same kind of head.
#
# Both Transformers use one Pre-Norm layer (LayerNorm before attention and before the
# feed-forward network), 4 heads, a feed-forward width of 128 and no dropout. The sizes were
# chosen on the 2013 validation year while writing this chapter, with one rule for every
# family: try a few sizes with seed 0, keep the best validation MAE, and among sizes within
# 0.002 °C of it keep the cheapest. For the Transformers we tried $d_{model}$ 32 and 64, one
# and two layers, feed-forward width 2x and 4x $d_{model}$, dropout 0 and 0.1, learning rates
# 1e-3 and 2e-3 (64 wide, one layer, no dropout, 2e-3 won; dropout hurt both Transformers).
# For the LSTM we tried 32, 64 and 128 hidden units: 64 and 128 tied on validation, so the
# cheaper 64 stays. All three use the same training recipe below. The test year played no
# part in any choice.

# %%
class LearnedPETransformer(nn.Module):
    """Hourly inputs -> linear -> + learned position -> nn.TransformerEncoder -> last hour."""

    def __init__(self, n_features, temp_index, d_model, num_heads, num_layers, d_ff, dropout,
                 max_len=WINDOW):
        super().__init__()
        self.temp_index = temp_index
        self.proj = nn.Linear(n_features, d_model)
        self.pos = positional.LearnedPositionalEmbedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout, batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 1)

    def forward(self, x):  # x [B, L, F]
        z = self.encoder(self.pos(self.proj(x)))  # [B, L, d_model]
        change = self.head(self.norm(z[:, -1])).squeeze(-1)  # [B]
        return x[:, -1, self.temp_index] + change  # hour 72's temperature + predicted change

    @torch.no_grad()
    def attention_weights(self, x):
        """Per-layer attention weights [B, h, L, L], recomputed the way each layer computes them
        (nn.TransformerEncoderLayer does not return them)."""
        z, weights = self.pos(self.proj(x)), []
        for layer in self.encoder.layers:
            h = layer.norm1(z) if layer.norm_first else z
            _, w = layer.self_attn(h, h, h, need_weights=True, average_attn_weights=False)
            weights.append(w)
            z = layer(z)
        return weights


class ALiBiTransformer(nn.Module):
    """Hourly inputs -> linear -> EncoderBlocks with an ALiBi bias (no positions) -> last hour."""

    def __init__(self, n_features, temp_index, d_model, num_heads, num_layers, d_ff, dropout):
        super().__init__()
        self.temp_index, self.num_heads = temp_index, num_heads
        self.proj = nn.Linear(n_features, d_model)
        self.blocks = nn.ModuleList(blocks.EncoderBlock(d_model, num_heads, d_ff, dropout)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 1)

    def forward(self, x, need_weights=False):  # x [B, L, F], any L
        bias = positional.alibi_bias(self.num_heads, x.shape[1]).to(x.device)  # [h, L, L]
        z, weights = self.proj(x), []
        for block in self.blocks:
            z, w = block(z, bias=bias, need_weights=need_weights)  # w [B, h, L, L] or None
            weights.append(w)
        pred = x[:, -1, self.temp_index] + self.head(self.norm(z[:, -1])).squeeze(-1)
        return (pred, weights) if need_weights else pred

    @torch.no_grad()
    def attention_weights(self, x):
        return self(x, need_weights=True)[1]


class LSTMForecaster(nn.Module):
    """Hourly inputs -> one LSTM layer, read in time order -> last hidden state."""

    def __init__(self, n_features, temp_index, hidden):
        super().__init__()
        self.temp_index = temp_index
        self.lstm = nn.LSTM(n_features, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):  # x [B, L, F]
        out, _ = self.lstm(x)  # [B, L, hidden]
        return x[:, -1, self.temp_index] + self.head(out[:, -1]).squeeze(-1)


n_features = len(FEATURES)
MAKERS = {
    "Transformer (learned PE)": lambda: LearnedPETransformer(n_features, TEMP, **MODEL),
    "Transformer (ALiBi)": lambda: ALiBiTransformer(n_features, TEMP, **MODEL),
    "LSTM": lambda: LSTMForecaster(n_features, TEMP, LSTM_HIDDEN),
}

# %%
# NBVAL_CHECK_OUTPUT
n_params = {name: sum(p.numel() for p in make().parameters()) for name, make in MAKERS.items()}
for name, n in n_params.items():
    print(f"{name:26s} {n:6,d} parameters")
print("ALiBi slopes per head:", positional.alibi_slopes(MODEL["num_heads"]).tolist())

# %% [markdown]
# The recipe is the same for all three: AdamW, one warm-up epoch then a cosine decay of the
# learning rate, mini-batches of 128, at most 20 epochs, and early stopping on the validation
# loss with patience 5, keeping the best epoch's weights (`course_lib.training.fit`). An epoch
# is 8,744 windows drawn at random, without replacement, from the 26,232 training windows: a
# third of them, a fresh third each epoch, so the whole training set is used while one epoch
# stays short on a CPU. Each model is trained from three seeds.

# %%
def warmup_cosine(warmup_steps, total_steps):
    def factor(step):
        return min((step + 1) / warmup_steps, 0.5 * (1 + math.cos(math.pi * min(step, total_steps)
                                                                   / total_steps)))
    return factor


train_set = TensorDataset(windows["train"]["X"], windows["train"]["y"])
val_loader = DataLoader(TensorDataset(val["X"], val["y"]), batch_size=1024)


def train(name, seed):
    runtime.set_seed(seed)
    model = MAKERS[name]().to(device)
    sampler = RandomSampler(train_set, num_samples=SIZES["windows_per_epoch"],
                            generator=torch.Generator().manual_seed(seed))
    loader = DataLoader(train_set, batch_size=TRAIN["batch_size"], sampler=sampler)
    steps_per_epoch = len(loader)
    optimizer = torch.optim.AdamW(model.parameters(), lr=TRAIN["lr"],
                                  weight_decay=TRAIN["weight_decay"])
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(steps_per_epoch, SIZES["epochs"] * steps_per_epoch))
    history = training.fit(model, loader, val_loader, nn.MSELoss(), optimizer,
                           epochs=SIZES["epochs"], device=device, scheduler=scheduler,
                           patience=SIZES["patience"], desc=f"{name}, seed {seed}")
    return model, history


models, histories = {}, {}
for name in MAKERS:
    for seed in SIZES["seeds"]:
        models[name, seed], histories[name, seed] = train(name, seed)
        model = models[name, seed]
        preds.setdefault(name, []).append(
            to_celsius(ts.predict(model, test["X"], device=device)))
        val_mae.setdefault(name, []).append(
            ts.mae(to_celsius(ts.predict(model, val["X"], device=device)), y_val_c))
runtime.set_seed(SEED)

# %%
fig, axes = plt.subplots(1, 3, figsize=(15, 3.6), sharey=True)
for ax, name in zip(axes, MAKERS):
    for seed in SIZES["seeds"]:
        h = histories[name, seed]
        ax.plot(h.epoch, np.sqrt(h.val_loss) * scaler.std_[TEMP], marker="o", ms=3,
                label=f"seed {seed}, validation")
        ax.plot(h.epoch, np.sqrt(h.train_loss) * scaler.std_[TEMP], ls=":", color="gray")
    ax.set_title(name)
    ax.set_xlabel("epoch")
axes[0].set_ylabel("RMSE (°C); dotted: training")
axes[0].legend(fontsize=8)
fig.suptitle("Learning curves (the best validation epoch's weights are kept)")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 5.5 The scoreboard
#
# Every method on the test year 2014, which no choice in this chapter has looked at. For the
# neural models the table gives the mean and the standard deviation over the seeds.

# %%
METHODS = ["persistence", "seasonal naive", "ridge", "LSTM", "Transformer (learned PE)",
           "Transformer (ALiBi)"]
scores = {m: {"mae": [ts.mae(p, y_test_c) for p in preds[m]],
              "rmse": [ts.rmse(p, y_test_c) for p in preds[m]]} for m in METHODS}


def mean_std(v):
    return f"{np.mean(v):.3f} ± {np.std(v):.3f}" if len(v) > 1 else f"{v[0]:.3f}"


board = pd.DataFrame({
    "test MAE (°C)": [mean_std(scores[m]["mae"]) for m in METHODS],
    "test RMSE (°C)": [mean_std(scores[m]["rmse"]) for m in METHODS],
    "validation MAE (°C)": [mean_std(val_mae[m]) for m in METHODS],
    "runs": [len(preds[m]) for m in METHODS],
    "parameters": [0, 0, ridge.coef_.size + 1] + [n_params[m] for m in METHODS[3:]],
}, index=METHODS)
board

# %%
MAE = {m: float(np.mean(scores[m]["mae"])) for m in METHODS}
RMSE = {m: float(np.mean(scores[m]["rmse"])) for m in METHODS}
TRANSFORMERS = ["Transformer (learned PE)", "Transformer (ALiBi)"]
best_tf = min(TRANSFORMERS, key=lambda m: np.mean(val_mae[m]))  # chosen on validation
print(f"chosen on validation: {best_tf} (validation MAE {np.mean(val_mae[best_tf]):.3f} °C)")
for base in ["persistence", "seasonal naive", "ridge", "LSTM"]:
    diff = MAE[best_tf] - MAE[base]
    verdict = "beats" if diff < 0 else "does NOT beat"
    print(f"  {verdict} {base}: test MAE {MAE[best_tf]:.3f} vs {MAE[base]:.3f} °C "
          f"({100 * diff / MAE[base]:+.1f}%)")
other = [m for m in TRANSFORMERS if m != best_tf][0]
print(f"the other Transformer, {other}: test MAE {MAE[other]:.3f} °C")
lo, hi = min(scores[best_tf]["mae"]), max(scores[best_tf]["mae"])
print(f"seeds of {best_tf}: test MAE from {lo:.3f} to {hi:.3f} °C")

# %% [markdown]
# SCOREBOARD_PROSE
#
# ## 5.6 Forecasts against the truth
#
# Two weeks of the test year, hour by hour, and the error by hour of the day over the whole
# test year (MAE of the hour being forecast; neural models averaged over seeds).

# %%
test_times = weather.datetime.iloc[test["rows"]].reset_index(drop=True)
fortnight = ((test_times >= "2014-03-01") & (test_times < "2014-03-15")).to_numpy()
fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 6.5), sharex=True,
                               gridspec_kw={"height_ratios": [2, 1]})
ax1.plot(test_times[fortnight], y_test_c[fortnight], color="black", lw=2, label="actual")
for m, color in [("ridge", "tab:blue"), ("LSTM", "tab:green"), (best_tf, "tab:red")]:
    ax1.plot(test_times[fortnight], preds[m][0][fortnight], color=color, lw=1, label=m)
    ax2.plot(test_times[fortnight], preds[m][0][fortnight] - y_test_c[fortnight], color=color,
             lw=1)
ax1.set_ylabel("TEMP (°C)")
ax1.set_title("One-hour-ahead forecasts, 1-14 March 2014 (test year, seed 0)")
ax1.legend(ncol=4, fontsize=9)
ax2.axhline(0, color="black", lw=0.8)
ax2.set_ylabel("error (°C)")
ax2.set_xlabel("date")
fig.tight_layout()
plt.show()

hour_of_target = weather.hour.iloc[test["rows"]].to_numpy()
by_hour = pd.DataFrame({m: [np.mean([np.abs(p - y_test_c)[hour_of_target == h].mean()
                                     for p in preds[m]]) for h in range(24)]
                        for m in METHODS if m != "seasonal naive"})
fig, ax = plt.subplots(figsize=(10, 4))
for m in by_hour.columns:
    ax.plot(by_hour.index, by_hour[m], marker="o", ms=3, label=m)
ax.set_xlabel("hour of day of the forecast hour")
ax.set_ylabel("test MAE (°C)")
ax.set_xticks(range(0, 24, 2))
ax.set_title("Error by hour of day (seasonal naive, off the scale, left out)")
ax.legend(fontsize=9)
plt.tight_layout()
plt.show()
worst, best = by_hour[best_tf].idxmax(), by_hour[best_tf].idxmin()
print(f"{best_tf}: largest MAE {by_hour[best_tf].max():.2f} °C for {worst}:00, smallest "
      f"{by_hour[best_tf].min():.2f} °C for {best}:00; persistence ranges "
      f"{by_hour['persistence'].min():.2f}-{by_hour['persistence'].max():.2f} °C")

# %% [markdown]
# HOUR_PROSE
#
# ## 5.7 What does attention look at?
#
# With one layer, the forecast depends on the window only through what the last position
# (hour 72) gathers with its attention. So the row of hour 72 in each head's attention matrix
# says how much each of the 72 hours contributes. We average that row over every window of
# the test year, per head, and plot it against the **lag**: lag 1 is hour 72 itself (one hour
# before the forecast hour), lag 24 is the same clock hour as the target, one day earlier.
#
# `nn.TransformerEncoderLayer` does not hand out its weights, so `attention_weights` above
# recomputes them with the layer's own `self_attn` module; the check below confirms that those
# are the weights the layer uses.

# %%
m_pe = models["Transformer (learned PE)", SIZES["seeds"][0]].eval()
with torch.no_grad():
    xb = test["X"][:64].to(device)
    layer = m_pe.encoder.layers[0]
    z = m_pe.pos(m_pe.proj(xb))
    h = layer.norm1(z)
    w = m_pe.attention_weights(xb)[0]  # [B, h, L, L]
    v = layer.self_attn.in_proj_weight.chunk(3)[2]
    vb = layer.self_attn.in_proj_bias.chunk(3)[2]
    heads_v = (h @ v.T + vb).view(64, WINDOW, MODEL["num_heads"], -1).transpose(1, 2)
    attn_out = layer.self_attn.out_proj((w @ heads_v).transpose(1, 2).reshape(64, WINDOW, -1))
    manual = z + attn_out
    manual = manual + layer.linear2(layer.activation(layer.linear1(layer.norm2(manual))))
    gap = (manual - layer(z)).abs().max().item()
print(f"layer output rebuilt from the read-out weights vs the layer itself: max diff {gap:.1e}")
assert gap < 1e-4


# %%
@torch.no_grad()
def mean_attention(model, X, batch=512):
    """Attention of the last layer, averaged over windows: [h, L, L]."""
    total = 0
    for i in range(0, len(X), batch):
        total = total + model.attention_weights(X[i : i + batch].to(device))[-1].sum(0).cpu()
    return (total / len(X)).numpy()


attn = {(m, s): mean_attention(models[m, s], test["X"]) for m in TRANSFORMERS
        for s in SIZES["seeds"]}
lags = np.arange(1, WINDOW + 1)  # lag k = position WINDOW - k


def by_lag(mat):
    """Last row of [h, L, L] as [h, L] ordered by lag 1..L."""
    return mat[:, -1, ::-1]


fig, axes = plt.subplots(1, 2, figsize=(14, 4.2), sharey=False)
for ax, m in zip(axes, TRANSFORMERS):
    curves = by_lag(attn[m, SIZES["seeds"][0]])
    for hd in range(MODEL["num_heads"]):
        ax.plot(lags, curves[hd], lw=1.5, label=f"head {hd + 1}")
    ax.axhline(1 / WINDOW, color="gray", ls="--", lw=0.8, label="uniform (1/72)")
    for d in (24, 48):
        ax.axvline(d, color="gray", ls=":", lw=0.8)
    ax.set_xlabel("lag (hours before the forecast hour)")
    ax.set_yscale("log")
    ax.set_ylim(bottom=max(1e-5, ax.get_ylim()[0]))
    ax.set_title(f"{m}, seed {SIZES['seeds'][0]}: what hour 72 attends to")
axes[0].set_ylabel("mean attention weight (log scale)")
axes[0].legend(fontsize=8)
fig.tight_layout()
plt.show()

# %%
def describe_heads(m):
    rows = []
    for s in SIZES["seeds"]:
        curves = by_lag(attn[m, s])
        for hd in range(MODEL["num_heads"]):
            c = curves[hd]
            near24 = c[22:25].mean()  # lags 23-25
            around = np.r_[c[18:21], c[27:30]].mean()  # lags 19-21 and 28-30
            entropy = -(c * np.log(c)).sum() / np.log(WINDOW)
            rows.append({"model": m, "seed": s, "head": hd + 1, "weight lags 1-3": c[:3].sum(),
                         "lag-24 peak ratio": near24 / around, "entropy / uniform": entropy})
    return pd.DataFrame(rows)


heads = pd.concat([describe_heads(m) for m in TRANSFORMERS])
heads.groupby(["model", "head"])[["weight lags 1-3", "lag-24 peak ratio",
                                   "entropy / uniform"]].agg(["mean", "std"]).round(3)

# %% [markdown]
# Two summaries per head, as mean and std over the three seeds: the share of attention on the
# last three hours, and the *lag-24 peak ratio*, the mean weight on lags 23-25 divided by the
# mean weight on lags 19-21 and 28-30 (above 1: a bump at the same hour yesterday). The
# entropy is 1 for uniform attention and 0 for attention on a single hour.
#
# Is a pattern real or noise? One test is whether it comes back when only the seed changes.
# ALiBi's heads are tied to their slopes, so head $i$ of one seed can be compared with head $i$
# of another. The heads of the learned-PE model are interchangeable (nothing distinguishes
# head 1 from head 2 before training), so for it we compare the average over heads.

# %%
def seed_agreement(curves_per_seed):
    c = np.array(curves_per_seed)
    r = np.corrcoef(np.log(c))
    return r[np.triu_indices(len(c), 1)].mean()


agree = {}
for hd in range(MODEL["num_heads"]):
    agree[f"ALiBi head {hd + 1}"] = seed_agreement(
        [by_lag(attn["Transformer (ALiBi)", s])[hd] for s in SIZES["seeds"]])
agree["ALiBi, mean over heads"] = seed_agreement(
    [by_lag(attn["Transformer (ALiBi)", s]).mean(0) for s in SIZES["seeds"]])
agree["learned PE, mean over heads"] = seed_agreement(
    [by_lag(attn["Transformer (learned PE)", s]).mean(0) for s in SIZES["seeds"]])
agreement = pd.Series(agree, name="correlation of log-weights between seeds")
agreement.round(3).to_frame()

# %% [markdown]
# The whole $72 \times 72$ matrix, averaged over the test year, one panel per head: row $i$ is
# what hour $i$ attends to (only the last row feeds the forecast; the others are computed and
# thrown away).

# %%
tick = [str(i + 1) if i % 12 == 0 else "" for i in range(WINDOW)]
fig, axes = plt.subplots(2, MODEL["num_heads"], figsize=(16, 8))
for row, m in zip(axes, TRANSFORMERS):
    logw = np.log10(attn[m, SIZES["seeds"][0]])  # [h, L, L]
    for hd, ax in enumerate(row):
        viz.attention_heatmap(logw[hd], x_labels=tick, y_labels=tick, ax=ax, cmap="magma",
                              vmin=-4, vmax=0, cbar=hd == len(row) - 1,
                              title=f"{m.split('(')[1][:-1]}, head {hd + 1}")
        ax.set_xlabel("key hour" if m == TRANSFORMERS[-1] else "")
        ax.set_ylabel("query hour" if hd == 0 else "")
fig.suptitle(f"log10 of the mean attention weight over the test year (seed {SIZES['seeds'][0]})")
fig.tight_layout()
plt.show()

# %% [markdown]
# ATTENTION_PROSE
#
# ## 5.8 Zero-shot: 144 hours of history
#
# Neither model saw a window longer than 72 hours in training. Give them 144. We take every
# test target that has 144 hours of history inside 2014 and score the same targets with
# 72-hour and with 144-hour windows.

# %%
starts_144 = ts.window_starts(splits["test"], 2 * WINDOW)[:: SIZES["eval_stride"]]
X144, y144, rows144 = ts.make_windows(values, temp_scaled, splits["test"], 2 * WINDOW,
                                      starts=starts_144)
X72_same, _, rows72 = ts.make_windows(values, temp_scaled, splits["test"], WINDOW,
                                      starts=starts_144 + WINDOW)
assert (rows72 == rows144).all()  # the same target hours
y144_c = to_celsius(y144.numpy())
print(f"{len(X144):,} test targets, windows {tuple(X144.shape)} and {tuple(X72_same.shape)}")

try:
    models["Transformer (learned PE)", SIZES["seeds"][0]](X144[:8].to(device))
except positional.SequenceTooLongError as err:
    print(f"learned PE model: {type(err).__name__}: {err}")

# %%
ext_rows = []
for s in SIZES["seeds"]:
    m = models["Transformer (ALiBi)", s]
    p72 = to_celsius(ts.predict(m, X72_same, device=device))
    p144 = to_celsius(ts.predict(m, X144, device=device))
    ext_rows.append({"seed": s, "MAE 72 h": ts.mae(p72, y144_c), "MAE 144 h": ts.mae(p144, y144_c),
                     "RMSE 72 h": ts.rmse(p72, y144_c), "RMSE 144 h": ts.rmse(p144, y144_c)})
extrapolation = pd.DataFrame(ext_rows).set_index("seed")
extrapolation.loc["mean"] = extrapolation.mean()
mae_72_same = extrapolation.loc["mean", "MAE 72 h"]
mae_144 = extrapolation.loc["mean", "MAE 144 h"]
rmse_144 = extrapolation.loc["mean", "RMSE 144 h"]
print(f"ALiBi on the same targets: MAE {mae_72_same:.3f} °C with 72 h, {mae_144:.3f} °C with "
      f"144 h ({100 * (mae_144 / mae_72_same - 1):+.1f}%)")
extrapolation.round(3)

# %%
a144 = mean_attention(models["Transformer (ALiBi)", SIZES["seeds"][0]], X144)
curves144 = by_lag(a144)
lags144 = np.arange(1, 2 * WINDOW + 1)
fig, ax = plt.subplots(figsize=(11, 4.2))
for hd in range(MODEL["num_heads"]):
    ax.plot(lags144, curves144[hd], lw=1.5,
            label=f"head {hd + 1} (slope 2^-{2 * (hd + 1)}): "
                  f"{curves144[hd][WINDOW:].sum():.1%} beyond lag 72")
ax.axvline(WINDOW, color="red", ls="--", label="longest lag seen in training")
ax.set_yscale("log")
ax.set_ylim(bottom=max(1e-5, ax.get_ylim()[0]))
ax.set_xlabel("lag (hours before the forecast hour)")
ax.set_ylabel("mean attention weight (log scale)")
ax.set_title(f"ALiBi, seed {SIZES['seeds'][0]}, on 144-hour windows it was never trained on")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# EXTRAPOLATION_PROSE
#
# ## 5.9 Speed on this machine
#
# The seed text says the Transformer trains faster than a recurrent network because all
# positions are computed in parallel. That is a statement about hardware, so we measure: the
# seconds per epoch recorded by `fit` (8,744 training windows plus one pass over the
# validation year), and the time to forecast 1,000 windows.

# %%
def inference_ms_per_1000(model, X, repeats=3):
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        ts.predict(model, X, batch_size=1000, device=device)
        best = min(best, time.perf_counter() - start)
    return 1000 * best / len(X) * 1000


NEURAL = ["LSTM", "Transformer (learned PE)", "Transformer (ALiBi)"]
timing_X = windows["test"]["X"][: SIZES["timing_windows"]]
speed = pd.DataFrame({
    "seconds per epoch": [np.mean([histories[m, s].seconds.mean() for s in SIZES["seeds"]])
                          for m in NEURAL],
    "epochs run": [np.mean([len(histories[m, s]) for s in SIZES["seeds"]]) for m in NEURAL],
    "ms per 1,000 windows (inference)": [inference_ms_per_1000(models[m, SIZES["seeds"][0]],
                                                               timing_X) for m in NEURAL],
}, index=NEURAL)
print(f"device: {device.type}, CPU threads: {torch.get_num_threads()}")
speed.round(2)

# %%
sec = speed["seconds per epoch"]
ratio = sec["Transformer (learned PE)"] / sec["LSTM"]
print(f"one epoch: Transformer (learned PE) {sec['Transformer (learned PE)']:.2f} s, "
      f"LSTM {sec['LSTM']:.2f} s: the Transformer is {ratio:.1f}x "
      f"{'slower' if ratio > 1 else 'faster'} here")

# %% [markdown]
# SPEED_PROSE
#
# ## Exercises
#
# **1.** PM2.5 and a day ahead. Add the PM2.5 reading as a thirteenth input (it has gaps:
# fill them with the last reading, which uses only the past, and add a 0/1 "was missing"
# column), and forecast the temperature 24 hours after the window instead of one hour
# (`make_windows(..., horizon=24)`). Compare ridge with and without PM2.5, and with the two
# naive forecasts. Which baseline becomes hard to beat?

# %% tags=["hide-input"]
# Solution 1 (ridge, to keep it quick; the neural models take the same windows)
pm = weather["pm2.5"]
pm_features = features.assign(log_pm25=np.log1p(pm.ffill().fillna(0.0)),
                              pm25_missing=pm.isna().astype("float32"))
for name, frame in [("without PM2.5", features), ("with PM2.5", pm_features)]:
    sc = ts.Standardizer().fit(frame.iloc[splits["train"]])
    vals = sc.transform(frame)
    w24 = {k: ts.make_windows(vals, temp_c, splits[k], WINDOW, horizon=24,
                              stride=SIZES["ridge_train_stride"] if k == "train" else
                              SIZES["eval_stride"]) for k in splits}
    fits = {a: Ridge(alpha=a, solver="cholesky").fit(flat(w24["train"][0]), w24["train"][1])
            for a in SIZES["ridge_alphas"]}
    alpha = min(fits, key=lambda a: ts.mae(fits[a].predict(flat(w24["val"][0])), w24["val"][1]))
    y24 = w24["test"][1].numpy()
    mae24 = ts.mae(fits[alpha].predict(flat(w24["test"][0])), y24)
    print(f"ridge {name:14s}: 24 h ahead test MAE {mae24:.3f} °C (alpha {alpha:g})")
X24 = w24["test"][0]
naive24 = {"persistence (hour 72)": ts.persistence(X24, TEMP),
           "seasonal naive (24 h earlier)": ts.seasonal_naive(X24, TEMP, horizon=24)}
for name, p in naive24.items():
    print(f"{name:29s}: 24 h ahead test MAE {ts.mae(sc.inverse(p.numpy(), TEMP), y24):.3f} °C")

# %% [markdown]
# **2.** Other context lengths. ALiBi does not care how long the window is. Score the ALiBi
# model (seed 0) on the same test targets with 24, 48, 72, 96, 120 and 144 hours of
# history. Is more history always better?

# %% tags=["hide-input"]
# Solution 2
m = models["Transformer (ALiBi)", SIZES["seeds"][0]]
for length in (24, 48, 72, 96, 120, 144):
    Xl, _, rl = ts.make_windows(values, temp_scaled, splits["test"], length,
                                starts=starts_144 + 2 * WINDOW - length)
    assert (rl == rows144).all()
    mae_l = ts.mae(to_celsius(ts.predict(m, Xl, device=device)), y144_c)
    print(f"{length:4d} h of history: test MAE {mae_l:.3f} °C")

# %% [markdown]
# **3.** Only the last query matters. In a one-layer model only hour 72's output reaches the
# forecast, yet the layer computes attention and the feed-forward network for all 72
# positions. Rewrite the ALiBi model's forward pass so that hour 72 is the only query (keys
# and values stay all 72 hours, and the ALiBi bias keeps only its last row), check that the
# forecasts do not change, and time both versions.

# %% tags=["hide-input"]
# Solution 3
@torch.no_grad()
def last_query_forward(model, x):
    block = model.blocks[0]  # one Pre-Norm EncoderBlock
    bias = positional.alibi_bias(model.num_heads, x.shape[1]).to(x.device)[:, -1:]  # [h, 1, L]
    z = model.proj(x)  # [B, L, d]
    keys = block.attn_sub.norm(z)
    out, _ = block.attn(keys[:, -1:], keys, keys, bias=bias, need_weights=False)  # [B, 1, d]
    last = z[:, -1:] + out
    last = last + block.ffn(block.ffn_sub.norm(last))
    return x[:, -1, model.temp_index] + model.head(model.norm(last[:, 0])).squeeze(-1)


m = models["Transformer (ALiBi)", SIZES["seeds"][0]].eval()
xb = timing_X.to(device)
with torch.no_grad():
    full_out = m(xb)
fast_out = last_query_forward(m, xb)
print(f"max difference: {(full_out - fast_out).abs().max().item():.1e}")
for label, fn in [("all 72 queries", lambda: m(xb)),
                  ("last query only", lambda: last_query_forward(m, xb))]:
    start = time.perf_counter()
    with torch.no_grad():
        fn()
    ms = 1e3 * (time.perf_counter() - start) / len(xb) * 1000
    print(f"{label:16s}: {ms:.1f} ms per 1,000 windows")

# %% [markdown]
# **4.** What does ridge look at? Ridge has one weight per (lag, input). Plot its weights for
# `TEMP` against the lag and compare them with the attention curves of section 5.7.

# %% tags=["hide-input"]
# Solution 4
coef = ridge.coef_.reshape(WINDOW, len(FEATURES))  # [position, feature]
fig, ax = plt.subplots(figsize=(10, 3.5))
ax.bar(lags, coef[::-1, TEMP], color="tab:red")
ax.set_xlabel("lag (hours before the forecast hour)")
ax.set_ylabel("ridge weight on scaled TEMP")
ax.set_title(f"Ridge (alpha {best_alpha:g}): weight of the temperature at each lag")
plt.tight_layout()
plt.show()
top = np.argsort(-np.abs(coef[::-1, TEMP]))[:5] + 1
print("largest |weights| on TEMP at lags:", top.tolist())

# %% [markdown]
# ## Results card

# %%
card = results.write_card(
    "05_time_series", profile=PROFILE, seed=SEED, device=device,
    wall_seconds=time.perf_counter() - T0,
    params={**{f"params_{k}": v for k, v in
               zip(["transformer", "alibi", "lstm"], n_params.values())},
            "ridge_alpha": best_alpha, "window_hours": WINDOW,
            "windows_per_epoch": SIZES["windows_per_epoch"], "max_epochs": SIZES["epochs"],
            "seeds": len(SIZES["seeds"])},
    metrics={
        "mae_persistence": MAE["persistence"], "mae_seasonal_naive": MAE["seasonal naive"],
        "mae_ridge": MAE["ridge"], "mae_lstm": MAE["LSTM"],
        "mae_transformer": MAE["Transformer (learned PE)"],
        "mae_alibi": MAE["Transformer (ALiBi)"], "mae_alibi_144h": mae_144,
        "rmse_persistence": RMSE["persistence"], "rmse_seasonal_naive": RMSE["seasonal naive"],
        "rmse_ridge": RMSE["ridge"], "rmse_lstm": RMSE["LSTM"],
        "rmse_transformer": RMSE["Transformer (learned PE)"],
        "rmse_alibi": RMSE["Transformer (ALiBi)"], "rmse_alibi_144h": rmse_144,
        "std_mae_transformer": float(np.std(scores["Transformer (learned PE)"]["mae"])),
        "epoch_seconds_transformer": sec["Transformer (learned PE)"],
        "epoch_seconds_lstm": sec["LSTM"],
    },
)
card

# %%
if PROFILE == "full":  # the claims of this chapter, checked
    for m in TRANSFORMERS:
        assert MAE[m] < MAE["persistence"] and MAE[m] < MAE["seasonal naive"], m
    assert abs(mae_144 / mae_72_same - 1) < 0.10, "ALiBi at 144 h should stay within 10%"
    assert abs(mae_144 / MAE["Transformer (ALiBi)"] - 1) < 0.10
