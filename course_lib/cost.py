"""What a computation costs: its run time, the memory it allocates, and how fast both grow.

    seconds = cost.time_call(lambda: attention.scaled_dot_product_attention(q, k, v))
    peak = cost.peak_cpu_memory(lambda: attention.scaled_dot_product_attention(q, k, v))
    cost.loglog_slope(lengths, times)   # about 2 for something that grows like L^2

``time_call`` uses ``torch.utils.benchmark`` (warm-up, repeats, CUDA synchronisation).
``peak_cpu_memory`` runs the function once under PyTorch's profiler and returns the largest
amount of CPU memory that PyTorch held at once above the level at the start.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch.utils import benchmark

from .checks import positive_int
from .machine import cpu_model  # noqa: F401 (timings belong to a machine: print its name)
from .machine import quiet_stderr as _quiet_stderr  # the name chapter 2's page shows


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


def peak_cpu_memory(fn: Callable[[], object]) -> int:
    """Peak CPU memory (bytes) that PyTorch allocated while running ``fn()`` once.

    Measured with the profiler's memory tracking: every operator's net allocation,
    taken in the order the operators start; the peak is the largest running total.
    Tensors that ``fn`` returns count (they are alive at the end). Only PyTorch's CPU
    allocations are seen, not Python objects and not GPU memory. What one operator
    allocates and frees again before it returns nets out: for a fused kernel (one
    operator) this sees little more than its output; ``peak_rss_growth`` sees it all.
    """
    _check_callable(fn)
    with _quiet_stderr():
        memory = dict(profile_memory=True, use_kineto=False)
        with torch.autograd.profiler.profile(**memory) as prof:
            result = fn()
    events = sorted(prof.function_events, key=lambda e: e.time_range.start)
    current = peak = 0
    for event in events:
        current += event.self_cpu_memory_usage
        peak = max(peak, current)
    del result
    return int(peak)


CLEAR_REFS = "/proc/self/clear_refs"  # Linux: writing "5" resets the peak resident size


def peak_rss_growth(fn: Callable[[], object], clear_refs: str = CLEAR_REFS) -> int | None:
    """How far ``fn()`` raised this process's peak resident memory, in bytes (None where the
    operating system cannot say).

    Linux only: writing ``5`` to ``/proc/self/clear_refs`` resets the peak (``VmHWM`` in
    ``/proc/self/status``) to the memory resident now; the peak after ``fn()`` minus the
    resident memory before it is what ``fn`` needed on top. Every allocation counts,
    inside an operator too, which ``peak_cpu_memory`` cannot see. Coarse: memory that the
    allocator kept from earlier calls and hands out again does not show, so use it for
    large allocations (tens of MB and more) and repeat it. Returns None on other systems
    and where the reset is not allowed.
    """
    _check_callable(fn)
    try:
        with open(clear_refs, "w") as f:
            f.write("5")
        before = _status_bytes("VmRSS")
    except OSError:
        return None
    result = fn()
    peak = _status_bytes("VmHWM")
    del result
    return max(0, peak - before)


def _status_bytes(field: str) -> int:
    """A memory field of /proc/self/status (reported in kB), in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(f"/proc/self/status has no {field}")


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


# --------------------------------------------------------------------------- several at once
def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _seconds_per_call(fn, number: int) -> float:
    import time

    _sync()
    start = time.perf_counter()
    for _ in range(number):
        fn()
    _sync()
    return (time.perf_counter() - start) / number


def time_interleaved(fns, repeats: int = 7, min_time: float = 0.05, warmup: int = 1,
                     progress: str | None = None):
    """Time several functions round by round: one row per (name, round), seconds per call.

    ``fns`` maps a name to a function of no arguments. Each function is first run ``warmup``
    times and its number of calls per measurement is chosen so that one measurement lasts
    about ``min_time`` seconds. Then every round measures every function once, in turn
    (A, B, C, A, B, C, ...), so that a slow moment of a shared machine lands on all of them
    rather than on one. Summarise with ``summarize_times`` (median and spread per name).
    ``progress`` (a description) shows a progress bar over the rounds.
    Returns a DataFrame with columns ``name``, ``round``, ``seconds``.
    """
    import pandas as pd

    if not isinstance(fns, dict) or not fns:
        raise TypeError("fns must be a non-empty dict {name: function of no arguments}")
    for fn in fns.values():
        _check_callable(fn)
    positive_int("repeats", repeats)
    if not (isinstance(min_time, (int, float)) and min_time > 0):
        raise ValueError(f"min_time must be a positive number of seconds, got {min_time!r}")
    if not (isinstance(warmup, int) and warmup >= 0):
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
    numbers = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        once = _seconds_per_call(fn, 1)
        numbers[name] = max(1, int(math.ceil(min_time / max(once, 1e-9))))
    rounds = range(repeats)
    if progress:
        from .runtime import progress as bar

        rounds = bar(rounds, desc=progress)
    rows = []
    for r in rounds:
        for name, fn in fns.items():
            rows.append({"name": name, "round": r,
                         "seconds": _seconds_per_call(fn, numbers[name])})
    return pd.DataFrame(rows)


def summarize_times(times):
    """Per name of a ``time_interleaved`` table: median seconds and the spread of the rounds.

    Columns: ``median``, ``q25`` and ``q75`` (the middle half of the rounds, from
    ``stats.median_iqr``), ``spread`` (the interquartile range relative to the median) and
    ``rounds``. Rows keep the order of the names in ``times``.
    """
    import pandas as pd

    from .stats import median_iqr

    missing = {"name", "seconds"} - set(getattr(times, "columns", ()))
    if missing:
        raise ValueError(f"times needs the columns of time_interleaved; missing {sorted(missing)}")
    grouped = times.groupby("name", sort=False)["seconds"]
    rows = []
    for name, seconds in grouped:
        try:
            q = median_iqr(seconds, method="pandas-groupby")  # the rounding it always had
        except ValueError as error:
            raise ValueError(f"the seconds of {name!r}: {error}") from None
        rows.append({"median": q.median, "q25": q.q25, "q75": q.q75, "spread": q.spread,
                     "rounds": len(seconds)})
    out = pd.DataFrame(rows, index=grouped.size().index)
    out.index.name = None
    return out


def cache_bytes(level: int = 3, cpu_dir: str = "/sys/devices/system/cpu/cpu0/cache") -> int | None:
    """Size in bytes of the CPU's data (or unified) cache at ``level``, or None if unknown.

    Read from Linux's sysfs; other systems (and containers that hide it) give None. Whether
    a computation's working set fits in this cache decides whether it runs at the speed of
    the cache or of main memory.
    """
    from pathlib import Path

    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    for index in sorted(Path(cpu_dir).glob("index*")):
        try:
            if int((index / "level").read_text().strip()) != level:
                continue
            if (index / "type").read_text().strip() == "Instruction":
                continue
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        try:
            return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
        except ValueError:
            return None
    return None
