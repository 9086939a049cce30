"""Count-based baselines for a language model: unigram, add-k bigram, Kneser-Ney bigram.

Each model is fitted on (previous token, next token) pairs and gives P(next | previous)
for any pairs; ``perplexity`` turns those into exp(mean negative log-likelihood).

    lm = KneserNeyBigram(vocab_size, discount=0.75).fit(prev, nxt)   # numpy int arrays
    lm.perplexity(prev_test, nxt_test)

Kneser-Ney (interpolated, one discount D; Kneser & Ney 1995, Chen & Goodman 1999):

    P(w | v) = max(c(v, w) - D, 0) / c(v)  +  D * N1+(v .) / c(v) * P_cont(w)

where N1+(v .) is the number of different words seen after v and the continuation
probability P_cont(w) is the share of bigram types that end in w: a word that follows many
different words ("francisco" follows almost only "san") is a likely guess in a new context.
A context never seen in training falls back on P_cont. Continuation counts get +1 so that
no word has probability 0.
"""

from __future__ import annotations

import numpy as np


def _pairs(prev, nxt, vocab_size):
    prev, nxt = np.asarray(prev, dtype=np.int64), np.asarray(nxt, dtype=np.int64)
    if prev.shape != nxt.shape or prev.ndim != 1:
        raise ValueError(f"prev and nxt must be 1-D arrays of the same length, got {prev.shape} "
                         f"and {nxt.shape}")
    for name, a in (("prev", prev), ("nxt", nxt)):
        if a.size and (a.min() < 0 or a.max() >= vocab_size):
            raise ValueError(f"{name} holds ids outside 0..{vocab_size - 1}")
    return prev, nxt


class _LM:
    def __init__(self, vocab_size: int):
        if not isinstance(vocab_size, int) or vocab_size < 2:
            raise ValueError(f"vocab_size must be an int >= 2, got {vocab_size!r}")
        self.V = vocab_size

    def prob(self, prev, nxt) -> np.ndarray:
        raise NotImplementedError

    def perplexity(self, prev, nxt) -> float:
        """exp of the mean negative log-probability of the pairs."""
        p = self.prob(prev, nxt)
        return float(np.exp(-np.log(p).mean()))

    def distribution(self, prev_id: int) -> np.ndarray:
        """P(. | prev_id) over the whole vocabulary, [V] (sums to 1)."""
        w = np.arange(self.V)
        return self.prob(np.full(self.V, prev_id), w)


class UnigramLM(_LM):
    """P(w) = (c(w) + k) / (N + k V): ignores the previous token."""

    def __init__(self, vocab_size: int, k: float = 1.0, exclude=()):
        super().__init__(vocab_size)
        self.k, self.exclude = k, tuple(exclude)

    def fit(self, prev, nxt):
        _, nxt = _pairs(prev, nxt, self.V)
        counts = np.bincount(nxt, minlength=self.V).astype(np.float64) + self.k
        counts[list(self.exclude)] = 0.0  # tokens that are never targets (<pad>, <bos>)
        self.p = counts / counts.sum()
        return self

    def prob(self, prev, nxt):
        _, nxt = _pairs(prev, nxt, self.V)
        return self.p[nxt]


class _BigramCounts(_LM):
    def fit(self, prev, nxt):
        prev, nxt = _pairs(prev, nxt, self.V)
        keys, counts = np.unique(prev * self.V + nxt, return_counts=True)  # sorted bigram types
        self.keys, self.counts = keys, counts.astype(np.float64)
        self.context_count = np.bincount(prev, minlength=self.V).astype(np.float64)  # c(v)
        self.types_after = np.bincount(keys // self.V, minlength=self.V).astype(np.float64)
        self.types_before = np.bincount(keys % self.V, minlength=self.V).astype(np.float64)
        return self

    def pair_count(self, prev, nxt) -> np.ndarray:
        """c(v, w) for each pair (0 if never seen)."""
        key = np.asarray(prev, dtype=np.int64) * self.V + np.asarray(nxt, dtype=np.int64)
        idx = np.searchsorted(self.keys, key).clip(max=len(self.keys) - 1)
        return np.where(self.keys[idx] == key, self.counts[idx], 0.0)


class AddKBigram(_BigramCounts):
    """P(w | v) = (c(v, w) + k) / (c(v) + k V)."""

    def __init__(self, vocab_size: int, k: float = 0.1):
        super().__init__(vocab_size)
        if not k > 0:
            raise ValueError(f"k must be > 0, got {k}")
        self.k = k

    def prob(self, prev, nxt):
        prev, nxt = _pairs(prev, nxt, self.V)
        return (self.pair_count(prev, nxt) + self.k) / (self.context_count[prev] + self.k * self.V)


class KneserNeyBigram(_BigramCounts):
    """Interpolated Kneser-Ney bigram with one discount ``D`` in (0, 1)."""

    def __init__(self, vocab_size: int, discount: float = 0.75):
        super().__init__(vocab_size)
        if not 0 < discount < 1:
            raise ValueError(f"discount must be in (0, 1), got {discount}")
        self.D = discount

    def fit(self, prev, nxt):
        super().fit(prev, nxt)
        cont = self.types_before + 1.0
        self.p_cont = cont / cont.sum()
        return self

    def prob(self, prev, nxt):
        prev, nxt = _pairs(prev, nxt, self.V)
        c_v = self.context_count[prev]
        seen = c_v > 0
        safe = np.where(seen, c_v, 1.0)
        discounted = np.maximum(self.pair_count(prev, nxt) - self.D, 0.0) / safe
        backoff = self.D * self.types_after[prev] / safe
        return np.where(seen, discounted + backoff * self.p_cont[nxt], self.p_cont[nxt])
