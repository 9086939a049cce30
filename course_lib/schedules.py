"""Learning-rate schedules for ``torch.optim.lr_scheduler.LambdaLR``: every course schedule.

Each is a function of the step that returns the factor of the optimizer's rate; ``LambdaLR``
calls it with 0 when it is built and with 1, 2, ... after each ``scheduler.step()``.

==================================  ================================================  ==========
schedule                            shape                                             chapters
==================================  ================================================  ==========
``warmup_constant(w)``              a line up to 1 over ``w`` steps, then 1            5, 7
``warmup_cosine(w, T, f=0.1)``      the line up to 1, then a cosine from 1 down to     7, 10, 11
                                    ``f`` over steps ``w`` .. ``T``
``cosine_capped_by_warmup(w, T)``   a cosine from 1 at step 0 to 0 at step ``T``,      5
                                    capped by the line (the lower of the two)
``noam_lambda(d_model, w)``         the Transformer paper's: the line, then            9
                                    ``1 / sqrt(step)`` (below)
==================================  ================================================  ==========

Older modules still answer to the names they gave these: ``gpt.warmup_cosine``,
``lm.constant_after_warmup``, ``timeseries.warmup_constant`` and ``timeseries.warmup_cosine``
(which is ``cosine_capped_by_warmup``: its cosine starts at step 0, not after the warm-up).

The Transformer paper's schedule ("Noam", after one of its authors) warms the learning rate
up linearly for ``warmup_steps`` steps, then lets it decay like ``1 / sqrt(step)``:

    lr(step) = factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)

The two branches meet at ``step = warmup_steps``, where the rate peaks at
``factor * (d_model * warmup_steps)**-0.5``. Use it with an optimizer whose ``lr`` is 1.0,
so that the value returned here *is* the learning rate::

    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = LambdaLR(optimizer, noam_lambda(d_model=256, warmup_steps=4000))
    ...  # after every optimizer.step(): scheduler.step()
"""

from __future__ import annotations

import math
import numbers

from .checks import positive_int, positive_number


# --------------------------------------------------------------------------- warm-up, then ...
def warmup_constant(warmup_steps: int):
    """``LambdaLR`` factor: linear warm-up to 1 over ``warmup_steps``, then constant.

    With a constant rate a checkpoint after k steps is the model a k-step run would give, so
    one run yields a whole curve of (compute, loss) points; and early stopping, not the
    schedule, ends a run. ``warmup_steps=0``: 1 from the first step.
    """
    if not isinstance(warmup_steps, int) or warmup_steps < 0:
        raise ValueError(f"warmup_steps must be an int >= 0, got {warmup_steps!r}")
    return lambda step: min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0


def warmup_cosine(warmup_steps: int, total_steps: int, final_fraction: float = 0.1):
    """``LambdaLR`` factor: linear warm-up to 1, then a cosine down to ``final_fraction``."""
    if warmup_steps < 0 or total_steps < 1 or warmup_steps >= total_steps:
        raise ValueError(
            f"need 0 <= warmup_steps < total_steps, got {warmup_steps} and {total_steps}"
        )

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


def cosine_capped_by_warmup(warmup_steps: int, total_steps: int):
    """``LambdaLR`` factor: a cosine that falls from 1 at step 0 to 0 at ``total_steps``,
    capped by a linear warm-up over ``warmup_steps`` (the lower of the two at each step).

    Unlike ``warmup_cosine`` the cosine does not wait for the warm-up to end, and it reaches 0.
    """
    if warmup_steps < 1 or total_steps < 1:
        raise ValueError(f"warmup_steps and total_steps must be >= 1, got {warmup_steps} and "
                         f"{total_steps}")

    def factor(step):
        return min((step + 1) / warmup_steps,
                   0.5 * (1 + math.cos(math.pi * min(step, total_steps) / total_steps)))
    return factor


# --------------------------------------------------------------------------- Noam
class NoamLambda:
    """The function of the step that ``noam_lambda`` returns (a class, so it pickles and prints).

    Steps are counted from 1. ``LambdaLR`` calls it once with 0 when it is built; step 0 is
    treated as step 1, so nothing is ever divided by zero and the first update already gets
    a small positive learning rate (the first two updates therefore share the rate of step 1).
    """

    def __init__(self, d_model: int, warmup_steps: int, factor: float = 1.0):
        positive_int("d_model", d_model)
        positive_int("warmup_steps", warmup_steps)
        positive_number("factor", factor)
        self.d_model, self.warmup_steps, self.factor = d_model, warmup_steps, float(factor)

    def __call__(self, step: int) -> float:
        if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
            raise ValueError(f"step must be a non-negative int, got {step!r}")
        step = max(int(step), 1)
        return self.factor * self.d_model**-0.5 * min(step**-0.5, step * self.warmup_steps**-1.5)

    @property
    def peak_lr(self) -> float:
        """The largest value, reached at ``step == warmup_steps``."""
        return self(self.warmup_steps)

    def __repr__(self) -> str:
        return (f"noam_lambda(d_model={self.d_model}, warmup_steps={self.warmup_steps}, "
                f"factor={self.factor})")


def noam_lambda(d_model: int, warmup_steps: int, factor: float = 1.0) -> NoamLambda:
    """The Noam schedule as a function of the step, for ``LambdaLR`` (optimizer lr 1.0):
    ``factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)``."""
    return NoamLambda(d_model, warmup_steps, factor)
