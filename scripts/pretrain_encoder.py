"""Pretrain the fine-tuning chapter's masked-LM encoder, at the shipped GPT's size and budget.

    python scripts/pretrain_encoder.py                    # full: rate search, then the run
    python scripts/pretrain_encoder.py --stage train      # only the run, at the committed rate
    python scripts/pretrain_encoder.py --profile smoke --out /tmp/encoder   # seconds
    python scripts/pretrain_encoder.py --profile gpu --out /tmp/encoder     # one GPU

The encoder is chapter 7's GPT built with ``GPTConfig(causal=False)``: the same blocks, sizes,
reviews, BPE and schedule as ``scripts/pretrain_gpt.py`` (whose functions it imports), so the
two pretrained models differ in their objective only. It reads every token of a window and
predicts 15 % of them (BERT's 80/10/10 rule, ``finetune.mask_tokens``); the ``<|endoftext|>``
between reviews is never masked. ``<mask>`` is id ``len(bpe)``, one embedding row past the
tokenizer's ids, which stay those of the shipped GPT (checked in the full profile).

It is a separate script so that ``pretrain_gpt.py``, whose SHA-256 the shipped GPT's card
records, stays the file that made that card.

1. **Search**: the GPT's grid of learning rates (extended past an edge, at most twice, until
   the best is bracketed) at the GPT search's compute per configuration, for the GPT's
   size (full: the shipped GPT's; other profiles: their smallest size). Scored by the
   masked-token perplexity of the validation reviews, masked once with a fixed seed.
   Written to ``book/results/search/pretrain_encoder.csv`` and ``.json``.
2. **The run**: the chosen rate for the shipped GPT's token budget (``run_tokens``), masked
   perplexity at 16 checkpoints. Weights with the tokenizer and the mask id go to
   ``data/pretrained/encoder_imdb.pt``, the card to ``book/results/pretrain/encoder_imdb.json``;
   the test reviews' masked perplexity is measured once, at the end.

The tokens a run reads are counted as the GPT's are (batch x context per step): the same
budget, though only 15 % of them are predicted.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this repository's course_lib
from course_lib import data, finetune, gpt, lm, runtime  # noqa: E402
from course_lib import precision as precisions  # noqa: E402

NAME = "pretrain_encoder"
CARD_NAME = "encoder_imdb"
MASK_P = 0.15
VAL_MASK_SEED = 1  # the validation and test masks: drawn once, the same for every model
GPT_CARD = ROOT / "book" / "results" / "pretrain" / "gpt_imdb.json"


def _load_gpt_script():
    spec = importlib.util.spec_from_file_location("pretrain_gpt", ROOT / "scripts" /
                                                  "pretrain_gpt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


G = _load_gpt_script()  # SIZES, SEED, prepare, make_config, machine, file_sha256
SEED = G.SEED


def encoder_config(vocab: int, d_model: int, layers: int, context: int) -> gpt.GPTConfig:
    """The GPT's config with one more id (``<mask>`` = ``vocab``) and no causal mask."""
    return dataclasses.replace(G.make_config(vocab + 1, d_model, layers, context), causal=False)


def encoder_size(sizes: dict) -> tuple[str, int, int]:
    """(name, d_model, layers): the shipped GPT's in the full profile, else the smallest."""
    if sizes["profile"] == "full":
        config = json.loads(GPT_CARD.read_text())["config"]
        d, layers = config["d_model"], config["num_layers"]
    else:
        d, layers = min(sizes["sizes"].values())
    return f"d{d} x {layers}", d, layers


def masked_rows(ids, context: int, mask_id: int, vocab: int, special_ids) -> tuple:
    """Reviews -> consecutive windows of ``context`` ids, masked once (VAL_MASK_SEED)."""
    stream = lm.token_stream(ids)
    n = len(stream) // context
    rows = stream[: n * context].view(n, context)  # [N, context]
    generator = torch.Generator().manual_seed(VAL_MASK_SEED)
    return finetune.mask_tokens(rows, mask_id, vocab, generator, p=MASK_P,
                                special_ids=special_ids)


