"""Unit tests of course_lib.ngram: the count-based baselines are proper distributions."""

import numpy as np
import pytest

from course_lib.ngram import AddKBigram, KneserNey, KneserNeyBigram, UnigramLM, sequence_ngrams

V = 12
PINNED_BIGRAM_PPL = 10.339132005014694
PINNED_BIGRAM_PROBS = [0.10069444444444445, 0.09027777777777778, 0.08333333333333333]


def _data(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    prev = rng.integers(0, V - 2, n)  # ids V-2 and V-1 never occur as a context
    nxt = (prev * 3 + rng.integers(0, 3, n)) % (V - 1)  # id V-1 never occurs as a target
    return prev, nxt


@pytest.mark.parametrize("model", [UnigramLM(V), AddKBigram(V, k=0.05),
                                   KneserNeyBigram(V, discount=0.75)])
def test_every_context_gives_a_distribution(model):
    model.fit(*_data())
    for v in range(V):  # seen and unseen contexts alike
        p = model.distribution(v)
        assert p.shape == (V,) and (p > 0).all()
        assert p.sum() == pytest.approx(1.0, abs=1e-9)


def test_kneser_ney_hand_computed():
    prev = np.array([0, 0, 0, 1, 2])
    nxt = np.array([1, 1, 2, 2, 2])
    lm = KneserNeyBigram(3, discount=0.5).fit(prev, nxt)
    # continuation: types ending in 1: {0->1}; in 2: {0->2, 1->2, 2->2}; in 0: none; +1 each
    p_cont = np.array([1, 2, 4]) / 7
    # context 0: c=3, types after = 2
    expected = (2 - 0.5) / 3 + 0.5 * 2 / 3 * p_cont[1]
    assert lm.prob([0], [1])[0] == pytest.approx(expected)
    assert lm.prob([0], [0])[0] == pytest.approx(0.5 * 2 / 3 * p_cont[0])


def test_bigram_beats_unigram_on_dependent_data():
    prev, nxt = _data(4000, seed=1)
    tp, tn = _data(1000, seed=2)
    uni = UnigramLM(V).fit(prev, nxt).perplexity(tp, tn)
    addk = AddKBigram(V, 0.05).fit(prev, nxt).perplexity(tp, tn)
    kn = KneserNeyBigram(V, 0.75).fit(prev, nxt).perplexity(tp, tn)
    assert kn < uni and addk < uni
    assert kn == pytest.approx(3.0, rel=0.1)  # three equally likely successors


def test_unigram_excludes_tokens_and_bad_inputs():
    lm = UnigramLM(V, exclude=(0,)).fit(*_data())
    assert lm.prob([0], [0])[0] == 0.0
    with pytest.raises(ValueError, match="outside"):
        AddKBigram(V).fit([0, V], [1, 1])
    with pytest.raises(ValueError, match="same length"):
        KneserNeyBigram(V).fit([0, 1], [1])
    with pytest.raises(ValueError, match="discount"):
        KneserNeyBigram(V, discount=1.5)
    with pytest.raises(ValueError, match="k must"):
        AddKBigram(V, k=0)


def test_kneser_ney_bigram_gives_the_same_numbers_as_before():
    """Pinned from the implementation before KneserNey (any order) was added beside it."""
    i = np.arange(60)
    prev, nxt = i % 7, (3 * (i % 7) + i // 7) % 11  # a fixed corpus, no random numbers
    lm = KneserNeyBigram(V, discount=0.75).fit(prev, nxt)
    assert lm.perplexity(prev, nxt) == pytest.approx(PINNED_BIGRAM_PPL, rel=1e-12)
    assert lm.prob([0, 3, 11], [0, 9, 5]) == pytest.approx(PINNED_BIGRAM_PROBS, rel=1e-12)


# --------------------------------------------------------------------------- any order
def _corpus(n_seqs=60, length=30, seed=0):
    """Sequences starting with id 0 (a <bos>); the next id depends on the two before it."""
    rng = np.random.default_rng(seed)
    seqs = []
    for _ in range(n_seqs):
        s = [0, int(rng.integers(1, V - 1))]
        for _ in range(length):
            s.append(1 + (s[-1] + 2 * s[-2] + int(rng.integers(0, 2))) % (V - 2))
        seqs.append(s)  # id V - 1 never occurs
    return seqs


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_kneser_ney_every_context_gives_a_distribution(order):
    ctx, nxt = sequence_ngrams(_corpus(), order, start_id=0)
    lm = KneserNey(V, order=order, discount=0.7).fit(ctx, nxt)
    rng = np.random.default_rng(1)
    seen = [tuple(c) for c in ctx[:20]]
    unseen = [tuple(rng.integers(0, V, order - 1)) for _ in range(20)]
    unseen += [(V - 1,) * (order - 1)]  # an id never seen anywhere
    for c in seen + unseen:
        p = lm.distribution(c)
        assert p.shape == (V,) and (p > 0).all()
        assert p.sum() == pytest.approx(1.0, abs=1e-12)
    # the vectorised scores are the distributions' entries
    assert lm.prob(ctx[:50], nxt[:50]) == pytest.approx(
        [lm.distribution(c)[w] for c, w in zip(ctx[:50], nxt[:50])], rel=1e-12)


def test_kneser_ney_trigram_hand_computed():
    # V = 3, D = 1/2, seven trigrams (u, v, w):
    ctx = np.array([[0, 1], [0, 1], [0, 1], [1, 1], [2, 1], [1, 2], [0, 0]])
    nxt = np.array([2, 2, 1, 2, 2, 0, 2])
    lm = KneserNey(3, order=3, discount=0.5).fit(ctx, nxt)
    # Order 3, raw counts: 012: 2, 011: 1, 112: 1, 212: 1, 120: 1, 002: 1.
    #   context (0, 1): c(01 .) = 3 with N1+(01 .) = 2 types; (2, 1): 1 and 1.
    # Order 2, continuation counts N1+(. v w) over the trigram types:
    #   12 follows 0, 1 and 2 -> 3; 11 follows 0 -> 1; 20 follows 1 -> 1; 02 follows 0 -> 1.
    #   context 1: total 3 + 1 = 4, 2 types; context 2: total 1, 1 type; context 0: 1, 1.
    # Order 1, continuation counts N1+(. w) over the bigram types 12, 11, 20, 02:
    #   w = 0: {2} -> 1; w = 1: {1} -> 1; w = 2: {1, 0} -> 2. Total 4, 3 types.
    # P1(w) = (c - 1/2) / 4 + (1/2) (3 / 4) (1 / 3) = (c - 1/2) / 4 + 1/8
    p1 = np.array([1 / 4, 1 / 4, 1 / 2])
    # P2(w | 1) = (max(c - 1/2, 0) + (1/2) 2 P1(w)) / 4
    #   w = 0: (0 + 1/4) / 4 = 1/16; w = 1: (1/2 + 1/4) / 4 = 3/16; w = 2: (5/2 + 1/2) / 4 = 3/4
    p2_after_1 = np.array([1 / 16, 3 / 16, 12 / 16])
    # P3(w | 0 1) = (max(c - 1/2, 0) + (1/2) 2 P2(w | 1)) / 3
    #   w = 0: (1/16) / 3 = 1/48; w = 1: (1/2 + 3/16) / 3 = 11/48; w = 2: (3/2 + 3/4) / 3 = 3/4
    assert lm.distribution([0, 1]) == pytest.approx([1 / 48, 11 / 48, 36 / 48], rel=1e-12)
    # P3(w | 2 1) = (max(c - 1/2, 0) + (1/2) 1 P2(w | 1)) / 1 = [1/32, 3/32, 1/2 + 3/8]
    assert lm.num_types == {1: 3, 2: 4, 3: 6}
    assert lm.distribution([2, 1]) == pytest.approx([1 / 32, 3 / 32, 28 / 32], rel=1e-12)
    assert lm.distribution([2, 1]) == pytest.approx(np.eye(3)[2] / 2 + p2_after_1 / 2)
    # unseen context (2, 2): order 3 passes P2(w | 2) through unchanged;
    # P2(w | 2) = (max(c - 1/2, 0) + (1/2) 1 P1(w)) / 1 = [1/2 + 1/8, 1/8, 1/4]
    assert lm.distribution([2, 2]) == pytest.approx([5 / 8, 1 / 8, 2 / 8], rel=1e-12)
    # unseen (1, 0): P2(w | 0) = 1/2 [w = 2] + 1/2 P1(w) = [1/8, 1/8, 3/4]
    p2_after_0 = np.eye(3)[2] / 2 + p1 / 2
    assert lm.distribution([1, 0]) == pytest.approx([1 / 8, 1 / 8, 6 / 8], rel=1e-12)
    assert lm.distribution([1, 0]) == pytest.approx(p2_after_0, rel=1e-12)
    # seen (0, 0), one trigram 002: P3 = 1/2 [w = 2] + 1/2 P2(w | 0) = [1/16, 1/16, 7/8]
    assert lm.distribution([0, 0]) == pytest.approx([1 / 16, 1 / 16, 14 / 16], rel=1e-12)
    # the unigram level alone (order 1 of the same data would use raw counts instead)
    lm1 = KneserNey(3, order=1, discount=0.5).fit(np.empty((7, 0), int), nxt)
    # raw counts [1, 1, 5] of 7, 3 types: (c - 1/2) / 7 + (1/2) (3 / 7) (1 / 3)
    assert lm1.distribution([]) == pytest.approx([1 / 7, 1 / 7, 5 / 7], rel=1e-12)


def test_kneser_ney_higher_order_helps_on_second_order_data():
    train, test = _corpus(200, seed=0), _corpus(50, seed=3)
    ppl = {}
    for order in (1, 2, 3, 4):
        lm = KneserNey(V, order=order, discount=0.75)
        ppl[order] = lm.fit(*sequence_ngrams(train, order, 0)).perplexity(
            *sequence_ngrams(test, order, 0))
    assert ppl[3] < ppl[2] < ppl[1], ppl
    assert ppl[3] < 2.5  # two equally likely successors given the two previous ids
    assert ppl[4] < ppl[2]


def test_kneser_ney_with_discount_equals_a_refit():
    ctx, nxt = sequence_ngrams(_corpus(), 3, start_id=0)
    lm = KneserNey(V, order=3, discount=0.5).fit(ctx, nxt)
    refit = KneserNey(V, order=3, discount=0.9).fit(ctx, nxt)
    assert lm.with_discount(0.9).prob(ctx, nxt) == pytest.approx(refit.prob(ctx, nxt), rel=1e-14)
    assert lm.D == 0.5  # the original is unchanged


def test_kneser_ney_order_2_accepts_bigram_pairs():
    prev, nxt = _data()
    lm = KneserNey(V, order=2).fit(prev, nxt)
    assert lm.prob(prev, nxt) == pytest.approx(lm.prob(prev[:, None], nxt))
    # same counts as KneserNeyBigram; only the last step differs (uniform vs add-one P_cont),
    # so the two agree closely on seen pairs
    old = KneserNeyBigram(V).fit(prev, nxt)
    assert lm.perplexity(prev, nxt) == pytest.approx(old.perplexity(prev, nxt), rel=0.02)


def test_sequence_ngrams_contexts():
    seqs = [[0, 5, 6, 7], [0, 8], [0]]  # the last one has nothing to predict
    ctx, nxt = sequence_ngrams(seqs, 3, start_id=0)
    assert nxt.tolist() == [5, 6, 7, 8]
    assert ctx.tolist() == [[0, 0], [0, 5], [5, 6], [0, 0]]  # never across sequences
    ctx2, nxt2 = sequence_ngrams(seqs, 2, start_id=0)
    assert ctx2.tolist() == [[0], [5], [6], [0]] and nxt2.tolist() == nxt.tolist()
    ctx1, _ = sequence_ngrams(seqs, 1, start_id=0)
    assert ctx1.shape == (4, 0)
    ctx4, _ = sequence_ngrams(seqs, 4, start_id=9)
    assert ctx4[0].tolist() == [9, 9, 0] and ctx4[2].tolist() == [0, 5, 6]


def test_kneser_ney_bad_inputs():
    ctx, nxt = sequence_ngrams(_corpus(5), 3, start_id=0)
    for order in (0, -1, 2.0, True, "3"):
        with pytest.raises(ValueError, match="order must be an int"):
            KneserNey(V, order=order)
    for D in (0, 1, 1.5, -0.1, float("nan"), True):
        with pytest.raises(ValueError, match="discount"):
            KneserNey(V, order=3, discount=D)
    with pytest.raises(ValueError, match="int64"):
        KneserNey(5000, order=6)
    with pytest.raises(RuntimeError, match="fit"):
        KneserNey(V, order=3).prob(ctx, nxt)
    with pytest.raises(RuntimeError, match="fit"):
        KneserNey(V, order=3).num_types
    lm = KneserNey(V, order=3)
    with pytest.raises(ValueError, match=f"id {V}, outside the vocabulary"):
        lm.fit(ctx, np.where(np.arange(len(nxt)) == 3, V, nxt))
    with pytest.raises(ValueError, match="id -1, outside"):
        lm.fit(np.where(ctx == 0, -1, ctx), nxt)
    with pytest.raises(ValueError, match=r"shape \[N, 2\]"):
        lm.fit(ctx[:, :1], nxt)
    with pytest.raises(ValueError, match="integer"):
        lm.fit(ctx.astype(float), nxt)
    with pytest.raises(ValueError, match="nothing to fit"):
        lm.fit(np.empty((0, 2), int), np.empty(0, int))
    lm.fit(ctx, nxt)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        lm.prob([[0, V + 3]], [1])
    with pytest.raises(ValueError, match="order must be an int"):
        sequence_ngrams([[0, 1]], 0, start_id=0)


def _naive_kneser_ney(ctx, nxt, V, D):
    """A slow, direct reading of the recursion with Python dicts: the reference."""
    order = ctx.shape[1] + 1
    grams = [tuple(c) + (w,) for c, w in zip(ctx.tolist(), nxt.tolist())]
    count = {order: {}}
    for g in grams:
        count[order][g] = count[order].get(g, 0) + 1
    for k in range(order - 1, 0, -1):  # continuation counts from the types one order up
        count[k] = {}
        for g in count[k + 1]:
            count[k][g[1:]] = count[k].get(g[1:], 0) + 1

    def p(k, h, w):
        if k == 0:
            return 1.0 / V
        total = sum(c for g, c in count[k].items() if g[:-1] == h)
        if total == 0:
            return p(k - 1, h[1:], w)
        n_after = sum(1 for g in count[k] if g[:-1] == h)
        c = count[k].get(h + (w,), 0)
        return (max(c - D, 0) + D * n_after * p(k - 1, h[1:], w)) / total

    return lambda h, w: p(order, tuple(h), w)


@pytest.mark.parametrize("order", [2, 3, 4])
def test_kneser_ney_matches_a_naive_implementation(order):
    ctx, nxt = sequence_ngrams(_corpus(8, 12, seed=5), order, start_id=0)
    naive = _naive_kneser_ney(ctx, nxt, V, 0.6)
    lm = KneserNey(V, order=order, discount=0.6).fit(ctx, nxt)
    rng = np.random.default_rng(2)
    queries = np.vstack([ctx[:30], rng.integers(0, V, (30, order - 1))])
    words = np.concatenate([nxt[:30], rng.integers(0, V, 30)])
    expected = [naive(h, w) for h, w in zip(queries.tolist(), words.tolist())]
    assert lm.prob(queries, words) == pytest.approx(expected, rel=1e-12)
