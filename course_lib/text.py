"""Words to ids and back: a word-level tokenizer, a vocabulary, and next-token windows.

    vocab = Vocab.build(tokenize(t) for t in train_texts)  # 5,000 words + <pad> <unk> <bos>
    ids = vocab.encode("This movie was great!")           # [bos?] 'this' 'movie' 'was' ...
    vocab.decode(ids)                                     # 'this movie was great!'
    rows = next_token_windows([ids, ...], window=32, pad_id=vocab.pad_id)  # [N, 33]

The tokenizer is deliberately simple: lowercase, words (letters and digits, with inner
apostrophes: ``don't``, ``it's``) and single punctuation marks. Words outside the
vocabulary become ``<unk>``.

``BPETokenizer`` is the subword alternative (chapters 7 and 8): byte-level BPE trained with
Hugging Face ``tokenizers`` on the training texts only. Every text is some sequence of its
pieces, so there is no ``<unk>`` and ``decode(encode(text)) == text``:

    bpe = BPETokenizer.train(train_texts, vocab_size=4096)
    ids = bpe.encode("This movie was great!", add_bos=True)  # [bos, 'This', ' movie', ...]
    bpe.decode(ids)                                          # 'This movie was great!'
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from .checks import positive_int

PAD, UNK, BOS = "<pad>", "<unk>", "<bos>"
SPECIALS = (PAD, UNK, BOS)

# a word: letters/digits, optionally joined by apostrophes; or any single other visible char
_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)*|[^\w\s]|_")
_NO_SPACE_BEFORE = re.compile(r" ([.,!?;:%)\]}])")
_NO_SPACE_AFTER = re.compile(r"([(\[{$]) ")


def tokenize(text: str) -> list[str]:
    """Lowercase ``text`` and split it into words and punctuation marks."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return _TOKEN.findall(text.lower())


def detokenize(tokens: Iterable[str]) -> str:
    """Join tokens with spaces, then glue punctuation to the word before it (or after ``(``)."""
    text = " ".join(tokens)
    return _NO_SPACE_AFTER.sub(r"\1", _NO_SPACE_BEFORE.sub(r"\1", text))


class Vocab:
    """A fixed list of tokens; its position in the list is a token's id.

    The special tokens come first: ``<pad>`` = 0, ``<unk>`` = 1, ``<bos>`` = 2 (by default),
    then the words from most to least frequent.
    """

    def __init__(self, itos: Sequence[str]):
        itos = list(itos)
        missing = [s for s in SPECIALS if s not in itos]
        if missing:
            raise ValueError(f"a Vocab needs the special tokens {SPECIALS}; missing {missing}")
        if len(set(itos)) != len(itos):
            dup = [t for t, c in Counter(itos).items() if c > 1][:5]
            raise ValueError(f"tokens must be unique, repeated: {dup}")
        self.itos = itos
        self.stoi = {t: i for i, t in enumerate(itos)}
        self.pad_id, self.unk_id, self.bos_id = (self.stoi[s] for s in SPECIALS)

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], max_size: int = 5000,
              min_count: int = 1) -> Vocab:
        """The ``max_size`` most frequent tokens (ties: alphabetical), after the specials."""
        positive_int("max_size", max_size)
        counts = Counter()
        for tokens in token_lists:
            if isinstance(tokens, str):
                raise TypeError("pass lists of tokens (e.g. tokenize(text)), not raw strings")
            counts.update(tokens)
        for s in SPECIALS:
            counts.pop(s, None)
        ranked = sorted((c, t) for t, c in counts.items() if c >= min_count)
        ranked.sort(key=lambda ct: (-ct[0], ct[1]))
        vocab = cls([*SPECIALS, *(t for _, t in ranked[:max_size])])
        vocab.counts = counts
        return vocab

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens: {', '.join(self.itos[:6])}, ...)"

    def encode(self, text: str | Sequence[str], add_bos: bool = False) -> list[int]:
        """Ids of a text (tokenized first) or of a list of tokens; unknown words -> ``<unk>``."""
        tokens = tokenize(text) if isinstance(text, str) else text
        ids = [self.stoi.get(t, self.unk_id) for t in tokens]
        return [self.bos_id, *ids] if add_bos else ids

    def tokens(self, ids: Iterable[int]) -> list[str]:
        """The token of each id."""
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else ids
        out = []
        for i in ids:
            if not 0 <= int(i) < len(self.itos):
                raise ValueError(f"id {i} is outside this vocabulary of {len(self.itos)} tokens")
            out.append(self.itos[int(i)])
        return out

    def decode(self, ids: Iterable[int], skip_special: bool = True) -> str:
        """Text of a list of ids (``<pad>``, ``<bos>`` dropped unless ``skip_special=False``)."""
        toks = self.tokens(ids)
        if skip_special:
            toks = [t for t in toks if t not in (PAD, BOS)]
        return detokenize(toks)


