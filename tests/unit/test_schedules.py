"""Unit tests of course_lib.schedules: noam_lambda, alone and inside LambdaLR, and the warm-up
schedules, equal step for step to the copies their old modules had."""

import math
import pickle

import pytest
import torch
from torch.optim.lr_scheduler import LambdaLR

from course_lib import schedules
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


# --------------------------------------------------------------------------- the other schedules
# The schedules as their old modules wrote them (gpt.py, timeseries.py, lm.py before
# course_lib.schedules held them all), copied verbatim: the moved ones must give the same
# floats at every step, so that no committed run would train differently.
def _old_gpt_warmup_cosine(warmup_steps, total_steps, final_fraction=0.1):
    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


def _old_timeseries_warmup_cosine(warmup_steps, total_steps):
    def factor(step):
        return min((step + 1) / warmup_steps,
                   0.5 * (1 + math.cos(math.pi * min(step, total_steps) / total_steps)))
    return factor


def _old_timeseries_warmup_constant(warmup_steps):
    return lambda step: min((step + 1) / warmup_steps, 1.0)


def _old_lm_constant_after_warmup(warmup_steps):
    return lambda step: min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0


@pytest.mark.parametrize("warmup, total, final", [(0, 1, 0.1), (1, 2, 0.1), (10, 110, 0.1),
                                                  (7, 500, 0.0), (100, 3000, 0.25), (3, 4, 1.0)])
def test_warmup_cosine_is_gpts_old_one_step_for_step(warmup, total, final):
    from course_lib import gpt

    new, old = schedules.warmup_cosine(warmup, total, final), _old_gpt_warmup_cosine(
        warmup, total, final)
    assert [new(s) for s in range(total + 20)] == [old(s) for s in range(total + 20)]
    assert gpt.warmup_cosine is schedules.warmup_cosine
    default = schedules.warmup_cosine(warmup, total)
    assert [default(s) for s in range(total)] == [
        _old_gpt_warmup_cosine(warmup, total)(s) for s in range(total)]


@pytest.mark.parametrize("warmup, total", [(1, 1), (4, 20), (13, 1300), (50, 49), (64, 64 * 30)])
def test_cosine_capped_by_warmup_is_timeseries_old_warmup_cosine(warmup, total):
    from course_lib import timeseries

    new, old = schedules.cosine_capped_by_warmup(warmup, total), _old_timeseries_warmup_cosine(
        warmup, total)
    assert [new(s) for s in range(total + 20)] == [old(s) for s in range(total + 20)]
    assert timeseries.warmup_cosine is schedules.cosine_capped_by_warmup


@pytest.mark.parametrize("warmup", [1, 2, 3, 7, 64, 1000])
def test_warmup_constant_is_both_old_ones(warmup):
    from course_lib import lm, timeseries

    new = schedules.warmup_constant(warmup)
    steps = range(3 * warmup + 5)
    assert [new(s) for s in steps] == [_old_timeseries_warmup_constant(warmup)(s) for s in steps]
    assert [new(s) for s in steps] == [_old_lm_constant_after_warmup(warmup)(s) for s in steps]
    assert timeseries.warmup_constant is schedules.warmup_constant
    assert lm.constant_after_warmup is schedules.warmup_constant
    assert schedules.warmup_constant(0)(0) == 1.0


def test_the_two_warmup_cosines_differ_where_their_cosines_start():
    waits = schedules.warmup_cosine(10, 100, final_fraction=0.0)
    capped = schedules.cosine_capped_by_warmup(10, 100)
    assert waits(10) == 1.0 and capped(10) < 1.0  # capped's cosine began at step 0
    assert waits(100) == capped(100) == 0.0


def test_schedules_drive_lambdalr():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    sched = LambdaLR(opt, schedules.warmup_cosine(2, 10))
    rates = []
    for _ in range(10):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert rates[:2] == [0.25, 0.5] and rates[-1] < rates[2]


@pytest.mark.parametrize("make, args, message", [
    (schedules.warmup_constant, (-1,), "warmup_steps must be an int >= 0"),
    (schedules.warmup_constant, (2.5,), "warmup_steps must be an int >= 0"),
    (schedules.warmup_cosine, (10, 10), "need 0 <= warmup_steps < total_steps"),
    (schedules.cosine_capped_by_warmup, (0, 10), ">= 1"),
])
def test_bad_schedules_say_what_is_wrong(make, args, message):
    with pytest.raises(ValueError, match=message):
        make(*args)