def masked_ppl(model, rows, device) -> float:
    total, count = finetune.masked_token_nll(model, *rows, device=device)
    return float(math.exp(total / count))


def train_one(config, stream, tokens, lr, sizes, device, prec, pairs, evaluate=None,
              checkpoints=0, desc="train"):
    """As ``pretrain_gpt.train_one``, with the masked pairs instead of the shift by one."""
    per_step = sizes["batch_size"] * sizes["context"]
    steps = max(2, round(tokens / per_step))
    warmup = max(1, round(sizes["warmup_fraction"] * steps))
    torch.manual_seed(SEED)  # the same initial weights for every rate
    model = gpt.GPT(config)
    marks = [round(steps * k / checkpoints) for k in range(1, checkpoints)] if checkpoints else []
    history = lm.train(model, stream, steps, batch_size=sizes["batch_size"],
                       window=sizes["context"], lr=lr, warmup_steps=warmup,
                       schedule=gpt.warmup_cosine(warmup, steps, final_fraction=0.1),
                       checkpoints=marks, evaluate=evaluate, seed=SEED, device=device,
                       desc=desc, precision=prec, pairs=pairs)
    return model, history, steps, warmup


def setup(sizes, prepared) -> dict:
    """The mask id, the training pairs and the masked validation and test rows."""
    bpe = prepared["bpe"]
    vocab, specials = len(bpe), (bpe.bos_id,)
    return dict(vocab=vocab, mask_id=vocab, specials=specials,
                pairs=lambda: finetune.mlm_pairs(vocab, vocab, seed=SEED, p=MASK_P,
                                                 special_ids=specials),
                val=masked_rows(prepared["val_ids"], sizes["context"], vocab, vocab, specials),
                test=masked_rows(prepared["test_ids"], sizes["context"], vocab, vocab, specials))


