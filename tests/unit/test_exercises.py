"""course_lib.exercises: the checks that tell a student whether an answer holds."""

from __future__ import annotations

import pytest

from course_lib import exercises
from course_lib.exercises import ExerciseCheckFailed


def test_every_public_name_is_documented_and_callable():
    assert issubclass(ExerciseCheckFailed, AssertionError)  # "Run all" stops there
    assert callable(exercises.check)
    for name in ("check", "ExerciseCheckFailed"):
        assert getattr(exercises, name).__doc__, f"{name} has no docstring"


def test_passing_checks_say_how_many_passed(capsys):
    with exercises.check(3) as c:
        c.that(1 + 1 == 2, "add again")
        c.close(0.765, 0.76, rel=0.05, what="the share")
        c.close(10.0, 10.4, abs=0.5, what="the count")
    assert capsys.readouterr().out.strip() == "Exercise 3: all 3 checks pass."


def test_a_missing_name_says_the_exercise_is_not_answered(capsys):
    with pytest.raises(ExerciseCheckFailed) as info:
        with exercises.check(2) as c:
            c.that(answer_that_does_not_exist > 0, "never reached")  # noqa: F821
    message = str(info.value)
    assert "Exercise 2 is not answered yet" in message
    assert "answer_that_does_not_exist" in message
    assert "cell above" in message  # says what to do
    assert capsys.readouterr().out == ""  # no "checks pass" line


def test_a_false_condition_gives_the_hint_and_the_number():
    with pytest.raises(ExerciseCheckFailed, match=r"^Exercise 4: not yet\. recount the head$"):
        with exercises.check(4) as c:
            c.that(False, "recount the head")


def test_checks_after_a_failed_one_do_not_run():
    ran = []
    with pytest.raises(ExerciseCheckFailed):
        with exercises.check(1) as c:
            c.that(False, "first")
            ran.append("second")
    assert ran == []


@pytest.mark.parametrize("value, direction", [(0.9, "too high"), (0.6, "too low")])
def test_a_wrong_value_says_too_high_or_too_low_but_not_the_target(value, direction):
    target = 0.7654321
    with pytest.raises(ExerciseCheckFailed) as info:
        with exercises.check(5) as c:
            c.close(value, target, rel=0.05, what="the lookup share")
    message = str(info.value)
    assert f"the lookup share is {direction}" in message
    assert "0.765" not in message and "0.77" not in message and "76" not in message
    assert str(value) not in message  # nor the student's own number: only the direction


def test_close_uses_the_larger_of_the_two_tolerances():
    with exercises.check(1) as c:
        c.close(1.05, 1.0, rel=0.01, abs=0.1)  # fails rel alone, passes abs
        c.close(105.0, 100.0, rel=0.06, abs=0.1)  # fails abs alone, passes rel
    with pytest.raises(ExerciseCheckFailed):
        with exercises.check(1) as c:
            c.close(1.2, 1.0, rel=0.01, abs=0.1)


@pytest.mark.parametrize("value, says", [
    (None, "should be a number, got NoneType"),
    ("0.8", None),  # a numeric string converts: no failure
    ([1, 2], "should be a number, got list"),
    (float("nan"), "is NaN"),
])
def test_close_with_no_number_or_nan(value, says):
    if says is None:
        with exercises.check(1) as c:
            c.close(value, 0.8, abs=0.01)
        return
    with pytest.raises(ExerciseCheckFailed, match=says):
        with exercises.check(1) as c:
            c.close(value, 0.8, abs=0.01, what="the MSE")


def test_a_check_with_no_condition_fails():
    with pytest.raises(ExerciseCheckFailed, match="the check ran no condition"):
        with exercises.check(6):
            pass


@pytest.mark.parametrize("kwargs", [dict(), dict(rel=None, abs=None)])
def test_close_without_a_tolerance_is_a_value_error(kwargs):
    with pytest.raises(ValueError, match="tolerance"):
        with exercises.check(1) as c:
            c.close(1.0, 1.0, **kwargs)


@pytest.mark.parametrize("hint", ["", None, 3])
def test_that_without_a_hint_is_a_value_error(hint):
    with pytest.raises(ValueError, match="hint"):
        with exercises.check(1) as c:
            c.that(True, hint)


def test_other_errors_in_a_check_are_not_hidden():
    with pytest.raises(ZeroDivisionError):
        with exercises.check(1) as c:
            c.that(1 / 0 > 0, "never reached")


@pytest.mark.parametrize("kwargs", [dict(rel=-0.1), dict(abs=-1.0), dict(rel=float("nan")),
                                    dict(abs=float("inf")), dict(rel="5%"), dict(abs=True)])
def test_bad_tolerances_are_a_value_error(kwargs):
    with pytest.raises(ValueError, match="must be a finite number >= 0"):
        with exercises.check(1) as c:
            c.close(1.0, 1.0, **kwargs)
