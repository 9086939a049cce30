"""The learning rate of every way of adapting a model in chapter 12, chosen on validation.

    python scripts/finetune_search.py                                 # full (~25 min, 2 CPUs)
    python scripts/finetune_search.py --profile smoke --out /tmp/fs   # seconds

For each arm (the shipped GPT fine-tuned in full or with LoRA, the masked-LM encoder
fine-tuned in full, the GPT's architecture from random initialisation) and each label
budget, every rate of the arm's grid trains exactly as chapter 12 trains it
(``finetune.fit_classifier``: rounds of at least 64 examples, early stopping on the
validation loss) on draw 0 of the labels, a draw the chapter does not report. Each run is
scored by its best validation loss (accuracy beside it). Where an arm's best rate lies on
the edge of its grid, the grid is extended by a factor 3 on that side, at most twice, so
every chosen rate is bracketed or the table says it is not.

Writes ``book/results/search/finetune_12.csv`` (one row per run) and ``finetune_12.json``
(the sizes, the machine, the script's SHA-256, each arm's winner per budget). The smoke
profile writes under ``--out`` only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this repository's course_lib

from course_lib import finetune, runtime  # noqa: E402
from course_lib.precision import cpu_model  # noqa: E402

NAME = "finetune_12"
GRIDS = {"full": (1e-4, 3e-4, 1e-3), "lora": (1e-3, 3e-3, 1e-2), "random": (3e-4, 1e-3, 3e-3)}
MAX_EXTENSIONS = 2


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=("full", "smoke"), default="full")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.profile != "full" and args.out is None:
        parser.error("the smoke profile writes under --out only")
    out = ROOT / "book" / "results" / "search" if args.out is None else args.out
    out.mkdir(parents=True, exist_ok=True)
    sizes = finetune.SIZES[args.profile]
    runtime.set_seed(0)
    device = runtime.get_device()
    threads = runtime.set_threads()
    start = time.perf_counter()
    task = finetune.sentiment_task(sizes)
    rows = []

    def run(arm, budget, lr):
        spec = finetune.ARMS[arm]
        index = finetune.label_budget_sample(task["train_labels"], budget, seed=0)
        clf = finetune.adapt(task[spec["backbone"]], spec["how"], task["pad_id"],
                             pool=spec["pool"], seed=0).to(device)
        fit = finetune.fit_classifier(clf, task["train_rows"][index],
                                      task["train_labels"][index], task["val_rows"],
                                      task["val_labels"], lr, seed=0, device=device,
                                      **sizes["fit"], desc=f"{arm} {budget} lr {lr:g}")
        row = dict(arm=arm, budget=budget, lr=lr, val_loss=round(fit["val_loss"], 4),
                   val_acc=round(fit["val_acc"], 4), best_round=fit["best_round"],
                   rounds=fit["rounds"], at_cap=fit["at_cap"],
                   epochs_per_round=fit["epochs_per_round"], steps=fit["steps"],
                   trained_params=fit["trained_params"], seconds=round(fit["seconds"], 1),
                   draw=0)
        print(row, flush=True)
        rows.append(row)
        return row

    winners = {}
    for arm in finetune.ARMS:
        for budget in sizes["budgets"]:
            grid = list(GRIDS[finetune.ARMS[arm]["how"]])
            scores = {lr: run(arm, budget, lr)["val_loss"] for lr in grid}
            extensions = 0
            while extensions < MAX_EXTENSIONS:
                best = min(scores, key=scores.get)
                if best == min(scores):
                    new = best / 3
                elif best == max(scores):
                    new = best * 3
                else:
                    break
                scores[new] = run(arm, budget, new)["val_loss"]
                extensions += 1
            best = min(scores, key=scores.get)
            bracketed = min(scores) < best < max(scores)
            winners.setdefault(arm, {})[str(budget)] = dict(lr=best, val_loss=scores[best],
                                                            bracketed=bracketed)

    table = pd.DataFrame(rows)
    table.to_csv(out / f"{NAME}.csv", index=False)
    meta = dict(name=NAME, profile=args.profile, sizes=sizes,
                grids={k: list(v) for k, v in GRIDS.items()}, winners=winners,
                device=str(device), cpu=cpu_model(), threads=threads,
                precision="float32", minutes=round((time.perf_counter() - start) / 60, 1),
                script_sha256=sha256(Path(__file__)), table_sha256=sha256(out / f"{NAME}.csv"))
    (out / f"{NAME}.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(winners, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
