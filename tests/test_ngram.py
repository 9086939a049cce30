"""Unit tests of course_lib.ngram: the count-based baselines are proper distributions."""

import numpy as np
import pytest

from course_lib.ngram import AddKBigram, KneserNeyBigram, UnigramLM

V = 12


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
