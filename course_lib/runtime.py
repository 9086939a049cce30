"""Where the code runs: seeds, device, threads, progress bars and the course's folders.

Every notebook starts with ``device = runtime.setup(seed=SEED)``: it fixes the seeds,
picks the fastest device present (CUDA, then Apple MPS, then the CPU), chooses how many
CPU threads PyTorch may use and prints all three, so a reader knows what produced the
numbers below.

Environment variables (all optional):

``COURSE_DEVICE``    force ``cpu``, ``cuda`` or ``mps`` (``auto`` = choose)
``COURSE_THREADS``   number of CPU threads for PyTorch
``COURSE_DATA_DIR``  folder holding the datasets (default: ``data/`` next to ``course_lib``)
``COURSE_RESULTS_DIR`` folder for results cards (default: ``book/results/``)
``COURSE_PROGRESS``  ``auto`` (widgets in Jupyter), ``text`` (one line per bar) or ``off``
``COURSE_PRECISION`` ``auto``, ``fp32``, ``bf16`` or ``fp16`` for notebooks that train with
                     mixed precision (``setup(precision="auto")``; see ``course_lib.precision``)
``COURSE_PROFILE``   read by ``setup(precision="auto")`` only when a notebook does not pass
                     its ``profile=`` (chapters 7, 9 and 11 today): ``smoke`` skips the probe
``COURSE_CACHE_DIR`` folder for per-machine measurements such as the bf16 probe (``cache_dir``,
                     from ``course_lib.machine``; default:
                     ``$XDG_CACHE_HOME/course_lib``, else ``~/.cache/course_lib``)
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import numpy as np
import torch

from . import precision as _precision
from .machine import cache_dir  # noqa: F401 (re-exported: runtime.cache_dir)

DEVICES = ("auto", "cpu", "cuda", "mps")


# --------------------------------------------------------------------------- paths
def repo_root() -> Path:
    """The folder that holds ``course_lib/`` (the repository root in a checkout)."""
    return Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """Folder with the datasets: ``$COURSE_DATA_DIR`` if set, else ``<repo>/data``."""
    env = os.environ.get("COURSE_DATA_DIR")
    return Path(env).expanduser() if env else repo_root() / "data"


def results_dir() -> Path:
    """Folder for results cards: ``$COURSE_RESULTS_DIR`` if set, else ``<repo>/book/results``."""
    env = os.environ.get("COURSE_RESULTS_DIR")
    return Path(env).expanduser() if env else repo_root() / "book" / "results"


def artifacts_dir() -> Path:
    """Folder (not committed) where a chapter leaves a trained model for a later chapter."""
    env = os.environ.get("COURSE_ARTIFACTS_DIR")
    path = Path(env).expanduser() if env else repo_root() / "artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path


# --------------------------------------------------------------------------- seeds
def set_seed(seed: int) -> None:
    """Seed Python, NumPy and PyTorch (CPU and every GPU) with one number."""
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    seed = int(seed)  # random.seed rejects numpy integers
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds CUDA and MPS


# --------------------------------------------------------------------------- device
def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def get_device(name: str | None = None) -> torch.device:
    """Pick a device: ``name`` if given, else ``$COURSE_DEVICE``, else the best one present.

    ``"auto"`` means CUDA if present, then Apple MPS, then the CPU. Asking for a device
    that is not present raises a ``ValueError`` that says what is available.
    """
    if name is None:
        name = os.environ.get("COURSE_DEVICE", "auto")
    if not isinstance(name, str):
        raise TypeError(f"device name must be a string such as 'cpu', got {type(name).__name__}")
    key = name.strip().lower()
    if key not in DEVICES:
        raise ValueError(f"unknown device name {name!r}: use one of {', '.join(DEVICES)}")
    if key == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    if key == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "device 'cuda' was asked for but no CUDA GPU is present; use 'auto' or 'cpu'"
        )
    if key == "mps" and not _mps_available():
        raise ValueError(
            "device 'mps' was asked for but Apple MPS is not available; use 'auto' or 'cpu'"
        )
    return torch.device(key)


class DeviceMismatchError(ValueError):
    """An input tensor is on another device than the model it is given to."""


def model_device(model: torch.nn.Module) -> torch.device | None:
    """The device of ``model``'s first parameter (or buffer); None for a model with neither."""
    for tensor in model.parameters():
        return tensor.device
    for tensor in model.buffers():
        return tensor.device
    return None


def check_device(model: torch.nn.Module, where: str, **inputs) -> None:
    """Raise ``DeviceMismatchError`` when an input tensor is not on ``model``'s device.

    ``check_device(model, "GPT", tokens=tokens)`` names the model, the input and both devices
    and says how to fix it, before PyTorch's own message (``Expected all tensors to be on the
    same device``). Inputs that are None or not tensors are skipped.
    """
    expected = model_device(model)
    if expected is None:
        return
    for name, tensor in inputs.items():
        if isinstance(tensor, torch.Tensor) and tensor.device != expected:
            raise DeviceMismatchError(
                f"{where}: {name} is on {tensor.device} but the model is on {expected}. "
                f"Move the input to the model's device, `{name} = {name}.to(device)` "
                f"(device = next(model.parameters()).device), or the model to the input's, "
                f"`model.to('{tensor.device}')`.")


