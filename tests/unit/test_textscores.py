"""Unit tests of course_lib.textscores: scores of generated text, on hand-made examples."""

import math

import numpy as np
import pytest
import torch

from course_lib import decoding
from course_lib.ngram import KneserNey, sequence_ngrams
from course_lib.textscores import (
    distinct_n,
    fit_judge,
    ngram_perplexity,
    repetition_rate,
    unseen_word_share,
    word_set,
    words,
)


# --------------------------------------------------------------------------- words
def test_words_split_on_everything_but_letters():
    assert words("Don't stop 2 times!") == ["don", "t", "stop", "times"]
    assert words("Café--au_lait, x2y") == ["café", "au", "lait", "x", "y"]
    assert words("  123 ... ") == []
    with pytest.raises(TypeError, match="must be a str"):
        words(["a list"])


def test_word_set():
    assert word_set(["The cat.", "the DOG, the cat"]) == {"the", "cat", "dog"}
    with pytest.raises(TypeError, match="list of texts"):
        word_set("one string")


def test_unseen_word_share_by_hand():
    known = word_set(["the movie was good", "a bad plot"])
    # 6 words, 2 unseen ('flimbo' twice): each occurrence counts
    assert unseen_word_share("The flimbo movie was a flimbo", known) == pytest.approx(2 / 6)
    # pooled over samples: 3 + 2 words, 1 unseen
    assert unseen_word_share(["good plot!", "bad zorp", "the"], known) == pytest.approx(1 / 5)
    assert unseen_word_share("The movie.", known) == 0.0
    assert unseen_word_share("movie", ["movie"]) == 0.0  # any collection of words
    with pytest.raises(ValueError, match="no words"):
        unseen_word_share("42 !!", known)
    with pytest.raises(TypeError, match="known_words must be a set"):
        unseen_word_share("the movie", "the movie")


# --------------------------------------------------------------------------- n-gram perplexity
def test_ngram_perplexity_by_hand():
    # order 1, V = 4, D = 0.5; training targets (after the first id): 1, 1, 2
    # P(w) = (max(c(w) - D, 0) + D * types / V) / N with N = 3 and 2 types:
    # P(1) = (1.5 + 0.25) / 3 = 7/12, P(2) = (0.5 + 0.25) / 3 = 1/4, P(0) = P(3) = 1/12
    train = [[0, 1, 1, 2]]
    kn = KneserNey(4, order=1, discount=0.5).fit(*sequence_ngrams(train, 1, 0))
    assert ngram_perplexity([[0, 1, 2]], kn, 1, start_id=0) == pytest.approx(
        1 / math.sqrt(7 / 12 * 1 / 4))
    assert ngram_perplexity([[0, 1, 2]], kn, 1, start_id=0, score_from=2) == pytest.approx(4.0)
    # pooled over samples: targets 3 and 1
    assert ngram_perplexity([[0, 3], [2, 1]], kn, 1, start_id=0) == pytest.approx(
        1 / math.sqrt(1 / 12 * 7 / 12))


def test_ngram_perplexity_equals_the_models_own_on_every_input_form():
    rng = np.random.default_rng(0)
    train = [rng.integers(1, 8, 30) for _ in range(20)]
    kn = KneserNey(8, order=3).fit(*sequence_ngrams(train, 3, 0))
    samples = [rng.integers(1, 8, 12) for _ in range(4)]
    expected = kn.perplexity(*sequence_ngrams(samples, 3, 0))
    as_rows = np.stack(samples)
    for form in (samples, [s.tolist() for s in samples], as_rows, torch.tensor(as_rows),
                 [torch.tensor(s) for s in samples]):
        assert ngram_perplexity(form, kn, 3, start_id=0) == pytest.approx(expected)
    one = samples[0]
    assert ngram_perplexity(one.tolist(), kn, 3, start_id=0) == pytest.approx(
        kn.perplexity(*sequence_ngrams([one], 3, 0)))
    # a prompt of 5 ids: only positions 5.. are targets, with the prompt as context
    ctx, nxt = sequence_ngrams(samples, 3, 0)
    keep = np.concatenate([np.arange(1, 12) >= 5 for _ in samples])
    assert ngram_perplexity(samples, kn, 3, start_id=0, score_from=5) == pytest.approx(
        kn.perplexity(ctx[keep], nxt[keep]))


