"""Unit tests of chapter 7's pieces: course_lib.lm, text.BPETokenizer, ngram mixtures and
stats power laws."""

import math

import numpy as np
import pytest
import torch

from course_lib import gpt, lm, ngram, stats, text

TEXTS = ["The movie was great, really great!", "A film I didn't like at all.",
         "Great acting; the plot was thin.", "Überraschend gut: 10/10 ★", "the the the"] * 8


@pytest.fixture(scope="module")
def bpe():
    return text.BPETokenizer.train(TEXTS, vocab_size=300)


# ------------------------------------------------------------------ BPE tokenizer
def test_bpe_round_trip_no_unk_and_bos(bpe):
    for t in TEXTS + ["words never seen: zyzzyva, Kubrick's 🎬"]:
        ids = bpe.encode(t, add_bos=True)
        assert ids[0] == bpe.bos_id == bpe.pad_id == 0
        assert bpe.decode(ids) == t  # the special token is skipped, every byte comes back
    assert bpe.unk_id is None and len(bpe) <= 300
    assert bpe.encode_batch(TEXTS[:2], add_bos=True) == [bpe.encode(t, True) for t in TEXTS[:2]]
    assert "".join(bpe.tokens(bpe.encode("the movie"))) == "the movie"


def test_bpe_json_round_trip(bpe):
    again = text.BPETokenizer.from_json(bpe.to_json())
    assert again.encode(TEXTS[3]) == bpe.encode(TEXTS[3]) and len(again) == len(bpe)


def test_bpe_bad_inputs(bpe):
    with pytest.raises(ValueError, match="vocab_size"):
        text.BPETokenizer.train(TEXTS, vocab_size=100)
    with pytest.raises(TypeError, match="list of texts"):
        text.BPETokenizer.train("one string", vocab_size=300)
    with pytest.raises(TypeError, match="string"):
        bpe.encode(["a", "list"])
    with pytest.raises(TypeError, match="list of strings"):
        bpe.encode_batch("one string")
    with pytest.raises(ValueError, match="outside"):
        bpe.decode([len(bpe)])
    with pytest.raises(TypeError, match="tokenizers.Tokenizer"):
        text.BPETokenizer("not a tokenizer")


def test_bits_per_byte():
    texts = ["ab", "cde"]  # 5 bytes
    assert text.bits_per_byte(5 * math.log(2), texts) == pytest.approx(1.0)
    assert text.bits_per_byte(5 * math.log(2), ["é"] * 5) == pytest.approx(0.5)  # 2 bytes each
    with pytest.raises(ValueError, match="no bytes"):
        text.bits_per_byte(1.0, [""])


# ------------------------------------------------------------------ lm
def test_token_stream_and_random_windows():
    stream = lm.token_stream([[0, 1, 2], [0, 3]])
    assert stream.tolist() == [0, 1, 2, 0, 3]
    g = torch.Generator().manual_seed(0)
    rows = lm.random_windows(torch.arange(100), 5, 7, g)
    assert rows.shape == (5, 8)
    assert torch.all(rows[:, 1:] - rows[:, :-1] == 1)  # consecutive ids of the stream
    again = lm.random_windows(torch.arange(100), 5, 7, torch.Generator().manual_seed(0))
    assert torch.equal(rows, again)
    with pytest.raises(ValueError, match="longer than window"):
        lm.random_windows(torch.arange(5), 2, 7, g)
    with pytest.raises(ValueError, match="at least 2"):
        lm.token_stream([[1]])