# --------------------------------------------------------------------------- threads
def choose_threads() -> int:
    """How many CPU threads PyTorch should use.

    ``$COURSE_THREADS`` wins. Otherwise all cores, minus those already busy (the 1-minute
    load average): on a small machine two processes that each take every core run many
    times slower than two that share them.
    """
    env = os.environ.get("COURSE_THREADS")
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"COURSE_THREADS must be a positive integer, got {env!r}") from None
        if n < 1:
            raise ValueError(f"COURSE_THREADS must be a positive integer, got {env!r}")
        return n
    cores = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows has no load average
        busy = 0.0
    return max(1, cores - int(round(busy)))


def set_threads(n: int | None = None) -> int:
    """Set PyTorch's CPU thread count (``choose_threads()`` when ``n`` is None)."""
    n = choose_threads() if n is None else int(n)
    if n < 1:
        raise ValueError(f"number of threads must be at least 1, got {n}")
    torch.set_num_threads(n)
    return n


def setup(seed: int = 0, device: str | None = None, threads: int | None = None,
          precision: str | None = "fp32", probe_step: dict | None = None,
          profile: str | None = None) -> torch.device:
    """Seed everything, choose device, threads and precision, print them, return the device.

    ``precision`` is what the notebook trains with: ``"fp32"`` (the default; None means the
    same: no autocast) or ``"auto"`` for a notebook that trains under
    ``course_lib.precision``'s autocast, which then picks bf16, fp16 or fp32 for the device
    (``$COURSE_PRECISION`` overrides ``auto``); on a CPU that choice comes from a measurement,
    printed on a second line:
    ``precision: fp32 (probe: bf16 0.71x the speed of fp32 on AMD EPYC, 2 threads; cached)``.
    ``probe_step`` (with ``"auto"``): the sizes of the training step the probe times, the
    notebook's own (``course_lib.precision.probe_step`` lists them), since bf16 can pay for a
    large step and not for a small one. ``profile`` (with ``"auto"``): the notebook's
    ``PROFILE``; in ``"smoke"`` the probe is not run. None, for notebooks that do not pass it,
    falls back to ``$COURSE_PROFILE`` (the one place the library still reads it).
    ``precision.current()`` returns the choice, and results cards record it.
    """
    dev = get_device(device)
    n = set_threads(threads)
    if profile is None and precision == "auto":  # chapters 7, 9 and 11 do not pass it (yet)
        profile = os.environ.get("COURSE_PROFILE", "full")
    name = "fp32" if precision is None else None if precision == "auto" else precision
    mp = _precision.choose(dev, name, probe_step=probe_step, profile=profile or "full")
    _precision.set_current(mp)
    set_seed(seed)  # last: nothing chosen above can move the random state a notebook starts from
    print(f"torch {torch.__version__} | device: {dev.type} | CPU threads: {n} | "
          f"precision: {mp.name} | seed: {seed}")
    if mp.probe is not None and mp.probe.source in ("measured", "cached", "skipped", "failed"):
        print(f"precision: {mp.name} ({mp.probe})")
    return dev


def in_colab() -> bool:
    """True inside Google Colab."""
    return "google.colab" in sys.modules


# --------------------------------------------------------------------------- progress
def progress(iterable=None, **kwargs):
    """A tqdm progress bar that suits where the code runs.

    In JupyterLab or Colab it is the usual widget bar. When a notebook is executed in batch
    (papermill, nbval: ``COURSE_PROGRESS=text``) the bar is plain text that prints only its
    final state, so the stored notebook shows one clean line per bar. ``COURSE_PROGRESS=off``
    hides bars.
    """
    mode = os.environ.get("COURSE_PROGRESS", "auto").lower()
    if mode == "off":
        kwargs["disable"] = True
    if mode in ("text", "off"):
        from tqdm.std import tqdm as text_tqdm

        kwargs.setdefault("file", sys.stdout)
        kwargs.setdefault("mininterval", float("inf"))  # no intermediate redraws
        kwargs.setdefault("ascii", True)
        kwargs.setdefault("dynamic_ncols", False)
        kwargs.setdefault("ncols", 90)
        return (
            _FinalLineTqdm(iterable, **kwargs) if mode == "text" else text_tqdm(iterable, **kwargs)
        )
    from tqdm.auto import tqdm as auto_tqdm

    return auto_tqdm(iterable, **kwargs)


def _final_line_class():
    from tqdm.std import tqdm as text_tqdm

    class FinalLineTqdm(text_tqdm):
        """Prints nothing while running and one line when closed."""

        def display(self, msg=None, pos=None):  # noqa: D401 - tqdm hook
            return True  # draw nothing while running

        def close(self):
            if not self.disable:
                self.fp.write(self.__str__() + "\n")
                self.fp.flush()
                self.disable = True  # tqdm's own close would print again
            return super().close()

    return FinalLineTqdm


def _FinalLineTqdm(iterable=None, **kwargs):  # noqa: N802 - factory that reads like a class
    return _final_line_class()(iterable, **kwargs)