def test_ngram_perplexity_bad_inputs():
    kn = KneserNey(4, order=2).fit(*sequence_ngrams([[0, 1, 2, 3]], 2, 0))
    with pytest.raises(ValueError, match="order-2 model"):
        ngram_perplexity([[0, 1, 2]], kn, 3, start_id=0)
    with pytest.raises(ValueError, match="not fitted"):
        ngram_perplexity([[0, 1, 2]], KneserNey(4, order=2), 2, start_id=0)
    with pytest.raises(TypeError, match="ngram.KneserNey"):
        ngram_perplexity([[0, 1, 2]], object(), 2, start_id=0)
    with pytest.raises(TypeError, match="encode texts"):
        ngram_perplexity(["a text"], kn, 2, start_id=0)
    with pytest.raises(ValueError, match="nothing to score"):
        ngram_perplexity([[0, 1, 2]], kn, 2, start_id=0, score_from=3)
    with pytest.raises(ValueError, match="nothing to score"):
        ngram_perplexity([], kn, 2, start_id=0)
    with pytest.raises(ValueError, match="score_from"):
        ngram_perplexity([[0, 1, 2]], kn, 2, start_id=0, score_from=0)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        ngram_perplexity([[0, 1, 9]], kn, 2, start_id=0)
    with pytest.raises(ValueError, match="1-D"):
        ngram_perplexity([[[0, 1], [1, 2]]], kn, 2, start_id=0)


# --------------------------------------------------------------------------- diversity
def test_distinct_n_on_texts_and_ids_by_hand():
    texts = ["the cat saw the cat", "The dog!"]
    # words: the cat saw the cat | the dog -> 7 words, 4 different
    assert distinct_n(texts, 1) == pytest.approx(4 / 7)
    # bigrams: (the cat) x2, (cat saw), (saw the), (the dog): 4 different of 5
    assert distinct_n(texts, 2) == pytest.approx(4 / 5)
    ids = [[1, 2, 3, 1, 2], torch.tensor([1, 2, 4])]
    assert distinct_n(ids, 2) == pytest.approx(4 / 6)
    assert distinct_n(ids, 2) == decoding.distinct_n(ids, 2)  # the same counting
    with pytest.raises(TypeError, match="wrap one text"):
        distinct_n("the cat", 1)
    with pytest.raises(ValueError, match="n must be"):
        distinct_n(texts, 0)
    with pytest.raises(ValueError, match="at least one text"):
        distinct_n(["cat"], 2)


def test_repetition_rate_by_hand():
    assert repetition_rate("a b c d e", 3) == 0.0
    loop = "I loved it. " * 4  # 12 words, 10 trigrams, 3 different
    assert repetition_rate(loop, 3) == pytest.approx(7 / 10)
    assert repetition_rate(np.array([7, 8, 9] * 4), 3) == pytest.approx(7 / 10)
    assert repetition_rate([1, 1, 1, 1], 1) == pytest.approx(3 / 4)
    with pytest.raises(ValueError, match="at least 3 tokens"):
        repetition_rate("too short", 3)
    with pytest.raises(ValueError, match="1-D"):
        repetition_rate(torch.zeros(2, 3, dtype=torch.long), 2)
    with pytest.raises(TypeError, match="text or a sequence"):
        repetition_rate(3.5, 2)


def test_fit_judge_picks_the_discount_that_scores_validation_best():
    rng = np.random.default_rng(0)
    judge_ids = [list(rng.integers(1, 12, size=40)) for _ in range(30)]
    val_ids = [list(rng.integers(1, 12, size=30)) for _ in range(5)]
    discounts = (0.3, 0.6, 0.9)
    judge = fit_judge(judge_ids, val_ids, 12, 0, order=3, discounts=discounts)
    fitted = KneserNey(12, order=3).fit(*sequence_ngrams(judge_ids, 3, 0))
    val = sequence_ngrams(val_ids, 3, 0)
    scores = {d: fitted.with_discount(d).perplexity(*val) for d in discounts}
    assert judge.order == 3 and judge.D == min(scores, key=scores.get)
    assert judge.perplexity(*val) == pytest.approx(min(scores.values()))


def test_fit_judge_bad_inputs():
    ids = [[1, 2, 3, 4]] * 3
    with pytest.raises(ValueError, match="discounts"):
        fit_judge(ids, ids, 8, 0, order=2, discounts=(0.5, 1.5))
    with pytest.raises(ValueError, match="vocab_size"):
        fit_judge(ids, ids, 1, 0, order=2)
