"""Unit tests of course_lib.runtime: seeds, devices, threads, paths and progress bars."""

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from course_lib import runtime

ENV = (
    "COURSE_DEVICE",
    "COURSE_THREADS",
    "COURSE_DATA_DIR",
    "COURSE_RESULTS_DIR",
    "COURSE_ARTIFACTS_DIR",
    "COURSE_PROGRESS",
    "COURSE_CACHE_DIR",
    "XDG_CACHE_HOME",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(runtime, "_mps_available", lambda: False)


# --------------------------------------------------------------------------- seeds
def draw():
    return random.random(), np.random.rand(), torch.rand(3).tolist()


def test_set_seed_reproduces_every_generator():
    runtime.set_seed(123)
    first = draw()
    runtime.set_seed(123)
    assert draw() == first
    runtime.set_seed(124)
    second = draw()
    assert all(a != b for a, b in zip(first, second, strict=True))


def test_set_seed_accepts_numpy_ints():
    runtime.set_seed(np.int64(5))
    a = torch.rand(1)
    runtime.set_seed(5)
    assert torch.equal(a, torch.rand(1))


@pytest.mark.parametrize("seed", ["0", 1.0, True, None])
def test_set_seed_rejects_non_ints(seed):
    with pytest.raises(TypeError, match=f"seed must be an int, got {type(seed).__name__}"):
        runtime.set_seed(seed)


# --------------------------------------------------------------------------- device
@pytest.mark.skipif(
    torch.cuda.is_available() or runtime._mps_available(), reason="this machine has a GPU"
)
def test_auto_is_cpu_on_this_machine():
    assert runtime.get_device() == torch.device("cpu")
    assert runtime.get_device("auto") == torch.device("cpu")


def test_auto_without_gpu_is_cpu(no_gpu):
    assert runtime.get_device("auto") == torch.device("cpu")


def test_auto_prefers_cuda_then_mps(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(runtime, "_mps_available", lambda: True)
    assert runtime.get_device("auto").type == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runtime.get_device("auto").type == "mps"


@pytest.mark.parametrize("name", ["cpu", "CPU", " cpu "])
def test_cpu_is_always_available(name, no_gpu):
    assert runtime.get_device(name) == torch.device("cpu")


@pytest.mark.parametrize("name", ["gpu", "cuda:0", "tpu", ""])
def test_unknown_device_name(name):
    with pytest.raises(ValueError, match=f"unknown device name {name!r}.*auto, cpu, cuda, mps"):
        runtime.get_device(name)


def test_device_name_must_be_a_string():
    with pytest.raises(TypeError, match="device name must be a string.*int"):
        runtime.get_device(0)


def test_absent_cuda_or_mps_raises(no_gpu):
    with pytest.raises(ValueError, match="'cuda' was asked for but no CUDA GPU is present"):
        runtime.get_device("cuda")
    with pytest.raises(ValueError, match="'mps' was asked for but Apple MPS is not available"):
        runtime.get_device("mps")


def test_present_cuda_is_returned(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert runtime.get_device("cuda") == torch.device("cuda")


def test_course_device_environment_variable(monkeypatch, no_gpu):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert runtime.get_device() == torch.device("cpu")
    monkeypatch.setenv("COURSE_DEVICE", "cuda")
    with pytest.raises(ValueError, match="cuda"):
        runtime.get_device()
    monkeypatch.setenv("COURSE_DEVICE", "gpu")
    with pytest.raises(ValueError, match="unknown device name 'gpu'"):
        runtime.get_device()
    assert runtime.get_device("cpu").type == "cpu"  # an explicit name wins over the variable


# --------------------------------------------------------------------------- threads
def test_choose_threads_honours_course_threads(monkeypatch):
    monkeypatch.setenv("COURSE_THREADS", "3")
    assert runtime.choose_threads() == 3


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5", "two"])
def test_choose_threads_rejects_junk(monkeypatch, value):
    monkeypatch.setenv("COURSE_THREADS", value)
    message = f"COURSE_THREADS must be a positive integer, got '{value}'"
    with pytest.raises(ValueError, match=message):
        runtime.choose_threads()


def test_choose_threads_default_is_between_one_and_cores(monkeypatch):
    n = runtime.choose_threads()
    assert 1 <= n <= (runtime.os.cpu_count() or 1)
    monkeypatch.setattr(runtime.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(runtime.os, "getloadavg", lambda: (2.6, 0.0, 0.0))
    assert runtime.choose_threads() == 5  # 8 cores, about 3 busy
    monkeypatch.setattr(runtime.os, "getloadavg", lambda: (30.0, 0.0, 0.0))
    assert runtime.choose_threads() == 1


def test_set_threads(monkeypatch):
    assert runtime.set_threads(1) == 1 and torch.get_num_threads() == 1
    monkeypatch.setenv("COURSE_THREADS", "2")
    assert runtime.set_threads() == 2 and torch.get_num_threads() == 2
    with pytest.raises(ValueError, match="number of threads must be at least 1, got 0"):
        runtime.set_threads(0)


def test_setup_prints_what_it_chose(monkeypatch, capsys, no_gpu):
    dev = runtime.setup(seed=7, device="cpu", threads=1)
    assert dev == torch.device("cpu")
    out = capsys.readouterr().out
    assert out == (
        f"torch {torch.__version__} | device: cpu | CPU threads: 1 | precision: fp32 | seed: 7\n")
    a = torch.rand(2)
    runtime.setup(seed=7, device="cpu", threads=1)
    assert torch.equal(a, torch.rand(2))


def test_in_colab():
    assert runtime.in_colab() is False


# --------------------------------------------------------------------------- paths
def test_default_paths():
    root = runtime.repo_root()
    assert (root / "course_lib" / "runtime.py").is_file()
    assert runtime.data_dir() == root / "data"
    assert runtime.results_dir() == root / "book" / "results"


def test_paths_honour_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "d"))
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path / "r"))
    monkeypatch.setenv("COURSE_ARTIFACTS_DIR", str(tmp_path / "a"))
    assert runtime.data_dir() == tmp_path / "d"
    assert runtime.results_dir() == tmp_path / "r"
    assert runtime.artifacts_dir() == tmp_path / "a"
    assert (tmp_path / "a").is_dir()  # created on demand


