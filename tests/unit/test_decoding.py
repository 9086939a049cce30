"""Unit tests of course_lib.decoding: greedy, beam search, sampling and the two filters."""

import itertools
import math

import pytest
import torch

from course_lib.decoding import (
    beam_search,
    beam_search_pool,
    distinct_n,
    greedy_decode,
    length_penalty_gnmt,
    repetition_rate,
    sample,
    top_k_filter,
    top_p_filter,
)

V = 7


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def make_lm(vocab=V, seed=0, scale=2.0):
    """A deterministic toy language model whose logits depend on the whole prefix."""
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(97, vocab, generator=g) * scale

    def step_fn(tokens):  # [N, L] -> [N, V]
        weights = torch.arange(1, tokens.shape[1] + 1)
        state = (tokens * weights).sum(dim=1) * 31 + tokens.shape[1]
        return table[state % 97]

    return step_fn


def seq_logprob(step_fn, tokens, start, eos_id=None):
    """log P of tokens[start:] given tokens[:start], stopping after eos; and its length."""
    total, length = 0.0, 0
    for t in range(start, tokens.shape[0]):
        logp = torch.log_softmax(step_fn(tokens[None, :t]), dim=-1)[0]
        total += float(logp[tokens[t]])
        length += 1
        if eos_id is not None and int(tokens[t]) == eos_id:
            break
    return total, length


# --------------------------------------------------------------------------- greedy
def test_greedy_shapes_and_prefix_kept():
    step_fn = make_lm()
    prefix = torch.randint(0, V, (3, 2))
    out = greedy_decode(step_fn, prefix, max_new_tokens=5)
    assert out.shape == (3, 7) and out.dtype == torch.long
    assert torch.equal(out[:, :2], prefix)


def test_greedy_takes_argmax_each_step():
    step_fn = make_lm()
    out = greedy_decode(step_fn, torch.tensor([[1, 2]]), max_new_tokens=4)
    for t in range(2, 6):
        assert int(out[0, t]) == int(step_fn(out[:, :t]).argmax())


def test_greedy_stops_at_eos_and_pads():
    # a model that says eos (0) after token 3, and 3 after anything else
    def step_fn(tokens):
        logits = torch.zeros(tokens.shape[0], 5)
        last = tokens[:, -1]
        logits[last == 3, 0] = 5.0
        logits[last != 3, 3] = 5.0
        logits[last == 0, 4] = 9.0  # would continue after eos if the row were not finished
        return logits

    prefix = torch.tensor([[1], [3]])
    out = greedy_decode(step_fn, prefix, max_new_tokens=10, eos_id=0)
    assert out.tolist() == [[1, 3, 0], [3, 0, 0]]  # row 2 padded with eos; stops early
    out = greedy_decode(step_fn, prefix, max_new_tokens=10, eos_id=0, pad_id=2)
    assert out.tolist() == [[1, 3, 0], [3, 0, 2]]


def test_zero_new_tokens_returns_prefix():
    prefix = torch.tensor([[1, 2, 3]])
    assert torch.equal(greedy_decode(make_lm(), prefix, 0), prefix)
    tokens, scores = beam_search(make_lm(), prefix, beam_size=3, max_new_tokens=0)
    assert torch.equal(tokens, prefix) and scores.tolist() == [0.0]


# --------------------------------------------------------------------------- beam search
@pytest.mark.parametrize("eos_id", [None, 0])
def test_beam_size_one_equals_greedy(eos_id):
    for seed in range(5):
        step_fn = make_lm(seed=seed)
        prefix = torch.randint(0, V, (4, 3))
        greedy = greedy_decode(step_fn, prefix, 12, eos_id=eos_id)
        beam, _ = beam_search(step_fn, prefix, beam_size=1, max_new_tokens=12, eos_id=eos_id)
        assert torch.equal(beam, greedy)


def test_exhaustive_beam_finds_the_most_likely_sequence():
    vocab, steps = 4, 4
    step_fn = make_lm(vocab=vocab, seed=3)
    prefix = torch.tensor([[1]])
    best = max(
        (seq_logprob(step_fn, torch.tensor([1, *seq]), 1)[0], seq)
        for seq in itertools.product(range(vocab), repeat=steps)
    )
    tokens, score = beam_search(step_fn, prefix, beam_size=vocab ** (steps - 1),
                                max_new_tokens=steps, length_penalty=0.0)
    assert tokens[0, 1:].tolist() == list(best[1])
    assert score.item() == pytest.approx(best[0], abs=1e-5)


