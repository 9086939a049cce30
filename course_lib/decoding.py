"""Turning a next-token model into text: greedy decoding, beam search and sampling.

Every function here talks to the model through one small interface, a *step function*:

    step_fn(tokens LongTensor [N, L]) -> logits FloatTensor [N, V]

the logits of the token that follows each row of ``tokens``. A decoder-only model gives it
as ``lambda t: model(t)[:, -1]``; an encoder-decoder closes over its encoder output. So the
GPT of chapter 7 and the translation model of chapter 9 share these functions.

- ``greedy_decode``  take the most likely token, every step
- ``beam_search``    keep the ``beam_size`` best partial sequences (GNMT length penalty)
- ``beam_search_pool``  the same search with live beams and a separate pool of finished ones
- ``sample``         draw from softmax(logits / temperature), optionally cut to top-k / top-p
- ``top_k_filter``, ``top_p_filter``  the two cuts, on their own
- ``BanTokens``      wrap a step function so that some tokens are never chosen
- ``distinct_n``, ``repetition_rate``  how varied generated text is

Conventions: a row that has produced ``eos_id`` is finished; from then on it is padded with
``pad_id`` (``eos_id`` when ``pad_id`` is None) and the model's choice is ignored. Decoding
stops early once every row is finished, so the output may be shorter than
``prefix_len + max_new_tokens``.

In ``beam_search`` the step function sees ``N = B * beam_size`` rows grouped batch-major
(rows ``b * beam_size ... (b + 1) * beam_size - 1`` belong to input ``b``): an
encoder-decoder can precompute ``memory.repeat_interleave(beam_size, 0)``. A step function
that keeps a cache (a KV cache) may define ``step_fn.reorder(index)``: beam search calls it
with the LongTensor [N] of rows the surviving beams come from, after every step.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

StepFn = Callable[[torch.Tensor], torch.Tensor]


# --------------------------------------------------------------------------- checks
def _check_int(name: str, value, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def _check_prefix(prefix) -> None:
    if not isinstance(prefix, torch.Tensor):
        raise TypeError(
            f"prefix must be a LongTensor of token ids [B, L0], got {type(prefix).__name__}"
        )
    if prefix.dim() != 2 or prefix.shape[1] < 1:
        raise ValueError(f"prefix must have shape [B, L0] with L0 >= 1, got {tuple(prefix.shape)}")
    if prefix.is_floating_point() or prefix.dtype == torch.bool:
        raise TypeError(f"prefix must hold integer token ids, got dtype {prefix.dtype}")


def _check_token_id(name: str, value) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ValueError(f"{name} must be None or a token id (int >= 0), got {value!r}")


def _check_temperature(temperature) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(
            f"temperature must be a number > 0, got {temperature!r}; for the most likely token "
            f"use greedy_decode (the limit temperature -> 0)"
        )


def _check_top_k(k) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"top_k must be an int >= 1 (the number of tokens kept), got {k!r}")


def _check_top_p(p) -> None:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 < p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1] (the probability mass kept), got {p!r}")


def _check_generator(generator, rows: int) -> None:
    if generator is None or isinstance(generator, torch.Generator):
        return
    if isinstance(generator, (list, tuple)) and all(isinstance(g, torch.Generator)
                                                    for g in generator):
        if len(generator) != rows:
            raise ValueError(f"generator: one torch.Generator per row of the prefix, "
                             f"{rows} of them, got {len(generator)}")
        return
    raise TypeError(f"generator must be None, a torch.Generator or a list of them (one per "
                    f"row), got {type(generator).__name__}")


def _draw(probs: torch.Tensor, generator) -> torch.Tensor:
    """One token per row of probs [B, V] -> [B]; a list of generators draws row by row."""
    if generator is None or isinstance(generator, torch.Generator):
        return torch.multinomial(probs, 1, generator=generator).squeeze(1)
    return torch.cat([torch.multinomial(row[None], 1, generator=g)[0]
                      for row, g in zip(probs, generator, strict=True)])


def _logits(step_fn: StepFn, tokens: torch.Tensor) -> torch.Tensor:
    logits = step_fn(tokens)
    ok = isinstance(logits, torch.Tensor) and logits.dim() == 2
    if not ok or logits.shape[0] != tokens.shape[0]:
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(
            f"step_fn must return next-token logits of shape [N, V] = [{tokens.shape[0]}, V] "
            f"for tokens of shape {tuple(tokens.shape)}, got {got}"
        )
    return logits.float()


# --------------------------------------------------------------------------- filters
def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits of each row, set the others to -inf.

    logits: [..., V]. Exactly ``min(k, V)`` entries survive per row (ties broken by
    ``torch.topk``).
    """
    _check_top_k(k)
    k = min(k, logits.shape[-1])
    index = logits.topk(k, dim=-1).indices  # [..., k]
    kept = torch.full_like(logits, float("-inf"))
    return kept.scatter(-1, index, logits.gather(-1, index))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the smallest set of most likely tokens whose probability reaches p.

    logits: [..., V]. Sorted by probability, a token is kept when the mass of the tokens
    before it is still below ``p``, so the most likely token is always kept and ``p = 1``
    keeps every token.
    """
    _check_top_p(p)
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # [..., V]
    probs = torch.softmax(sorted_logits.float(), dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs  # mass of the strictly more likely tokens
    keep_sorted = mass_before < p
    keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


# --------------------------------------------------------------------------- wrappers
class BanTokens:
    """A step function that never proposes the tokens ``ids`` (their logits become -inf).

    For tokens a model should not produce when generating: ``<pad>``, ``<bos>``, ``<unk>``.
    A ``reorder`` method of the wrapped step function (a KV cache) is passed through.
    """

    def __init__(self, step_fn: StepFn, ids):
        self.step_fn = step_fn
        self.ids = torch.as_tensor(list(ids), dtype=torch.long)
        if hasattr(step_fn, "reorder"):
            self.reorder = step_fn.reorder

    def __call__(self, tokens):
        logits = self.step_fn(tokens)
        return logits.index_fill(-1, self.ids.to(logits.device), float("-inf"))


# --------------------------------------------------------------------------- greedy
@torch.no_grad()
def greedy_decode(step_fn: StepFn, prefix: torch.Tensor, max_new_tokens: int,
                  eos_id: int | None = None, pad_id: int | None = None) -> torch.Tensor:
    """Append the most likely next token, ``max_new_tokens`` times (or until every row ends).

    prefix: LongTensor [B, L0] -> LongTensor [B, L0 + T], T <= max_new_tokens.
    """
    _check_prefix(prefix)
    _check_int("max_new_tokens", max_new_tokens, 0)
    _check_token_id("eos_id", eos_id)
    _check_token_id("pad_id", pad_id)
    pad = eos_id if pad_id is None else pad_id
    tokens = prefix
    finished = torch.zeros(prefix.shape[0], dtype=torch.bool, device=prefix.device)
    for _ in range(max_new_tokens):
        next_token = _logits(step_fn, tokens).argmax(dim=-1)  # [B]
        if eos_id is not None:
            next_token = next_token.masked_fill(finished, pad)
            finished = finished | (next_token == eos_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        if eos_id is not None and bool(finished.all()):
            break
    return tokens


# --------------------------------------------------------------------------- sampling
@torch.no_grad()
def sample(step_fn: StepFn, prefix: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
           top_k: int | None = None, top_p: float | None = None, eos_id: int | None = None,
           generator: torch.Generator | list[torch.Generator] | None = None,
           pad_id: int | None = None) -> torch.Tensor:
    """Draw each next token from softmax(logits / temperature), cut to top-k and/or top-p.

    prefix: LongTensor [B, L0] -> LongTensor [B, L0 + T], T <= max_new_tokens. Pass a seeded
    ``torch.Generator`` (on the prefix's device) for reproducible draws, or a list of B of
    them, one per row: then row b's draws come from ``generator[b]`` alone, so each row's
    text is the same whatever the other rows of the batch. With both cuts, top-k is applied
    first, then top-p on what remains.
    """
    _check_prefix(prefix)
    _check_int("max_new_tokens", max_new_tokens, 0)
    _check_temperature(temperature)
    if top_k is not None:
        _check_top_k(top_k)
    if top_p is not None:
        _check_top_p(top_p)
    _check_token_id("eos_id", eos_id)
    _check_token_id("pad_id", pad_id)
    _check_generator(generator, prefix.shape[0])
    pad = eos_id if pad_id is None else pad_id
    tokens = prefix
    finished = torch.zeros(prefix.shape[0], dtype=torch.bool, device=prefix.device)
    for _ in range(max_new_tokens):
        logits = _logits(step_fn, tokens) / temperature  # [B, V]
        if top_k is not None:
            logits = top_k_filter(logits, top_k)
        if top_p is not None:
            logits = top_p_filter(logits, top_p)
        probs = torch.softmax(logits, dim=-1)
        next_token = _draw(probs, generator)  # [B]
        if eos_id is not None:
            next_token = next_token.masked_fill(finished, pad)
            finished = finished | (next_token == eos_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        if eos_id is not None and bool(finished.all()):
            break
    return tokens


# --------------------------------------------------------------------------- beam search
def length_penalty_gnmt(length: torch.Tensor | int, alpha: float) -> torch.Tensor | float:
    """GNMT's length penalty lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al. 2016).

    A hypothesis is ranked by log P(Y) / lp(Y); alpha = 0 ranks by log P(Y) alone, larger
    alpha favours longer outputs.
    """
    return ((5.0 + length) / 6.0) ** alpha


def _check_beam_args(prefix, beam_size, max_new_tokens, eos_id, pad_id, length_penalty):
    """The argument checks shared by ``beam_search`` and ``beam_search_pool``."""
    _check_prefix(prefix)
    _check_int("beam_size", beam_size, 1)
    _check_int("max_new_tokens", max_new_tokens, 0)
    _check_token_id("eos_id", eos_id)
    _check_token_id("pad_id", pad_id)
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)) \
            or not math.isfinite(length_penalty):
        raise ValueError(
            f"length_penalty must be a finite number (GNMT's alpha), got {length_penalty!r}"
        )


@torch.no_grad()
def beam_search(step_fn: StepFn, prefix: torch.Tensor, beam_size: int, max_new_tokens: int,
                eos_id: int | None = None, length_penalty: float = 0.6,
                pad_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Keep the ``beam_size`` best partial sequences of each input; return the best one.

    prefix: LongTensor [B, L0] -> (tokens LongTensor [B, L0 + T], scores FloatTensor [B]).

    A hypothesis Y (the generated tokens, its ``eos_id`` included) is ranked by
    ``log P(Y) / ((5 + |Y|) / 6) ** length_penalty``; the returned ``scores`` are these
    ranked values. All beams of all inputs go through ``step_fn`` as one batch of
    ``B * beam_size`` rows (batch-major). A finished hypothesis stays in its beam, keeps its
    score and is padded with ``pad_id`` (``eos_id`` when None); it keeps competing for the
    ``beam_size`` places, so ``beam_size`` better-ranked live extensions push it out
    (``beam_search_pool`` keeps finished hypotheses apart instead). The search stops when
    every beam has finished or after ``max_new_tokens`` steps.
    """
    _check_beam_args(prefix, beam_size, max_new_tokens, eos_id, pad_id, length_penalty)
    pad = eos_id if pad_id is None else pad_id
    B, K, device = prefix.shape[0], beam_size, prefix.device
    tokens = prefix.repeat_interleave(K, dim=0)  # [B*K, L0], batch-major
    # log P of each beam; only beam 0 is alive at the start, so the K beams do not repeat
    logp = torch.full((B, K), float("-inf"), device=device)
    logp[:, 0] = 0.0
    logp = logp.view(-1)  # [B*K]
    length = torch.zeros(B * K, device=device)  # generated tokens, eos included
    finished = torch.zeros(B * K, dtype=torch.bool, device=device)
    reorder = getattr(step_fn, "reorder", None)

    for _ in range(max_new_tokens):
        if bool((finished | torch.isinf(logp)).all()):
            break
        step_logp = torch.log_softmax(_logits(step_fn, tokens), dim=-1)  # [B*K, V]
        V = step_logp.shape[-1]
        if eos_id is not None and bool(finished.any()):
            # a finished beam has one continuation (index eos_id, written as padding), at no cost
            frozen = torch.full((V,), float("-inf"), device=device)
            frozen[eos_id] = 0.0
            step_logp = torch.where(finished[:, None], frozen, step_logp)
        new_logp = logp[:, None] + step_logp  # [B*K, V]
        new_len = length[:, None] + (~finished[:, None]).float()  # [B*K, 1]
        rank = new_logp / length_penalty_gnmt(new_len, length_penalty)  # [B*K, V]
        best = rank.view(B, K * V).topk(K, dim=-1).indices  # [B, K]
        offset = torch.arange(B, device=device)[:, None] * K  # first row of each input
        beam = (best // V + offset).view(-1)  # the row each new beam extends, [B*K]
        choice = (best % V).view(-1)  # [B*K]
        logp, length = new_logp[beam, choice], new_len[beam, 0]
        was_finished = finished[beam]
        token = choice.masked_fill(was_finished, pad) if eos_id is not None else choice
        if eos_id is not None:
            finished = was_finished | (choice == eos_id)
        tokens = torch.cat([tokens[beam], token[:, None]], dim=1)
        if reorder is not None:
            reorder(beam)

    rank = (logp / length_penalty_gnmt(length, length_penalty)).view(B, K)
    best_score, best_beam = rank.max(dim=-1)  # [B]
    rows = best_beam + torch.arange(B, device=device) * K
    return tokens[rows], best_score


@torch.no_grad()
def beam_search_pool(step_fn: StepFn, prefix: torch.Tensor, beam_size: int, max_new_tokens: int,
                     eos_id: int | None = None, length_penalty: float = 0.6,
                     pad_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Beam search in its common form: ``beam_size`` live beams plus a pool of finished ones.

    Same interface, ranking (``log P(Y) / ((5 + |Y|) / 6) ** length_penalty``) and output as
    ``beam_search``; only the handling of finished hypotheses differs. At every step the
    ``2 * beam_size`` best extensions of each input are read best first: one that ends with
    ``eos_id`` goes to the input's pool of finished hypotheses (if it ranks among the first
    ``beam_size``; the pool keeps the best ``beam_size``), the others fill the live beams. So
    ``beam_size`` hypotheses are always extended, and a finished hypothesis leaves the pool
    only for a better finished one. An input is done once its pool is full and no live beam
    scores above the worst pooled one at its current length (exact for length_penalty = 0, a
    heuristic above 0). After ``max_new_tokens`` steps the live beams join the pool; the best
    pooled hypothesis is returned, padded with ``pad_id`` (``eos_id`` when None).
    """
    _check_beam_args(prefix, beam_size, max_new_tokens, eos_id, pad_id, length_penalty)
    pad = eos_id if pad_id is None else pad_id
    pad = 0 if pad is None else pad  # no eos: nothing finishes, the filler is never returned
    B, K, L0, device = prefix.shape[0], beam_size, prefix.shape[1], prefix.device
    tokens = prefix.repeat_interleave(K, dim=0)  # [B*K, L0], batch-major
    logp = torch.full((B, K), float("-inf"), device=device)
    logp[:, 0] = 0.0  # only beam 0 is alive at the start
    logp = logp.view(-1)  # [B*K]
    pools = [[] for _ in range(B)]  # per input: (score, generated ids) of finished hypotheses
    done = [False] * B
    reorder = getattr(step_fn, "reorder", None)

    for t in range(1, max_new_tokens + 1):  # t: generated tokens after this step
        if all(done):
            break
        step_logp = torch.log_softmax(_logits(step_fn, tokens), dim=-1)  # [B*K, V]
        V = step_logp.shape[-1]
        cand = (logp[:, None] + step_logp).view(B, K * V)
        top_logp, top_index = cand.topk(min(2 * K, K * V), dim=-1)  # [B, 2K], best first
        lp = length_penalty_gnmt(t, length_penalty)  # every live beam has length t
        rows = torch.arange(B * K, device=device).view(B, K)  # done inputs keep their rows
        next_tok = torch.full((B, K), pad, dtype=torch.long, device=device)
        next_logp = torch.full((B, K), float("-inf"), device=device)
        for b, (values, index) in enumerate(zip(top_logp.tolist(), top_index.tolist())):
            if done[b]:
                continue
            n_live = 0
            for rank, (value, i) in enumerate(zip(values, index)):
                if value == float("-inf") or n_live == K:
                    break
                row, token = b * K + i // V, i % V
                if token == eos_id:
                    if rank < K:  # an ending that ranks below the k best is not kept
                        ids = tokens[row, L0:].tolist() + [token]
                        pools[b] = sorted(pools[b] + [(value / lp, ids)], key=lambda h: -h[0])[:K]
                    continue
                rows[b, n_live], next_tok[b, n_live], next_logp[b, n_live] = row, token, value
                n_live += 1
            best_live = next_logp[b, 0].item() / lp
            done[b] = n_live == 0 or (len(pools[b]) == K and best_live <= pools[b][-1][0])
        beam = rows.view(-1)  # the row each new beam extends, [B*K]
        logp = next_logp.view(-1)
        tokens = torch.cat([tokens[beam], next_tok.view(-1, 1)], dim=1)
        if reorder is not None:
            reorder(beam)

    length = tokens.shape[1] - L0
    best = []
    for b in range(B):
        hyps = list(pools[b])
        if not done[b]:  # out of steps: the live beams compete with the finished ones
            for r in range(b * K, (b + 1) * K):
                if logp[r] > float("-inf"):
                    score = logp[r].item() / length_penalty_gnmt(length, length_penalty)
                    hyps.append((score, tokens[r, L0:].tolist()))
        best.append(max(hyps, key=lambda h: h[0]))
    width = max(len(ids) for _, ids in best)
    out = torch.full((B, L0 + width), pad, dtype=torch.long, device=device)
    out[:, :L0] = prefix
    for b, (_, ids) in enumerate(best):
        out[b, L0:L0 + len(ids)] = torch.tensor(ids, dtype=torch.long, device=device)
    scores = torch.tensor([s for s, _ in best], device=device)
    return out, scores


# --------------------------------------------------------------------------- text metrics
def _ngrams(seq, n: int) -> list[tuple]:
    seq = seq.tolist() if hasattr(seq, "tolist") else list(seq)  # tensor, array or list
    return [tuple(seq[i:i + n]) for i in range(len(seq) - n + 1)]


def distinct_n(sequences, n: int) -> float:
    """Distinct-n of a set of texts: different n-grams / all n-grams, pooled over the texts.

    ``sequences``: token lists (or 1-D tensors or arrays). 1.0 means no n-gram occurs twice
    anywhere. The value falls as the sample grows (more chances to repeat), so compare
    strategies on samples of the same number of tokens.
    """
    _check_int("n", n, 1)
    grams = [g for seq in sequences for g in _ngrams(seq, n)]
    if not grams:
        raise ValueError(f"distinct_n needs at least one text of {n} or more tokens")
    return len(set(grams)) / len(grams)


def repetition_rate(sequence, n: int = 3) -> float:
    """Share of one text's n-grams that repeat an n-gram seen earlier in the same text.

    0.0: no n-gram repeats; a text stuck in a loop approaches 1.0. Equals
    ``1 - distinct_n([sequence], n)``.
    """
    _check_int("n", n, 1)
    grams = _ngrams(sequence, n)
    if not grams:
        raise ValueError(
            f"repetition_rate needs a text of at least {n} tokens, got {len(sequence)}"
        )
    return 1.0 - len(set(grams)) / len(grams)
