"""The learning rate of every rung of chapter 7's ladder, chosen on validation.

    python scripts/ladder_search.py                                 # full (~50 min, 2 CPUs)
    python scripts/ladder_search.py --profile smoke --out /tmp/ls   # seconds

The committed table also holds the controls and the longer runs (the JSON's ``minutes``:
about two hours on an Intel Xeon with 2 threads, all invocations together).

Every rung of ``course_lib.ladder.RUNGS`` trains, for each rate of a grid, exactly as
chapter 7 trains it: the same initial weights for every rate (seeded), the same batches for
every rung, the same number of tokens, warm-up then cosine decay to 10 % of the rate. Each
run is scored by validation perplexity on chapter 7's 100 validation reviews, at every
quarter of the run (so the table shows how much the last quarter still improved). Where a
rung's best rate lies on the edge of its grid, the grid is extended by a factor 2 on that
side (at most five times), so every chosen rate is bracketed.

``--rungs NAME ...`` searches those rungs only and merges them into the committed table; a
run already in the table (the same rung, rate and sizes) is reused, not trained again.
``--longer NAME ...`` trains those rungs' winners for twice the steps (``--times 4``: four
times). ``--controls NAME ...``
trains the controls of ``CONTROLS`` (rung 9 against rung 8): each changes one thing of its
parent rung; a control with its own grid is searched like a rung, the others train at their
parent's chosen rate.

Writes ``book/results/search/ladder_07.csv`` (one row per run) and ``ladder_07.json`` (the
sizes, the machine, the script's SHA-256, and each rung's winner); chapter 7 reads the
winners and trains them. The smoke profile writes under ``--out`` only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this repository's course_lib
from course_lib import data, gpt, ladder, lm, runtime, text  # noqa: E402
from course_lib import precision as precisions  # noqa: E402

NAME = "ladder_07"
SEED = 0
SIZES = {
    "full": dict(vocab_size=1024, window=64, stride=32, d_model=64, num_heads=4,
                 num_layers=4, batch_size=32, steps=2000, warmup_steps=100,
                 lr_grid=(5e-3, 1e-2, 2e-2), lr_grid_norm=(2e-3, 4e-3, 8e-3),
                 val_reviews=100, train_reviews=None),
    "smoke": dict(vocab_size=400, window=16, stride=8, d_model=32, num_heads=2,
                  num_layers=2, batch_size=8, steps=8, warmup_steps=2,
                  lr_grid=(2e-3, 4e-3, 8e-3), lr_grid_norm=(2e-3, 4e-3, 8e-3),
                  val_reviews=8, train_reviews=300),
}
MAX_EXTENSIONS = 5
NORMED = ("LayerNorm", "blocks", "tied head")  # rungs with LayerNorm start from lr_grid_norm
# Why is the tied head (rung 9) behind the untied one (rung 8)? Each control changes one thing.
CONTROLS = {
    # rung 8 with its head out of weight decay, as the tied head (an embedding) is
    "blocks, head undecayed": dict(parent="blocks", no_decay_head=True, search=False),
    # rung 9 as wide as it must be to have about rung 8's parameters (d_model 72: 331,056
    # against 336,256 at 1,024 pieces): the tied head's deficit in parameters paid back
    "tied head, wider": dict(parent="tied head", d_model=72, search=True),
    # rung 9 with a bias in its head, as rung 8's head has one
    "tied head + bias": dict(parent="tied head", head_bias=True, search=False),
    # rung 9 at rung 8's rate, its shared matrix at half of it (rung 9's own rate): does the
    # matrix that serves both ends hold the whole model to a lower rate?
    "tied head, rung 8's rate, embedding at half": dict(parent="tied head", lr_from="blocks",
                                                        embedding_scale=0.5, search=False),
    # rung 4 with a residual path around its attention: rung 5's control without the FFN
    "heads + residual": dict(parent="heads", residual=True, search=False),
}


class Residual(torch.nn.Module):
    """x + inner(x): a residual path around a rung's body."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return x + self.inner(x)


