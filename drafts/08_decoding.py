# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 8. Decoding: from next-token probabilities to text
#
# A language model gives a probability for every possible next token. Turning that into text
# is a separate decision, made one token at a time, and it changes the output as much as the
# model does: the same GPT can loop ("the movie is a movie that is a movie ..."), write
# bland but likely sentences, or ramble. This chapter writes every common strategy once, in
# `course_lib.decoding`, runs them all on the GPT of chapter 7, and makes generation fast with
# a KV cache.
#
# **After this chapter you will be able to**
#
# - write greedy decoding, beam search (with a length penalty and end-of-sequence handling)
#   and sampling (temperature, top-k, top-p) against one small interface, a *step function*;
# - show on a toy model why greedy decoding can miss the most likely sequence and how beam
#   search finds it;
# - compare strategies by log-probability, length and repetition (distinct-n), and choose one
#   for a task;
# - explain and implement a KV cache, verify that it changes nothing in the output, and
#   measure what it saves in time and costs in memory.

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
        n_prompts=8, samples_per_prompt=5, max_new_tokens=40, beam_size=4, top_k=40, top_p=0.9,
        beam_sizes=[1, 2, 4, 8], alphas=[0.0, 0.6, 1.0],
        kv_lengths=[16, 32, 64, 128, 256], kv_prompt=8, kv_repeats=3,
        # only used when chapter 7's model is missing: a small GPT trained here
        fallback=dict(train_reviews=None, vocab_words=5000, d_model=128, num_layers=2, d_ff=512,
                      batch_size=64, lr=4e-3, steps_per_epoch=150, epochs=4),
    ),
    "smoke": dict(
        n_prompts=2, samples_per_prompt=2, max_new_tokens=6, beam_size=2, top_k=40, top_p=0.9,
        beam_sizes=[1, 2], alphas=[0.0, 0.6],
        kv_lengths=[4, 8], kv_prompt=4, kv_repeats=1,
        fallback=dict(train_reviews=300, vocab_words=300, d_model=32, num_layers=1, d_ff=64,
                      batch_size=16, lr=4e-3, steps_per_epoch=3, epochs=1),
    ),
}[PROFILE]
SIZES

# %%
import inspect
import itertools
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from IPython.display import Code, display

from course_lib import data, decoding, gpt, results, runtime, text, training

T0 = time.perf_counter()
device = runtime.setup(seed=SEED)
sns.set_theme(style="whitegrid", context="notebook")

# %% [markdown]
# ## 8.1 One interface for every strategy
#
# Every decoding strategy needs the same thing from a model: given the tokens so far, the
# logits of the next one. So `course_lib.decoding` asks for exactly that, a **step function**
#
# ```python
# step_fn(tokens: LongTensor [N, L]) -> logits: FloatTensor [N, V]
# ```
#
# For a GPT it is `lambda t: model(t)[:, -1]`; for the translation model of chapter 9 it
# also closes over the encoder's output. Greedy decoding, the simplest strategy, appends the
# most likely token until it reaches `max_new_tokens` or every row has produced the
# end-of-sequence token (finished rows are then padded):

# %%
display(Code(inspect.getsource(decoding.greedy_decode), language="python"))

# %% [markdown]
# ## 8.2 Why beam search exists
#
# Greedy decoding commits to the best *next* token, which is not the same as the best
# *sequence*. A hand-made language model shows it. After `<s>` it says "the" (0.6) or "a"
# (0.4). After "the" it is unsure: "movie" 0.4, "film" 0.3, "plot" 0.3. After "a" it is
# nearly certain: "great" 0.9. Then `</s>`.

# %%
# NBVAL_CHECK_OUTPUT
toy_words = ["<s>", "</s>", "the", "a", "movie", "film", "plot", "great", "bad"]
toy_id = {w: i for i, w in enumerate(toy_words)}
toy_table = {  # P(next | words after <s>); anything not listed ends with </s>
    (): {"the": 0.6, "a": 0.4},
    ("the",): {"movie": 0.4, "film": 0.3, "plot": 0.3},
    ("a",): {"great": 0.9, "bad": 0.1},
}