def search(sizes, prepared, mlm, device, prec, out: Path) -> dict:
    """The rate search at the GPT search's compute; returns the winner."""
    name, d_model, layers = encoder_size(sizes)
    smallest = min(sizes["sizes"].values())
    budget = sizes["search_tokens"] * lm.flops_per_token(
        G.make_config(mlm["vocab"], *smallest, sizes["context"]))
    config = encoder_config(mlm["vocab"], d_model, layers, sizes["context"])
    tokens = budget / lm.flops_per_token(config)
    rows = []

    def run(lr):
        t = time.perf_counter()
        model, hist, steps, _ = train_one(config, prepared["stream"], tokens, lr, sizes, device,
                                          prec, mlm["pairs"](), desc=f"{name}, lr {lr:g}")
        row = {"size": name, "d_model": d_model, "layers": layers,
               "params": sum(p.numel() for p in model.parameters()), "lr": lr,
               "steps": steps, "tokens": int(hist["tokens"].iloc[-1]),
               "flops": float(hist["tokens"].iloc[-1] * lm.flops_per_token(config)),
               "train_seconds": round(float(hist["seconds"].iloc[-1]), 1),
               "train_loss_last": round(float(hist["train_loss"].iloc[-1]), 4),
               "val_masked_ppl": round(masked_ppl(model, mlm["val"], device), 3),
               "seed": SEED, "seconds": round(time.perf_counter() - t, 1)}
        print(f"  {name} lr {lr:g}: {steps} steps, {row['tokens']:,} tokens, "
              f"val masked ppl {row['val_masked_ppl']:.2f} ({row['seconds']:.0f} s)", flush=True)
        rows.append(row)
        return row["val_masked_ppl"]

    grid = {lr: run(lr) for lr in sizes["lr_grid"]}
    extended = []
    for _ in range(2):  # bracket the best rate: extend the grid past an edge
        best = min(grid, key=grid.get)
        if min(grid) < best < max(grid):
            break
        new = best / 2 if best == min(grid) else best * 2
        extended.append(new)
        grid[new] = run(new)
    table = pd.DataFrame(rows).sort_values("lr").reset_index(drop=True)
    winner = table.loc[table["val_masked_ppl"].idxmin()]
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / f"{NAME}.csv"
    table.to_csv(csv_path, index=False)
    meta = {"name": NAME, "profile": sizes["profile"], "seed": SEED, "objective": "mlm",
            "mask_p": MASK_P, "val_mask_seed": VAL_MASK_SEED,
            "flops_per_configuration": budget, "context": sizes["context"],
            "batch_size": sizes["batch_size"], "vocab_size": mlm["vocab"] + 1,
            "mask_id": mlm["mask_id"], "lr_grid": list(sizes["lr_grid"]), "extended": extended,
            "val_reviews": prepared["val_reviews"], "val_masked_tokens": int(
                (mlm["val"][1] != finetune.IGNORE).sum()),
            "winner": {"size": name, "d_model": d_model, "layers": layers,
                       "lr": float(winner["lr"]),
                       "val_masked_ppl": float(winner["val_masked_ppl"]),
                       "lr_bracketed": bool(table["lr"].min() < winner["lr"]
                                            < table["lr"].max())},
            **G.machine(device, prec),
            "script_sha256": G.file_sha256(__file__), "table_sha256": G.file_sha256(csv_path)}
    (out / f"{NAME}.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(table.to_string(index=False))
    print(f"winner: {meta['winner']}", flush=True)
    return meta["winner"]


def pretrain(sizes, prepared, mlm, winner, device, prec, weights: Path, card_path: Path) -> dict:
    config = encoder_config(mlm["vocab"], winner["d_model"], winner["layers"], sizes["context"])
    t0 = time.perf_counter()
    model, hist, steps, warmup = train_one(
        config, prepared["stream"], sizes["run_tokens"], winner["lr"], sizes, device, prec,
        mlm["pairs"](), evaluate=lambda m: {"val_masked_ppl": masked_ppl(m, mlm["val"], device)},
        checkpoints=sizes["checkpoints"], desc=f"pretrain encoder {winner['size']}")
    wall = time.perf_counter() - t0
    test_ppl = masked_ppl(model, mlm["test"], device)
    fpt = lm.flops_per_token(config)
    stream_tokens = len(prepared["stream"])
    hist["passes"] = hist["tokens"] / stream_tokens
    hist["flops"] = hist["tokens"] * fpt
    best = hist.loc[hist["val_masked_ppl"].idxmin()]
    last_quarter = hist[hist["step"] >= 0.75 * steps]
    gain = 1 - last_quarter["val_masked_ppl"].iloc[-1] / last_quarter["val_masked_ppl"].iloc[0]
    card = {
        "name": CARD_NAME, "profile": sizes["profile"], "seed": SEED, "objective": "mlm",
        "mask_p": MASK_P, "mask_rule": "80 % <mask>, 10 % random id, 10 % unchanged",
        "mask_id": mlm["mask_id"], "val_mask_seed": VAL_MASK_SEED,
        "script": f"scripts/{NAME}.py", "script_sha256": G.file_sha256(__file__),
        "config": config.to_dict(), "params": sum(p.numel() for p in model.parameters()),
        "lr": winner["lr"], "batch_size": sizes["batch_size"], "context": sizes["context"],
        "steps": steps, "warmup_steps": warmup, "tokens": int(hist["tokens"].iloc[-1]),
        "train_stream_tokens": stream_tokens,
        "passes": round(float(hist["passes"].iloc[-1]), 3),
        "flops": float(hist["flops"].iloc[-1]), "flops_per_token": fpt,
        "train_minutes": round(float(hist["seconds"].iloc[-1]) / 60, 2),
        "wall_minutes": round(wall / 60, 2),
        **G.machine(device, prec),
        "train_reviews": prepared["train_reviews"], "val_reviews": prepared["val_reviews"],
        "test_reviews": prepared["test_reviews"],
        "checkpoints": [{k: (round(float(v), 4) if isinstance(v, float) else int(v))
                         for k, v in row.items()} for row in hist.to_dict("records")],
        "best_step": int(best["step"]), "best_is_last": bool(best["step"] == steps),
        "last_quarter_val_gain": round(float(gain), 4),
        "final_val_masked_ppl": float(hist["val_masked_ppl"].iloc[-1]),
        "test_masked_ppl": test_ppl,
    }
    weights.parent.mkdir(parents=True, exist_ok=True)
    gpt.save(model, weights, tokenizer=prepared["bpe"].to_json(), mask_id=mlm["mask_id"],
             split_seed=SEED, final_val_masked_ppl=card["final_val_masked_ppl"],
             card_name=CARD_NAME)
    card["weights"] = weights.name
    card["weights_sha256"] = G.file_sha256(weights)
    card["weights_bytes"] = weights.stat().st_size
    card_path.parent.mkdir(parents=True, exist_ok=True)
    card_path.write_text(json.dumps(card, indent=1) + "\n")
    print(hist.round(4).to_string(index=False))
    print(f"final validation masked perplexity {card['final_val_masked_ppl']:.2f}, test "
          f"{test_ppl:.2f}; {card['passes']:.2f} passes in {card['train_minutes']:.1f} min",
          flush=True)
    return card


def check_tokenizer(bpe) -> None:
    """The full profile's BPE must be the shipped GPT's, so both models read the same ids."""
    _, saved = data.load_pretrained_gpt()
    if bpe.to_json() != saved["tokenizer"]:
        raise RuntimeError("the BPE trained here differs from the shipped GPT's "
                           "(data/pretrained/gpt_imdb.pt): a changed tokenizers version or "
                           "data; the two models would not read the same ids")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", choices=sorted(G.SIZES), default="full")
    parser.add_argument("--stage", choices=("all", "search", "train"), default="all")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for everything written (required unless --profile full)")
    args = parser.parse_args(argv)
    if args.profile != "full" and args.out is None:
        parser.error(f"--profile {args.profile} writes nowhere in the repository: name --out")
    sizes = {**G.SIZES[args.profile], "profile": args.profile}
    runtime.set_seed(SEED)
    device = runtime.get_device()
    threads = runtime.set_threads()
    _, d_model, layers = encoder_size(sizes)
    step = {"batch": sizes["batch_size"], "length": sizes["context"], "vocab": 4096,
            "d_model": d_model, "layers": layers}
    prec = precisions.choose(device, "fp32" if args.profile == "smoke" else None,
                             probe_step=step if args.profile != "smoke" else None)
    print(f"{NAME} ({args.profile}): {device}, {threads} threads, {prec}", flush=True)
    if args.profile == "full":
        search_out = ROOT / "book" / "results" / "search"
        weights = ROOT / "data" / "pretrained" / f"{CARD_NAME}.pt"
        card_path = ROOT / "book" / "results" / "pretrain" / f"{CARD_NAME}.json"
    else:
        search_out = args.out / "search"
        weights = args.out / f"{CARD_NAME}.pt"
        card_path = (ROOT / "book" / "results" / "gpu" / f"{NAME}.json"
                     if args.profile == "gpu" else args.out / f"{CARD_NAME}.json")
    prepared = G.prepare(sizes)
    if args.profile == "full":
        check_tokenizer(prepared["bpe"])
    mlm = setup(sizes, prepared)
    if args.stage in ("all", "search"):
        winner = search(sizes, prepared, mlm, device, prec, search_out)
    else:
        winner = json.loads((search_out / f"{NAME}.json").read_text())["winner"]
        print(f"the committed search's winner: {winner}", flush=True)
    if args.stage in ("all", "train"):
        pretrain(sizes, prepared, mlm, winner, device, prec, weights, card_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