def test_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert runtime.cache_dir() == tmp_path / "home" / ".cache" / "course_lib"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert runtime.cache_dir() == tmp_path / "xdg" / "course_lib"
    monkeypatch.setenv("COURSE_CACHE_DIR", "~/probe-cache")  # wins over both
    assert runtime.cache_dir() == tmp_path / "home" / "probe-cache"
    assert not (tmp_path / "home").exists(), "asking for the folder creates nothing"


def test_paths_expand_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("COURSE_DATA_DIR", "~/datasets")
    assert runtime.data_dir() == tmp_path / "datasets"
    assert isinstance(runtime.data_dir(), Path)


# --------------------------------------------------------------------------- progress
@pytest.mark.parametrize("mode", ["auto", "text", "off", None])
def test_progress_is_an_iterable_in_every_mode(monkeypatch, mode):
    if mode is not None:
        monkeypatch.setenv("COURSE_PROGRESS", mode)
    assert list(runtime.progress(range(5), desc="x")) == [0, 1, 2, 3, 4]


def test_progress_text_mode_prints_exactly_one_final_line(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_PROGRESS", "text")
    for _ in runtime.progress(range(50), desc="epochs"):
        pass
    out = capsys.readouterr().out
    lines = [line for line in out.replace("\r", "\n").split("\n") if line.strip()]
    assert len(lines) == 1
    assert lines[0].startswith("epochs: 100%") and "50/50" in lines[0]
    assert len(lines[0]) <= 90


def test_progress_text_mode_manual_bar(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_PROGRESS", "text")
    bar = runtime.progress(total=4, desc="steps")
    for _ in range(4):
        bar.update(1)
    assert capsys.readouterr().out == ""  # nothing while it runs
    bar.close()
    bar.close()  # closing twice prints nothing more
    lines = [line for line in capsys.readouterr().out.split("\n") if line.strip("\r ")]
    assert len(lines) == 1 and "4/4" in lines[0]


def test_progress_off_prints_nothing(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_PROGRESS", "off")
    assert sum(runtime.progress(range(10), desc="quiet")) == 45
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_progress_text_mode_respects_disable(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_PROGRESS", "text")
    assert list(runtime.progress(range(3), disable=True)) == [0, 1, 2]
    assert capsys.readouterr().out == ""
