"""Unit tests of course_lib.cost: timing, peak memory, log-log slopes."""

import numpy as np
import pytest
import torch

from course_lib import attention, cost
from course_lib.cost import loglog_slope, peak_cpu_memory, time_call

MB = 1_000_000


# --------------------------------------------------------------------------- time_call
def test_time_call_returns_positive_seconds():
    x = torch.randn(64, 64)
    t = time_call(lambda: x @ x, min_run_time=0.05)
    assert isinstance(t, float) and 0 < t < 1


def test_time_call_sees_more_work():
    small, large = torch.randn(32, 32), torch.randn(384, 384)
    assert time_call(lambda: large @ large, 0.05) > time_call(lambda: small @ small, 0.05)


@pytest.mark.parametrize("bad", [None, 3, "x @ x"])
def test_time_call_rejects_non_callables(bad):
    with pytest.raises(TypeError, match="function of no arguments"):
        time_call(bad)


def test_time_call_rejects_bad_run_time():
    with pytest.raises(ValueError, match="min_run_time"):
        time_call(lambda: None, min_run_time=0)


# --------------------------------------------------------------------------- peak_cpu_memory
def test_peak_memory_of_one_tensor():
    peak = peak_cpu_memory(lambda: torch.empty(1_000_000))  # float32: 4 MB
    assert 4 * MB <= peak < 4.2 * MB


def test_peak_memory_counts_tensors_alive_at_once_not_the_total():
    def sequential():
        a = torch.empty(1_000_000)
        del a
        b = torch.empty(1_000_000)
        del b

    def together():
        a = torch.empty(1_000_000)
        b = torch.empty(1_000_000)
        return a, b

    assert peak_cpu_memory(sequential) < 4.2 * MB
    assert peak_cpu_memory(together) >= 8 * MB


def test_peak_memory_of_attention_grows_with_the_score_matrix():
    q = torch.randn(1, 2, 512, 16)
    explicit = peak_cpu_memory(lambda: attention.scaled_dot_product_attention(q, q, q))
    score_bytes = 2 * 512 * 512 * 4
    assert explicit >= score_bytes  # the [B, h, L, L] weights are returned, so they are alive
    fused = peak_cpu_memory(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q))
    assert fused < explicit


def test_peak_memory_rejects_non_callables():
    with pytest.raises(TypeError):
        peak_cpu_memory(torch.empty(3))


def test_peak_memory_passes_errors_through():
    def boom():
        raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        peak_cpu_memory(boom)


# --------------------------------------------------------------------------- peak_rss_growth
needs_clear_refs = pytest.mark.skipif(cost.peak_rss_growth(lambda: None) is None,
                                      reason="no /proc/self/clear_refs (Linux only)")


@needs_clear_refs
def test_peak_rss_sees_memory_freed_before_the_call_returns():
    def transient():  # 200 MB touched, then freed: nothing survives the call
        x = torch.ones(50_000_000)
        return float(x[-1])

    grown = [cost.peak_rss_growth(transient) for _ in range(3)]
    assert max(grown) >= 150 * MB, grown  # the profiler's netting would report about 0
    assert cost.peak_rss_growth(lambda: None) < 50 * MB


@needs_clear_refs
def test_peak_rss_sees_the_math_path_build_the_score_matrix():
    q = torch.randn(4, 4096, 16)  # 3-D: F.sdpa takes the math path, [4, 4096, 4096] scores
    grown = [cost.peak_rss_growth(
        lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q)) for _ in range(3)]
    assert max(grown) >= 4 * 4096 * 4096 * 4, grown  # at least one score matrix (268 MB)


def test_peak_rss_without_the_reset_is_none(tmp_path):
    missing = tmp_path / "no_such_dir" / "clear_refs"
    assert cost.peak_rss_growth(lambda: None, clear_refs=str(missing)) is None
    with pytest.raises(TypeError):
        cost.peak_rss_growth(torch.empty(3))


# --------------------------------------------------------------------------- loglog_slope
def test_loglog_slope_recovers_the_exponent():
    x = np.array([64, 128, 256, 512, 1024])
    assert loglog_slope(x, 3.0 * x**2) == pytest.approx(2.0)
    assert loglog_slope(x, 0.5 * x) == pytest.approx(1.0)
    assert loglog_slope(x.tolist(), np.sqrt(x).tolist()) == pytest.approx(0.5)


@pytest.mark.parametrize("x, y, match", [
    ([1, 2], [1, 2, 3], "equal length"),
    ([1], [1], "two points"),
    ([1, 2], [0, 1], "positive"),
    ([1, -2], [1, 1], "positive"),
    ([2, 2], [1, 3], "different values"),
])
def test_loglog_slope_rejects_bad_input(x, y, match):
    with pytest.raises(ValueError, match=match):
        loglog_slope(x, y)