def test_constant_after_warmup():
    f = lm.constant_after_warmup(4)
    assert [f(s) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert lm.constant_after_warmup(0)(0) == 1.0
    with pytest.raises(ValueError):
        lm.constant_after_warmup(-1)


def _tiny(V=20, L=8):
    return gpt.GPT(gpt.GPTConfig(vocab_size=V, max_len=L, d_model=16, num_heads=2,
                                 num_layers=1, d_ff=32, dropout=0.0, pad_id=None))


def test_train_learns_a_cycle_and_reports_checkpoints():
    torch.manual_seed(0)
    stream = torch.arange(2000) % 7  # 0 1 2 ... 6 0 1 ...: the next id is determined
    model = _tiny(V=7)
    hist = lm.train(model, stream, 60, batch_size=8, window=8, lr=1e-2, warmup_steps=5,
                    checkpoints=[20, 40], evaluate=lambda m: {"answer": 1.0})
    assert hist["step"].tolist() == [20, 40, 60]
    assert hist["tokens"].tolist() == [20 * 64, 40 * 64, 60 * 64]
    assert hist["train_loss"].iloc[-1] < 0.5 * hist["train_loss"].iloc[0]
    assert (hist["answer"] == 1.0).all() and hist["seconds"].is_monotonic_increasing
    assert not model.training


def test_train_with_the_shift_forgotten_copies():
    torch.manual_seed(0)
    stream = torch.randint(0, 20, (3000,))  # random ids: the next one cannot be predicted
    model = _tiny()
    hist = lm.train(model, stream, 80, batch_size=8, window=8, lr=1e-2, warmup_steps=5,
                    pairs=lambda b: (b[:, :-1], b[:, :-1]))
    assert hist["train_loss"].iloc[-1] < 1.0  # copying the input is easy...
    nll = lm.target_nll(model, [stream[:200].tolist()], window=8, stride=4)
    assert nll.mean() > math.log(20) - 0.5  # ...and useless for the next id


def test_train_bad_steps():
    with pytest.raises(ValueError, match="steps"):
        lm.train(_tiny(), torch.arange(100) % 20, 0, batch_size=2, window=4, lr=1e-3)


def test_target_nll_order_matches_ngrams_and_full_windows():
    torch.manual_seed(0)
    model = _tiny(V=20, L=8).eval()
    seqs = [torch.randint(0, 20, (n,)).tolist() for n in (3, 8, 9, 21)]
    nll = lm.target_nll(model, seqs, window=8, stride=4)
    _, targets = ngram.sequence_ngrams(seqs, 2, start_id=0)
    assert len(nll) == len(targets) == sum(len(s) - 1 for s in seqs)
    # a sequence that fits in one window: each target scored with all of its past
    with torch.no_grad():
        logits = model(torch.tensor([seqs[1][:-1]]))[0]
    direct = torch.nn.functional.cross_entropy(logits, torch.tensor(seqs[1][1:]),
                                               reduction="none")
    np.testing.assert_allclose(nll[2:2 + 7], direct.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lm.per_sequence(nll, seqs).sum(), nll.sum())
    assert lm.per_sequence(nll, seqs).shape == (4,)
    assert lm.target_positions(seqs).tolist()[:2] == [1, 2]
    with pytest.raises(ValueError, match="same sequences"):
        lm.per_sequence(nll[:-1], seqs)


def test_flops_per_token():
    c = gpt.GPTConfig(vocab_size=100, max_len=10, d_model=8, num_heads=2, num_layers=2, d_ff=32)
    n = 2 * (4 * 64 + 2 * 8 * 32) + 100 * 8
    assert lm.flops_per_token(c) == 6 * n + 6 * 2 * 10 * 8
    assert lm.flops_per_token(c, window=5) == 6 * n + 6 * 2 * 5 * 8


# ------------------------------------------------------------------ mixtures
def test_mix_and_em_weight_maximise_likelihood():
    rng = np.random.default_rng(0)
    p_a, p_b = rng.uniform(0.01, 1, 500), rng.uniform(0.01, 1, 500)
    w = ngram.fit_mix_weight(p_a, p_b)
    grid = np.linspace(0, 1, 201)
    ll = [np.log(ngram.mix(p_a, p_b, g)).sum() for g in grid]
    assert np.log(ngram.mix(p_a, p_b, w)).sum() >= max(ll) - 1e-6
    assert ngram.fit_mix_weight(p_a, p_a * 0.5) > 0.99  # a is always better: all weight on a
    np.testing.assert_allclose(ngram.mix(p_a, p_b, 1.0), p_a)
    with pytest.raises(ValueError, match="weight"):
        ngram.mix(p_a, p_b, 1.5)
    with pytest.raises(ValueError, match="probability 0"):
        ngram.fit_mix_weight(np.array([0.0, 0.5]), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="same targets"):
        ngram.fit_mix_weight(p_a, p_b[:10])


# ------------------------------------------------------------------ power laws
def test_power_law_fit_and_crossing():
    x = np.array([1e3, 1e4, 1e5, 1e6])
    y = 2.0 * x ** -0.25
    law = stats.fit_power_law(x, y)
    assert law.a == pytest.approx(2.0) and law.b == pytest.approx(0.25)
    assert law.solve(2.0 * 1e8 ** -0.25) == pytest.approx(1e8, rel=1e-6)
    assert stats.PowerLaw(1.0, -0.1).solve(0.5) == math.inf  # a rising line never gets there
    rng = np.random.default_rng(0)
    noisy = y * np.exp(rng.normal(0, 0.01, 4))
    law2, iv = stats.power_law_crossing(x, noisy, target=2.0 * 1e8 ** -0.25, n_resamples=300)
    assert iv.low <= iv.estimate <= iv.high and 1e7 < iv.estimate < 1e9
    with pytest.raises(ValueError, match="> 0"):
        stats.fit_power_law([1, 2], [0, 1])
    with pytest.raises(ValueError, match="length >= 2"):
        stats.fit_power_law([1], [1])


def test_train_follows_the_schedule_it_is_given():
    """``schedule`` is the LambdaLR factor: a rate of 0 from the first step changes nothing."""
    torch.manual_seed(0)
    model = _tiny()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    lm.train(model, torch.arange(500) % 20, 5, batch_size=2, window=4, lr=1e-2,
             weight_decay=0.0, schedule=lambda step: 0.0)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    torch.manual_seed(0)
    moved = _tiny()  # the same initial weights as `before`
    assert all(torch.equal(before[k], v) for k, v in moved.state_dict().items())
    lm.train(moved, torch.arange(500) % 20, 5, batch_size=2, window=4, lr=1e-2,
             schedule=gpt.warmup_cosine(1, 5))
    assert any(not torch.equal(before[k], v) for k, v in moved.state_dict().items())


def test_train_rejects_a_schedule_that_is_not_a_function():
    with pytest.raises(TypeError, match="schedule must be a function"):
        lm.train(_tiny(), torch.arange(100) % 20, 2, batch_size=2, window=4, lr=1e-3,
                 schedule=0.5)


def test_bpe_json_with_legacy_merges_reads_back_the_same(bpe):
    """tokenizers before 0.20 read merges only as "a b": the rewritten JSON says the same."""
    import json as _json

    saved = bpe.to_json()
    legacy = text.legacy_merges_json(saved)
    merges = _json.loads(legacy)["model"]["merges"]
    assert merges and all(isinstance(m, str) and len(m.split(" ")) == 2 for m in merges)
    assert text.legacy_merges_json(legacy) == legacy  # already legacy: unchanged
    again = text.BPETokenizer.from_json(legacy)
    for t in TEXTS[:5]:
        assert again.encode(t) == bpe.encode(t)


def test_gpt_answers_to_the_training_and_scoring_names_that_lm_holds():
    for name in ("configure_optimizer", "RowBatches", "lm_batch_loss", "token_nll",
                 "sliding_windows", "sliding_nll"):
        assert getattr(gpt, name) is getattr(lm, name), name
        assert getattr(lm, name).__module__ == "course_lib.lm", name


def test_train_follows_setups_precision_by_default_and_none_is_float32(monkeypatch):
    from course_lib import precision

    class Counted(precision.Precision):
        calls = 0

        def autocast(self):
            Counted.calls += 1
            return super().autocast()

    monkeypatch.setattr(precision, "_CURRENT", Counted("fp32", "cpu"))  # as runtime.setup sets
    stream = torch.arange(500) % 20
    lm.train(_tiny(), stream, 3, batch_size=2, window=4, lr=1e-3)  # default: "current"
    assert Counted.calls == 3
    lm.train(_tiny(), stream, 3, batch_size=2, window=4, lr=1e-3, precision=None)
    assert Counted.calls == 3, "None is float32, not the current precision"
