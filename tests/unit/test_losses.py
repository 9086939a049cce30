"""Unit tests of course_lib.losses.LabelSmoothingLoss against explicit formulas and PyTorch."""

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.losses import LabelSmoothingLoss

V, PAD = 7, 0


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def batch(n=10, with_pad=True):
    logits = torch.randn(n, V) * 3
    target = torch.randint(1, V, (n,))
    if with_pad:
        target[[2, 7]] = PAD
    return logits, target


def close(a, b, atol=1e-6):
    return torch.allclose(torch.as_tensor(a), torch.as_tensor(b), atol=atol, rtol=0)


# --------------------------------------------------------------------------- the distribution
def test_target_distribution_values():
    loss = LabelSmoothingLoss(V, PAD, smoothing=0.1)
    q = loss.target_distribution(torch.tensor([3, PAD, 1]))
    assert q.shape == (3, V)
    assert close(q[0, 3], 0.9) and close(q[0, PAD], 0.0)
    others = [j for j in range(V) if j not in (3, PAD)]
    assert close(q[0, others], torch.full((V - 2,), 0.1 / (V - 2)))
    assert close(q[0].sum(), 1.0)  # a probability distribution
    assert (q[1] == 0).all()  # padding target: nothing
    assert close(q[2].sum(), 1.0) and close(q[2, 1], 0.9)


def test_target_distribution_other_pad_id():
    loss = LabelSmoothingLoss(V, pad_id=4, smoothing=0.2)
    q = loss.target_distribution(torch.tensor([[0, 6]]))
    assert q.shape == (1, 2, V)
    assert (q[..., 4] == 0).all() and close(q.sum(-1), torch.ones(1, 2))


# --------------------------------------------------------------------------- the loss
def test_equals_explicit_cross_entropy_with_smoothed_target():
    loss = LabelSmoothingLoss(V, PAD, smoothing=0.1)
    logits, target = batch()
    q = loss.target_distribution(target)
    per_token = -(q * F.log_softmax(logits, -1)).sum(-1)
    keep = target != PAD
    assert close(loss(logits, target), per_token[keep].mean())


def test_zero_smoothing_is_cross_entropy_ignoring_pad():
    logits, target = batch()
    ours = LabelSmoothingLoss(V, PAD, smoothing=0.0)(logits, target)
    assert close(ours, F.cross_entropy(logits, target, ignore_index=PAD))


def test_differs_from_torch_label_smoothing_as_explained():
    """PyTorch spreads eps/V over all V classes (pad and the true token included)."""
    eps = 0.1
    logits, target = batch()
    theirs = F.cross_entropy(logits, target, ignore_index=PAD, label_smoothing=eps)
    log_p = F.log_softmax(logits, -1)
    q_torch = torch.full((len(target), V), eps / V)
    q_torch.scatter_(1, target[:, None], 1 - eps + eps / V)
    keep = target != PAD
    assert close(theirs, -(q_torch * log_p).sum(-1)[keep].mean())
    ours = LabelSmoothingLoss(V, PAD, smoothing=eps)(logits, target)
    assert not close(ours, theirs, atol=1e-4)
    # the difference is exactly the difference of the two targets, weighted by log p
    q_ours = LabelSmoothingLoss(V, PAD, eps).target_distribution(target)
    assert close(ours - theirs, -((q_ours - q_torch) * log_p).sum(-1)[keep].mean())


def test_pad_targets_are_ignored():
    loss = LabelSmoothingLoss(V, PAD, smoothing=0.1)
    logits, target = batch()
    keep = target != PAD
    assert close(loss(logits, target), loss(logits[keep], target[keep]))
    # changing the logits at padded positions changes nothing
    logits2 = logits.clone()
    logits2[~keep] = 100.0
    assert close(loss(logits, target), loss(logits2, target))


def test_all_pad_gives_zero_not_nan():
    loss = LabelSmoothingLoss(V, PAD, smoothing=0.1)
    out = loss(torch.randn(3, V), torch.full((3,), PAD))
    assert out.item() == 0.0


