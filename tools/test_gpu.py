"""The course on a CUDA GPU: what a Colab student with a GPU runtime would run into.

    make test-gpu                     # in a checkout with .venv (the Makefile sets it up)
    python tools/test_gpu.py          # anywhere the course's libraries are installed (Colab)
    python tools/test_gpu.py --units  # only the unit tests that take a device

1. The unit tests that take a device (``GPU_UNIT_TESTS``) with ``COURSE_DEVICE=cuda``: the
   device checks of ``course_lib`` with the model on the GPU and the input on the CPU, the
   precision choice on CUDA, the device choice.
2. Every notebook in the smoke profile with ``COURSE_DEVICE=cuda`` (``tools/run_notebooks.py``,
   executed notebooks into a temporary folder), stopping at the first error.

Without a CUDA GPU it says so and exits 0: there is nothing to test (CI has no GPU). It does
not replace ``make test``, which runs everything on the CPU.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Unit tests whose behaviour depends on the device present (each has CUDA cases).
GPU_UNIT_TESTS = ["tests/unit/test_devices.py", "tests/unit/test_precision.py",
                  "tests/unit/test_runtime.py", "tests/unit/test_distributed.py"]


def cuda_state() -> tuple[bool, str]:
    import torch

    if not torch.cuda.is_available():
        return False, f"torch {torch.__version__}: no CUDA GPU is present"
    return True, f"torch {torch.__version__}, CUDA {torch.version.cuda}: " \
                 f"{torch.cuda.get_device_name(0)}"


def run(cmd: list[str], env: dict) -> int:
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="notebooks to run (default: every one)")
    part = parser.add_mutually_exclusive_group()
    part.add_argument("--units", action="store_true", help="only the unit tests")
    part.add_argument("--notebooks-only", action="store_true", help="only the notebooks")
    args = parser.parse_args(argv)

    present, what = cuda_state()
    if not present:
        print(f"make test-gpu: {what}, so there is nothing to test here; it passes without "
              "running anything. Run it on a machine with an NVIDIA GPU (on Colab: Runtime > "
              "Change runtime type > a GPU, then `!python tools/test_gpu.py` in the course's "
              "folder).")
        return 0
    print(f"make test-gpu: {what}", flush=True)
    env = dict(os.environ, COURSE_DEVICE="cuda", COURSE_PROGRESS="text", PYTHONUNBUFFERED="1")
    start = time.perf_counter()
    if not args.notebooks_only:
        rc = run([sys.executable, "-m", "pytest", "-q", "-ra", "-p", "no:cacheprovider",
                  *GPU_UNIT_TESTS], env)
        print(f"=== unit tests on CUDA: {'passed' if rc == 0 else 'FAILED'} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
        if rc:
            return rc
    if not args.units:
        out = tempfile.mkdtemp(prefix="course-gpu-smoke-")
        rc = run([sys.executable, "tools/run_notebooks.py", "--profile", "smoke",
                  "--output-dir", out, *args.notebooks], env)
        print(f"=== notebooks on CUDA, smoke profile: {'passed' if rc == 0 else 'FAILED'}; "
              f"executed notebooks in {out}", flush=True)
        if rc:
            return rc
    print(f"make test-gpu passed in {(time.perf_counter() - start) / 60:.1f} min", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