def test_beam_beats_greedy_on_a_trap():
    # step 1: "a" (0.6) or "b" (0.4); after "a" the next word is a coin toss over 3 tokens,
    # after "b" one token is almost certain. Greedy: 0.6 * 1/3 = 0.2; best: 0.4 * 0.9 = 0.36.
    a, b = 1, 2
    probs = {(): [0, 0.6, 0.4, 0, 0, 0], (a,): [0, 0, 0, 1 / 3, 1 / 3, 1 / 3],
             (b,): [0, 0, 0, 0.9, 0.05, 0.05]}

    def step_fn(tokens):
        rows = [torch.tensor(probs[tuple(t[1:].tolist())]) for t in tokens]
        return torch.stack(rows).clamp_min(1e-12).log()

    prefix = torch.tensor([[0]])
    greedy = greedy_decode(step_fn, prefix, 2)
    beam, score = beam_search(step_fn, prefix, beam_size=2, max_new_tokens=2, length_penalty=0.0)
    assert greedy[0, 1:].tolist()[0] == a
    assert beam[0, 1:].tolist() == [b, 3]
    assert score.item() == pytest.approx(math.log(0.36), abs=1e-5)


def test_beam_score_is_length_penalised_logprob():
    step_fn = make_lm(seed=1)
    prefix = torch.randint(1, V, (3, 2))
    for alpha in (0.0, 0.6, 1.0):
        tokens, scores = beam_search(step_fn, prefix, beam_size=3, max_new_tokens=8, eos_id=0,
                                     length_penalty=alpha)
        for row, score in zip(tokens, scores, strict=True):
            logp, length = seq_logprob(step_fn, row, 2, eos_id=0)
            expected = logp / length_penalty_gnmt(length, alpha)
            assert score.item() == pytest.approx(expected, abs=1e-4)


def test_beam_batch_equals_one_by_one():
    step_fn = make_lm(seed=2)
    prefix = torch.randint(1, V, (5, 3))
    tokens, scores = beam_search(step_fn, prefix, beam_size=4, max_new_tokens=6, eos_id=0)
    for i in range(5):
        t_i, s_i = beam_search(step_fn, prefix[i:i + 1], beam_size=4, max_new_tokens=6, eos_id=0)
        assert torch.allclose(s_i, scores[i:i + 1], atol=1e-5)
        assert torch.equal(t_i[0], tokens[i, :t_i.shape[1]])
        assert (tokens[i, t_i.shape[1]:] == 0).all()  # padded with eos


def test_beam_rows_are_batch_major():
    # an "encoder-decoder": each input has its own memory vector, repeated beam_size times
    vocab, K = 6, 3
    memory = torch.randn(2, vocab) * 3
    seen = []

    def make_step_fn(mem):
        def step_fn(tokens):
            seen.append(tokens.shape[0])
            return mem + 0.1 * tokens.sum(dim=1, keepdim=True).float()
        return step_fn

    prefix = torch.tensor([[1], [1]])
    both, _ = beam_search(make_step_fn(memory.repeat_interleave(K, 0)), prefix, K, 4)
    assert set(seen) == {2 * K}
    for b in range(2):
        step_fn = make_step_fn(memory[b:b + 1].repeat_interleave(K, 0))
        alone, _ = beam_search(step_fn, prefix[b:b + 1], K, 4)
        assert torch.equal(alone[0], both[b])


def test_beam_stops_at_eos_and_pads_with_pad_id():
    def step_fn(tokens):  # eos (0) is always the most likely token
        logits = torch.zeros(tokens.shape[0], 4)
        logits[:, 0] = 3.0
        return logits

    prefix = torch.tensor([[1, 2], [3, 3]])
    tokens, _ = beam_search(step_fn, prefix, beam_size=2, max_new_tokens=10, eos_id=0)
    assert tokens.shape[1] < 12  # stopped once every beam had finished
    assert tokens[:, :3].tolist() == [[1, 2, 0], [3, 3, 0]] and (tokens[:, 3:] == 0).all()
    # with a strong length penalty a longer hypothesis can win; finished rows are padded
    tokens, _ = beam_search(step_fn, prefix, beam_size=3, max_new_tokens=4, eos_id=0, pad_id=3,
                            length_penalty=0.6)
    assert tokens.shape[0] == 2
    for row in tokens:
        gen = row[2:].tolist()
        if 0 in gen:
            assert all(t == 3 for t in gen[gen.index(0) + 1:])


