"""The hyperparameter searches of chapter 6 (Ames house prices), as one committed script.

Every model of the chapter is tuned here on the validation houses, by the budget the
chapter states: ridge (a grid of 17 penalties), gradient-boosted trees (a random search of
40 configurations), the MLP (20) and the feature-tokenizer Transformer (10 trainings: the
two tokenizations at the base settings, then 8 drawn settings on the kept one; the base run
on the kept tokenization is configuration 0 of that search). The random searches draw with
``ParameterSampler(..., random_state=0)``; the neural networks are trained with seed 0.

It writes two files (default folder ``book/results/search/``):

- ``search_06_tabular.csv``: one row per configuration tried, every model: ``model``,
  ``stage`` (``search`` or, for the Transformer's first choice, ``tokenization``),
  ``config``, ``seed`` (of the training; empty for ridge), ``val_rmse`` (RMSE of the log
  price on the validation houses), ``rank`` within its model and stage, ``length``
  (epochs run, or the number of trees kept), ``grown`` (trees grown before early stopping),
  ``seconds``, ``parameters``, then one column per setting (empty where a model has none);
- ``search_06_tabular.json``: this script's own SHA-256 (``script_sha256``) and the
  table's (``table_sha256``), the profile, the sampler seed, budgets, search spaces, the
  training settings, the data's fingerprint (``tabular.TableViews.fingerprint``), each
  model's winner, the tokenization decision, the edge checks
  (``course_lib.tuning.edge_check``), the time each search took, and the machine.

The notebook reads both, trains the winners and checks that its split and training settings
are the ones used here; tests/test_search_06_tabular.py fails when the committed table no
longer matches this script (hash) and runs the script at the smoke size.

    python scripts/search_06_tabular.py                     # full size, ~17 min on 2 cores
    python scripts/search_06_tabular.py --profile smoke --out /tmp/search   # seconds
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import sklearn  # noqa: E402
import torch  # noqa: E402
from sklearn.ensemble import HistGradientBoostingRegressor  # noqa: E402
from sklearn.linear_model import Ridge  # noqa: E402
from sklearn.model_selection import ParameterSampler  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from course_lib import data, runtime, stats, tabular, tuning  # noqa: E402

NAME = "search_06_tabular"
SEED = 0  # the split, the samplers' random_state and the seed of every training
SIZES = {
    "full": dict(
        max_epochs=100, patience=15, batch_size=128, train_rows=None,  # as in the notebook
        ridge_alphas=[float(f"{10 ** (k / 4):.3g}") for k in range(-4, 13)],  # 0.1 .. 1000
        gbm_space=dict(learning_rate=[0.01, 0.02, 0.05, 0.1, 0.2],
                       max_leaf_nodes=[4, 8, 16, 32, 64],
                       min_samples_leaf=[1, 2, 5, 10, 20, 40],
                       l2_regularization=[0.0, 0.1, 1.0, 10.0, 100.0],
                       max_features=[0.1, 0.2, 0.35, 0.5, 0.75, 1.0]),
        gbm_configs=40, gbm_max_iter=10_000, gbm_patience=50,
        mlp_space=dict(lr=[3e-4, 1e-3, 3e-3, 1e-2], hidden=[128, 256, 512, 1024],
                       dropout=[0.1, 0.3, 0.5, 0.7], weight_decay=[1e-4, 1e-2, 1.0, 10.0]),
        mlp_configs=20,
        transformer=dict(d_model=32, num_heads=2, num_layers=2, dropout=0.1, lr=1e-3,
                         weight_decay=1e-5),  # the base settings
        ft_space=dict(d_model=[16, 32, 64], num_heads=[1, 2, 4], num_layers=[2, 3],
                      dropout=[0.0, 0.1, 0.2, 0.3], lr=[3e-4, 1e-3, 3e-3],
                      weight_decay=[1e-5, 1e-3, 1e-1]),
        ft_configs=8,
        token_margin=0.02,  # keep the slower one-hot tokens only if >2% better on validation
        bootstrap=2000,
    ),
    "smoke": dict(
        max_epochs=2, patience=2, batch_size=128, train_rows=256,
        ridge_alphas=[1.0, 10.0, 100.0],
        gbm_space=dict(learning_rate=[0.1, 0.2], max_leaf_nodes=[4, 8], min_samples_leaf=[20],
                       l2_regularization=[0.0, 1.0], max_features=[0.5, 1.0]),
        gbm_configs=3, gbm_max_iter=30, gbm_patience=5,
        mlp_space=dict(lr=[1e-3], hidden=[128, 256], dropout=[0.1], weight_decay=[1e-2]),
        mlp_configs=2,
        transformer=dict(d_model=16, num_heads=2, num_layers=2, dropout=0.1, lr=1e-3,
                         weight_decay=1e-5),
        ft_space=dict(d_model=[16, 32], num_heads=[2], num_layers=[2], dropout=[0.1],
                      lr=[1e-3], weight_decay=[1e-5]),
        ft_configs=1,
        token_margin=0.02,
        bootstrap=200,
    ),
}
ARCHITECTURE = ("d_model", "num_heads", "num_layers", "dropout")  # the rest: the optimizer's
INTEGER = ("d_model", "num_heads", "num_layers", "hidden", "max_leaf_nodes", "min_samples_leaf")
ONE_THREAD = dict(limits=1, user_api="openmp")  # on 2,000 houses, threads cost more than they save
TOKEN_VIEWS = {"one-hot columns as tokens": "flat", "one token per column": "columns"}


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def rmse(pred, target) -> float:
    return float(np.sqrt(np.mean((np.asarray(pred) - np.asarray(target)) ** 2)))


def ames_views():
    """The chapter's data: 2,925 houses, log price, the 70/15/15 split drawn with SEED."""
    houses = data.load_ames(drop_outliers=True)
    numeric = [c for c in houses.select_dtypes("number").columns
               if c not in ("Order", "SalePrice")]
    categorical = [c for c in houses.columns if c not in numeric + ["Order", "PID", "SalePrice"]]
    log_price = np.log(houses["SalePrice"].to_numpy())
    split = tabular.split_rows(len(houses), SEED)
    return tabular.table_views(houses, numeric, categorical, log_price, split, min_frequency=10)


