# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 7. A small GPT: next-word prediction on IMDB reviews
#
# A GPT is a stack of Transformer blocks trained on one task only: read some text, predict
# the next word. Nothing else. Done at scale, this is the pre-training of GPT-3
# {cite}`brown2020language`; done on a laptop, it gives a model that completes movie reviews
# in passable English. This chapter builds the small one end to end, from raw reviews
# {cite}`maas2011learning` to generated text, and checks it against the count-based models it
# has to beat.
#
# **After this chapter you will be able to**
#
# - turn raw reviews into a word-level vocabulary and into next-token training pairs
#   (inputs $x$, targets $y$ shifted by one), with a split that keeps each movie on one side;
# - build a decoder-only Transformer from the course's blocks (causal mask, Pre-Norm,
#   learned positions, tied input/output embeddings) and count where its parameters go;
# - train it with AdamW, a warm-up + cosine schedule and gradient clipping;
# - measure perplexity, read it as "choosing among N words", and compare it with unigram
#   and Kneser-Ney bigram models fitted on the same tokens;
# - generate text at different temperatures and draw the tree of likely next words.

# %%
# (Colab set-up cell: replaced by tools/colab_cell.py)

# %% tags=["parameters"]
import os

PROFILE = os.environ.get("COURSE_PROFILE", "full")  # "full" (the book) or "smoke" (the tests)
SEED = 0

# %%
# Every size in this chapter follows from the profile, here and nowhere else.
SIZES = {
    "full": dict(
        vocab_words=5000, window=32,  # the seed's setup: 5,000 words, 32 tokens of context
        d_model=128, num_heads=4, num_layers=2, d_ff=512, dropout=0.1,
        batch_size=64, lr=4e-3, weight_decay=0.1, warmup_steps=100,
        steps_per_epoch=300,  # fit() checks the validation loss every 300 steps
        seed_epochs=2, full_epochs=10,  # run A (openings only) and run B (whole reviews)
        train_reviews=None, val_reviews=300, test_reviews=1500,
    ),
    "smoke": dict(
        vocab_words=500, window=32,
        d_model=32, num_heads=2, num_layers=1, d_ff=64, dropout=0.1,
        batch_size=32, lr=5e-3, weight_decay=0.1, warmup_steps=2,
        steps_per_epoch=4, seed_epochs=2, full_epochs=2,
        train_reviews=600, val_reviews=40, test_reviews=60,
    ),
}[PROFILE]
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
from torch.utils.data import DataLoader, TensorDataset

from course_lib import data, decoding, gpt, masks, ngram, results, runtime, text, training, viz

T0 = time.perf_counter()
device = runtime.setup(seed=SEED)
sns.set_theme(style="whitegrid", context="notebook")

# %% [markdown]
# ## 7.1 From reviews to token ids
#
# The reviews come with HTML line breaks (`<br />`), which `data.load_imdb` replaces by a
# space. Here is one review before and after that cleaning:

# %%
raw = data.load_imdb("train", clean=False)
example = raw.loc[raw["review"].str.contains("<br />"), "review"].iloc[0]
print("raw:    ", example[:300])
print("cleaned:", data.clean_review(example)[:300])

# %% [markdown]
# **A split that keeps each movie on one side.** A movie has up to 30 reviews, and they share
# names, plot words and quotes. If some of them were in training and others in the test set,
# the test would partly measure memorised names. The official train and test splits are
# already movie-disjoint; we hold out whole movies of the train split for validation, drop
# test reviews of the one movie that occurs in both official splits, and keep each text
# once (the data contain duplicates).

# %%
display(Code(inspect.getsource(text.imdb_lm_splits), language="python"))
splits = text.imdb_lm_splits(data.load_imdb("train"), data.load_imdb("test"), val_fraction=0.1,
                             seed=SEED)
for name, part in splits.items():
    print(f"{name:>5}: {len(part):>6,} reviews of {part['movie_id'].nunique():>5,} movies")
print("movies shared by train and val:",
      len(set(splits["train"]["movie_id"]) & set(splits["val"]["movie_id"])),
      "| train and test:", len(set(splits["train"]["movie_id"]) & set(splits["test"]["movie_id"])))

# %% [markdown]
# **Tokenizer.** Lowercase, then split into words and punctuation marks; a word may contain
# an apostrophe (`didn't`, `it's`), and each punctuation mark is a token of its own. It is
# the simplest tokenizer that keeps `movie.` and `movie` the same word (the seed splits on
# spaces only, which makes them two).

# %%
# NBVAL_CHECK_OUTPUT
sentence = "I didn't expect much... but this film (2006) is GREAT!"
print(text.tokenize(sentence))
print(text.detokenize(text.tokenize(sentence)))

