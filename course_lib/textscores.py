"""Scoring generated text by something other than the model that wrote it (chapters 7, 8).

    kn = ngram.KneserNey(V, order=3).fit(*ngram.sequence_ngrams(train_ids, 3, bos))
    ngram_perplexity(sample_ids, kn, order=3, start_id=bos)   # do counts find it plausible?
    judge = fit_judge(judge_ids, val_ids, V, bos)  # a 5-gram on texts neither model read
    known = word_set(train_texts)
    unseen_word_share(samples, known)     # words never seen in training: made-up words
    distinct_n(samples, 2)                # different bigrams / all bigrams, pooled
    repetition_rate(sample, 3)            # share of one sample's trigrams seen before in it

A model's own log-probability rewards what the model likes, and greedy or beam decoding
maximise exactly that. These scores come from elsewhere: counts on the training texts
(a Kneser-Ney model), the training vocabulary, and the sample itself. ``distinct_n`` and
``repetition_rate`` count as ``decoding``'s functions of the same names do (the counting is
theirs); these also take texts, split into words by ``words``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import torch

from . import decoding
from .ngram import KneserNey, sequence_ngrams

_LETTERS = re.compile(r"[^\W\d_]+")  # runs of letters (any alphabet): no digits, no "_"


def words(text: str) -> list[str]:
    """The words of ``text``: lowercased, then split on every character that is not a letter.

    Digits, punctuation, apostrophes and spaces all split: "Don't stop 2 times!" gives
    ``['don', 't', 'stop', 'times']``. Letters of any alphabet count ("café" is one word).
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return _LETTERS.findall(text.lower())


def word_set(texts: Iterable[str]) -> set[str]:
    """Every word (as ``words`` splits them) of ``texts``: the known words of a training set."""
    if isinstance(texts, str):
        raise TypeError("word_set takes a list of texts, not one string")
    return {w for text in texts for w in words(text)}


def unseen_word_share(text: str | Iterable[str], known_words: set[str]) -> float:
    """Share of the words of ``text`` (one string or a list, pooled) not in ``known_words``.

    Each occurrence counts: a made-up word used twice counts twice. Words are split by
    ``words`` (lowercase, letters only), so build ``known_words`` with ``word_set(train)``.
    A word-level model scores 0 by construction; a subword model can spell new words.
    """
    if isinstance(known_words, str) or not isinstance(known_words, Iterable):
        raise TypeError("known_words must be a set of words, e.g. word_set(train_texts); got "
                        f"{type(known_words).__name__}")
    known = known_words if isinstance(known_words, (set, frozenset)) else set(known_words)
    texts = [text] if isinstance(text, str) else list(text)
    found = [w for t in texts for w in words(t)]
    if not found:
        raise ValueError("the text holds no words (letters) to score")
    return sum(w not in known for w in found) / len(found)


def ngram_perplexity(sample_ids, kn_model: KneserNey, order: int, *, start_id: int,
                     score_from: int = 1) -> float:
    """Perplexity of samples of token ids under a Kneser-Ney model fitted on training ids.

    ``sample_ids``: a list of id sequences (lists, 1-D tensors or arrays), a 2-D tensor or
    array (one sample a row), or one 1-D sequence. ``order`` and ``start_id`` as in
    ``ngram.sequence_ngrams`` (the model's own order and the <bos> id it was fitted with).
    Targets at positions ``score_from`` and later of each sample are scored; the ids before
    still serve as context: pass the prompt's length to score only what was generated.
    perplexity = exp(mean over the scored targets of -log P_KN(target | context)).
    """
    _check_kn(kn_model, order)
    if not isinstance(score_from, int) or isinstance(score_from, bool) or score_from < 1:
        raise ValueError(f"score_from must be an int >= 1 (the first position scored), got "
                         f"{score_from!r}")
    samples = _as_samples(sample_ids)
    context, nxt = sequence_ngrams(samples, order, start_id)
    position = np.concatenate([np.arange(1, len(s)) for s in samples if len(s) > 1] or [[]])
    keep = position >= score_from  # sequence_ngrams' order: sample by sample, position 1, 2...
    if not keep.any():
        raise ValueError(f"nothing to score: no sample has a token at position >= "
                         f"{score_from} (lengths {[len(s) for s in samples][:5]}...)")
    return kn_model.perplexity(context[keep], nxt[keep])