def plain(value):
    """Numbers from NumPy and pandas as plain Python numbers, for JSON."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if value != value else float(value)
    return value


def draw(space: dict, n: int) -> list[dict]:
    """``n`` settings drawn from ``space`` with the fixed sampler seed, as plain numbers."""
    return [{k: int(v) if k in INTEGER else float(v) for k, v in p.items()}
            for p in ParameterSampler(space, n_iter=n, random_state=SEED)]


class Search:
    """Everything one run of the searches needs: the data, the sizes, and the results."""

    def __init__(self, sizes: dict, device):
        self.sizes, self.device = sizes, device
        self.v = ames_views()
        y = self.v.y
        self.y_mean, self.y_std = float(y["train"].mean()), float(y["train"].std())
        target = {s: torch.tensor((y[s] - self.y_mean) / self.y_std, dtype=torch.float32)
                  for s in y}
        self.inputs = {  # the inputs each kind of network reads
            "flat": {s: (torch.as_tensor(self.v.flat[s]),) for s in y},
            "columns": {s: (torch.as_tensor(self.v.num[s]), torch.as_tensor(self.v.cat[s]))
                        for s in y},
        }
        self.target = target
        self.rows: list[dict] = []
        self.meta: dict = {"winners": {}, "edge_checks": {}, "seconds": {}}

    # -- shared pieces
    def train_net(self, build, view, p):
        rows = self.sizes["train_rows"] or None
        train = (*(t[:rows] for t in self.inputs[view]["train"]), self.target["train"][:rows])
        val = (*self.inputs[view]["val"], self.target["val"])
        return tabular.fit_regressor(
            build, train, val, seed=SEED, lr=p["lr"], weight_decay=p["weight_decay"],
            epochs=self.sizes["max_epochs"], patience=self.sizes["patience"],
            batch_size=self.sizes["batch_size"], device=self.device, show_progress=False)

    def predict(self, model, view, split="val"):
        out = tabular.predict_regressor(model, self.inputs[view][split], self.device)
        return out * self.y_std + self.y_mean

    def compare(self, val_pred):
        """compare(a, b) for tuning.edge_check: RMSE(a) - RMSE(b), paired bootstrap."""
        y_val = self.v.y["val"]

        def gap(a, b):
            return stats.bootstrap(lambda t, p, q: rmse(p, t) - rmse(q, t), y_val,
                                   val_pred(a), val_pred(b),
                                   n_resamples=self.sizes["bootstrap"], seed=SEED)
        return gap

    def record(self, model, stage, rows, space, val_pred, limits=None):
        """Rank the rows, run the edge check, keep the winner; return the ranked table."""
        table = pd.DataFrame(rows).sort_values("val_rmse", kind="stable").set_index("config")
        table["rank"] = np.arange(1, len(table) + 1)
        check = tuning.edge_check(table, space, compare=self.compare(val_pred), limits=limits)
        self.meta["edge_checks"][model] = check.reset_index().to_dict(orient="records")
        best = table.iloc[0]
        self.meta["winners"][model] = {
            "config": int(table.index[0]), "val_rmse": float(best["val_rmse"]),
            "seed": None if model == "ridge" else SEED,
            "settings": {k: int(best[k]) if k in INTEGER else float(best[k]) for k in space},
            **({"trees": int(best["length"])} if model == "gradient boosting" else {})}
        for config, row in table.iterrows():
            self.rows.append({"model": model, "stage": stage, "config": int(config),
                              **row.to_dict()})
        return table

    # -- the four searches
    def ridge(self):
        v, alphas = self.v, self.sizes["ridge_alphas"]
        start, rows, preds = time.perf_counter(), [], {}
        for i, alpha in enumerate(alphas):
            t0 = time.perf_counter()
            preds[i] = Ridge(alpha=alpha).fit(v.flat["train"], v.y["train"]).predict(v.flat["val"])
            rows.append({"config": i, "seed": None, "val_rmse": rmse(preds[i], v.y["val"]),
                         "seconds": time.perf_counter() - t0,
                         "parameters": v.flat["train"].shape[1] + 1, "alpha": alpha})
        self.meta["seconds"]["ridge"] = time.perf_counter() - start
        self.record("ridge", "search", rows, {"alpha": alphas}, preds.__getitem__)

    def boosting(self, params, trees, early_stopping=False):
        n_numeric = self.v.prep.n_numeric
        is_categorical = [j >= n_numeric for j in range(self.v.tree["train"].shape[1])]
        return HistGradientBoostingRegressor(
            max_iter=trees, early_stopping=early_stopping,
            n_iter_no_change=self.sizes["gbm_patience"], categorical_features=is_categorical,
            random_state=SEED, **params)

    def gbm(self):
        v, sizes = self.v, self.sizes
        configs = draw(sizes["gbm_space"], sizes["gbm_configs"])
        start, rows = time.perf_counter(), []
        with threadpool_limits(**ONE_THREAD):
            for i, params in enumerate(runtime.progress(configs, desc="gradient boosting")):
                t0 = time.perf_counter()
                model = self.boosting(params, sizes["gbm_max_iter"], early_stopping=True)
                model.fit(v.tree["train"], v.y["train"], X_val=v.tree["val"], y_val=v.y["val"])
                # validation_score_[t] = -(half the mean squared error) after t trees
                curve = np.sqrt(-2 * model.validation_score_)
                rows.append({"config": i, "seed": SEED, "val_rmse": float(curve.min()),
                             "length": int(np.argmin(curve)), "grown": int(model.n_iter_),
                             "seconds": time.perf_counter() - t0, **params})
        self.meta["seconds"]["gradient boosting"] = time.perf_counter() - start
        trees = {r["config"]: max(1, r["length"]) for r in rows}

        def val_pred(config):  # refit one configuration with its best number of trees
            with threadpool_limits(**ONE_THREAD):
                model = self.boosting(configs[config], trees[config])
                return model.fit(v.tree["train"], v.y["train"]).predict(v.tree["val"])

        self.record("gradient boosting", "search", rows, sizes["gbm_space"], val_pred,
                    limits={"max_features": 1.0, "l2_regularization": 0.0,
                            "min_samples_leaf": 1})
        self.meta["gbm_capped"] = sum(r["grown"] >= sizes["gbm_max_iter"] for r in rows)

    def mlp(self):
        v, sizes = self.v, self.sizes
        configs = draw(sizes["mlp_space"], sizes["mlp_configs"])
        start, rows, preds = time.perf_counter(), [], {}
        for i, p in enumerate(runtime.progress(configs, desc="MLP")):
            t0 = time.perf_counter()

            def build(p=p):
                return tabular.MLPRegressor(v.flat["train"].shape[1], hidden=p["hidden"],
                                            depth=2, dropout=p["dropout"])
            model, hist = self.train_net(build, "flat", p)
            preds[i] = self.predict(model, "flat")
            rows.append({"config": i, "seed": SEED, "val_rmse": rmse(preds[i], v.y["val"]),
                         "length": len(hist), "seconds": time.perf_counter() - t0,
                         "parameters": tabular.count_parameters(model), **p})
        self.meta["seconds"]["MLP"] = time.perf_counter() - start
        self.record("MLP", "search", rows, sizes["mlp_space"], preds.__getitem__)

    def build_ft(self, p, view):
        arch = {k: p[k] for k in ARCHITECTURE}
        if view == "columns":
            return lambda: tabular.TabularTransformer(self.v.prep.n_numeric,
                                                      self.v.prep.cardinalities, **arch)
        return lambda: tabular.TabularTransformer(self.v.flat["train"].shape[1], [], **arch)

    def transformer(self):
        v, sizes = self.v, self.sizes
        base = sizes["transformer"]
        start, token_rows, runs = time.perf_counter(), [], {}
        # 1. the tokenization, at the base settings
        for i, (name, view) in enumerate(TOKEN_VIEWS.items()):
            t0 = time.perf_counter()
            model, hist = self.train_net(self.build_ft(base, view), view, base)
            seconds = time.perf_counter() - t0
            runs[name] = (model, hist, seconds)
            token_rows.append({"config": i, "seed": SEED,
                               "val_rmse": rmse(self.predict(model, view), v.y["val"]),
                               "length": len(hist), "seconds": seconds,
                               "parameters": tabular.count_parameters(model),
                               "tokenization": name, "tokens": 1 + model.tokenizer.n_features,
                               "seconds_per_epoch": seconds / len(hist), **base})
        val = {r["tokenization"]: r["val_rmse"] for r in token_rows}
        per_epoch = {r["tokenization"]: r["seconds_per_epoch"] for r in token_rows}
        onehot, columns = TOKEN_VIEWS
        gain = 1 - val[onehot] / val[columns]
        kept = onehot if gain > sizes["token_margin"] else columns
        self.meta["tokenization"] = {
            "val_rmse": val, "seconds_per_epoch": per_epoch, "gain_of_onehot": gain,
            "onehot_slower": per_epoch[onehot] / per_epoch[columns],
            "margin": sizes["token_margin"], "kept": kept}
        for row in sorted(token_rows, key=lambda r: r["val_rmse"]):
            self.rows.append({"model": "Transformer", "stage": "tokenization", **row})
        # 2. the settings, on the kept tokenization; configuration 0 is the base run above
        view = TOKEN_VIEWS[kept]
        configs = [dict(base)] + draw(sizes["ft_space"], sizes["ft_configs"])
        assert all(base[k] in values for k, values in sizes["ft_space"].items())
        rows, preds = [], {}
        for i, p in enumerate(runtime.progress(configs, desc="Transformer")):
            t0 = time.perf_counter()
            if i == 0:
                model, hist, seconds = runs[kept]
            else:
                model, hist = self.train_net(self.build_ft(p, view), view, p)
                seconds = time.perf_counter() - t0
            preds[i] = self.predict(model, view)
            rows.append({"config": i, "seed": SEED, "val_rmse": rmse(preds[i], v.y["val"]),
                         "length": len(hist), "seconds": seconds,
                         "parameters": tabular.count_parameters(model), "tokenization": kept,
                         **p})
        self.meta["seconds"]["Transformer"] = time.perf_counter() - start
        self.record("Transformer", "search", rows, sizes["ft_space"], preds.__getitem__,
                    limits={"dropout": 0.0})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=sorted(SIZES),
                        default=os.environ.get("COURSE_PROFILE", "full"))
    parser.add_argument("--out", type=Path, default=ROOT / "book" / "results" / "search",
                        help="folder for the table and its meta file (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (default: $COURSE_THREADS or what runtime chooses)")
    args = parser.parse_args(argv)
    sizes = SIZES[args.profile]
    t0 = time.perf_counter()
    device = runtime.setup(seed=SEED, threads=args.threads)
    search = Search(sizes, device)
    for step in (search.ridge, search.gbm, search.mlp, search.transformer):
        step()
        print(f"{step.__name__}: done at {time.perf_counter() - t0:.0f} s", flush=True)

    table = pd.DataFrame(search.rows)
    first = ["model", "stage", "config", "seed", "val_rmse", "rank", "length", "grown",
             "seconds", "parameters"]
    table = table[[c for c in first if c in table] + [c for c in table if c not in first]]
    args.out.mkdir(parents=True, exist_ok=True)
    table_path, meta_path = args.out / f"{NAME}.csv", args.out / f"{NAME}.json"
    table.to_csv(table_path, index=False, float_format="%.6g", lineterminator="\n")
    script = Path(__file__).resolve()
    meta = {
        "script": script.relative_to(ROOT).as_posix() if script.is_relative_to(ROOT)
        else script.name,
        "script_sha256": sha256(script),
        "table": table_path.name, "table_sha256": sha256(table_path),
        "profile": args.profile, "seed": SEED, "sampler": "ParameterSampler(random_state=0)",
        "budgets": {"ridge": len(sizes["ridge_alphas"]), "gradient boosting": sizes["gbm_configs"],
                    "MLP": sizes["mlp_configs"],
                    "Transformer": len(TOKEN_VIEWS) + sizes["ft_configs"]},  # trainings
        "spaces": {"ridge": {"alpha": sizes["ridge_alphas"]},
                   "gradient boosting": sizes["gbm_space"], "MLP": sizes["mlp_space"],
                   "Transformer": sizes["ft_space"]},
        "training": {k: sizes[k] for k in ("max_epochs", "patience", "batch_size", "train_rows",
                                           "gbm_max_iter", "gbm_patience", "token_margin",
                                           "bootstrap")},
        "transformer_base": sizes["transformer"],
        "data_fingerprint": search.v.fingerprint(),
        **search.meta,
        "wall_seconds": time.perf_counter() - t0,
        "machine": {"cpu": runtime_cpu(), "threads": torch.get_num_threads(),
                    "device": str(device), "python": platform.python_version(),
                    "torch": torch.__version__, "scikit-learn": sklearn.__version__,
                    "numpy": np.__version__, "pandas": pd.__version__},
    }
    meta_path.write_text(json.dumps(plain(meta), indent=1) + "\n", encoding="utf-8")
    print(f"{len(table)} configurations -> {table_path}; meta -> {meta_path} "
          f"({meta['wall_seconds']:.0f} s)")
    return 0


def runtime_cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    sys.exit(main())