# %% [markdown]
# **Vocabulary.** The 5,000 most frequent words of the *training* reviews, plus three special
# tokens: `<pad>` fills short rows, `<unk>` stands for every other word, and `<bos>` ("beginning
# of sequence") marks where a review starts. Validation and test words never enter the
# vocabulary.

# %%
rng = np.random.default_rng(SEED)


def take(df, n):
    """n random reviews of df (all of them when n is None)."""
    return df if n is None or n >= len(df) else df.iloc[np.sort(rng.choice(len(df), n, replace=False))]


train_df = take(splits["train"], SIZES["train_reviews"])
val_df = splits["val"]
test_df = take(splits["test"], SIZES["test_reviews"])

t = time.perf_counter()
train_tokens = [text.tokenize(r) for r in train_df["review"]]
vocab = text.Vocab.build(train_tokens, max_size=SIZES["vocab_words"])
V = len(vocab)
train_ids = [vocab.encode(toks, add_bos=True) for toks in train_tokens]
val_ids = [vocab.encode(r, add_bos=True) for r in val_df["review"]]
test_ids = [vocab.encode(r, add_bos=True) for r in test_df["review"]]
n_train_tokens = sum(len(s) - 1 for s in train_ids)
unk_share = sum(s.count(vocab.unk_id) for s in train_ids) / n_train_tokens
print(f"tokenized and encoded in {time.perf_counter() - t:.1f} s")
print(f"vocabulary: {V:,} tokens = {SIZES['vocab_words']:,} words + {vocab.itos[:3]}")
print(f"{len(vocab.counts):,} distinct words in the training reviews; "
      f"{n_train_tokens:,} tokens, of which {unk_share:.1%} become <unk>")
print("the 20 most frequent:", vocab.itos[3:23])

# %% [markdown]
# The round trip text → ids → text loses exactly what the vocabulary cannot hold: case (we
# lowercased), spacing around punctuation, and the rare words, which come back as `<unk>`.

# %%
review = test_df["review"].iloc[0]
ids = vocab.encode(review, add_bos=True)
print("text:   ", review[:200])
print("ids:    ", ids[:25], "...")
print("decoded:", vocab.decode(ids)[:200])

# %% [markdown]
# ## 7.2 The next-token dataset
#
# A language model learns from pairs "context → next token". The seed's recipe takes
# `<bos>` plus the first 32 tokens of every review, a row of 33 ids, and shifts it by one:
# the input $x$ is ids 0–31, the target $y$ is ids 1–32. One row gives 32 training pairs at
# once, because with a causal mask position $t$ only sees $x_0 \dots x_t$ and has to predict
# $y_t = x_{t+1}$.

# %%
W = SIZES["window"]
openings_train = text.next_token_windows(train_ids, W, vocab.pad_id, max_windows_per_sequence=1)
row = openings_train[0]
shift = pd.DataFrame({"x (input)": vocab.tokens(row[:-1]), "y (target)": vocab.tokens(row[1:])})
shift.index.name = "position t"
shift.head(10).T

# %% [markdown]
# That recipe reads only the first 32 tokens of each review and throws the rest away. The
# reviews are much longer, so we go beyond the seed: cut **every** review into windows of 32
# (consecutive windows overlap by one token, so each token of a review is a target exactly
# once). The first window of a review is the seed's row; the others start mid-review, without
# `<bos>`. Same model, same row shape, many more rows:

# %%
windows_train = text.next_token_windows(train_ids, W, vocab.pad_id)
windows_val = text.next_token_windows(val_ids[: SIZES["val_reviews"]], W, vocab.pad_id)
windows_test = text.next_token_windows(test_ids, W, vocab.pad_id)
openings_test = text.next_token_windows(test_ids, W, vocab.pad_id, max_windows_per_sequence=1)


def n_targets(rows):
    return int((rows[:, 1:] != vocab.pad_id).sum())


sizes = pd.DataFrame({
    "rows": [len(openings_train), len(windows_train)],
    "target tokens": [n_targets(openings_train), n_targets(windows_train)],
}, index=["seed: first 32 tokens", "all windows of 32"])
sizes["x more"] = sizes["target tokens"] / sizes["target tokens"].iloc[0]
print(f"the review texts hold {n_train_tokens:,} next-token targets; the windows use all of them")
sizes