def test_beam_calls_reorder_with_source_rows():
    calls = []
    step_fn = make_lm(seed=4)

    class Cached:
        def __call__(self, tokens):
            return step_fn(tokens)

        def reorder(self, index):
            calls.append(index.clone())

    beam_search(Cached(), torch.tensor([[1], [2]]), beam_size=3, max_new_tokens=4)
    assert len(calls) == 4
    for index in calls:
        assert index.shape == (6,)
        assert (index[:3] < 3).all() and (index[3:] >= 3).all()  # beams stay with their input


# --------------------------------------------------------------------------- filters
def test_top_k_filter_keeps_exactly_k():
    logits = torch.randn(4, 10)
    out = top_k_filter(logits, 3)
    assert (torch.isfinite(out).sum(dim=-1) == 3).all()
    top = logits.topk(3, dim=-1).indices
    assert torch.equal(out.gather(-1, top), logits.gather(-1, top))
    assert torch.equal(top_k_filter(logits, 50), logits)  # k > V keeps everything


def test_top_p_filter_hand_example():
    logits = torch.tensor([0.05, 0.5, 0.15, 0.3]).log()
    kept = lambda p: torch.isfinite(top_p_filter(logits, p)).nonzero().flatten().tolist()  # noqa: E731
    assert kept(0.4) == [1]
    assert kept(0.5 - 1e-4) == [1]
    assert kept(0.79) == [1, 3]
    assert kept(0.81) == [1, 2, 3]
    assert kept(1.0) == [0, 1, 2, 3]


def test_top_p_keeps_the_smallest_set_reaching_p():
    logits = torch.randn(50, 20) * 2
    for p in (0.1, 0.5, 0.9, 0.99):
        out = top_p_filter(logits, p)
        probs = torch.softmax(logits, dim=-1)
        keep = torch.isfinite(out)
        mass = (probs * keep).sum(dim=-1)
        assert (mass >= p - 1e-6).all()  # the kept set reaches p
        smallest_kept = torch.where(keep, probs, torch.inf).min(dim=-1).values
        assert (mass - smallest_kept < p + 1e-6).all()  # and no smaller set would
        # the kept tokens are the most likely ones
        largest_dropped = torch.where(keep, -torch.inf, probs).max(dim=-1).values
        assert (largest_dropped <= smallest_kept).all()
        assert torch.equal(out[keep], logits[keep])


# --------------------------------------------------------------------------- sampling
def test_top_k_one_equals_greedy():
    for seed in range(3):
        step_fn = make_lm(seed=seed)
        prefix = torch.randint(0, V, (4, 2))
        g = torch.Generator().manual_seed(seed)
        sampled = sample(step_fn, prefix, 10, temperature=1.0, top_k=1, generator=g)
        assert torch.equal(sampled, greedy_decode(step_fn, prefix, 10))


def test_low_temperature_approaches_greedy():
    step_fn = make_lm(seed=5)
    prefix = torch.randint(0, V, (8, 2))
    greedy = greedy_decode(step_fn, prefix, 10)
    g = torch.Generator().manual_seed(0)
    assert torch.equal(sample(step_fn, prefix, 10, temperature=1e-3, generator=g), greedy)
    # the probability of the argmax token grows towards 1 as the temperature falls
    logits = step_fn(prefix)
    top = [torch.softmax(logits / t, dim=-1).max(dim=-1).values.min().item()
           for t in (1.0, 0.3, 0.01)]
    assert top[0] < top[1] < top[2] and top[2] > 0.99


def test_sample_is_reproducible_with_a_generator():
    step_fn = make_lm(seed=6)
    prefix = torch.randint(0, V, (3, 2))
    a = sample(step_fn, prefix, 15, generator=torch.Generator().manual_seed(7))
    b = sample(step_fn, prefix, 15, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, b) and a.shape == (3, 17)


