"""Count-based baselines for a language model: unigram, add-k bigram, Kneser-Ney of order n.

Each model is fitted on (context, next token) pairs and gives P(next | context) for any
pairs; ``perplexity`` turns those into exp(mean negative log-likelihood).

    lm = KneserNeyBigram(vocab_size, discount=0.75).fit(prev, nxt)   # numpy int arrays
    lm.perplexity(prev_test, nxt_test)

    ctx, nxt = sequence_ngrams(train_ids, order=3, start_id=bos_id)  # [N, 2], [N]
    kn3 = KneserNey(vocab_size, order=3, discount=0.8).fit(ctx, nxt)
    kn3.perplexity(*sequence_ngrams(test_ids, order=3, start_id=bos_id))

Kneser-Ney bigram (interpolated, one discount D; Kneser & Ney 1995, Chen & Goodman 1999):

    P(w | v) = max(c(v, w) - D, 0) / c(v)  +  D * N1+(v .) / c(v) * P_cont(w)

where N1+(v .) is the number of different words seen after v and the continuation
probability P_cont(w) is the share of bigram types that end in w: a word that follows many
different words ("francisco" follows almost only "san") is a likely guess in a new context.
A context never seen in training falls back on P_cont. Continuation counts get +1 so that
no word has probability 0.

``KneserNey`` is the same idea for any order n, applied recursively. With h a context of
k - 1 words and h' = h without its first (oldest) word:

    P_k(w | h) = max(c_k(h w) - D, 0) / c_k(h .)  +  D * N1+(h .) / c_k(h .) * P_{k-1}(w | h')
    P_0(w)     = 1 / V

c_n is the raw count at the highest order n; at every lower order c_k(g) is the
continuation count N1+(. g), the number of different words seen just before g. A context
with c_k(h .) = 0 (never seen) passes P_{k-1} through unchanged. Every non-zero count is at
least 1 > D, so each P_k sums to 1 over the vocabulary whenever P_{k-1} does.
"""

from __future__ import annotations

import numbers

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


# --------------------------------------------------------------------------- any order
def sequence_ngrams(sequences, order: int, start_id: int):
    """Every (context, next id) of id sequences: contexts [N, order - 1], next ids [N].

    Each id after the first of a sequence is a target once, in order; its context is the
    ``order - 1`` ids before it, and slots before the start of the sequence hold
    ``start_id``. With sequences that begin with ``<bos>`` and ``start_id = <bos>``, the
    first word's context is ``<bos>`` in every slot: "a text starts here", no more.
    Contexts never cross from one sequence into the next.
    """
    _check_order(order)
    pad = max(order - 2, 0)
    parts, targets = [], []
    offset = 0
    for seq in sequences:
        seq = np.asarray(seq, dtype=np.int64).reshape(-1)
        if len(seq) < 2:
            continue  # nothing to predict
        parts.append(np.concatenate([np.full(pad, start_id, dtype=np.int64), seq]))
        targets.append(offset + pad + np.arange(1, len(seq)))  # positions in the joined array
        offset += pad + len(seq)
    if not parts:
        return np.empty((0, order - 1), dtype=np.int64), np.empty(0, dtype=np.int64)
    flat, at = np.concatenate(parts), np.concatenate(targets)
    context = np.empty((len(at), order - 1), dtype=np.int64)
    for j in range(order - 1):  # column j: the id order - 1 - j places before the target
        context[:, j] = flat[at - order + 1 + j]
    return context, flat[at]


def _check_order(order):
    if isinstance(order, bool) or not isinstance(order, numbers.Integral) or order < 1:
        raise ValueError(f"order must be an int >= 1 (2 = bigram, 3 = trigram), got {order!r}")


def _check_discount(discount):
    if isinstance(discount, bool) or not isinstance(discount, numbers.Real) \
            or not 0 < discount < 1:
        raise ValueError(f"discount must be a number in (0, 1), got {discount!r}")
    return float(discount)


def _lookup(keys, values, query):
    """values[i] where keys[i] == query (keys sorted), 0 where query is not in keys."""
    if len(keys) == 0:
        return np.zeros(len(query))
    idx = np.searchsorted(keys, query).clip(max=len(keys) - 1)
    return np.where(keys[idx] == query, values[idx], 0.0)