# %% [markdown]
# ## 7.3 The model: a decoder-only Transformer
#
# `course_lib.gpt.GPT` is the model of GPT-2 {cite}`radford2019language` at toy size, built
# from the course's parts:
#
# - a token embedding plus a **learned** positional embedding
#   (`positional.LearnedPositionalEmbedding`, which refuses sequences longer than it was
#   built for);
# - `num_layers` **Pre-Norm** `blocks.EncoderBlock`s (LayerNorm before each sublayer, residual
#   around it; {cite}`xiong2020layer`), with dropout, given a **causal** mask: an
#   "encoder block" with a causal mask *is* a GPT decoder block, since there is no encoder to
#   cross-attend to;
# - a final LayerNorm and a linear head from $d_{model}$ to the vocabulary.
#
# The head's weight is the token embedding matrix itself (**tied weights**): the same
# $V \times d$ matrix maps a word to a vector on the way in and scores every word against the
# last hidden vector on the way out. Both jobs ask "which words are alike?", tying removes
# $V \cdot d$ parameters (most of a model this small, see below), and it usually lowers
# perplexity in small language models. We tie; exercise 1 counts what untying would cost.

# %%
display(Code(inspect.getsource(gpt.GPT.__init__) + "\n" + inspect.getsource(gpt.GPT.forward),
             language="python"))

# %%
config = gpt.GPTConfig(vocab_size=V, max_len=W, d_model=SIZES["d_model"], num_heads=SIZES["num_heads"],
                       num_layers=SIZES["num_layers"], d_ff=SIZES["d_ff"], dropout=SIZES["dropout"],
                       tie_weights=True, pad_id=vocab.pad_id)
model = gpt.GPT(config).to(device)
config

# %% [markdown]
# **The causal mask.** Over a real sentence, row $i$ (the query) may attend to columns
# $0 \dots i$ only: reading down the rows, each position sees one more word. This is what lets
# one forward pass train all 32 positions at once without any of them seeing its answer.

# %%
demo = "this movie was one of the best films i have seen ."
demo_ids = torch.tensor([vocab.encode(demo, add_bos=True)], device=device)
demo_labels = vocab.tokens(demo_ids[0])
fig, ax = plt.subplots(figsize=(6.5, 5))
viz.attention_heatmap(masks.causal_mask(len(demo_labels)).float(), demo_labels, demo_labels, ax=ax,
                      cmap="Blues", cbar=False,
                      title="Causal mask: 1 = may attend (query row → key column)")
plt.tight_layout()
plt.show()

# %% [markdown]
# **Where the parameters are.** The table is computed from `model.named_parameters()`. With
# tied weights the output head adds no matrix of its own (only the final LayerNorm before it).

# %%
def parameter_table(model):
    groups = {}
    for name, p in model.named_parameters():  # a tied matrix is listed once
        parts = name.split(".")
        if parts[0] == "token_embedding":
            key = "token embedding (= output head, tied)" if model.config.tie_weights else "token embedding"
        elif parts[0] == "position":
            key = "positional embedding"
        elif parts[0] == "blocks":
            kind = {"attn": "attention", "ffn": "feed-forward"}.get(parts[2], "LayerNorms")
            key = f"block {parts[1]}: {kind}"
        elif parts[0] == "final_norm":
            key = "final LayerNorm"
        else:
            key = "output head"
        groups[key] = groups.get(key, 0) + p.numel()
    table = pd.DataFrame({"parameters": groups})
    table["share"] = table["parameters"] / table["parameters"].sum()
    return table


ptable = parameter_table(model)
params_total = int(ptable["parameters"].sum())
lookup = [k for k in ptable.index if "embedding" in k or k == "output head"]
params_embedding_share = float(ptable.loc[lookup, "parameters"].sum() / params_total)
print(f"total {params_total:,} parameters; looking things up (embeddings, head): "
      f"{params_embedding_share:.1%}; Transformer layers: {1 - params_embedding_share:.1%}")
ptable.style.format({"parameters": "{:,}", "share": "{:.1%}"})

# %% [markdown]
# Most of a model this small is a lookup table. The same formula, written out once and checked
# against our model, sets it in context: the original Transformer base
# {cite}`vaswani2017attention` (an encoder-decoder) and GPT-3 175B {cite}`brown2020language`.
# Per block: attention $4(d^2 + d)$, feed-forward $2\,d\,d_{ff} + d_{ff} + d$, LayerNorms
# $2d$ each; a decoder block of the encoder-decoder has a second (cross-)attention and a third
# LayerNorm.

# %%
def transformer_params(vocab_size, d, layers, d_ff, max_len=0, tied=True, decoder_layers=0,
                       final_norm=True):
    """Parameters of a Transformer with biases everywhere and LayerNorm (gamma, beta)."""
    attention = 4 * (d * d + d)
    ffn = 2 * d * d_ff + d_ff + d
    norm = 2 * d
    blocks = layers * (attention + ffn + 2 * norm) + decoder_layers * (2 * attention + ffn + 3 * norm)
    lookup = vocab_size * d * (1 if tied else 2) + max_len * d
    return {"lookup (embeddings + head)": lookup, "Transformer layers": blocks + final_norm * norm,
            "total": lookup + blocks + final_norm * norm}