def test_one_generator_per_row_makes_each_row_independent_of_the_batch():
    step_fn = make_lm(seed=6)
    prefix = torch.randint(0, V, (4, 2))

    def seeded(rows):
        return [torch.Generator().manual_seed(100 + i) for i in rows]

    batch = sample(step_fn, prefix, 12, top_p=0.9, generator=seeded(range(4)))
    for i in range(4):  # row i alone, with its own seed: the same tokens as in the batch
        alone = sample(step_fn, prefix[i:i + 1], 12, top_p=0.9, generator=seeded([i]))
        assert torch.equal(alone[0], batch[i])
    # the batch in another order gives each row the same tokens
    order = [2, 0, 3, 1]
    shuffled = sample(step_fn, prefix[order], 12, top_p=0.9, generator=seeded(order))
    assert torch.equal(shuffled, batch[order])
    # one shared generator does not: a row's draws depend on the rows before it
    shared = [sample(step_fn, prefix[rows], 12, generator=torch.Generator().manual_seed(5))
              for rows in ([0, 1, 2, 3], [3, 2, 1, 0])]
    assert not torch.equal(shared[0][[3, 2, 1, 0]], shared[1])


def test_one_generator_per_row_needs_one_per_row():
    prefix = torch.zeros(3, 1, dtype=torch.long)
    with pytest.raises(ValueError, match="per row of the prefix, 3 of them, got 2"):
        sample(make_lm(), prefix, 2, generator=[torch.Generator(), torch.Generator()])
    with pytest.raises(TypeError, match="generator"):
        sample(make_lm(), prefix, 2, generator=[1, 2, 3])


def test_sample_frequencies_follow_the_filtered_distribution():
    logits = torch.tensor([2.0, 1.5, 1.0, 0.0, -1.0, -3.0])
    n = 20000
    step_fn = lambda tokens: logits.expand(tokens.shape[0], -1)  # noqa: E731
    prefix = torch.zeros(n, 1, dtype=torch.long)
    g = torch.Generator().manual_seed(0)
    out = sample(step_fn, prefix, 1, temperature=0.7, top_k=4, top_p=0.9, generator=g)[:, 1]
    expected = torch.softmax(top_p_filter(top_k_filter(logits / 0.7, 4), 0.9), dim=-1)
    freq = torch.bincount(out, minlength=6).float() / n
    assert torch.allclose(freq, expected, atol=0.015)
    assert freq[expected == 0].sum() == 0


def test_sample_stops_at_eos():
    def step_fn(tokens):
        logits = torch.full((tokens.shape[0], 3), -20.0)
        logits[:, 0] = 0.0  # eos certain
        return logits

    out = sample(step_fn, torch.tensor([[1], [2]]), 10, eos_id=0)
    assert out.tolist() == [[1, 0], [2, 0]]


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize("kwargs, name", [
    (dict(top_k=0), "top_k"), (dict(top_k=-2), "top_k"), (dict(top_k=2.5), "top_k"),
    (dict(top_p=0.0), "top_p"), (dict(top_p=1.5), "top_p"), (dict(top_p=-0.1), "top_p"),
    (dict(temperature=0.0), "temperature"), (dict(temperature=-1.0), "temperature"),
    (dict(max_new_tokens=-1), "max_new_tokens"), (dict(eos_id=-1), "eos_id"),
])
def test_sample_rejects_bad_arguments(kwargs, name):
    args = dict(max_new_tokens=3)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        sample(make_lm(), torch.tensor([[1]]), **args)


def test_filters_reject_bad_arguments():
    with pytest.raises(ValueError, match="top_k"):
        top_k_filter(torch.randn(3), 0)
    with pytest.raises(ValueError, match="top_p"):
        top_p_filter(torch.randn(3), 0.0)
    with pytest.raises(ValueError, match="top_p"):
        top_p_filter(torch.randn(3), 1.01)


def test_beam_rejects_bad_arguments():
    prefix = torch.tensor([[1]])
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="beam_size"):
            beam_search(make_lm(), prefix, beam_size=bad, max_new_tokens=3)
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(make_lm(), prefix, beam_size=2, max_new_tokens=3, length_penalty=float("nan"))