def next_token_windows(sequences: Iterable[Sequence[int]], window: int, pad_id: int,
                       max_windows_per_sequence: int | None = None) -> torch.Tensor:
    """Cut each id sequence into rows of ``window + 1`` ids: x = row[:-1], y = row[1:].

    Consecutive rows of one sequence overlap by one id, so every id after the first is a
    target exactly once. The last row of a sequence is right-padded with ``pad_id``; rows
    never cross from one sequence into the next. ``max_windows_per_sequence=1`` keeps only
    the first row (the start of each text).
    Returns LongTensor [N, window + 1].
    """
    positive_int("window", window)
    if max_windows_per_sequence is not None and max_windows_per_sequence < 1:
        raise ValueError(
            f"max_windows_per_sequence must be None or >= 1, got {max_windows_per_sequence}"
        )
    rows = []
    for seq in sequences:
        seq = list(seq)
        starts = range(0, max(len(seq) - 1, 0), window)
        if max_windows_per_sequence is not None:
            starts = starts[:max_windows_per_sequence]
        for s in starts:
            row = seq[s:s + window + 1]
            rows.append(row + [pad_id] * (window + 1 - len(row)))
    if not rows:
        return torch.empty(0, window + 1, dtype=torch.long)
    return torch.tensor(rows, dtype=torch.long)


def imdb_lm_splits(train: pd.DataFrame, test: pd.DataFrame, val_fraction: float = 0.1,
                   seed: int = 0) -> dict[str, pd.DataFrame]:
    """Train / validation / test reviews for language modelling, with no movie on two sides.

    - validation: whole movies (``movie_id``) drawn at random from the official train split;
    - test: the official test split (movie-disjoint from train by design), without reviews of
      a movie that also occurs in train and without texts that also occur in train;
    - exact duplicate texts are kept once (a text is never in two parts).
    """
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    for name, df in (("train", train), ("test", test)):
        missing = {"movie_id", "review"} - set(df.columns)
        if missing:
            raise ValueError(f"{name} lacks the columns {sorted(missing)} (use data.load_imdb)")
    train = train.drop_duplicates("review")  # one copy of each text, before splitting
    rng = np.random.default_rng(seed)
    movies = np.array(sorted(train["movie_id"].unique()))
    n_val = max(1, round(val_fraction * len(movies)))
    val_movies = set(rng.choice(movies, size=n_val, replace=False))
    is_val = train["movie_id"].isin(val_movies)
    parts = {"train": train[~is_val], "val": train[is_val]}
    seen_movies, seen_texts = set(train["movie_id"]), set(train["review"])
    parts["test"] = test[~test["movie_id"].isin(seen_movies) & ~test["review"].isin(seen_texts)]
    return {k: v.drop_duplicates("review").reset_index(drop=True) for k, v in parts.items()}