ours = transformer_params(V, config.d_model, config.num_layers, config.d_ff, config.max_len)
assert ours["total"] == params_total, (ours, params_total)
print(f"formula for our model: {ours['total']:,} = count from the model: {params_total:,}")

# %%
# NBVAL_CHECK_OUTPUT
setups = {
    # name: (vocab, d_model, layers, d_ff, learned positions, decoder layers, final LayerNorm)
    "Transformer base (6+6 layers)": (37000, 512, 6, 2048, 0, 6, False),
    "GPT-3 175B": (50257, 12288, 96, 4 * 12288, 2048, 0, True),
}
reported = {"Transformer base (6+6 layers)": 65e6, "GPT-3 175B": 175.0e9}  # as the papers state
rows = {}
for name, (vs, d, n, f, pos, dec, fn) in setups.items():
    c = transformer_params(vs, d, n, f, max_len=pos, decoder_layers=dec, final_norm=fn)
    rows[name] = {"vocab": vs, "d_model": d, "layers": f"{n}" + (f"+{dec}" if dec else ""),
                  "d_ff": f, "lookup": c["lookup (embeddings + head)"],
                  "layers params": c["Transformer layers"], "total": c["total"],
                  "lookup share": c["lookup (embeddings + head)"] / c["total"],
                  "paper reports": reported[name]}
context = pd.DataFrame(rows)
for key in ("lookup", "layers params", "total", "paper reports"):
    context.loc[key] = [f"{v:,.0f}" for v in context.loc[key]]
context.loc["lookup share"] = [f"{v:.2%}" for v in context.loc["lookup share"]]
print(context.to_string())

# %% [markdown]
# The formula lands close to what the papers report (they round, and do not give every
# detail, such as the exact vocabulary size or where biases are used). The trend is the point:
# in GPT-3 the lookup tables are a fraction of a percent of the parameters, in our model they
# are most of them. Scale goes into the layers; a small model is mostly a dictionary.

# %% [markdown]
# ## 7.4 Training
#
# - **Loss**: cross-entropy of the next token, averaged over the targets that are not
#   `<pad>` (`GPT.loss`).
# - **Optimizer**: AdamW {cite}`loshchilov2019decoupled` with decoupled weight decay 0.1 on the
#   blocks' weight matrices only (not on embeddings, LayerNorms or biases), betas (0.9, 0.95).
# - **Schedule**: linear warm-up, then a cosine decay to 10% of the peak rate, as a factor for
#   `torch.optim.lr_scheduler.LambdaLR`, stepped after every batch.
# - **Gradient clipping** at norm 1.
#
# `training.fit` runs the loop. Its "epoch" here is a fixed number of steps
# (`gpt.RowBatches`), so that the validation loss is checked at the same steps for two
# datasets of very different sizes.

# %%
display(Code(inspect.getsource(gpt.warmup_cosine) + "\n" + inspect.getsource(gpt.configure_optimizer),
             language="python"))

# %%
val_loader = DataLoader(TensorDataset(windows_val), batch_size=256)


def train(rows, epochs, desc, seed=SEED):
    """Train a fresh GPT on rows [N, W+1]; return the model, fit's history and the minutes."""
    torch.manual_seed(seed)
    m = gpt.GPT(config).to(device)
    steps = epochs * SIZES["steps_per_epoch"]
    optimizer = gpt.configure_optimizer(m, lr=SIZES["lr"], weight_decay=SIZES["weight_decay"])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, gpt.warmup_cosine(SIZES["warmup_steps"], steps))
    loader = gpt.RowBatches(rows, SIZES["batch_size"], SIZES["steps_per_epoch"], seed=seed)
    start = time.perf_counter()
    history = training.fit(m, loader, val_loader, optimizer=optimizer, epochs=epochs, device=device,
                           scheduler=scheduler, clip_grad_norm=1.0, batch_loss=gpt.lm_batch_loss,
                           desc=desc)
    minutes = (time.perf_counter() - start) / 60
    history["step"] = history["epoch"] * SIZES["steps_per_epoch"]
    print(f"{desc}: {steps} steps in {minutes:.1f} min ({60 * minutes / steps:.2f} s/step); "
          f"{loader.rows_seen / len(rows):.2f} passes over its {len(rows):,} rows")
    return m.eval(), history, minutes


# %% [markdown]
# **Run A, the seed's data**: `<bos>` + the first 32 tokens of each review, repeated passes.

# %%
model_a, hist_a, minutes_a = train(openings_train, SIZES["seed_epochs"], "run A (openings)")

# %% [markdown]
# **Run B, every window of every review**: the same model and settings, more steps (the
# printed line says how many passes over the data that is).

# %%
model, hist_b, train_minutes = train(windows_train, SIZES["full_epochs"], "run B (all windows)")

