"""Unit tests of course_lib.schedules.noam_lambda, alone and inside LambdaLR."""

import math
import pickle

import pytest
import torch
from torch.optim.lr_scheduler import LambdaLR

from course_lib.schedules import NoamLambda, noam_lambda


def paper(step, d_model, warmup, factor=1.0):
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@pytest.mark.parametrize(
    "d_model, warmup, factor", [(512, 4000, 1.0), (256, 1000, 2.0), (64, 1, 0.5)]
)
def test_formula(d_model, warmup, factor):
    f = noam_lambda(d_model, warmup, factor)
    for step in (1, 2, 10, warmup - 1 or 1, warmup, warmup + 1, 10 * warmup, 123457):
        assert math.isclose(f(step), paper(step, d_model, warmup, factor), rel_tol=1e-12)


def test_step_zero_is_step_one():
    f = noam_lambda(512, 4000)
    assert f(0) == f(1) > 0


def test_warmup_linear_then_inverse_sqrt_decay_and_peak():
    f = noam_lambda(512, 4000)
    assert math.isclose(f(2000), f(1000) * 2, rel_tol=1e-12)  # linear in the warm-up
    assert math.isclose(f(16000), f(4000) / 2, rel_tol=1e-12)  # 1/sqrt(step) afterwards
    assert max(f(s) for s in range(1, 20000, 7)) <= f(4000) == f.peak_lr
    assert math.isclose(f.peak_lr, (512 * 4000) ** -0.5, rel_tol=1e-12)
    assert f(3999) < f(4000) > f(4001)


def test_inside_lambda_lr():
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    f = noam_lambda(256, 10, factor=2.0)
    sched = LambdaLR(opt, f)
    assert math.isclose(opt.param_groups[0]["lr"], f(1))  # built with step 0 -> treated as 1
    seen = []
    for _ in range(30):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen[0] == seen[1] == f(1)  # LambdaLR's 0 and the first step share the rate of step 1
    assert seen[10] == f(10) == max(seen)
    assert all(math.isclose(seen[s], f(s)) for s in range(1, 30))


def test_pickles_and_prints():
    f = noam_lambda(512, 4000, 1.5)
    g = pickle.loads(pickle.dumps(f))
    assert g(77) == f(77)
    assert repr(f) == "noam_lambda(d_model=512, warmup_steps=4000, factor=1.5)"


@pytest.mark.parametrize(
    "args, match",
    [
        ((0, 4000), "d_model must be a positive int"),
        ((512.0, 4000), "d_model must be a positive int"),
        ((512, 0), "warmup_steps must be a positive int"),
        ((512, True), "warmup_steps must be a positive int"),
        ((512, 4000, 0.0), "factor must be a positive number"),
        ((512, 4000, float("nan")), "factor must be a positive number"),
    ],
)
def test_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        noam_lambda(*args)


def test_bad_step():
    f = noam_lambda(512, 4000)
    with pytest.raises(ValueError, match="step must be a non-negative int"):
        f(-1)
    with pytest.raises(ValueError, match="step must be a non-negative int"):
        f(1.5)


def test_noam_lambda_returns_a_noam_lambda_that_rejects_bad_steps():
    f = noam_lambda(64, 10)
    assert isinstance(f, NoamLambda) and f(0) == f(1)  # LambdaLR's first call, step 0
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="step must be a non-negative int"):
            f(bad)