def file_sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def prepare(sizes: dict) -> dict:
    """Chapter 7's data: its training reviews, its BPE, its validation reviews."""
    splits = text.imdb_lm_splits(data.load_imdb("train"), data.load_imdb("test"),
                                 val_fraction=0.1, seed=SEED)
    rng = np.random.default_rng(SEED)  # chapter 7's draws, in chapter 7's order

    def take(df, n):
        return df if n is None or n >= len(df) else df.iloc[np.sort(rng.choice(len(df), n,
                                                                                 replace=False))]

    train = list(take(splits["train"], sizes["train_reviews"])["review"])
    val = list(take(splits["val"], sizes["val_reviews"])["review"])
    bpe = text.BPETokenizer.train(train, vocab_size=sizes["vocab_size"])
    return dict(bpe=bpe, stream=lm.token_stream(bpe.encode_batch(train, add_bos=True)),
                val_ids=bpe.encode_batch(val, add_bos=True))


def train_rung(rung, lr, sizes, prepared, device, prec, steps=None):
    """One run: returns its history (validation perplexity at every quarter) and the model."""
    steps = steps or sizes["steps"]
    control = CONTROLS.get(rung, {})
    torch.manual_seed(SEED)  # the same initial weights for every rate of a rung
    model = ladder.build(control.get("parent", rung), len(prepared["bpe"]), sizes["window"],
                         control.get("d_model", sizes["d_model"]), sizes["num_heads"],
                         sizes["num_layers"])
    no_decay = [model.head.weight] if control.get("no_decay_head") else []
    if control.get("head_bias"):
        model.head.bias = torch.nn.Parameter(torch.zeros(len(prepared["bpe"])))
    if control.get("residual"):
        model.body = Residual(model.body)
    lr_scale = ({model.token_embedding.weight: control["embedding_scale"]}
                if "embedding_scale" in control else None)

    def evaluate(m):
        nll = lm.target_nll(m, prepared["val_ids"], sizes["window"], sizes["stride"],
                            device=device)
        return {"val_ppl": float(math.exp(nll.mean()))}

    history = lm.train(model, prepared["stream"], steps, batch_size=sizes["batch_size"],
                       window=sizes["window"], lr=lr, warmup_steps=sizes["warmup_steps"],
                       schedule=gpt.warmup_cosine(sizes["warmup_steps"], steps, 0.1),
                       checkpoints=[steps // 4, steps // 2, 3 * steps // 4], evaluate=evaluate,
                       seed=SEED, device=device, desc=f"{rung}, lr {lr:g}", precision=prec,
                       no_decay=no_decay, lr_scale=lr_scale)
    return history, model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", choices=sorted(SIZES), default="full")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the table (required unless --profile full)")
    parser.add_argument("--rungs", nargs="*", default=None, help="only these rungs")
    parser.add_argument("--longer", nargs="*", default=None,
                        help="train these rungs once more at their chosen rate for twice the "
                             "steps (a control: does the ranking hold with more training?)")
    parser.add_argument("--times", type=int, default=2, choices=(2, 4),
                        help="--longer trains this many times the steps")
    parser.add_argument("--controls", nargs="*", default=None, choices=sorted(CONTROLS),
                        help="train these controls of CONTROLS")
    args = parser.parse_args(argv)
    if args.profile != "full" and args.out is None:
        parser.error(f"--profile {args.profile} writes nowhere in the repository: name --out")
    sizes = SIZES[args.profile]
    out = ROOT / "book" / "results" / "search" if args.profile == "full" else args.out
    runtime.set_seed(SEED)
    device = runtime.get_device()
    threads = runtime.set_threads()
    prec = precisions.choose(device, "fp32" if args.profile == "smoke" else None,
                             probe_step={"batch": sizes["batch_size"], "length": sizes["window"],
                                         "vocab": sizes["vocab_size"],
                                         "d_model": sizes["d_model"],
                                         "layers": sizes["num_layers"]})
    print(f"{NAME} ({args.profile}): {device}, {threads} threads, {prec}", flush=True)
    t0 = time.perf_counter()
    prepared = prepare(sizes)
    rows, extended, old = [], [], None
    csv_path, json_path = out / f"{NAME}.csv", out / f"{NAME}.json"
    if (args.rungs or args.longer or args.controls) and csv_path.exists():  # merge into it
        old = pd.read_csv(csv_path)
        meta_old = json.loads(json_path.read_text())
        extended = [e for e in meta_old["extended"] if e["rung"] not in (args.rungs or [])]

    def run(rung, lr, steps=None):
        steps = steps or sizes["steps"]
        if old is not None:
            same = old[(old["rung"] == rung) & np.isclose(old["lr"], lr)
                       & (old["steps"] == steps)]
            if len(same):
                rows.append(same.iloc[0].to_dict())
                print(f"  {rung} lr {lr:g}: reused, val ppl {same['val_ppl'].iloc[0]:.2f}")
                return float(same["val_ppl"].iloc[0])
        t = time.perf_counter()
        hist, model = train_rung(rung, lr, sizes, prepared, device, prec, steps)
        v = hist["val_ppl"].tolist()
        row = {"rung": rung, "lr": lr, "steps": steps,
               "tokens": int(hist["tokens"].iloc[-1]),
               "params": sum(p.numel() for p in model.parameters()),
               "val_ppl_q1": round(v[0], 3), "val_ppl_q2": round(v[1], 3),
               "val_ppl_q3": round(v[2], 3), "val_ppl": round(v[-1], 3),
               "last_quarter_gain": round(1 - v[-1] / v[2], 4),
               "train_loss_last": round(float(hist["train_loss"].iloc[-1]), 4),
               "train_seconds": round(float(hist["seconds"].iloc[-1]), 1),
               "seconds": round(time.perf_counter() - t, 1), "seed": SEED}
        print(f"  {rung} lr {lr:g}: val ppl {row['val_ppl']:.2f} (quarters {v[0]:.1f}, "
              f"{v[1]:.1f}, {v[2]:.1f}); {row['seconds']:.0f} s", flush=True)
        rows.append(row)
        return row["val_ppl"]

    winners = {}
    only_extra = (args.longer is not None or args.controls is not None) and not args.rungs
    searched = [] if only_extra else list(args.rungs or ladder.RUNGS)
    searched = searched + [c for c in args.controls or [] if CONTROLS[c]["search"]]
    for rung in searched:
        family = CONTROLS[rung]["parent"] if rung in CONTROLS else rung
        grid = {lr: run(rung, lr)
                for lr in sizes["lr_grid_norm" if family in NORMED else "lr_grid"]}
        for _ in range(MAX_EXTENSIONS):  # bracket the best rate: extend past an edge
            best = min(grid, key=grid.get)
            if best == min(grid):
                new = best / 2
            elif best == max(grid):
                new = best * 2
            else:
                break
            extended.append({"rung": rung, "lr": new})
            grid[new] = run(rung, new)
        best = min(grid, key=grid.get)
        winners[rung] = {"lr": best, "val_ppl": grid[best],
                         "lr_bracketed": bool(min(grid) < best < max(grid))}
    if old is not None:  # the other rungs' winners as committed
        winners = {**{k: v for k, v in meta_old["winners"].items() if k not in searched},
                   **winners}
    for rung in args.longer or []:  # the control: each winner again, twice as long (or more)
        run(rung, winners[rung]["lr"], args.times * sizes["steps"])
    for name in args.controls or []:  # the others at their parent's chosen rate
        if not CONTROLS[name]["search"]:
            spec = CONTROLS[name]
            run(name, winners[spec.get("lr_from", spec["parent"])]["lr"])
    table = pd.DataFrame(rows)
    if old is not None:  # the other rows as committed
        redone = set(zip(table["rung"], table["lr"].round(8), table["steps"]))
        keep = [(r, round(lr, 8), st) not in redone
                for r, lr, st in zip(old["rung"], old["lr"], old["steps"])]
        table = pd.concat([old[keep], table], ignore_index=True)
    order = {r: i for i, r in enumerate((*ladder.RUNGS, *CONTROLS))}
    table = table.sort_values(["rung", "steps", "lr"],
                              key=lambda c: c.map(order) if c.name == "rung"
                              else c).reset_index(drop=True)
    winners = {r: winners[r] for r in (*ladder.RUNGS, *CONTROLS) if r in winners}
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(csv_path, index=False)
    meta = {"name": NAME, "profile": args.profile, "seed": SEED,
            "sizes": {k: (list(v) if isinstance(v, tuple) else v) for k, v in sizes.items()},
            "schedule": f"linear warm-up over {sizes['warmup_steps']} steps, cosine decay to "
                        "10 % of the rate",
            "extended": extended, "winners": winners,
            "device": str(device), "cpu": precisions.cpu_model(), "threads": threads,
            "torch": torch.__version__, "precision": prec.card_name,
            "minutes": round((time.perf_counter() - t0) / 60
                             + (meta_old["minutes"] if old is not None else 0), 1),
            "script_sha256": file_sha256(__file__), "table_sha256": file_sha256(csv_path)}
    json_path.write_text(json.dumps(meta, indent=1) + "\n")
    print(table.to_string(index=False))
    print(json.dumps(winners, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