# %%
fig, ax = plt.subplots(figsize=(8, 4))
for hist, label, color in ((hist_a, "A: openings only", "tab:orange"), (hist_b, "B: all windows", "tab:blue")):
    ax.plot(hist["step"], hist["train_loss"], "--", color=color, label=f"{label}, train")
    ax.plot(hist["step"], hist["val_loss"], "o-", ms=3, color=color, label=f"{label}, validation")
ax.set(xlabel="optimizer step", ylabel="cross-entropy (nats per token)",
       title="Training and validation loss (validation: whole held-out reviews)")
ax.legend()
plt.tight_layout()
plt.show()
a_end = hist_a["step"].iloc[-1]
b_same = hist_b.loc[hist_b["step"] == a_end, "val_loss"]
print(f"validation loss after {a_end} steps: A {hist_a['val_loss'].iloc[-1]:.3f}, "
      f"B {b_same.iloc[0]:.3f} (B's learning rate still high then); "
      f"B after {hist_b['step'].iloc[-1]} steps: {hist_b['val_loss'].iloc[-1]:.3f}")

# %% [markdown]
# ## 7.5 Perplexity, and the baselines to beat
#
# Perplexity is $\exp$ of the mean cross-entropy per token. It reads as a number of choices: a
# perplexity of $N$ means the model is, on average, as unsure as if it picked uniformly among
# $N$ words. A model that knows nothing picks among all $V$ words; a perfect one among 1.
#
# Two count-based models tell us what "good" means here, fitted on exactly the training
# targets of run B and evaluated on exactly the same test targets as the Transformer (every
# token of the test reviews after `<bos>`):
#
# - **unigram**: $P(w)$, word frequencies, ignoring the context (add-one smoothed);
# - **bigram**: $P(w \mid v)$ from the previous word only, smoothed with **add-$k$** or with
#   interpolated **Kneser-Ney** {cite}`kneser1995improved`, its smoothing constant ($k$, or the
#   discount $D$) tuned on the validation reviews, never on the test set.

# The GPT reads the test reviews with a sliding window: windows of 32 that start every 16
# tokens, each scoring only the tokens not scored before, so that every token after the first
# 16 of a review is predicted from at least 16 tokens of context (cut into separate windows,
# a token at the start of a window would see almost none). Each token is still scored
# exactly once.

# %%
display(Code(inspect.getsource(ngram.KneserNeyBigram), language="python"))


# %%
def pairs(rows):
    """(previous token, next token) for every non-padding target of rows [N, W+1]."""
    x, y = rows[:, :-1].reshape(-1), rows[:, 1:].reshape(-1)
    keep = y != vocab.pad_id
    return x[keep].numpy(), y[keep].numpy()


train_pairs = pairs(windows_train)
val_pairs = pairs(text.next_token_windows(val_ids, W, vocab.pad_id))  # all validation reviews
test_pairs = pairs(windows_test)

unigram = ngram.UnigramLM(V, k=1.0, exclude=(vocab.pad_id, vocab.bos_id)).fit(*train_pairs)
tuning = []
for k in (0.001, 0.003, 0.01, 0.03, 0.1, 0.3):
    tuning.append(("add-k", k, ngram.AddKBigram(V, k).fit(*train_pairs).perplexity(*val_pairs)))
for D in (0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 0.95):
    tuning.append(("Kneser-Ney", D, ngram.KneserNeyBigram(V, D).fit(*train_pairs).perplexity(*val_pairs)))
tuning = pd.DataFrame(tuning, columns=["smoothing", "constant", "validation perplexity"])
best = tuning.loc[tuning.groupby("smoothing")["validation perplexity"].idxmin()].set_index("smoothing")
best

# %%
addk = ngram.AddKBigram(V, best.loc["add-k", "constant"]).fit(*train_pairs)
kneser_ney = ngram.KneserNeyBigram(V, best.loc["Kneser-Ney", "constant"]).fit(*train_pairs)


def transformer_ppl(m, rows):
    """Perplexity on rows [N, W+1] (each row on its own, as in training)."""
    total, count = gpt.token_nll(m, rows, device=device)
    return math.exp(total / count)


