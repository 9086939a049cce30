"""Checks that tell a student whether an exercise answer is right, without giving it away.

Each checkable exercise has a cell after its solution, tagged ``check``, whose first line
is ``# Check N``. The student edition keeps it (only the solution is emptied), so a student
who writes an answer runs the check and reads what is right or what to look at:

    # Check 1
    with exercises.check(1) as c:
        c.that(untied_total - params_total == V * d + V,
               "untying adds a second V x d matrix and V biases: recount the head")
        c.close(share_untied, 0.765, rel=0.05, what="the lookup share")

- A name the answer should define and does not (the student has not run their cell yet)
  fails with "Exercise 1 is not answered yet: name 'untied_total' is not defined".
- A condition that does not hold fails with the exercise number and the hint, never with
  the expected value: the message says what to look at.
- When every condition holds, the check prints how many passed.

A failed check raises ``ExerciseCheckFailed`` (an ``AssertionError``), so "Run all" stops
there, as it should, and a test can tell that the empty student edition fails every check.
"""

from __future__ import annotations

import math
from contextlib import contextmanager


class ExerciseCheckFailed(AssertionError):
    """An exercise's answer is missing or does not pass its check."""


class _Checker:
    def __init__(self, number):
        self.number, self.passed = number, 0

    def _fail(self, hint):
        raise ExerciseCheckFailed(f"Exercise {self.number}: not yet. {hint}")

    def that(self, condition, hint: str):
        """Pass when ``condition`` is true; otherwise fail with ``hint`` (what to look at)."""
        if not isinstance(hint, str) or not hint:
            raise ValueError("give a hint: a sentence that says what to look at")
        if not bool(condition):
            self._fail(hint)
        self.passed += 1

    def close(self, value, target, *, rel: float | None = None, abs: float | None = None,
              what: str = "the value"):
        """Pass when ``value`` is within ``rel`` (relative) or ``abs`` of ``target``.

        The hint names ``what`` and says whether the answer is too high or too low, not by
        how much, so the check does not print the answer.
        """
        if rel is None and abs is None:
            raise ValueError("close() needs a tolerance: rel=... or abs=...")
        for name, tol in (("rel", rel), ("abs", abs)):
            if tol is not None and not (isinstance(tol, (int, float)) and not
                                        isinstance(tol, bool) and math.isfinite(tol)
                                        and tol >= 0):
                raise ValueError(f"close(): {name} must be a finite number >= 0, got {tol!r}")
        try:
            value = float(value)
        except (TypeError, ValueError):
            self._fail(f"{what} should be a number, got {type(value).__name__}")
        if math.isnan(value):
            self._fail(f"{what} is NaN: look for a division by zero or a log of 0")
        tol = max(rel * math.fabs(target) if rel is not None else 0.0,
                  abs if abs is not None else 0.0)
        if math.fabs(value - target) > tol:
            direction = "too high" if value > target else "too low"
            self._fail(f"{what} is {direction}.")
        self.passed += 1


@contextmanager
def check(number):
    """``with check(N) as c: c.that(...); c.close(...)``: see the module docstring."""
    checker = _Checker(number)
    try:
        yield checker
    except NameError as error:
        raise ExerciseCheckFailed(
            f"Exercise {number} is not answered yet: {error}. Write your solution in the "
            "cell above and run it, then run this check again.") from None
    if checker.passed == 0:
        raise ExerciseCheckFailed(f"Exercise {number}: the check ran no condition")
    print(f"Exercise {number}: all {checker.passed} checks pass.")