def fit_judge(judge_ids, val_ids, vocab_size: int, start_id: int, order: int = 5,
              discounts=(0.7, 0.8, 0.9, 0.95)) -> KneserNey:
    """A Kneser-Ney model of ``order`` fitted on ``judge_ids``, its discount chosen on ``val_ids``.

    A judge of samples: fit it on reviews that neither the models being judged nor their
    n-gram baselines were trained on (chapters 7 and 8 use the official test split's reviews
    outside chapter 7's test reviews), so that no contestant is scored by its own counts.
    """
    if not isinstance(vocab_size, int) or vocab_size < 2:
        raise ValueError(f"vocab_size must be an int >= 2, got {vocab_size!r}")
    if not discounts or any(not 0 < d < 1 for d in discounts):
        raise ValueError(f"discounts must be values in (0, 1), got {discounts!r}")
    fitted = KneserNey(vocab_size, order=order).fit(*sequence_ngrams(judge_ids, order,
                                                                     start_id))
    val = sequence_ngrams(val_ids, order, start_id)
    return min((fitted.with_discount(d) for d in discounts), key=lambda m: m.perplexity(*val))


def distinct_n(texts_or_token_lists, n: int) -> float:
    """Different n-grams / all n-grams, pooled over the samples (Li et al. 2016).

    Each sample is a text (a str, split by ``words``) or a sequence of token ids. 1.0: no
    n-gram occurs twice. It falls as the samples grow, so compare equal amounts of text.
    """
    if isinstance(texts_or_token_lists, str):
        raise TypeError("distinct_n takes a list of samples; wrap one text as [text]")
    return decoding.distinct_n([_units(s) for s in texts_or_token_lists], n)


def repetition_rate(text_or_tokens, n: int = 3) -> float:
    """Share of one sample's n-grams that repeat an n-gram seen earlier in it.

    The sample is a text (split by ``words``) or a sequence of token ids. 0.0: nothing
    repeats; a sample stuck in a loop approaches 1.0.
    """
    return decoding.repetition_rate(_units(text_or_tokens), n)


# --------------------------------------------------------------------------- checks
def _units(sample) -> list:
    """A text's words, or a sequence's ids as a list."""
    if isinstance(sample, str):
        return words(sample)
    if isinstance(sample, torch.Tensor | np.ndarray):
        if sample.ndim != 1:
            raise ValueError(f"a sample of ids must be 1-D, got shape {tuple(sample.shape)}")
        return sample.tolist()
    if not isinstance(sample, Iterable):
        raise TypeError(f"a sample must be a text or a sequence of token ids, got "
                        f"{type(sample).__name__}")
    return list(sample)


def _as_samples(sample_ids) -> list[np.ndarray]:
    if isinstance(sample_ids, torch.Tensor):
        sample_ids = sample_ids.detach().cpu().numpy()
    if isinstance(sample_ids, np.ndarray):
        if sample_ids.ndim not in (1, 2):
            raise ValueError(f"sample_ids must be 1-D (one sample) or 2-D (one a row), got "
                             f"shape {sample_ids.shape}")
        return [sample_ids] if sample_ids.ndim == 1 else list(sample_ids)
    if isinstance(sample_ids, str) or not isinstance(sample_ids, Iterable):
        raise TypeError(f"sample_ids must be token ids (a list of sequences, or a tensor), got "
                        f"{type(sample_ids).__name__}; encode texts with the tokenizer first")
    samples = list(sample_ids)
    if samples and all(isinstance(i, (int, np.integer)) for i in samples):
        return [np.asarray(samples)]  # one flat sequence of ids
    out = []
    for s in samples:
        if isinstance(s, str):
            raise TypeError("sample_ids holds a str; encode texts with the tokenizer first")
        a = s.detach().cpu().numpy() if isinstance(s, torch.Tensor) else np.asarray(s)
        if a.ndim != 1:
            raise ValueError(f"each sample must be a 1-D sequence of ids, got shape {a.shape}")
        out.append(a)
    return out


def _check_kn(kn_model, order):
    if not isinstance(kn_model, KneserNey):
        raise TypeError(f"kn_model must be an ngram.KneserNey, got {type(kn_model).__name__}")
    if kn_model.levels is None:
        raise ValueError("kn_model is not fitted: call kn_model.fit(*sequence_ngrams(train_ids, "
                         "order, bos)) first")
    if order != kn_model.order:
        raise ValueError(f"order={order!r} but kn_model is an order-{kn_model.order} model: "
                         "pass its own order (kn_model.order)")