class BPETokenizer:
    """Byte-level BPE: a text becomes pieces of UTF-8 bytes merged by frequency.

    One special token, ``<|endoftext|>`` (id 0), marks where a text starts (``add_bos``),
    as in GPT-2. ``bos_id`` and ``pad_id`` are both that id: a padded slot is never a target.
    There is no ``unk_id``: any byte sequence can be spelled with the 256 single bytes.
    """

    BOS = "<|endoftext|>"
    unk_id = None

    def __init__(self, tokenizer):
        from tokenizers import Tokenizer

        if not isinstance(tokenizer, Tokenizer):
            raise TypeError("BPETokenizer wraps a tokenizers.Tokenizer; build one with "
                            "BPETokenizer.train(texts) or BPETokenizer.from_json(saved)")
        self._tok = tokenizer
        bos = tokenizer.token_to_id(self.BOS)
        if bos is None:
            raise ValueError(f"the tokenizer has no {self.BOS!r} token: train it with "
                             "BPETokenizer.train")
        self.bos_id = self.pad_id = bos

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int = 4096) -> BPETokenizer:
        """Learn ``vocab_size`` pieces (256 bytes + merges + ``<|endoftext|>``) from ``texts``."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        if not isinstance(vocab_size, int) or vocab_size < 258:
            raise ValueError(f"vocab_size must be an int >= 258 (256 bytes, the special token "
                             f"and at least one merge), got {vocab_size!r}")
        if isinstance(texts, str):
            raise TypeError("pass a list of texts, not one string")
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=[cls.BOS], show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train_from_iterator(list(texts), trainer=trainer)
        return cls(tok)

    def __len__(self) -> int:
        return self._tok.get_vocab_size()

    def __repr__(self) -> str:
        return f"BPETokenizer({len(self)} pieces, byte-level)"

    def encode(self, text: str, add_bos: bool = False) -> list[int]:
        """Ids of ``text`` (a string), with ``<|endoftext|>`` first when ``add_bos``."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes a string, got {type(text).__name__}")
        ids = self._tok.encode(text).ids
        return [self.bos_id, *ids] if add_bos else ids

    def encode_batch(self, texts: Sequence[str], add_bos: bool = False) -> list[list[int]]:
        """``[encode(t, add_bos) for t in texts]``, in parallel."""
        if isinstance(texts, str):
            raise TypeError("encode_batch takes a list of strings; use encode for one")
        head = [self.bos_id] if add_bos else []
        return [head + e.ids for e in self._tok.encode_batch(list(texts))]

    def _ids(self, ids) -> list[int]:
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < len(self)]
        if bad:
            raise ValueError(f"id {bad[0]} is outside this tokenizer's {len(self)} pieces")
        return ids

    def decode(self, ids: Iterable[int], skip_special: bool = True) -> str:
        """The text of ``ids`` (``<|endoftext|>`` dropped unless ``skip_special=False``)."""
        return self._tok.decode(self._ids(ids), skip_special_tokens=skip_special)

    def tokens(self, ids: Iterable[int]) -> list[str]:
        """Each id as readable text (a leading space shown as is; a piece that is only part
        of a multi-byte character shows as the replacement character)."""
        return [self._tok.decode([i], skip_special_tokens=False) for i in self._ids(ids)]

    def token_to_id(self, piece: str) -> int | None:
        """The id of a piece as the tokenizer stores it (a leading space is ``Ġ``), or None."""
        return self._tok.token_to_id(piece)

    def to_json(self) -> str:
        return self._tok.to_str()

    @classmethod
    def from_json(cls, saved: str) -> BPETokenizer:
        """The tokenizer ``to_json`` wrote, with any ``tokenizers`` the course supports.

        ``tokenizers`` 0.20 and later write each merge as a pair ``["a", "b"]``; older
        versions read only ``"a b"``. If this version cannot read the file as it is, the
        merges are rewritten in the old form (byte-level pieces hold no spaces) and read again.
        """
        from tokenizers import Tokenizer

        try:
            return cls(Tokenizer.from_str(saved))
        except Exception as error:  # tokenizers raises a plain Exception here
            legacy = legacy_merges_json(saved)
            if legacy == saved:
                raise
            try:
                return cls(Tokenizer.from_str(legacy))
            except Exception:
                raise error from None


def legacy_merges_json(saved: str) -> str:
    """``saved`` (a tokenizer's JSON) with its BPE merges written ``"a b"``, as ``tokenizers``
    before 0.20 reads them; unchanged if they are already, or if a piece holds a space."""
    data = json.loads(saved)
    model = data.get("model") or {}
    merges = model.get("merges")
    if not merges or isinstance(merges[0], str):
        return saved
    if any(" " in piece for pair in merges for piece in pair):
        return saved  # "a b" could not say where one piece ends
    model["merges"] = [" ".join(pair) for pair in merges]
    model.pop("ignore_merges", None)  # a newer field the old reader does not know
    return json.dumps(data, ensure_ascii=False)


def bits_per_byte(total_nll_nats: float, texts: Iterable[str]) -> float:
    """Summed NLL in nats over every token of ``texts`` -> bits per UTF-8 byte of the texts.

    Unlike perplexity per token it does not depend on the tokenizer: any model that scores
    the same texts, with any tokens, can be compared on it.
    """
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    if n_bytes == 0:
        raise ValueError("the texts hold no bytes")
    return float(total_nll_nats) / (np.log(2.0) * n_bytes)