def test_reductions_and_shapes():
    logits, target = torch.randn(2, 5, V), torch.randint(0, V, (2, 5))
    target[0, 0] = 3
    mean = LabelSmoothingLoss(V, PAD, 0.1)(logits, target)
    total = LabelSmoothingLoss(V, PAD, 0.1, reduction="sum")(logits, target)
    each = LabelSmoothingLoss(V, PAD, 0.1, reduction="none")(logits, target)
    assert each.shape == (2, 5) and (each[target == PAD] == 0).all()
    assert close(total, each.sum()) and close(mean, total / (target != PAD).sum())
    assert close(mean, LabelSmoothingLoss(V, PAD, 0.1)(logits.view(-1, V), target.view(-1)))


def test_minimum_is_at_the_smoothed_target():
    """The loss is smallest when softmax(logits) equals q: its gradient there is zero."""
    loss = LabelSmoothingLoss(V, PAD, smoothing=0.1)
    target = torch.tensor([2])
    q = loss.target_distribution(target)
    logits = torch.where(q > 0, q.clamp(min=1e-12).log(), torch.tensor(-1e4)).requires_grad_(True)
    value = loss(logits, target)
    value.backward()
    assert logits.grad.abs().max() < 1e-5
    entropy = -(q[q > 0] * q[q > 0].log()).sum()  # at the minimum the loss is the entropy of q
    assert close(value.detach(), entropy, atol=1e-5)
    assert value.item() > 0.1  # unlike plain cross-entropy, it cannot reach zero


def test_gradient_matches_explicit():
    loss = LabelSmoothingLoss(V, PAD, smoothing=0.2)
    logits, target = batch()
    a = logits.clone().requires_grad_(True)
    b = logits.clone().requires_grad_(True)
    loss(a, target).backward()
    q = loss.target_distribution(target)
    keep = target != PAD
    (-(q * F.log_softmax(b, -1)).sum(-1)[keep].mean()).backward()
    assert close(a.grad, b.grad)


def test_gradcheck_in_double_precision():
    loss = LabelSmoothingLoss(V, PAD, smoothing=0.1, reduction="sum")
    logits, target = batch(n=8)
    x = logits.double().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda z: loss(z, target), (x,))


def test_half_precision_logits_are_computed_in_float32():
    loss = LabelSmoothingLoss(V, PAD, 0.1)
    logits, target = batch()
    assert close(
        loss(logits.to(torch.bfloat16), target), loss(logits.to(torch.bfloat16).float(), target)
    )


# --------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(vocab_size=2, pad_id=0), "vocab_size must be an int >= 3"),
        (dict(vocab_size=7.0, pad_id=0), "vocab_size must be an int >= 3"),
        (dict(vocab_size=7, pad_id=7), r"pad_id must be an int in \[0, vocab_size=7\)"),
        (dict(vocab_size=7, pad_id=-1), "pad_id must be an int"),
        (dict(vocab_size=7, pad_id=0, smoothing=1.0), r"smoothing must be a number in \[0, 1\)"),
        (dict(vocab_size=7, pad_id=0, smoothing=-0.1), "smoothing must be"),
        (dict(vocab_size=7, pad_id=0, reduction="avg"), "reduction must be one of"),
    ],
)
def test_bad_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LabelSmoothingLoss(**kwargs)


def test_bad_calls():
    loss = LabelSmoothingLoss(V, PAD, 0.1)
    with pytest.raises(ValueError, match="built with vocab_size=7"):
        loss(torch.randn(4, V + 1), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"must agree.*\(4, 7\).*\(5,\)"):
        loss(torch.randn(4, V), torch.zeros(5, dtype=torch.long))
    with pytest.raises(TypeError, match="integer token ids"):
        loss(torch.randn(4, V), torch.zeros(4))
    with pytest.raises(TypeError, match="logits must be a float tensor"):
        loss(torch.zeros(4, V, dtype=torch.long), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"target ids must lie in \[0, 7\).*max 9"):
        loss(torch.randn(2, V), torch.tensor([1, 9]))


def test_repr_names_the_settings():
    assert "smoothing=0.1" in repr(LabelSmoothingLoss(V, PAD, 0.1))
    assert math.isclose(LabelSmoothingLoss(V, PAD, 0.1).other, 0.1 / 5)