class KneserNey(_LM):
    """Interpolated Kneser-Ney of any ``order`` (2 = bigram, 3 = trigram, ...), one discount.

    ``fit(context, nxt)`` and ``prob(context, nxt)`` take contexts [N, order - 1] (the
    oldest id first; a 1-D array for order 2) and next ids [N]; see ``sequence_ngrams``.
    Each n-gram is one int64 key, ``((c_1 V + c_2) V + ...) V + w``, so that its last k ids
    are ``key % V**k`` and its context ``key // V``: every count is a sorted key array.
    """

    def __init__(self, vocab_size: int, order: int = 3, discount: float = 0.75):
        super().__init__(vocab_size)
        _check_order(order)
        if vocab_size ** order >= 2 ** 63:
            raise ValueError(f"vocab_size ** order must fit in int64: {vocab_size} ** {order} "
                             "is too large; use a lower order or a smaller vocabulary")
        self.order, self.D = int(order), _check_discount(discount)
        self.levels = None  # filled by fit

    def fit(self, context, nxt):
        key = self._keys(context, nxt)
        if key.size == 0:
            raise ValueError("nothing to fit: no (context, next id) pairs")
        types, counts = np.unique(key, return_counts=True)  # raw counts of the n-grams
        levels = {self.order: (types, counts)}
        for k in range(self.order - 1, 0, -1):  # continuation counts N1+(. g), shorter g
            types, counts = np.unique(levels[k + 1][0] % self.V ** k, return_counts=True)
            levels[k] = (types, counts)
        self.levels = {k: self._with_context_totals(t, c) for k, (t, c) in levels.items()}
        return self

    def _with_context_totals(self, types, counts):
        """Per context h (sorted keys): c(h .), the sum of counts, and N1+(h .), the types."""
        ctx, first = np.unique(types // self.V, return_index=True)  # types are sorted
        totals = np.add.reduceat(counts, first).astype(np.float64)
        n_types = np.diff(np.append(first, len(types))).astype(np.float64)
        return types, counts.astype(np.float64), ctx, totals, n_types

    def prob(self, context, nxt) -> np.ndarray:
        if self.levels is None:
            raise RuntimeError("KneserNey: call fit(context, nxt) before prob or perplexity")
        key = self._keys(context, nxt)
        D = self.D
        p = np.full(len(key), 1.0 / self.V)  # P_0: uniform
        for k in range(1, self.order + 1):  # interpolate upwards: P_1, P_2, ..., P_n
            types, counts, ctx, totals, n_types = self.levels[k]
            gram = key % self.V ** k  # the last k ids: (h, w)
            c = _lookup(types, counts, gram)
            total = _lookup(ctx, totals, gram // self.V)  # c_k(h .); 0 for an unseen h
            n_after = _lookup(ctx, n_types, gram // self.V)  # N1+(h .)
            seen = total > 0
            safe = np.where(seen, total, 1.0)
            p = np.where(seen, (np.maximum(c - D, 0.0) + D * n_after * p) / safe, p)
        return p

    @property
    def num_types(self) -> dict[int, int]:
        """How many distinct k-grams the fitted model stores at each order k."""
        if self.levels is None:
            raise RuntimeError("KneserNey: call fit(context, nxt) first")
        return {k: len(level[0]) for k, level in sorted(self.levels.items())}

    def distribution(self, context) -> np.ndarray:
        """P(. | context) over the whole vocabulary, [V] (sums to 1); context: order - 1 ids."""
        context = np.asarray(context, dtype=np.int64).reshape(1, -1)
        return self.prob(np.repeat(context, self.V, axis=0), np.arange(self.V))

    def with_discount(self, discount: float) -> KneserNey:
        """The same fitted counts with another discount (no refit): for tuning D."""
        other = KneserNey(self.V, self.order, discount)
        other.levels = self.levels
        return other

    def _keys(self, context, nxt) -> np.ndarray:
        """Check the inputs; one int64 key per n-gram."""
        nxt = _as_ids(nxt, "nxt")
        if nxt.ndim != 1:
            raise ValueError(f"nxt must be 1-D, got shape {nxt.shape}")
        n_ctx = self.order - 1
        context = _as_ids(context, "context")
        if context.ndim == 1 and n_ctx == 1:
            context = context[:, None]  # a bigram's context may be given as prev ids [N]
        if context.size == 0 and n_ctx == 0:
            context = context.reshape(len(nxt), 0)
        if context.shape != (len(nxt), n_ctx):
            raise ValueError(f"an order-{self.order} model needs contexts of shape "
                             f"[N, {n_ctx}] for N = {len(nxt)} next ids, got {context.shape}")
        for name, a in (("context", context), ("nxt", nxt)):
            if a.size and (a.min() < 0 or a.max() >= self.V):
                bad = a[(a < 0) | (a >= self.V)][0]
                raise ValueError(f"{name} holds id {bad}, outside the vocabulary 0..{self.V - 1}")
        key = np.zeros(len(nxt), dtype=np.int64)
        for j in range(n_ctx):
            key = key * self.V + context[:, j]
        return key * self.V + nxt


def _as_ids(a, name):
    a = np.asarray(a)
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name} must hold integer token ids, got dtype {a.dtype}")
    return a.astype(np.int64)


# --------------------------------------------------------------------------- mixtures
def _probabilities(name, p):
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or not p.size:
        raise ValueError(f"{name} must be a non-empty 1-D array of probabilities, got shape "
                         f"{p.shape}")
    if not np.all((p > 0) & (p <= 1)):
        raise ValueError(f"{name} must hold probabilities in (0, 1]; a model that gives a "
                         "target probability 0 cannot be scored (smooth it)")
    return p


def mix(p_a, p_b, weight: float) -> np.ndarray:
    """P = weight * P_a + (1 - weight) * P_b, target by target (linear interpolation)."""
    if not 0.0 <= float(weight) <= 1.0:
        raise ValueError(f"weight must be in [0, 1], got {weight}")
    return float(weight) * _probabilities("p_a", p_a) + (1 - float(weight)) * _probabilities(
        "p_b", p_b)


def fit_mix_weight(p_a, p_b, iterations: int = 100, tol: float = 1e-9) -> float:
    """The weight of ``mix`` that maximises the likelihood of the targets (EM).

    Each step gives every target the posterior share of model a,
    w P_a / (w P_a + (1 - w) P_b), and sets w to their mean; the likelihood never decreases.
    Fit it on validation targets, then score ``mix`` on test.
    """
    p_a, p_b = _probabilities("p_a", p_a), _probabilities("p_b", p_b)
    if p_a.shape != p_b.shape:
        raise ValueError(f"p_a and p_b must score the same targets, got {p_a.shape} and "
                         f"{p_b.shape}")
    w = 0.5
    for _ in range(iterations):
        share = w * p_a / (w * p_a + (1 - w) * p_b)
        new = float(share.mean())
        if abs(new - w) < tol:
            return new
        w = new
    return w
