"""Learning-rate schedules for ``torch.optim.lr_scheduler.LambdaLR``.

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

import numbers

from .checks import positive_int, positive_number


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