def transformer_ppl_sliding(m, sequences, stride=W // 2):
    """Perplexity of every token of whole reviews, each with >= W - stride tokens of context."""
    total, count = gpt.sliding_nll(m, sequences, stride=stride, device=device)
    assert count == len(test_pairs[0]), "the GPT and the n-grams must score the same tokens"
    return math.exp(total / count)


open_pairs = pairs(openings_test)
ppl = pd.DataFrame({
    "test: whole reviews": {
        "unigram": unigram.perplexity(*test_pairs), "bigram, add-k": addk.perplexity(*test_pairs),
        "bigram, Kneser-Ney": kneser_ney.perplexity(*test_pairs),
        "GPT run A (openings only)": transformer_ppl_sliding(model_a, test_ids),
        "GPT run B (all windows)": transformer_ppl_sliding(model, test_ids)},
    "test: first 32 tokens": {
        "unigram": unigram.perplexity(*open_pairs), "bigram, add-k": addk.perplexity(*open_pairs),
        "bigram, Kneser-Ney": kneser_ney.perplexity(*open_pairs),
        "GPT run A (openings only)": transformer_ppl(model_a, openings_test),
        "GPT run B (all windows)": transformer_ppl(model, openings_test)},
})
print(f"test targets: {len(test_pairs[0]):,} tokens of {len(test_df):,} test reviews "
      f"({len(open_pairs[0]):,} of them in the first 32 tokens)")
print(f"run B on the same whole reviews cut into separate windows of {W}, as in training "
      f"(a token at the start of a window sees little context): "
      f"{transformer_ppl(model, windows_test):.1f}")
ppl.style.format("{:.1f}")

# %%
test_ppl = float(ppl.loc["GPT run B (all windows)", "test: whole reviews"])
ppl_unigram = float(ppl.loc["unigram", "test: whole reviews"])
ppl_bigram = float(ppl.loc[["bigram, add-k", "bigram, Kneser-Ney"], "test: whole reviews"].min())
ratio = test_ppl / ppl_bigram
print(f"On whole test reviews the GPT chooses among {test_ppl:.0f} words on average, the best bigram "
      f"among {ppl_bigram:.0f}, the unigram among {ppl_unigram:.0f} (of {V:,} possible).")
print(f"GPT / best bigram = {ratio:.2f} (the goal was at most 0.6: "
      f"{'met' if ratio <= 0.6 else 'not met'}).")
ppl_a = float(ppl.loc["GPT run A (openings only)", "test: whole reviews"])
print(f"Training on every window instead of the openings only: test perplexity {ppl_a:.1f} -> "
      f"{test_ppl:.1f} on whole reviews; on the first 32 tokens "
      f"{ppl.loc['GPT run A (openings only)', 'test: first 32 tokens']:.1f} -> "
      f"{ppl.loc['GPT run B (all windows)', 'test: first 32 tokens']:.1f}.")

# %%
col = "test: whole reviews"
print(f"One word of context (the best bigram) divides the unigram's perplexity by "
      f"{ppl_unigram / ppl_bigram:.1f}; Kneser-Ney vs add-k: "
      f"{ppl.loc['bigram, Kneser-Ney', col]:.1f} vs {ppl.loc['bigram, add-k', col]:.1f}.")
print(f"Up to 32 words of context (GPT run B) divide the best bigram's perplexity by "
      f"{ppl_bigram / test_ppl:.2f}.")
for col in ppl.columns:
    a_, b_ = ppl.loc["GPT run A (openings only)", col], ppl.loc["GPT run B (all windows)", col]
    print(f"{col}: run A {a_:.1f}, run B {b_:.1f} -> {'B' if b_ < a_ else 'A'} is better")

# %% [markdown]
# How to read these lines: a bigram only knows the previous word, so everything the GPT gains
# beyond it comes from the longer context. Kneser-Ney usually beats add-$k$ because its
# back-off distribution asks "how many different words does $w$ follow?" rather than "how
# often does $w$ occur?". Run A never saw the middle of a review, so whole reviews are new
# territory for it; the openings column shows whether the extra text also helped on the
# part of the review that run A was trained on.

# %% [markdown]
# **What did it learn to look at?** The attention weights of the trained model over the
# sentence from 7.3, averaged over the heads of each block. Every row sums to one over the
# words it is allowed to see; the upper triangle stays empty, as the mask demands.

# %%
maps = model.attention_maps(demo_ids)
fig, axes = plt.subplots(1, len(maps), figsize=(6 * len(maps), 5.2))
for i, (w, ax) in enumerate(zip(maps, np.atleast_1d(axes))):
    viz.attention_heatmap(w[0].mean(0), demo_labels, demo_labels, ax=ax, vmax=1.0,
                          title=f"block {i}: weights averaged over heads")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 7.6 Generating text
#
# Generation repeats one step: feed the text so far, take the logits at the last position,
# choose a token, append it. `decoding.sample` draws from $\mathrm{softmax}(z / T)$; the
# temperature $T$ sharpens ($T < 1$) or flattens ($T > 1$) the distribution, and $T \to 0$ is
# greedy decoding (chapter 8 covers every strategy). The model sees the last 32 tokens (a
# sliding window), and we forbid `<pad>`, `<bos>` and `<unk>` so that the text is readable.

# %%
step_fn = decoding.BanTokens(model.step_fn(), [vocab.pad_id, vocab.bos_id, vocab.unk_id])
generator = torch.Generator(device=device).manual_seed(SEED)
for prompt, temperature in (("the movie was", 0.1), ("i really liked", 0.8), ("the plot is", 1.2)):
    prefix = torch.tensor([vocab.encode(prompt, add_bos=True)], device=device)
    out = decoding.sample(step_fn, prefix, max_new_tokens=30, temperature=temperature,
                          generator=generator)
    print(f"T = {temperature}: {prompt} | {vocab.decode(out[0, prefix.shape[1]:])}\n")

# %% [markdown]
# What to look for in the three texts: at $T = 0.1$ each step is (almost) the model's single
# most likely word, which tends to produce safe, repetitive phrases; at 0.8 the text varies
# more; at 1.2 rare words get through more often and sentences drift. None of it is about a
# real movie: 32 words of context and a model of this size give local fluency, not a plot.
#
# **The tree of likely next words.** From the prompt "this is one of", the three most likely
# next words, then the three most likely after each of those, for three steps. Each edge
# shows the model's probability of that word given the path so far; each leaf shows the
# probability of the whole path.

# %%
@torch.no_grad()
def next_word_tree(prompt, depth=3, branch=3):
    """Nodes (id, parent id, step, word, p(word | path), p(path)) of the top-`branch` tree."""
    nodes = [(0, None, 0, prompt, 1.0, 1.0)]
    frontier = [(0, vocab.encode(prompt, add_bos=True), 1.0)]
    for step in range(1, depth + 1):
        new = []
        for node_id, ids, p_path in frontier:
            probs = torch.softmax(model.step_fn()(torch.tensor([ids], device=device))[0], dim=-1)
            top = probs.topk(branch)
            for p, tok in zip(top.values.tolist(), top.indices.tolist()):
                nodes.append((len(nodes), node_id, step, vocab.itos[tok], p, p_path * p))
                new.append((len(nodes) - 1, ids + [tok], p_path * p))
        frontier = new
    return pd.DataFrame(nodes, columns=["id", "parent", "step", "word", "p", "p_path"]).set_index("id")


def draw_tree(tree, ax):
    y = {}
    for node_id in tree.index[tree["step"] == tree["step"].max()]:
        y[node_id] = -len(y)  # leaves top to bottom
    for step in range(tree["step"].max() - 1, -1, -1):
        for node_id in tree.index[tree["step"] == step]:
            y[node_id] = np.mean([y[c] for c in tree.index[tree["parent"] == node_id]])
    cmap = plt.get_cmap("viridis")
    for node_id, r in tree.iterrows():
        if r["parent"] is not None and not pd.isna(r["parent"]):
            parent = int(r["parent"])
            ax.plot([tree.loc[parent, "step"], r["step"]], [y[parent], y[node_id]], color="0.7", zorder=1)
            ax.text((tree.loc[parent, "step"] + r["step"]) / 2, (y[parent] + y[node_id]) / 2,
                    f"{r['p']:.2f}", fontsize=7, color="0.35", ha="center", va="bottom")
        label = r["word"] + (f"  (path {r['p_path']:.3f})" if r["step"] == tree["step"].max() else "")
        ax.text(r["step"], y[node_id], label, ha="left" if r["step"] else "right", va="center",
                fontsize=9, zorder=2,
                bbox=dict(boxstyle="round,pad=0.2", fc=cmap(r["p"]) if r["step"] else "white", alpha=0.35))
    ax.set_xlim(-0.9, tree["step"].max() + 0.9)
    ax.set_xticks(range(tree["step"].max() + 1), ["prompt"] + [f"step {s}" for s in range(1, tree["step"].max() + 1)])
    ax.set_yticks([])
    ax.grid(False)


tree = next_word_tree("this is one of", depth=3, branch=3)
first = tree[tree["step"] == 1]
print("first step after 'this is one of':",
      ", ".join(f"{w} {p:.2f}" for w, p in zip(first["word"], first["p"])))
fig, ax = plt.subplots(figsize=(11, 8))
draw_tree(tree, ax)
ax.set_title("Most likely continuations of 'this is one of' (edge: p(word | path); box colour: p)")
plt.tight_layout()
plt.show()
top_paths = tree[tree["step"] == 3].sort_values("p_path", ascending=False).head(3)
for node_id, r in top_paths.iterrows():
    words, n = [], node_id
    while tree.loc[n, "step"] > 0:
        words.append(tree.loc[n, "word"])
        n = int(tree.loc[n, "parent"])
    print(f"this is one of {' '.join(reversed(words))}: p = {r['p_path']:.4f}")

# %% [markdown]
# The tree shows how the probability is spread: where one branch carries most of it, the
# model has learned a stock phrase of movie reviews ("one of the best ..." is one), and
# where it is spread over many branches, the phrase can go several ways. A path's
# probability is the product of its edges, so even the best three-word continuation is
# far from certain.

# %% [markdown]
# ## 7.7 Saving the model for chapter 8
#
# Chapter 8 decodes with this model. We save the configuration, the weights (`state_dict`)
# and the vocabulary, plain tensors, lists and numbers that `torch.load(weights_only=True)`
# accepts. Chapter 8 uses the file when it exists and otherwise trains a small model itself.

# %%
artifact = runtime.artifacts_dir() / ("gpt_imdb.pt" if PROFILE == "full" else f"gpt_imdb_{PROFILE}.pt")
gpt.save(model, artifact, vocab=vocab.itos, test_ppl=test_ppl, profile=PROFILE)
reloaded, saved = gpt.load(artifact, map_location=device)
same = torch.equal(reloaded(demo_ids), model(demo_ids))
print(f"saved {artifact.name} ({artifact.stat().st_size / 1e6:.1f} MB); reloaded model gives the same "
      f"logits: {same}")

# %% [markdown]
# ## Exercises
#
# **1.** Untie the head. Build the same model with `tie_weights=False` and recount the
# parameters and the share spent on lookup tables. (Training it is optional; on a model this
# small, untied heads usually train to a slightly worse perplexity.)

# %% tags=["hide-input"]
# Solution 1
untied = gpt.GPT(gpt.GPTConfig(**{**config.to_dict(), "tie_weights": False}))
t_untied = parameter_table(untied)
lookup_untied = [k for k in t_untied.index if "embedding" in k or k == "output head"]
share_untied = t_untied.loc[lookup_untied, "parameters"].sum() / t_untied["parameters"].sum()
print(f"untied: {t_untied['parameters'].sum():,} parameters (+{t_untied['parameters'].sum() - params_total:,}), "
      f"lookup share {share_untied:.1%} (tied: {params_embedding_share:.1%})")

# %% [markdown]
# **2.** Context helps, measurably. Compute the test cross-entropy of run B separately for each
# position $t$ of the window (how many tokens of context it had). How much lower is it at
# position 31 than at position 0, where the model knows one token, like a bigram?

# %% tags=["hide-input"]
# Solution 2
with torch.no_grad():
    rows_ = windows_test[:1000].to(device)
    logits = model(rows_[:, :-1])
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), rows_[:, 1:], reduction="none")
    real = rows_[:, 1:] != vocab.pad_id
    by_pos = (nll * real).sum(0) / real.sum(0)