def test_bad_prefix_and_bad_step_fn():
    with pytest.raises(TypeError, match="prefix"):
        greedy_decode(make_lm(), torch.tensor([[1.0]]), 3)
    with pytest.raises(ValueError, match="prefix"):
        greedy_decode(make_lm(), torch.tensor([1, 2]), 3)
    with pytest.raises(ValueError, match="step_fn"):
        greedy_decode(lambda t: torch.zeros(t.shape[0], t.shape[1], 5), torch.tensor([[1]]), 3)


def test_ban_tokens_never_chosen_and_passes_reorder():
    from course_lib.decoding import BanTokens

    step_fn = make_lm(seed=8)
    prefix = torch.randint(0, V, (6, 2))
    favourite = greedy_decode(step_fn, prefix, 1)[:, -1].unique().tolist()
    banned = BanTokens(step_fn, favourite)
    out = greedy_decode(banned, prefix, 10)
    assert not torch.isin(out[:, 2:], torch.tensor(favourite)).any()
    out = sample(banned, prefix, 10, generator=torch.Generator().manual_seed(0))
    assert not torch.isin(out[:, 2:], torch.tensor(favourite)).any()

    class Cached:
        def __call__(self, tokens):
            return step_fn(tokens)

        def reorder(self, index):
            pass

    assert hasattr(BanTokens(Cached(), [0]), "reorder")
    assert not hasattr(banned, "reorder")


# --------------------------------------------------------------------------- finished pool
def table_lm(table, vocab):
    """A step function from {generated tokens (tuple): {next token: probability}}; the rows
    start with one prefix token; a context not in the table ends (token 0) for sure."""

    def step_fn(tokens):
        rows = []
        for row in tokens.tolist():
            p = torch.full((vocab,), 1e-9)
            for token, q in table.get(tuple(row[1:]), {0: 1.0}).items():
                p[token] = q
            rows.append(p.log())
        return torch.stack(rows)

    return step_fn


# eos 0, <s> 1, the 2, great 3, movie 4, film 5, plot 6, was 7, is 8, bad 9
TRAP = {(): {2: 0.8, 3: 0.2}, (3,): {0: 1.0}, (2,): {4: 0.75, 5: 0.2, 6: 0.05},
        (2, 4): {7: 0.55, 8: 0.45}, (2, 4, 7): {3: 0.55, 9: 0.45}, (2, 4, 8): {3: 0.6, 9: 0.4}}


def test_in_beam_search_can_lose_a_finished_hypothesis_the_pool_keeps():
    # "great </s>" (P = 0.2) finishes at step 2 inside the beam; at step 3 the two children of
    # "the movie" (0.33 and 0.27) push it out, and they end lower: "the movie was great </s>"
    step_fn, prefix = table_lm(TRAP, 10), torch.tensor([[1]])
    in_beam, s_in = beam_search(step_fn, prefix, beam_size=2, max_new_tokens=6, eos_id=0,
                                length_penalty=0.0)
    pooled, s_pool = beam_search_pool(step_fn, prefix, beam_size=2, max_new_tokens=6, eos_id=0,
                                      length_penalty=0.0)
    assert in_beam[0, 1:].tolist() == [2, 4, 7, 3, 0]
    assert s_in.item() == pytest.approx(math.log(0.8 * 0.75 * 0.55 * 0.55), abs=1e-5)
    assert pooled[0, 1:3].tolist() == [3, 0] and (pooled[0, 3:] == 0).all()
    assert s_pool.item() == pytest.approx(math.log(0.2), abs=1e-5)


def test_pool_without_eos_equals_beam_search():
    for seed in range(4):
        step_fn = make_lm(seed=seed)
        prefix = torch.randint(1, V, (3, 2))
        for alpha in (0.0, 0.6):
            a, sa = beam_search(step_fn, prefix, 3, 7, length_penalty=alpha)
            b, sb = beam_search_pool(step_fn, prefix, 3, 7, length_penalty=alpha)
            assert torch.equal(a, b) and torch.allclose(sa, sb, atol=1e-5)


