"""Chapter 5's forecasters, trained until validation stops improving: the search, then the
chosen models from three new seeds, written as a table, histories and weights.

    python scripts/train_05_time_series.py           # full size: about 100-120 minutes on 2 CPU cores
    python scripts/train_05_time_series.py --profile smoke --out /tmp/ts5   # seconds

1. The search. For each of the three neural models (learned-PE Transformer, ALiBi
   Transformer, LSTM) it draws the same configurations with scikit-learn's ParameterSampler
   (fixed sampler seed, before any training), trains each once (training seed 0) and scores
   it by MAE (degrees C) on the validation year 2013. The test year is never read.
2. The chosen configuration of each model (lowest validation MAE) is trained again from
   three seeds the search never used (1, 2, 3).

Every run has one recipe (course_lib.timeseries.train_forecaster): AdamW, one warm-up epoch,
then a constant learning rate, and early stopping: training stops when the validation loss
has not improved for `patience` epochs, and the best epoch's weights are kept. The cap
(`max_epochs`) is there only to stop a run that never stops improving; the table records
whether any run reached it.

It writes into --out (default book/results/search/):
- train_05_time_series.csv: one row per search configuration (model, config, settings,
  seed, sampler seed, parameters, epochs run, best epoch, whether the best was the cap,
  seconds per epoch, validation MAE);
- train_05_time_series.json: what the run was (profile, sizes, search space, machine,
  seconds, the script's SHA-256, the table's), the edge check of each winner
  (course_lib.tuning.edge_check with a paired block bootstrap over validation hours in
  weeks), and every final run: its seed, best epoch, epochs run, validation MAE and its
  per-epoch history;
and the final models' weights to --weights (default data/pretrained/forecasters_05.pt, with
its SHA-256 in the JSON). tests/tools/test_train_05_time_series.py checks the committed files
against this script and runs it at smoke size. Smoke runs must name --out (they write
nowhere in the repository).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scipy.stats import loguniform
from sklearn.model_selection import ParameterSampler
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this repository's course_lib
from course_lib import data, runtime, stats, training  # noqa: E402
from course_lib import timeseries as ts  # noqa: E402
from course_lib.precision import cpu_model  # noqa: E402
from course_lib.tuning import edge_check  # noqa: E402

NAME = "train_05_time_series"
SIZES = {
    "full": dict(search_configs=6, max_epochs=150, patience=5, windows_per_epoch=8744,
                 eval_stride=1, bootstrap=2000, final_seeds=[1, 2, 3]),
    "smoke": dict(search_configs=2, max_epochs=3, patience=1, windows_per_epoch=256,
                  eval_stride=16, bootstrap=200, final_seeds=[1, 2]),
}
# What the search may choose, for each neural model (the same draws for all):
SEARCH_SPACE = dict(lr=(5e-4, 5e-3),  # log-uniform between the two
                    layers=[1, 2], dropout=[0.0, 0.1, 0.2])
SEARCH_SIZES = {"Transformer (learned PE)": [32, 48, 64],  # d_model
                "Transformer (ALiBi)": [32, 48, 64],  # d_model
                "LSTM": [32, 48, 64]}  # hidden units
SEARCH_SEED = 0  # the sampler's seed: every configuration is fixed before any training
TRAIN_SEED = 0  # one training seed per configuration of the search
NUM_HEADS = 4  # both Transformers; their feed-forward width is 2 x d_model
TRAIN = dict(batch_size=128, weight_decay=1e-4, schedule="constant")  # lr is searched
WINDOW = 72  # hours of history; the target is the temperature one hour later
BLOCK_HOURS = 168  # the block bootstrap's block: one week of consecutive hours
SPLITS = {"train": (2010, 2012), "val": (2013, 2013), "test": (2014, 2014)}


def search_space(name: str) -> dict:
    """What the search may choose for one model, in the form ParameterSampler takes."""
    return {"lr": loguniform(*SEARCH_SPACE["lr"]), "size": SEARCH_SIZES[name],
            "layers": SEARCH_SPACE["layers"], "dropout": SEARCH_SPACE["dropout"]}


def sample_configs(name: str, n: int) -> list[dict]:
    """The search's configurations for one model (fixed by SEARCH_SEED, drawn up front)."""
    space = search_space(name)
    draws = ParameterSampler(space, n_iter=n, random_state=SEARCH_SEED)
    return [{k: float(c[k]) if k in ("lr", "dropout") else int(c[k]) for k in space}
            for c in draws]