for t_ in (0, 1, 3, 7, 15, 31):
    print(f"position {t_:>2}: cross-entropy {by_pos[t_]:.3f}, perplexity {math.exp(by_pos[t_]):.0f}")

# %% [markdown]
# **3.** Temperature and the number of choices. For the prompt "the movie was", compute the
# entropy $H$ of the next-word distribution at $T$ = 0.1, 0.8, 1.2 and its "effective number
# of choices" $e^H$. Compare with the texts of 7.6.

# %% tags=["hide-input"]
# Solution 3
with torch.no_grad():
    logits = model.step_fn()(torch.tensor([vocab.encode("the movie was", add_bos=True)], device=device))[0]
for T in (0.1, 0.8, 1.2):
    p = torch.softmax(logits / T, dim=-1)
    H = -(p * p.clamp_min(1e-12).log()).sum().item()
    print(f"T = {T}: entropy {H:.2f} nats, about {math.exp(H):.1f} equally likely choices; "
          f"top word '{vocab.itos[int(p.argmax())]}' with p = {p.max():.2f}")

# %% [markdown]
# ## Results card

# %%
card = results.write_card(
    "07_gpt", profile=PROFILE, seed=SEED, device=device,
    wall_seconds=time.perf_counter() - T0,
    params={"gpt": params_total, "d_model": config.d_model, "num_layers": config.num_layers,
            "vocab_size": V, "train_steps": int(hist_b["step"].iloc[-1]),
            "seed_run_train_minutes": minutes_a},
    metrics={
        "test_ppl": test_ppl,
        "ppl_unigram": ppl_unigram,
        "ppl_bigram": ppl_bigram,
        "params_total": params_total,
        "params_embedding_share": params_embedding_share,
        "train_minutes": train_minutes,
    },
)
card

# %%
if PROFILE == "full":  # the claims of this chapter, checked
    assert test_ppl < ppl_bigram < ppl_unigram, "GPT < bigram < unigram perplexity"
    assert test_ppl < ppl_a, "more data (all windows) beats the openings only"
    assert params_embedding_share > 0.5, "a small model is mostly lookup tables"
    assert same, "the saved model reloads to the same logits"
