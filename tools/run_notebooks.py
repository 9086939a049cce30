"""Execute the chapter notebooks with papermill and print how long each one took.

    python tools/run_notebooks.py                      # every notebook, full profile, in place
    python tools/run_notebooks.py notebooks/07_gpt.ipynb
    python tools/run_notebooks.py --profile smoke      # every notebook, smoke, into a temp folder
    python tools/run_notebooks.py --profile smoke --output-dir out/ notebooks/01_attention.ipynb

The full profile rewrites the committed notebooks (outputs) and their results cards in
``book/results/``: that is how the book's numbers are produced. The gpu profile (sizes for
one modern GPU, chapters 7 and 9) writes its executed notebooks to ``--output-dir`` and its
results cards to ``book/results/gpu/``; the committed notebooks keep their CPU outputs. The
smoke profile never touches the repository: executed notebooks go to ``--output-dir``
(default: a new temporary folder) and results cards to ``$COURSE_RESULTS_DIR`` pointed at
that folder.

Each notebook runs in a fresh kernel with ``notebooks/`` as its working directory, with
``COURSE_PROFILE=<profile>`` and ``COURSE_PROGRESS=text`` (progress bars as one final line)
in its environment; the full profile also sets ``COURSE_THREADS`` to every core unless it is
set (``pin_threads``). No papermill parameter is passed (see ``run_one``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def pin_threads(profile: str, env: dict[str, str]) -> None:
    """Give a full-profile run every core: its numbers and timings are committed.

    Left alone, ``runtime.choose_threads`` subtracts the 1-minute load average, so a notebook
    started right after another one ran on 1 thread of 2 (and failed its own timing check).
    A ``$COURSE_THREADS`` already set wins; other profiles keep the load-aware choice.
    """
    if profile == "full" and not env.get("COURSE_THREADS"):
        env["COURSE_THREADS"] = str(os.cpu_count() or 1)


def run_one(nb: Path, out: Path, profile: str, kernel: str, env: dict[str, str]) -> float:
    """Execute ``nb`` into ``out``; on failure ``out`` is left untouched and the partly
    executed notebook (outputs up to the failing cell) is kept in the temp folder."""
    tmp = out.with_name(f".{out.stem}.running.ipynb")
    # The profile travels in COURSE_PROFILE only (set in ``env``). A papermill parameter would
    # add a cell `PROFILE = "full"` to the committed notebook, and that cell would then
    # override COURSE_PROFILE=smoke when the tests run the notebook with nbval.
    cmd = [sys.executable, "-m", "papermill", str(nb), str(tmp), "--cwd", str(NOTEBOOKS),
           "-k", kernel, "--log-output", "--no-progress-bar"]
    start = time.perf_counter()
    try:
        subprocess.run(cmd, check=True, env=env)
        tidy(tmp, source=nb, final=out)
        os.replace(tmp, out)
    except subprocess.CalledProcessError:
        if tmp.exists():
            kept = Path(tempfile.gettempdir()) / f"{out.stem}.failed.ipynb"
            shutil.move(tmp, kept)
            print(f"=== the partly executed notebook is in {kept}", flush=True)
        raise
    finally:
        tmp.unlink(missing_ok=True)
    return time.perf_counter() - start


def _display_path(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path.name


def tidy(path: Path, source: Path, final: Path) -> None:
    """Drop any papermill injected-parameters cell; record repository-relative paths (not
    this machine's) in the notebook's papermill metadata."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    # A cell injected by an earlier papermill run with -p would pin the profile: drop it.
    nb.cells = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    meta = nb.metadata.get("papermill")
    if meta is not None:
        meta["input_path"] = _display_path(source)
        meta["output_path"] = _display_path(final)
    nbformat.write(nb, path)


def has_profile(nb: Path, profile: str) -> bool:
    """True if the notebook's SIZES name ``profile`` (as ``"gpu": dict(``)."""
    return f'"{profile}": dict(' in nb.read_text(encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to run (default: every notebooks/*.ipynb, in order)")
    parser.add_argument("--profile", default="full", choices=["full", "smoke", "gpu"],
                        help="full: the committed outputs; smoke: tiny sizes (the tests); gpu: "
                        "sizes for one modern GPU (chapters 7 and 9), cards to book/results/gpu/")
    parser.add_argument("--output-dir", type=Path,
                        help="where executed notebooks go (not allowed with --profile full, "
                        "which writes in place)")
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel name (python3)")
    parser.add_argument("--keep-going", action="store_true",
                        help="run the remaining notebooks after one fails")
    args = parser.parse_args(argv)

    notebooks = [p.resolve() for p in args.notebooks] or sorted(NOTEBOOKS.glob("*.ipynb"))
    if args.profile == "gpu" and not args.notebooks:  # only the chapters that define it
        notebooks = [nb for nb in notebooks if has_profile(nb, "gpu")]
    if not notebooks:
        print("no notebooks in notebooks/: nothing to run")
        return 0
    for nb in notebooks:
        if not nb.is_file():
            parser.error(f"no such notebook: {nb}")

    env = dict(os.environ, COURSE_PROGRESS="text", COURSE_PROFILE=args.profile)
    pin_threads(args.profile, env)
    if args.profile == "full":
        if args.output_dir:
            parser.error("--profile full rewrites the committed notebooks in place; "
                         "--output-dir is for other profiles")
        out_dir = None
    else:
        out_dir = args.output_dir or Path(tempfile.mkdtemp(prefix=f"course-{args.profile}-"))
        out_dir = out_dir.resolve()
        out_dir.mkdir(parents=True, exist_ok=True)
        if out_dir == NOTEBOOKS.resolve():
            parser.error("the output folder must not be notebooks/")
        if args.profile != "gpu":  # the gpu profile's cards go to book/results/gpu/
            env["COURSE_RESULTS_DIR"] = str(out_dir / "results")

    times: list[tuple[str, float, str]] = []
    failed = False
    for nb in notebooks:
        out = nb if out_dir is None else out_dir / nb.name
        print(f"=== {nb.name} ({args.profile}) -> {out}", flush=True)
        try:
            seconds = run_one(nb, out, args.profile, args.kernel, env)
            status = "ok"
        except subprocess.CalledProcessError:
            seconds, status, failed = float("nan"), "FAILED", True
        times.append((nb.name, seconds, status))
        print(f"=== {nb.name}: {status} in {seconds:.1f} s", flush=True)
        if failed and not args.keep_going:
            break

    print(f"\n{'notebook':<36} {'seconds':>9}  status")
    for name, seconds, status in times:
        print(f"{name:<36} {seconds:>9.1f}  {status}")
    total = sum(s for _, s, st in times if st == "ok")
    print(f"{'total':<36} {total:>9.1f}")
    if out_dir is not None:
        print(f"executed notebooks are in {out_dir}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
