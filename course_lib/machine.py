"""The machine the numbers come from: its CPU's name, a folder for what is measured once per
machine, and a quiet stderr while PyTorch's profiler runs.

    machine.cpu_model()     # 'AMD EPYC 7763 64-Core Processor': print it next to a timing
    machine.cache_dir()     # where the bf16 probe keeps its answer (course_lib.precision)

Timings belong to a machine, so every results card records ``cpu_model()``. This module
imports nothing else from ``course_lib``: ``runtime``, ``precision``, ``cost`` and
``attention`` all build on it, and it on none of them.

``$COURSE_CACHE_DIR`` names the cache folder (default: ``$XDG_CACHE_HOME/course_lib``, else
``~/.cache/course_lib``).
"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from pathlib import Path


def cpu_model(cpuinfo: str | Path = "/proc/cpuinfo") -> str:
    """The CPU's model name, e.g. ``AMD EPYC 7763 64-Core Processor`` (else the architecture)."""
    system = platform.system()
    if system == "Linux":
        try:
            text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key.strip().lower() in ("model name", "hardware", "cpu model") and value.strip():
                return " ".join(value.split())
    elif system == "Darwin":
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True,
                                 text=True, timeout=5, check=True).stdout.strip()
            if out:
                return out
    return platform.processor() or platform.machine() or "unknown CPU"


def cache_dir() -> Path:
    """Folder for what is measured once per machine (the precision probe), not committed:
    ``$COURSE_CACHE_DIR``, else ``$XDG_CACHE_HOME/course_lib``, else ``~/.cache/course_lib``."""
    env = os.environ.get("COURSE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "course_lib"


@contextlib.contextmanager
def quiet_stderr():
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