def mae_gap(err_a, err_b) -> float:
    """MAE(a) - MAE(b) from per-hour absolute errors."""
    return float(err_a.mean() - err_b.mean())


def file_sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", choices=sorted(SIZES), default="full")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the table (default: book/results/search, full "
                             "profile only)")
    parser.add_argument("--weights", type=Path, default=None,
                        help="file for the final models (default: "
                             "data/pretrained/forecasters_05.pt, full profile only; "
                             "else OUT/forecasters_05.pt)")
    args = parser.parse_args(argv)
    if args.out is None:
        if args.profile != "full":
            parser.error("a smoke run writes nowhere in the repository: give --out DIR")
        args.out = runtime.repo_root() / "book" / "results" / "search"
    if args.weights is None:
        args.weights = (runtime.repo_root() / "data" / "pretrained" / "forecasters_05.pt"
                        if args.profile == "full" and args.out == runtime.repo_root() / "book"
                        / "results" / "search" else args.out / "forecasters_05.pt")
    sizes = SIZES[args.profile]
    t0 = time.perf_counter()
    device = runtime.setup(seed=TRAIN_SEED)

    # the chapter's data: 12 inputs per hour, scaled with the training years' statistics
    weather = data.load_beijing()
    features = ts.weather_features(weather)
    temp = list(features.columns).index("TEMP")
    splits = ts.year_splits(weather.datetime, SPLITS)
    scaler = ts.Standardizer().fit(features.iloc[splits["train"]])
    values = scaler.transform(features)
    X_tr, y_tr, _ = ts.make_windows(values, values[:, temp], splits["train"], WINDOW)
    X_va, y_va, _ = ts.make_windows(values, values[:, temp], splits["val"], WINDOW,
                                    stride=sizes["eval_stride"])
    y_val_c = scaler.inverse(y_va.numpy(), temp)  # degrees C
    train_set = TensorDataset(X_tr, y_tr)
    val_loader = DataLoader(TensorDataset(X_va, y_va), batch_size=1024)

    configs = {name: sample_configs(name, sizes["search_configs"]) for name in ts.FORECASTERS}
    # the same draws for every model: learning rate, depth, dropout and the width's position
    paired = [[(c["lr"], c["layers"], c["dropout"], SEARCH_SIZES[n].index(c["size"]))
               for c in configs[n]] for n in ts.FORECASTERS]
    assert all(p == paired[0] for p in paired)

    rows, seconds, val_pred = [], {}, {}
    for name in ts.FORECASTERS:
        start = time.perf_counter()
        for k, config in enumerate(configs[name]):
            model, history = ts.train_forecaster(
                name, config, train_set, val_loader, temp, seed=TRAIN_SEED,
                epochs=sizes["max_epochs"], patience=sizes["patience"],
                windows_per_epoch=sizes["windows_per_epoch"], num_heads=NUM_HEADS,
                device=device, desc=f"search: {name}, config {k}", **TRAIN)
            val_pred[name, k] = scaler.inverse(ts.predict(model, X_va, device=device), temp)
            rows.append({"model": name, "config": k, **config, "seed": TRAIN_SEED,
                         "sampler_seed": SEARCH_SEED,
                         "parameters": training.count_parameters(model),
                         "epochs_run": len(history),
                         "best_epoch": int(history.epoch[history.val_loss.idxmin()]),
                         "best_at_cap": bool(history.val_loss.idxmin() == sizes["max_epochs"] - 1),
                         "seconds_per_epoch": float(history.seconds.mean()),
                         "val_mae": ts.mae(val_pred[name, k], y_val_c)})
        seconds[name] = time.perf_counter() - start
    table = pd.DataFrame(rows)

    # edge check: is a winner on the edge of its range better than the best off that edge?
    block = max(1, BLOCK_HOURS // sizes["eval_stride"])  # in rows of the validation table
    edges = []
    for name in ts.FORECASTERS:
        calls = {}  # the interval given for each comparison, to store its numbers

        def compare(a, b, name=name, calls=calls):
            err_a, err_b = (np.abs(val_pred[name, k] - y_val_c) for k in (a, b))  # [N] each
            gap = stats.block_bootstrap(mae_gap, err_a, err_b, block_length=block,
                                        n_resamples=sizes["bootstrap"], seed=TRAIN_SEED)
            hours = stats.bootstrap(mae_gap, err_a, err_b, n_resamples=sizes["bootstrap"],
                                    seed=TRAIN_SEED)  # hours as if independent: too narrow
            calls[str(gap)] = (b, gap, hours)
            return gap

        ranked = table[table.model == name].sort_values("val_mae").set_index("config")
        check = edge_check(ranked, search_space(name), compare=compare,
                           limits={"layers": 1, "dropout": 0.0})
        for setting, row in check.to_dict("index").items():
            other, gap, hours = calls.get(row["winner minus best off the edge"], (None,) * 3)
            edges.append({"model": name, "setting": setting, **row, "compared_with": other,
                          **({} if gap is None else {
                              "gap": [gap.estimate, gap.low, gap.high],
                              "gap_hour_bootstrap": [hours.estimate, hours.low, hours.high]})})

    # the chosen configuration of each model, trained again from seeds the search never used
    chosen = {name: int(table[table.model == name].sort_values("val_mae").iloc[0].config)
              for name in ts.FORECASTERS}
    finals, weights, final_seconds = [], {}, {}
    for name in ts.FORECASTERS:
        start = time.perf_counter()
        for seed in sizes["final_seeds"]:
            model, history = ts.train_forecaster(
                name, configs[name][chosen[name]], train_set, val_loader, temp, seed=seed,
                epochs=sizes["max_epochs"], patience=sizes["patience"],
                windows_per_epoch=sizes["windows_per_epoch"], num_heads=NUM_HEADS,
                device=device, desc=f"final: {name}, seed {seed}", **TRAIN)
            best = int(history.val_loss.idxmin())
            finals.append({
                "model": name, "config": chosen[name], "seed": seed,
                "epochs_run": len(history), "best_epoch": int(history.epoch[best]),
                "best_at_cap": bool(best == sizes["max_epochs"] - 1),
                "val_mae": ts.mae(scaler.inverse(ts.predict(model, X_va, device=device), temp),
                                  y_val_c),
                "history": history[["epoch", "train_loss", "val_loss", "seconds"]]
                .round(7).to_dict("list")})
            weights[name, seed] = {k: v.detach().cpu().clone()
                                   for k, v in model.state_dict().items()}
        final_seconds[name] = time.perf_counter() - start
    args.weights.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"configs": {name: configs[name][chosen[name]] for name in ts.FORECASTERS},
                "n_features": int(X_tr.shape[-1]), "temp_index": temp, "window": WINDOW,
                "num_heads": NUM_HEADS, "scaler": {"mean": scaler.scaler_.mean_.tolist(),
                                                   "std": scaler.scaler_.scale_.tolist()},
                "models": {f"{name}|{seed}": sd for (name, seed), sd in weights.items()}},
               args.weights)

    args.out.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = args.out / f"{NAME}.csv", args.out / f"{NAME}.json"
    table.to_csv(csv_path, index=False, float_format="%.6g", lineterminator="\n")
    meta = {
        "script": "scripts/train_05_time_series.py",
        "script_sha256": file_sha256(__file__),
        "table": csv_path.name,
        "table_sha256": file_sha256(csv_path),
        "profile": args.profile,
        "sizes": sizes,
        "search_space": {"lr": {"log-uniform": list(SEARCH_SPACE["lr"])},
                         "layers": SEARCH_SPACE["layers"], "dropout": SEARCH_SPACE["dropout"],
                         "size": SEARCH_SIZES},
        "sampler_seed": SEARCH_SEED,
        "training_seed": TRAIN_SEED,
        "train": TRAIN, "num_heads": NUM_HEADS, "window_hours": WINDOW,
        "block_hours": BLOCK_HOURS,
        "seconds_per_model": {k: round(v, 1) for k, v in seconds.items()},
        "final_seconds_per_model": {k: round(v, 1) for k, v in final_seconds.items()},
        "chosen": chosen,
        "finals": finals,
        "weights": {"file": str(args.weights.relative_to(runtime.repo_root()))
                    if args.weights.is_relative_to(runtime.repo_root()) else args.weights.name,
                    "sha256": file_sha256(args.weights)},
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "device": device.type, "cpu": cpu_model(), "threads": torch.get_num_threads(),
        "torch": torch.__version__.split("+")[0],
        "edges": edges,
    }
    json_path.write_text(json.dumps(meta, indent=1, default=str) + "\n")
    print(f"wrote {csv_path} ({len(table)} configurations), {json_path} and "
          f"{args.weights} in {meta['wall_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