def test_pool_with_a_wide_beam_finds_the_best_finished_or_full_length_sequence():
    vocab, steps = 4, 4
    step_fn = make_lm(vocab=vocab, seed=3)
    candidates = set()
    for seq in itertools.product(range(vocab), repeat=steps):
        candidates.add(seq[: seq.index(0) + 1] if 0 in seq else seq)  # ends at eos (0)
    best = max((seq_logprob(step_fn, torch.tensor([1, *seq]), 1, eos_id=0)[0], seq)
               for seq in candidates)
    tokens, score = beam_search_pool(step_fn, torch.tensor([[1]]), beam_size=vocab ** steps,
                                     max_new_tokens=steps, eos_id=0, length_penalty=0.0)
    assert tokens[0, 1:1 + len(best[1])].tolist() == list(best[1])
    assert score.item() == pytest.approx(best[0], abs=1e-5)


def test_pool_score_is_length_penalised_logprob_and_batch_equals_one_by_one():
    step_fn = make_lm(seed=1)
    prefix = torch.randint(1, V, (4, 2))
    for alpha in (0.0, 0.6, 1.0):
        tokens, scores = beam_search_pool(step_fn, prefix, beam_size=3, max_new_tokens=8,
                                          eos_id=0, length_penalty=alpha)
        for i, (row, score) in enumerate(zip(tokens, scores, strict=True)):
            logp, length = seq_logprob(step_fn, row, 2, eos_id=0)
            assert score.item() == pytest.approx(logp / length_penalty_gnmt(length, alpha),
                                                 abs=1e-4)
            alone, s_alone = beam_search_pool(step_fn, prefix[i:i + 1], beam_size=3,
                                              max_new_tokens=8, eos_id=0, length_penalty=alpha)
            assert s_alone.item() == pytest.approx(score.item(), abs=1e-5)
            assert torch.equal(alone[0], row[:alone.shape[1]]) and (row[alone.shape[1]:] == 0).all()


def test_pool_calls_reorder_and_pads_with_pad_id():
    calls = []
    step_fn = make_lm(seed=4)

    class Cached:
        def __call__(self, tokens):
            return step_fn(tokens)

        def reorder(self, index):
            calls.append(index.clone())

    tokens, _ = beam_search_pool(Cached(), torch.tensor([[1], [2]]), beam_size=3,
                                 max_new_tokens=5, eos_id=0, pad_id=6)
    assert calls and all(index.shape == (6,) for index in calls)
    assert all((index[:3] < 3).all() and (index[3:] >= 3).all() for index in calls)
    for row in tokens:
        gen = row[1:].tolist()
        if 0 in gen:
            assert all(t == 6 for t in gen[gen.index(0) + 1:])


def test_pool_rejects_bad_arguments():
    with pytest.raises(ValueError, match="beam_size"):
        beam_search_pool(make_lm(), torch.tensor([[1]]), beam_size=0, max_new_tokens=3)
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search_pool(make_lm(), torch.tensor([[1]]), 2, 3, length_penalty=float("inf"))


# --------------------------------------------------------------------------- text metrics
def test_distinct_n_hand_example():
    texts = [[1, 2, 3, 1, 2], [1, 2, 4]]
    # unigrams: 8, different {1, 2, 3, 4}; bigrams: (1,2) x3, (2,3), (3,1), (2,4): 4 of 6
    assert distinct_n(texts, 1) == pytest.approx(4 / 8)
    assert distinct_n(texts, 2) == pytest.approx(4 / 6)
    assert distinct_n([torch.tensor([5, 6, 7])], 2) == 1.0
    with pytest.raises(ValueError, match="at least one text"):
        distinct_n([[1]], 2)
    with pytest.raises(ValueError, match="n must be"):
        distinct_n(texts, 0)


def test_repetition_rate_hand_example():
    assert repetition_rate([1, 2, 3, 4, 5], 3) == 0.0
    loop = [7, 8, 9] * 4  # 10 trigrams, 3 different
    assert repetition_rate(loop, 3) == pytest.approx(7 / 10)
    assert repetition_rate(loop, 3) == pytest.approx(1 - distinct_n([loop], 3))
    with pytest.raises(ValueError, match="at least 3 tokens"):
        repetition_rate([1, 2], 3)