def toy_step_fn(tokens):
    """Log-probabilities of the toy model for each row of tokens [N, L] (row starts with <s>)."""
    rows = []
    for row in tokens.tolist():
        context = tuple(toy_words[i] for i in row[1:])
        probs = toy_table.get(context, {"</s>": 1.0})
        p = torch.full((len(toy_words),), 1e-9)
        for word, q in probs.items():
            p[toy_id[word]] = q
        rows.append(p.log())
    return torch.stack(rows)


def toy_text(row):
    return " ".join(toy_words[i] for i in row)


def toy_logprob(row):
    """log P of the tokens after <s>, up to and including the first </s>."""
    total = 0.0
    for t in range(1, len(row)):
        total += toy_step_fn(torch.tensor([row[:t]]))[0, row[t]].item()
        if row[t] == toy_id["</s>"]:
            break
    return total


start = torch.tensor([[toy_id["<s>"]]])
greedy_toy = decoding.greedy_decode(toy_step_fn, start, 3, eos_id=toy_id["</s>"])[0].tolist()
beam_toy, _ = decoding.beam_search(toy_step_fn, start, beam_size=2, max_new_tokens=3,
                                   eos_id=toy_id["</s>"], length_penalty=0.0)
beam_toy = beam_toy[0].tolist()
every = [[toy_id["<s>"], *seq] for seq in itertools.product(range(2, len(toy_words)), repeat=2)]
best_toy = max(every, key=toy_logprob)
for name, row in (("greedy", greedy_toy), ("beam search, k = 2", beam_toy),
                  ("best of all sequences", best_toy + [toy_id["</s>"]])):
    print(f"{name:<22} {toy_text(row):<26} P = {math.exp(toy_logprob(row)):.2f}")

# %% [markdown]
# Greedy takes "the" because 0.6 > 0.4, and is then stuck among three middling words:
# $0.6 \times 0.4 = 0.24$. Beam search with $k = 2$ keeps both "the" and "a" alive after the
# first step, extends both, and keeps the two best of the five two-word sequences, among them
# "a great" with $0.4 \times 0.9 = 0.36$. Here that is the exact optimum (the exhaustive search
# agrees); in general beam search is a better approximation, not a guarantee.
#
# **Batched beams.** `decoding.beam_search` runs all beams of all inputs as one batch of
# $B \cdot k$ rows, grouped input by input (so an encoder output can be repeated with
# `repeat_interleave(k, 0)`). Each step adds every token's log-probability to every beam's
# score, ranks the $k \cdot V$ candidates of each input, and keeps the $k$ best. A beam that
# has produced the end token keeps its score and is padded; the search stops when all beams
# are finished.
#
# **Length penalty.** Every token multiplies in a probability below 1, so shorter
# hypotheses have higher raw scores and beam search prefers ending early. GNMT's length
# penalty divides the summed log-probability by
# $\mathrm{lp}(Y) = \left(\frac{5 + |Y|}{6}\right)^{\alpha}$: $\alpha = 0$ ranks by
# probability alone, larger $\alpha$ favours longer outputs ({cite}`vaswani2017attention` used
# $\alpha = 0.6$).

# %%
# NBVAL_CHECK_OUTPUT
lp = pd.DataFrame({f"alpha = {a}": [decoding.length_penalty_gnmt(n, a) for n in (1, 5, 10, 20, 40)]
                   for a in (0.0, 0.6, 1.0)}, index=pd.Index([1, 5, 10, 20, 40], name="length |Y|"))
print("divide the summed log-probability by:")
print(lp.round(3).to_string())

# %%
display(Code(inspect.getsource(decoding.beam_search), language="python"))

# %% [markdown]
# ## 8.3 The GPT of chapter 7
#
# Chapter 7 saved its trained model to the artifacts folder. If the file is there we use it;
# otherwise (this notebook run on its own) we train a smaller one here with the same code.

# %%
artifact = runtime.artifacts_dir() / ("gpt_imdb.pt" if PROFILE == "full" else f"gpt_imdb_{PROFILE}.pt")
if artifact.exists():
    model, saved = gpt.load(artifact, map_location=device)
    vocab = text.Vocab(saved["vocab"])
    print(f"loaded {artifact.name}: chapter 7's model (test perplexity {saved['test_ppl']:.1f})")
    source = "chapter 7"
