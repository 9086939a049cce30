"""What a computation costs: its run time, the memory it allocates, and how fast both grow.

    seconds = cost.time_call(lambda: attention.scaled_dot_product_attention(q, k, v))
    peak = cost.peak_cpu_memory(lambda: attention.scaled_dot_product_attention(q, k, v))
    cost.loglog_slope(lengths, times)   # about 2 for something that grows like L^2

``time_call`` uses ``torch.utils.benchmark`` (warm-up, repeats, CUDA synchronisation).
``peak_cpu_memory`` runs the function once under PyTorch's profiler and returns the largest
amount of CPU memory that PyTorch held at once above the level at the start.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable

import numpy as np
import torch
from torch.utils import benchmark


def _check_callable(fn) -> None:
    if not callable(fn):
        raise TypeError(
            f"fn must be a function of no arguments (e.g. a lambda), got {type(fn).__name__}"
        )


def time_call(fn: Callable[[], object], min_run_time: float = 0.5,
              num_threads: int | None = None) -> float:
    """Median seconds per call of ``fn()``, measured with ``torch.utils.benchmark.Timer``.

    The timer repeats the call until ``min_run_time`` seconds have passed and synchronises
    CUDA, so GPU timings are real. ``num_threads`` defaults to PyTorch's current setting.
    """
    _check_callable(fn)
    if not (isinstance(min_run_time, (int, float)) and min_run_time > 0):
        raise ValueError(f"min_run_time must be a positive number of seconds, got {min_run_time!r}")
    threads = torch.get_num_threads() if num_threads is None else int(num_threads)
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
    return float(timer.blocked_autorange(min_run_time=min_run_time).median)


@contextlib.contextmanager
def _quiet_stderr():
    """Silence file descriptor 2: the profiler prints start/stop notes from C++ there."""
    try:
        saved = os.dup(2)
    except OSError:  # no usable stderr (some embedded interpreters): nothing to silence
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_cpu_memory(fn: Callable[[], object]) -> int:
    """Peak CPU memory (bytes) that PyTorch allocated while running ``fn()`` once.

    Measured with the profiler's memory tracking: every operator's net allocation, taken in
    the order the operators start; the peak is the largest running total. Tensors that
    ``fn`` returns count (they are alive at the end). Only PyTorch's CPU allocations are
    seen, not Python objects and not GPU memory.
    """
    _check_callable(fn)
    with _quiet_stderr():
        with torch.autograd.profiler.profile(profile_memory=True, use_kineto=False) as prof:
            result = fn()
    events = sorted(prof.function_events, key=lambda e: e.time_range.start)
    current = peak = 0
    for event in events:
        current += event.self_cpu_memory_usage
        peak = max(peak, current)
    del result
    return int(peak)


def loglog_slope(x, y) -> float:
    """Least-squares slope of log(y) against log(x): the exponent b in y ~ a * x^b."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(
            f"x and y must be 1-D and of equal length, got shapes {x.shape} and {y.shape}"
        )
    if len(x) < 2:
        raise ValueError("a slope needs at least two points")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))) or np.any(x <= 0) or np.any(y <= 0):
        raise ValueError("x and y must be positive and finite to take logarithms")
    if np.unique(x).size < 2:
        raise ValueError("x must take at least two different values")
    slope = np.polyfit(np.log(x), np.log(y), 1)[0]
    return float(slope) if math.isfinite(slope) else float("nan")
