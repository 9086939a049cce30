"""Unit tests of course_lib.text: tokenizer, vocabulary and next-token windows."""

import pytest
import torch

from course_lib.text import BOS, PAD, SPECIALS, UNK, Vocab, detokenize, next_token_windows, tokenize


def test_tokenize_lowercases_and_splits_punctuation():
    assert tokenize("This movie wasn't GREAT, was it?") == [
        "this", "movie", "wasn't", "great", ",", "was", "it", "?"]
    assert tokenize("rated 7/10... (really)") == ["rated", "7", "/", "10", ".", ".", ".", "(",
                                                  "really", ")"]
    assert tokenize("Café   naïve") == ["café", "naïve"]
    assert tokenize("") == []


def test_tokenize_rejects_non_strings():
    with pytest.raises(TypeError, match="str"):
        tokenize(["a", "b"])


def test_detokenize_glues_punctuation():
    assert detokenize(["it", "was", "good", ",", "really", "(", "not", ")", "!"]) == \
        "it was good, really (not)!"


def _vocab():
    texts = ["the movie was good .", "the film was bad .", "the movie , the end"]
    return Vocab.build([tokenize(t) for t in texts], max_size=4)


def test_vocab_specials_first_then_most_frequent():
    v = _vocab()
    assert v.itos[:3] == list(SPECIALS)
    assert (v.pad_id, v.unk_id, v.bos_id) == (0, 1, 2)
    assert v.itos[3] == "the"  # 4 occurrences
    assert len(v) == 3 + 4
    # ties broken alphabetically: "." (2), "movie" (2), "was" (2) before one-count words
    assert v.itos[4:] == [".", "movie", "was"]


def test_encode_decode_round_trip_and_unknown_words():
    v = _vocab()
    ids = v.encode("The movie was terrible.", add_bos=True)
    assert ids[0] == v.bos_id
    assert v.tokens(ids) == [BOS, "the", "movie", "was", UNK, "."]
    assert v.decode(ids) == "the movie was <unk>."
    assert v.decode(ids, skip_special=False) == "<bos> the movie was <unk>."
    known = "the movie was."
    assert v.decode(v.encode(known)) == known
    assert v.decode(torch.tensor(v.encode(known))) == known


def test_vocab_errors():
    with pytest.raises(ValueError, match="special"):
        Vocab(["a", "b"])
    with pytest.raises(ValueError, match="unique"):
        Vocab([*SPECIALS, "a", "a"])
    with pytest.raises(TypeError, match="lists of tokens"):
        Vocab.build(["a raw string"])
    with pytest.raises(ValueError, match="outside"):
        _vocab().tokens([99])


def test_windows_shift_overlap_and_padding():
    seq = list(range(10, 21))  # 11 ids
    rows = next_token_windows([seq], window=4, pad_id=0)
    assert rows.tolist() == [[10, 11, 12, 13, 14], [14, 15, 16, 17, 18], [18, 19, 20, 0, 0]]
    # every id after the first is a target exactly once
    targets = rows[:, 1:][rows[:, 1:] != 0]
    assert sorted(targets.tolist()) == seq[1:]


def test_windows_first_only_and_no_crossing():
    rows = next_token_windows([[1, 2, 3, 4, 5, 6], [7, 8]], window=3, pad_id=0,
                              max_windows_per_sequence=1)
    assert rows.tolist() == [[1, 2, 3, 4], [7, 8, 0, 0]]
    assert next_token_windows([[5]], window=3, pad_id=0).shape == (0, 4)  # nothing to predict
    with pytest.raises(ValueError, match="window"):
        next_token_windows([[1, 2]], window=0, pad_id=0)
    assert PAD == "<pad>"


def test_imdb_lm_splits_keep_movies_apart():
    import pandas as pd

    from course_lib.text import imdb_lm_splits

    train = pd.DataFrame({"movie_id": [f"m{i % 20}" for i in range(100)],
                          "review": [f"text {i}" for i in range(99)] + ["text 0"]})
    test = pd.DataFrame({"movie_id": ["m1", "x1", "x2", "x3"],
                         "review": ["a", "text 5", "b", "b"]})
    parts = imdb_lm_splits(train, test, val_fraction=0.2, seed=0)
    assert set(parts["train"].movie_id).isdisjoint(parts["val"].movie_id)
    assert parts["val"].movie_id.nunique() == 4
    assert parts["test"]["review"].tolist() == ["b"]  # m1 is in train, "text 5" too, dup dropped
    assert len(parts["train"]) + len(parts["val"]) == 99  # the duplicate "text 0" kept once
    with pytest.raises(ValueError, match="val_fraction"):
        imdb_lm_splits(train, test, val_fraction=1.0)
