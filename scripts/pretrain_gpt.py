"""Pretrain chapter 7's GPT on the IMDB training reviews, once, and ship the weights.

    python scripts/pretrain_gpt.py                    # full: search, then the run (~90 min, 2 CPUs)
    python scripts/pretrain_gpt.py --stage search     # only the search table
    python scripts/pretrain_gpt.py --stage train      # only the run, with the committed winner
    python scripts/pretrain_gpt.py --profile smoke --out /tmp/pretrain   # seconds
    python scripts/pretrain_gpt.py --profile gpu --out /tmp/pretrain     # one GPU, minutes

Data: ``text.imdb_lm_splits`` with seed 0, as chapter 7 (validation = whole movies of the
official train split; the official test split is never trained on). The byte-level BPE of
4,096 pieces is trained on every training review, as chapter 7 trains it.

1. **Search** (compute-matched): every (size, learning rate) of the grid trains from the same
   initial seed on the same batches for the same number of FLOPs (``lm.flops_per_token``),
   with warm-up then cosine decay, and is scored by validation perplexity. Where a size's best
   rate lies on the edge of the grid, the grid is extended by a factor 2 on that side (at most
   twice), so the chosen rate is bracketed. Written to ``book/results/search/pretrain_gpt.csv``
   (one row per configuration) and ``.json`` (the script's SHA-256, the machine, the winner).
2. **The run**: the winner of the search trains for a fixed token budget with the same
   schedule; validation perplexity at 16 checkpoints. It writes the weights with the
   tokenizer to ``data/pretrained/gpt_imdb.pt`` and its card to
   ``book/results/pretrain/gpt_imdb.json``: steps, tokens, passes, FLOPs, minutes, CPU model,
   threads, precision, every checkpoint, the best step and whether it was the last, and the
   test perplexity of chapter 7's 1,000 test reviews (measured once, at the end; nothing is
   chosen on it).

The smoke profile runs everything tiny into ``--out`` (required: it writes nowhere in the
repository). The gpu profile runs a larger model for more tokens; its card goes to
``book/results/gpu/pretrain_gpt.json`` and its weights to ``--out``.
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
from course_lib import data, gpt, lm, runtime, text  # noqa: E402
from course_lib import precision as precisions  # noqa: E402

NAME = "pretrain_gpt"
SEED = 0
# Model sizes the search compares (all with 4 heads, d_ff = 4 d, context `context`).
SIZES = {
    "full": dict(vocab_size=4096, context=128, batch_size=32, val_reviews=500,
                 test_reviews=1000, stride=64,
                 sizes={"d128 x 4": (128, 4), "d192 x 4": (192, 4)},
                 lr_grid=(1e-3, 2e-3, 4e-3),
                 search_tokens=3_000_000,  # per configuration, for the smallest size
                 run_tokens=28_000_000, checkpoints=16, warmup_fraction=0.02),
    "gpu": dict(vocab_size=4096, context=256, batch_size=64, val_reviews=500,
                test_reviews=1000, stride=128,
                sizes={"d256 x 6": (256, 6), "d384 x 6": (384, 6)},
                lr_grid=(5e-4, 1e-3, 2e-3),
                search_tokens=8_000_000,
                run_tokens=64_000_000, checkpoints=16, warmup_fraction=0.02),
    "smoke": dict(vocab_size=300, context=32, batch_size=4, val_reviews=8, test_reviews=8,
                  stride=16, sizes={"d16 x 1": (16, 1), "d32 x 1": (32, 1)},
                  lr_grid=(1e-3, 4e-3, 1.6e-2), search_tokens=2_000, run_tokens=4_000,
                  checkpoints=2, warmup_fraction=0.1, train_reviews=60),
}
# The chapter's test reviews: chapter 7 draws 100 validation then 1,000 test reviews with one
# generator seeded SEED; the same draws here give the same 1,000 test reviews.
CHAPTER7_VAL_REVIEWS = 100


def file_sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def take(df: pd.DataFrame, n, rng) -> pd.DataFrame:
    """n random rows of df in their original order (chapter 7's `take`)."""
    if n is None or n >= len(df):
        return df
    return df.iloc[np.sort(rng.choice(len(df), n, replace=False))]


def prepare(sizes: dict) -> dict:
    """The texts, the tokenizer and the token ids (train stream, validation, test)."""
    splits = text.imdb_lm_splits(data.load_imdb("train"), data.load_imdb("test"),
                                 val_fraction=0.1, seed=SEED)
    rng = np.random.default_rng(SEED)
    train = take(splits["train"], sizes.get("train_reviews"), rng)
    take(splits["val"], CHAPTER7_VAL_REVIEWS, rng)  # chapter 7's draw, so test matches its own
    test = take(splits["test"], sizes["test_reviews"], rng)
    val = take(splits["val"], sizes["val_reviews"], np.random.default_rng([SEED, 1]))
    t = time.perf_counter()
    bpe = text.BPETokenizer.train(list(train["review"]), vocab_size=sizes["vocab_size"])
    train_ids = bpe.encode_batch(list(train["review"]), add_bos=True)
    out = dict(bpe=bpe, stream=lm.token_stream(train_ids),
               val_ids=bpe.encode_batch(list(val["review"]), add_bos=True),
               test_ids=bpe.encode_batch(list(test["review"]), add_bos=True),
               train_reviews=len(train), val_reviews=len(val), test_reviews=len(test),
               tokenizer_seconds=time.perf_counter() - t)
    print(f"{len(train):,} training reviews, {len(out['stream']):,} tokens; "
          f"{len(val)} validation and {len(test)} test reviews; BPE of {len(bpe):,} pieces "
          f"in {out['tokenizer_seconds']:.0f} s", flush=True)
    return out


def make_config(vocab: int, d_model: int, layers: int, context: int) -> gpt.GPTConfig:
    return gpt.GPTConfig(vocab_size=vocab, max_len=context, d_model=d_model, num_heads=4,
                         num_layers=layers, d_ff=4 * d_model, dropout=0.0, pad_id=None)


def val_ppl(model, ids, sizes, device) -> float:
    nll = lm.target_nll(model, ids, sizes["context"], sizes["stride"], device=device)
    return float(math.exp(nll.mean()))


def train_one(config, stream, tokens, lr, sizes, device, prec, evaluate=None, checkpoints=0,
              desc="train"):
    """One run of `tokens` training tokens: warm-up, cosine decay to 10 % of `lr`."""
    per_step = sizes["batch_size"] * sizes["context"]
    steps = max(2, round(tokens / per_step))
    warmup = max(1, round(sizes["warmup_fraction"] * steps))
    torch.manual_seed(SEED)  # the same initial weights for every rate of a size
    model = gpt.GPT(config)
    marks = [round(steps * k / checkpoints) for k in range(1, checkpoints)] if checkpoints else []
    history = lm.train(model, stream, steps, batch_size=sizes["batch_size"],
                       window=sizes["context"], lr=lr, warmup_steps=warmup,
                       schedule=gpt.warmup_cosine(warmup, steps, final_fraction=0.1),
                       checkpoints=marks, evaluate=evaluate, seed=SEED, device=device,
                       desc=desc, precision=prec)
    return model, history, steps, warmup


def machine(device, prec) -> dict:
    return {"device": str(device), "cpu": precisions.cpu_model(),
            "threads": torch.get_num_threads(), "torch": torch.__version__,
            "precision": prec.card_name,
            "gpu": torch.cuda.get_device_name(0) if torch.device(device).type == "cuda" else None}


def search(sizes, prepared, device, prec, out: Path) -> dict:
    """The compute-matched grid; returns the winner (size name, d_model, layers, lr)."""
    vocab = len(prepared["bpe"])
    smallest = min(sizes["sizes"].values())
    budget = sizes["search_tokens"] * lm.flops_per_token(make_config(vocab, *smallest,
                                                                       sizes["context"]))
    rows = []

    def run(name, d_model, layers, lr):
        config = make_config(vocab, d_model, layers, sizes["context"])
        tokens = budget / lm.flops_per_token(config)
        t = time.perf_counter()
        model, hist, steps, _ = train_one(config, prepared["stream"], tokens, lr, sizes, device,
                                          prec, desc=f"{name}, lr {lr:g}")
        row = {"size": name, "d_model": d_model, "layers": layers,
               "params": sum(p.numel() for p in model.parameters()), "lr": lr,
               "steps": steps, "tokens": int(hist["tokens"].iloc[-1]),
               "flops": float(hist["tokens"].iloc[-1] * lm.flops_per_token(config)),
               "train_seconds": round(float(hist["seconds"].iloc[-1]), 1),
               "train_loss_last": round(float(hist["train_loss"].iloc[-1]), 4),
               "val_ppl": round(val_ppl(model, prepared["val_ids"], sizes, device), 3),
               "seed": SEED, "seconds": round(time.perf_counter() - t, 1)}
        print(f"  {name} lr {lr:g}: {row['steps']} steps, {row['tokens']:,} tokens, "
              f"val ppl {row['val_ppl']:.2f} ({row['seconds']:.0f} s)", flush=True)
        rows.append(row)
        return row["val_ppl"]

    extended = []
    for name, (d_model, layers) in sizes["sizes"].items():
        grid = {lr: run(name, d_model, layers, lr) for lr in sizes["lr_grid"]}
        for _ in range(2):  # bracket the best rate: extend the grid past an edge
            best = min(grid, key=grid.get)
            if best == min(grid):
                new = best / 2
            elif best == max(grid):
                new = best * 2
            else:
                break
            extended.append({"size": name, "lr": new})
            grid[new] = run(name, d_model, layers, new)
    table = pd.DataFrame(rows).sort_values(["size", "lr"]).reset_index(drop=True)
    winner = table.loc[table["val_ppl"].idxmin()]
    size_rows = table[table["size"] == winner["size"]]
    bracketed = size_rows["lr"].min() < winner["lr"] < size_rows["lr"].max()
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / f"{NAME}.csv"
    table.to_csv(csv_path, index=False)
    meta = {"name": NAME, "profile": sizes["profile"], "seed": SEED,
            "flops_per_configuration": budget, "context": sizes["context"],
            "batch_size": sizes["batch_size"], "vocab_size": vocab,
            "sizes": {k: list(v) for k, v in sizes["sizes"].items()},
            "lr_grid": list(sizes["lr_grid"]), "extended": extended,
            "schedule": f"linear warm-up over {sizes['warmup_fraction']:.0%} of the steps, "
                        "cosine decay to 10 % of the rate",
            "val_reviews": prepared["val_reviews"],
            "winner": {"size": winner["size"], "d_model": int(winner["d_model"]),
                       "layers": int(winner["layers"]), "lr": float(winner["lr"]),
                       "val_ppl": float(winner["val_ppl"]), "lr_bracketed": bool(bracketed)},
            **machine(device, prec),
            "script_sha256": file_sha256(__file__), "table_sha256": file_sha256(csv_path)}
    (out / f"{NAME}.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(table.to_string(index=False))
    print(f"winner: {meta['winner']}", flush=True)
    return meta["winner"]


def pretrain(sizes, prepared, winner, device, prec, weights: Path, card_path: Path) -> dict:
    vocab = len(prepared["bpe"])
    config = make_config(vocab, winner["d_model"], winner["layers"], sizes["context"])
    t0 = time.perf_counter()
    model, hist, steps, warmup = train_one(
        config, prepared["stream"], sizes["run_tokens"], winner["lr"], sizes, device, prec,
        evaluate=lambda m: {"val_ppl": val_ppl(m, prepared["val_ids"], sizes, device)},
        checkpoints=sizes["checkpoints"], desc=f"pretrain {winner['size']}")
    wall = time.perf_counter() - t0
    test_ppl = val_ppl(model, prepared["test_ids"], sizes, device)
    fpt = lm.flops_per_token(config)
    stream_tokens = len(prepared["stream"])
    hist["passes"] = hist["tokens"] / stream_tokens
    hist["flops"] = hist["tokens"] * fpt
    best = hist.loc[hist["val_ppl"].idxmin()]
    last_quarter = hist[hist["step"] >= 0.75 * steps]
    gain = 1 - last_quarter["val_ppl"].iloc[-1] / last_quarter["val_ppl"].iloc[0]
    params = sum(p.numel() for p in model.parameters())
    card = {
        "name": "gpt_imdb", "profile": sizes["profile"], "seed": SEED,
        "script": f"scripts/{NAME}.py", "script_sha256": file_sha256(__file__),
        "config": config.to_dict(), "params": params, "lr": winner["lr"],
        "batch_size": sizes["batch_size"], "context": sizes["context"], "steps": steps,
        "warmup_steps": warmup, "tokens": int(hist["tokens"].iloc[-1]),
        "train_stream_tokens": stream_tokens,
        "passes": round(float(hist["passes"].iloc[-1]), 3),
        "flops": float(hist["flops"].iloc[-1]), "flops_per_token": fpt,
        "train_minutes": round(float(hist["seconds"].iloc[-1]) / 60, 2),
        "wall_minutes": round(wall / 60, 2),
        **machine(device, prec),
        "train_reviews": prepared["train_reviews"], "val_reviews": prepared["val_reviews"],
        "test_reviews": prepared["test_reviews"], "stride": sizes["stride"],
        "checkpoints": [{k: (round(float(v), 4) if isinstance(v, float) else int(v))
                         for k, v in row.items()} for row in hist.to_dict("records")],
        "best_step": int(best["step"]), "best_is_last": bool(best["step"] == steps),
        "last_quarter_val_gain": round(float(gain), 4),
        "final_val_ppl": float(hist["val_ppl"].iloc[-1]),
        "test_ppl": test_ppl,
    }
    weights.parent.mkdir(parents=True, exist_ok=True)
    gpt.save(model, weights, tokenizer=prepared["bpe"].to_json(), split_seed=SEED,
             final_val_ppl=card["final_val_ppl"], val_reviews=prepared["val_reviews"],
             stride=sizes["stride"], card_name="gpt_imdb")
    card["weights"] = weights.name
    card["weights_sha256"] = file_sha256(weights)
    card["weights_bytes"] = weights.stat().st_size
    card_path.parent.mkdir(parents=True, exist_ok=True)
    card_path.write_text(json.dumps(card, indent=1) + "\n")
    print(hist.round(4).to_string(index=False))
    print(f"final validation perplexity {card['final_val_ppl']:.2f}, test {test_ppl:.2f}; "
          f"{card['passes']:.2f} passes in {card['train_minutes']:.1f} min of training",
          flush=True)
    return card


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", choices=sorted(SIZES), default="full")
    parser.add_argument("--stage", choices=("all", "search", "train"), default="all")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for everything written (required unless --profile full)")
    args = parser.parse_args(argv)
    if args.profile != "full" and args.out is None:
        parser.error(f"--profile {args.profile} writes nowhere in the repository: name --out")
    sizes = {**SIZES[args.profile], "profile": args.profile}
    runtime.set_seed(SEED)
    device = runtime.get_device()
    threads = runtime.set_threads()
    step = {"batch": sizes["batch_size"], "length": sizes["context"], "vocab": 4096,
            "d_model": min(v[0] for v in sizes["sizes"].values()),
            "layers": min(v[1] for v in sizes["sizes"].values())}
    prec = precisions.choose(device, "fp32" if args.profile == "smoke" else None,
                             probe_step=step if args.profile != "smoke" else None)
    print(f"{NAME} ({args.profile}): {device}, {threads} threads, {prec}", flush=True)
    if args.profile == "full":
        search_out = ROOT / "book" / "results" / "search"
        weights = ROOT / "data" / "pretrained" / "gpt_imdb.pt"
        card_path = ROOT / "book" / "results" / "pretrain" / "gpt_imdb.json"
    else:
        search_out = args.out / "search"
        weights = args.out / "gpt_imdb.pt"
        card_path = (ROOT / "book" / "results" / "gpu" / f"{NAME}.json"
                     if args.profile == "gpu" else args.out / "gpt_imdb.json")
    prepared = prepare(sizes)
    if args.stage in ("all", "search"):
        winner = search(sizes, prepared, device, prec, search_out)
    else:
        winner = json.loads((search_out / f"{NAME}.json").read_text())["winner"]
        print(f"the committed search's winner: {winner}", flush=True)
    if args.stage in ("all", "train"):
        pretrain(sizes, prepared, winner, device, prec, weights, card_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