else:
    fb = SIZES["fallback"]
    print(f"{artifact.name} not found: training a small GPT here")
    splits = text.imdb_lm_splits(data.load_imdb("train"), data.load_imdb("test"), seed=SEED)
    reviews = splits["train"]["review"]
    reviews = reviews if fb["train_reviews"] is None else reviews.iloc[: fb["train_reviews"]]
    tokens = [text.tokenize(r) for r in reviews]
    vocab = text.Vocab.build(tokens, max_size=fb["vocab_words"])
    rows = text.next_token_windows([vocab.encode(t, add_bos=True) for t in tokens], 32, vocab.pad_id)
    torch.manual_seed(SEED)
    model = gpt.GPT(gpt.GPTConfig(vocab_size=len(vocab), max_len=32, d_model=fb["d_model"],
                                  num_heads=4 if fb["d_model"] % 4 == 0 else 2,
                                  num_layers=fb["num_layers"], d_ff=fb["d_ff"], dropout=0.1,
                                  pad_id=vocab.pad_id)).to(device)
    steps = fb["epochs"] * fb["steps_per_epoch"]
    optimizer = gpt.configure_optimizer(model, lr=fb["lr"])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, gpt.warmup_cosine(min(100, steps // 10), steps))
    training.fit(model, gpt.RowBatches(rows, fb["batch_size"], fb["steps_per_epoch"], seed=SEED),
                 optimizer=optimizer, epochs=fb["epochs"], device=device, scheduler=scheduler,
                 clip_grad_norm=1.0, batch_loss=gpt.lm_batch_loss, desc="small GPT")
    model.eval()
    source = "trained here"
config = model.config
print(config)
print(f"{sum(p.numel() for p in model.parameters()):,} parameters, vocabulary of {len(vocab):,}, "
      f"context of {config.max_len} tokens")

# %% [markdown]
# ## 8.4 Every strategy on the same prompts
#
# The task: continue a review opening until the end of the sentence (the token ".") or 40
# tokens. Each strategy gets the same prompts; the sampling strategies draw several
# continuations per prompt. The step function is the model's (over a sliding window of its
# last 32 tokens) with `<pad>`, `<bos>` and `<unk>` forbidden.
#
# For each continuation we measure
#
# - the **average log-probability per token** under the model (higher: the model finds the
#   text more likely);
# - the **length** in tokens (the "." included);
# - **distinct-1 / distinct-2**: the number of different words / word pairs divided by the
#   number of words / pairs, over all continuations of a strategy; low values mean
#   repetition.

# %%
PROMPTS = ["the movie was", "i really liked", "the plot is", "this is one of",
           "the acting in this film", "i went to see this movie", "if you like", "the ending"]
prompts = PROMPTS[: SIZES["n_prompts"]]
period = vocab.stoi["."] if "." in vocab else vocab.unk_id
banned = [vocab.pad_id, vocab.bos_id, vocab.unk_id]
step_fn = decoding.BanTokens(model.step_fn(), banned)
N_NEW = SIZES["max_new_tokens"]

STRATEGIES = {
    "greedy": dict(kind="greedy"),
    f"beam search (k={SIZES['beam_size']}, alpha=0.6)": dict(kind="beam", beam_size=SIZES["beam_size"],
                                                            length_penalty=0.6),
    "sampling (T=1)": dict(kind="sample", temperature=1.0),
    "sampling (T=0.7)": dict(kind="sample", temperature=0.7),
    f"top-k (k={SIZES['top_k']})": dict(kind="sample", top_k=SIZES["top_k"]),
    f"top-p (p={SIZES['top_p']})": dict(kind="sample", top_p=SIZES["top_p"]),
}


def generate(prefix, spec, generator):
    """Continuations of one prompt prefix [1, L0]: [n, L0 + T] (n = 1 for greedy and beam)."""
    kind = spec["kind"]
    if kind == "greedy":
        return decoding.greedy_decode(step_fn, prefix, N_NEW, eos_id=period)
    if kind == "beam":
        out, _ = decoding.beam_search(step_fn, prefix, spec["beam_size"], N_NEW, eos_id=period,
                                      length_penalty=spec["length_penalty"])
        return out
    many = prefix.repeat(SIZES["samples_per_prompt"], 1)
    args = {k: v for k, v in spec.items() if k != "kind"}
    return decoding.sample(step_fn, many, N_NEW, eos_id=period, generator=generator, **args)


def continuation(row, start):
    """The generated ids of one output row, up to and including the first '.'."""
    gen = row[start:].tolist()
    return gen[: gen.index(period) + 1] if period in gen else gen


@torch.no_grad()
def logprob(prefix_ids, gen):
    """Summed log-probability of gen after prefix, under the (banned) step function."""
    seq = torch.tensor([prefix_ids + gen], device=device)
    total = 0.0
    for t in range(len(prefix_ids), seq.shape[1]):
        total += torch.log_softmax(step_fn(seq[:, :t]), dim=-1)[0, seq[0, t]].item()
    return total


def distinct(texts, n):
    grams = [tuple(g[i:i + n]) for g in texts for i in range(len(g) - n + 1)]
    return len(set(grams)) / max(1, len(grams))


generator = torch.Generator(device=device).manual_seed(SEED)
outputs = {name: [] for name in STRATEGIES}
t = time.perf_counter()
for prompt in prompts:
    prefix_ids = vocab.encode(prompt, add_bos=True)
    prefix = torch.tensor([prefix_ids], device=device)
    for name, spec in STRATEGIES.items():
        for row in generate(prefix, spec, generator):
            gen = continuation(row, len(prefix_ids))
            outputs[name].append(dict(prompt=prompt, gen=gen, logprob=logprob(prefix_ids, gen)))
print(f"generated and scored in {time.perf_counter() - t:.0f} s")

table = pd.DataFrame({
    name: {"avg log-prob / token": np.mean([o["logprob"] / len(o["gen"]) for o in outs]),
           "mean length": np.mean([len(o["gen"]) for o in outs]),
           "ended with '.'": np.mean([o["gen"][-1] == period for o in outs]),
           "distinct-1": distinct([o["gen"] for o in outs], 1),
           "distinct-2": distinct([o["gen"] for o in outs], 2),
           "continuations": len(outs)}
    for name, outs in outputs.items()
}).T
table.style.format({"avg log-prob / token": "{:.2f}", "mean length": "{:.1f}",
                    "ended with '.'": "{:.0%}", "distinct-1": "{:.2f}", "distinct-2": "{:.2f}",
                    "continuations": "{:.0f}"})

# %%
for prompt in prompts[:2]:
    print(f"prompt: {prompt!r}")
    for name, outs in outputs.items():
        first = next(o for o in outs if o["prompt"] == prompt)
        print(f"  {name:<28} {vocab.decode(first['gen'])}")
    print()

# %%
beam_name = next(n for n in STRATEGIES if n.startswith("beam"))
top_p_name = next(n for n in STRATEGIES if n.startswith("top-p"))
greedy_logprob = float(table.loc["greedy", "avg log-prob / token"])
beam_logprob = float(table.loc[beam_name, "avg log-prob / token"])
distinct2_greedy = float(table.loc["greedy", "distinct-2"])
distinct2_top_p = float(table.loc[top_p_name, "distinct-2"])
print(f"average log-probability per token: greedy {greedy_logprob:.2f}, beam search {beam_logprob:.2f}")
print(f"distinct-2: greedy {distinct2_greedy:.2f}, top-p {distinct2_top_p:.2f}; "
      f"greedy ended {table.loc['greedy', 'ended with ' + chr(39) + '.' + chr(39)]:.0%} of its "
      f"continuations with '.', the rest ran to {N_NEW} tokens")

# %%
ranked = table.sort_values("avg log-prob / token", ascending=False).index.tolist()
print("most to least likely per token:", " > ".join(ranked))
ranked = table.sort_values("distinct-2", ascending=False).index.tolist()
print("most to least varied (distinct-2):", " > ".join(ranked))

# %% [markdown]
# What to read in the table and the two rankings:
#
# - **Greedy and beam search** aim at the text the model finds most likely: one continuation
#   per prompt, the same every time. Greedy can fall into a loop it cannot leave, since
#   inside a loop the loop is often the most likely next step; that shows as a low
#   distinct-2 and as continuations that run to the 40-token limit without a ".".
# - **Sampling at T = 1** follows the model's own distribution: varied, but now and then it
#   draws one of the thousands of unlikely words, and the average log-probability drops.
# - **top-k and top-p** cut that tail before sampling, keeping much of the variety without
#   the least likely words; a lower temperature does something similar by sharpening the
#   distribution.
#
# **Beam size and length penalty.** A wider beam searches more, and finds sequences that are
# more likely under the objective it ranks by. With $\alpha = 0$ that objective rewards
# stopping early; $\alpha > 0$ gives longer sentences.

# %%
sweep = []
for k in SIZES["beam_sizes"]:
    for alpha in SIZES["alphas"]:
        lengths, scores, sums = [], [], []
        for prompt in prompts:
            prefix_ids = vocab.encode(prompt, add_bos=True)
            out, score = decoding.beam_search(step_fn, torch.tensor([prefix_ids], device=device), k, N_NEW,
                                              eos_id=period, length_penalty=alpha)
            gen = continuation(out[0], len(prefix_ids))
            lengths.append(len(gen))
            scores.append(score.item())
            sums.append(logprob(prefix_ids, gen))
        sweep.append(dict(beam_size=k, alpha=alpha, mean_length=np.mean(lengths),
                          mean_score=np.mean(scores), mean_sum_logprob=np.mean(sums)))
sweep = pd.DataFrame(sweep)
display(sweep.pivot(index="beam_size", columns="alpha", values=["mean_score", "mean_length"]).round(2))
for alpha, part in sweep.groupby("alpha"):
    s_ = part.sort_values("beam_size")["mean_score"].to_numpy()
    print(f"alpha = {alpha}: mean score from beam size {SIZES['beam_sizes'][0]} to "
          f"{SIZES['beam_sizes'][-1]}: {s_[0]:.3f} -> {s_[-1]:.3f}; never lower with a wider beam: "
          f"{bool((np.diff(s_) >= -1e-6).all())}")
for k, part in sweep.groupby("beam_size"):
    print(f"beam size {k}: mean length by alpha {dict(zip(part['alpha'], part['mean_length'].round(1)))}")

# %% [markdown]
# The score is the quantity beam search maximises; a wider beam usually reaches a better one,
# but nothing guarantees it (a narrow beam can stumble on a hypothesis that a wider beam
# ranks out early). The length penalty is the other knob: the lines above show the mean
# length for each $\alpha$.
#
# ## 8.5 Top-k is fixed, top-p adapts
#
# Top-k always keeps $k$ tokens. Top-p keeps the smallest set of most likely tokens whose
# probabilities add up to $p$ {cite}`holtzman2020curious`: few when the model is sure, many
# when it is not. Here is how many tokens each would keep at every step of one top-p
# continuation.

# %%
display(Code(inspect.getsource(decoding.top_p_filter), language="python"))


# %%
class Recorder:
    """A step function that also records the logits it returns."""

    def __init__(self, step):
        self.step, self.logits = step, []

    def __call__(self, tokens):
        out = self.step(tokens)
        self.logits.append(out[0].detach())
        return out


prefix_ids = vocab.encode("this is one of", add_bos=True)
recorder = Recorder(step_fn)
out = decoding.sample(recorder, torch.tensor([prefix_ids], device=device), max(N_NEW // 2, 4),
                      top_p=SIZES["top_p"], generator=torch.Generator(device=device).manual_seed(SEED))
words = vocab.tokens(out[0, len(prefix_ids):])
kept_p = [int(torch.isfinite(decoding.top_p_filter(z, SIZES["top_p"])).sum()) for z in recorder.logits]
kept_k = [int(torch.isfinite(decoding.top_k_filter(z, SIZES["top_k"])).sum()) for z in recorder.logits]
top1 = [torch.softmax(z, -1).max().item() for z in recorder.logits]

fig, ax = plt.subplots(figsize=(10, 4))
steps_ = np.arange(len(words))
ax.plot(steps_, kept_p, "o-", label=f"top-p (p = {SIZES['top_p']})")
ax.plot(steps_, kept_k, "s--", label=f"top-k (k = {SIZES['top_k']})")
ax.set_yscale("log")
ax.set_xticks(steps_, words, rotation=60)
ax.set(xlabel="token chosen at this step", ylabel="tokens kept (log scale)",
       title="How many candidate tokens each filter keeps, step by step ('this is one of ...')")
ax.legend()
plt.tight_layout()
plt.show()
print(f"top-p kept between {min(kept_p)} and {max(kept_p)} tokens; the step with the most "
      f"confident model (top probability {max(top1):.2f}) kept {kept_p[int(np.argmax(top1))]}, "
      f"the least confident (top probability {min(top1):.2f}) kept {kept_p[int(np.argmin(top1))]}")

# %% [markdown]
# ## 8.6 Which strategy for which job
#
# | job | strategy | why |
# |---|---|---|
# | translation, summarisation, speech recognition: one right answer | beam search, $k$ = 4–10, length penalty $\alpha \approx 0.6$ | the most likely output is what we want; the length penalty stops it from ending early |
# | code completion, extraction, classification by generation | greedy (or beam) | deterministic and usually the likeliest; loops matter less for short outputs |
# | stories, dialogue, open-ended text | top-p ($p \approx 0.9$), temperature 0.7–1.0 | variety without the unlikely tail; greedy and beam search loop and stay bland (the table above) |
# | many diverse candidates to rerank or test | sampling at higher temperature, or top-k | breadth matters more than each sample's quality |
#
# These are starting points, not rules; the table of 8.4 is how to check them on a model.

# %% [markdown]
# ## 8.7 The KV cache
#
# Without a cache, every generation step runs the model over the whole sequence again. But
# with a causal mask, the keys and values of positions $0 \dots t-1$ never change when token
# $t$ is appended: earlier positions cannot see later ones. So we can keep them (a **KV
# cache**, one pair of tensors `[B, heads, L, d_k]` per block) and at each step compute the
# query, key and value of the *new* position only, attend over the cached keys, and append.
# Per step, the work drops from a pass over $L$ positions to a pass over one.

# %%
display(Code(inspect.getsource(gpt._block_step), language="python"))
display(Code(inspect.getsource(gpt.CachedStepFn.__call__), language="python"))

# %% [markdown]
# **Same result?** On chapter 7's model: feed a test sentence one token at a time through the
# cache, and compare every position's logits with one ordinary forward pass; then generate
# greedily with and without the cache (within the model's 32 positions, since learned
# positions cannot slide).

# %%
sentence = "this is one of the best movies i have seen in years, and the acting is great."
ids = torch.tensor([vocab.encode(sentence, add_bos=True)[: config.max_len]], device=device)
with torch.no_grad():
    full = model(ids)
    cache, steps = None, []
    for t in range(ids.shape[1]):
        logits, cache = model.forward_cached(ids[:, t:t + 1], cache)
        steps.append(logits)
    diff_trained = (torch.cat(steps, 1) - full).abs().max().item()
prompt = torch.tensor([vocab.encode("the movie was", add_bos=True)], device=device)
room = config.max_len - prompt.shape[1]
plain = decoding.greedy_decode(step_fn, prompt, room)
cached = decoding.greedy_decode(decoding.BanTokens(gpt.CachedStepFn(model), banned), prompt, room)
same_trained = torch.equal(plain, cached)
print(f"max |cached - uncached| over {ids.shape[1]} positions: {diff_trained:.2e}")
print(f"greedy, {room} new tokens: identical = {same_trained}: {vocab.decode(cached[0])}")

# %% [markdown]
# **How much faster?** The trained model has 32 positions; to time long generations we build a
# model with the same sizes and 512 positions, with random weights: the time per step depends
# on the shapes, not on the values of the weights. (Its text is noise, and it does not matter
# here.) We check again that both ways give the same tokens, then time greedy generation of
# 16 to 256 new tokens after an 8-token prompt, best of a few repeats.

# %%
torch.manual_seed(SEED)
long_config = gpt.GPTConfig(**{**config.to_dict(), "max_len": 512, "dropout": 0.0})
long_model = gpt.GPT(long_config).to(device).eval()
kv_prompt = torch.randint(3, long_config.vocab_size, (1, SIZES["kv_prompt"]), device=device)
n128 = max(SIZES["kv_lengths"]) if 128 not in SIZES["kv_lengths"] else 128
ref = decoding.greedy_decode(long_model.step_fn(), kv_prompt, n128)
fast_step = gpt.CachedStepFn(long_model)
fast = decoding.greedy_decode(fast_step, kv_prompt, n128)
same_long = torch.equal(ref, fast)
with torch.no_grad():
    full = long_model(ref)
    logits, cache = long_model.forward_cached(ref[:, : SIZES["kv_prompt"]])  # the prompt at once
    steps = [logits]
    for t in range(SIZES["kv_prompt"], ref.shape[1]):  # then one token at a time
        logits, cache = long_model.forward_cached(ref[:, t:t + 1], cache)
        steps.append(logits)
    diff_long = (torch.cat(steps, 1) - full).abs().max().item()
kv_cache_max_abs_diff = max(diff_trained, diff_long)
print(f"{n128} new tokens: identical tokens = {same_long}; max logit difference {diff_long:.2e}")


def best_time(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


timing = []
for n in runtime.progress(SIZES["kv_lengths"], desc="timing"):
    slow_s = best_time(lambda: decoding.greedy_decode(long_model.step_fn(), kv_prompt, n), SIZES["kv_repeats"])
    fast_s = best_time(lambda: decoding.greedy_decode(gpt.CachedStepFn(long_model), kv_prompt, n),
                       SIZES["kv_repeats"])
    timing.append(dict(new_tokens=n, without_cache_s=slow_s, with_cache_s=fast_s, speedup=slow_s / fast_s))
timing = pd.DataFrame(timing).set_index("new_tokens")
timing.round(3)

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
ax1.plot(timing.index, timing["without_cache_s"], "o-", label="without cache")
ax1.plot(timing.index, timing["with_cache_s"], "s-", label="with KV cache")
ax1.set(xlabel="new tokens", ylabel="seconds (best of repeats)", title="Greedy generation time",
        xscale="log", yscale="log")
ax1.minorticks_off()
ax1.set_xticks(timing.index, timing.index)
ax1.legend()
ax2.bar([str(i) for i in timing.index], timing["speedup"], color="tab:green")
ax2.axhline(1, color="0.5", lw=1)
ax2.set(xlabel="new tokens", ylabel="time without / time with cache", title="Speed-up from the KV cache")
plt.tight_layout()
plt.show()
kv_cache_speedup_128 = float(timing.loc[n128, "speedup"])
print(f"at {n128} new tokens the cache is {kv_cache_speedup_128:.1f}x faster "
      f"({timing.loc[n128, 'without_cache_s']:.2f} s -> {timing.loc[n128, 'with_cache_s']:.2f} s)")

# %%
n_max, n_half = timing.index[-1], timing.index[-2]
print(f"from {n_half} to {n_max} new tokens the time grows {timing.loc[n_max, 'without_cache_s'] / timing.loc[n_half, 'without_cache_s']:.1f}x "
      f"without the cache and {timing.loc[n_max, 'with_cache_s'] / timing.loc[n_half, 'with_cache_s']:.1f}x with it")

# %% [markdown]
# Without a cache, step $t$ processes all $t$ positions, so the total grows faster than the
# length (towards its square once the positions dominate the fixed cost of a step); with the
# cache every step costs about the same, so the total grows about linearly, and the gap
# widens with every token.
#
# **What it costs.** The cache holds a key and a value vector per position, per block:
# $2 \times \text{layers} \times B \times L \times d_{model}$ numbers. The cache of the run above
# measured against that formula:

# %%
measured = fast_step.bytes()
formula = gpt.kv_cache_bytes(long_config, batch=1, length=fast.shape[1] - 1)
weights_bytes = sum(p.numel() * p.element_size() for p in long_model.parameters())
print(f"KV cache after {fast.shape[1] - 1} positions: {measured / 1e6:.2f} MB measured, "
      f"{formula / 1e6:.2f} MB by the formula; the model's weights: {weights_bytes / 1e6:.1f} MB")
assert measured == formula

# %% [markdown]
# Small here, large for a large model: the cache grows with batch size and length, and serving
# systems for large models are largely designed around it (exercise 2 puts numbers on GPT-3).
#
# ## Exercises
#
# **1.** A repetition penalty as a step-function wrapper. Write a step function that lowers
# the logits of tokens already present in the row (divide positive logits by 1.3, multiply
# negative ones by 1.3), and compare greedy decoding's distinct-2 with and without it on the
# prompts.

# %% tags=["hide-input"]
# Solution 1
class RepetitionPenalty:
    def __init__(self, step, penalty=1.3):
        self.step, self.penalty = step, penalty

    def __call__(self, tokens):
        logits = self.step(tokens).clone()
        seen = torch.zeros_like(logits, dtype=torch.bool).scatter(1, tokens, True)
        scaled = torch.where(logits > 0, logits / self.penalty, logits * self.penalty)
        return torch.where(seen, scaled, logits)


for name, fn in (("greedy", step_fn), ("greedy + repetition penalty", RepetitionPenalty(step_fn))):
    gens = []
    for prompt in prompts:
        p_ids = vocab.encode(prompt, add_bos=True)
        out = decoding.greedy_decode(fn, torch.tensor([p_ids], device=device), N_NEW, eos_id=period)
        gens.append(continuation(out[0], len(p_ids)))
    print(f"{name:<28} distinct-2 {distinct(gens, 2):.2f}, mean length {np.mean([len(g) for g in gens]):.1f}")

# %% [markdown]
# **2.** KV cache of GPT-3 175B (96 blocks, $d_{model}$ = 12,288) for a 2,048-token context
# in 16-bit numbers: how many GB per sequence, and for a batch of 32? Compare with its 175
# billion weights in 16 bits.

# %% tags=["hide-input"]
# Solution 2
gpt3 = gpt.GPTConfig(vocab_size=50257, max_len=2048, d_model=12288, num_heads=96, num_layers=96)
for batch in (1, 32):
    print(f"batch {batch:>2}: {gpt.kv_cache_bytes(gpt3, batch, 2048, bytes_per_value=2) / 1e9:,.1f} GB")
print(f"weights: {175e9 * 2 / 1e9:,.0f} GB")

# %% [markdown]
# **3.** How uncertain is the first step? For every prompt, count the tokens in the top-p
# (0.9) nucleus of the first generated token, and the probability of the most likely one.

# %% tags=["hide-input"]
# Solution 3
with torch.no_grad():
    for prompt in prompts:
        l_ = step_fn(torch.tensor([vocab.encode(prompt, add_bos=True)], device=device))[0]
        n_kept = int(torch.isfinite(decoding.top_p_filter(l_, 0.9)).sum())
        p_top = torch.softmax(l_, -1).max().item()
        print(f"{prompt!r:<28} nucleus of {n_kept:>4} tokens; top token "
              f"'{vocab.itos[int(l_.argmax())]}' with p = {p_top:.2f}")

# %% [markdown]
# ## Results card

# %%
card = results.write_card(
    "08_decoding", profile=PROFILE, seed=SEED, device=device,
    wall_seconds=time.perf_counter() - T0,
    params={"gpt": sum(p.numel() for p in model.parameters()), "model_source": source,
            "beam_size": SIZES["beam_size"], "top_k": SIZES["top_k"], "top_p": SIZES["top_p"]},
    metrics={
        "kv_cache_speedup_128": kv_cache_speedup_128,
        "kv_cache_max_abs_diff": kv_cache_max_abs_diff,
        "greedy_logprob": greedy_logprob,
        "beam_logprob": beam_logprob,
        "distinct2_greedy": distinct2_greedy,
        "distinct2_top_p": distinct2_top_p,
    },
)
card

# %%
if PROFILE == "full":  # the claims of this chapter, checked
    assert kv_cache_speedup_128 >= 3, "the KV cache should be at least 3x faster at 128 new tokens"
    assert kv_cache_max_abs_diff <= 1e-5 and same_trained and same_long, "the cache changes nothing"
    assert distinct2_top_p > distinct2_greedy, "top-p repeats itself less than greedy"