# --------------------------------------------------------------------------- interleaved timing
def test_time_interleaved_measures_every_function_every_round():
    from course_lib.cost import summarize_times, time_interleaved

    small, large = torch.randn(16, 16), torch.randn(256, 256)
    times = time_interleaved({"small": lambda: small @ small, "large": lambda: large @ large},
                             repeats=4, min_time=0.01)
    assert list(times.columns) == ["name", "round", "seconds"]
    assert list(times["name"]) == ["small", "large"] * 4  # interleaved, round by round
    assert (times["seconds"] > 0).all()
    summary = summarize_times(times)
    assert list(summary.index) == ["small", "large"]
    assert (summary["rounds"] == 4).all()
    assert (summary["q25"] <= summary["median"]).all()
    assert (summary["median"] <= summary["q75"]).all()
    assert summary.loc["large", "median"] > summary.loc["small", "median"]


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(fns={}), TypeError, "non-empty dict"),
    (dict(fns={"a": 3}), TypeError, "function of no arguments"),
    (dict(fns={"a": lambda: None}, repeats=0), ValueError, "repeats"),
    (dict(fns={"a": lambda: None}, min_time=0), ValueError, "min_time"),
    (dict(fns={"a": lambda: None}, warmup=-1), ValueError, "warmup"),
])
def test_time_interleaved_bad_inputs(kwargs, error, message):
    from course_lib.cost import time_interleaved

    with pytest.raises(error, match=message):
        time_interleaved(**kwargs)


def test_summarize_times_needs_the_columns():
    import pandas as pd

    from course_lib.cost import summarize_times

    with pytest.raises(ValueError, match="seconds"):
        summarize_times(pd.DataFrame({"name": ["a"]}))


def test_cpu_model_reads_cpuinfo(tmp_path):
    from course_lib.cost import cpu_model

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Example CPU 9000\nflags\t: fpu\n")
    assert cpu_model(str(info)) == "Example CPU 9000"
    assert isinstance(cpu_model(str(tmp_path / "missing")), str)  # falls back, never raises
    assert cpu_model()  # this machine: some name


def test_cache_bytes_reads_sysfs(tmp_path):
    from course_lib.cost import cache_bytes

    for name, level, kind, size in [("index0", 1, "Data", "32K"), ("index1", 1, "Instruction",
                                     "64K"), ("index2", 2, "Unified", "512K"),
                                    ("index3", 3, "Unified", "8192K")]:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "type").write_text(f"{kind}\n")
        (folder / "size").write_text(f"{size}\n")
    assert cache_bytes(1, str(tmp_path)) == 32 * 1024  # the data cache, not the instruction one
    assert cache_bytes(3, str(tmp_path)) == 8 * 1024**2
    assert cache_bytes(4, str(tmp_path)) is None
    assert cache_bytes(3, str(tmp_path / "missing")) is None


def test_time_interleaved_with_a_progress_bar(monkeypatch):
    from course_lib.cost import time_interleaved

    monkeypatch.setenv("COURSE_PROGRESS", "off")
    times = time_interleaved({"a": lambda: None}, repeats=3, min_time=0.001, progress="timing")
    assert len(times) == 3


def test_summarize_times_takes_each_names_median_iqr():
    import pandas as pd

    from course_lib import stats
    from course_lib.cost import summarize_times

    a, b = [0.30, 0.10, 0.20, 0.90], [2.0, 1.0, 3.0]
    times = pd.DataFrame({"name": ["b"] * 3 + ["a"] * 4, "seconds": b + a})
    summary = summarize_times(times)
    assert list(summary.index) == ["b", "a"]  # the order of the table, not sorted
    assert list(summary.columns) == ["median", "q25", "q75", "spread", "rounds"]
    for name, values in (("a", a), ("b", b)):
        q = stats.median_iqr(values, method="pandas-groupby")
        row = summary.loc[name]
        assert (row["q25"], row["median"], row["q75"]) == (q.q25, q.median, q.q75)
        assert row["spread"] == q.spread and row["rounds"] == len(values)
    assert summary.loc["a", "median"] == pytest.approx(0.25)
    assert summary.loc["a", "spread"] == pytest.approx((0.45 - 0.175) / 0.25)


def test_summarize_times_names_the_function_with_a_missing_time():
    import pandas as pd

    from course_lib.cost import summarize_times

    times = pd.DataFrame({"name": ["ok", "broken"], "seconds": [0.1, float("nan")]})
    with pytest.raises(ValueError, match="seconds of 'broken'.*drop missing"):
        summarize_times(times)
