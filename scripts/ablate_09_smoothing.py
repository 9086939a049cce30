"""Chapter 9's label-smoothing ablation: the chapter's own notebook, run once more with ε = 0.

    python scripts/ablate_09_smoothing.py              # full size: about 25 minutes, 2 cores
    python scripts/ablate_09_smoothing.py --profile smoke --out /tmp/ls9   # about a minute

Chapter 9 trains one model with label smoothing (ε = 0.1) to early stopping. Whether the
smoothing helps can only be answered by a second model, trained the same way without it,
which does not fit the chapter's time budget beside the first. This script executes
notebooks/09_translation.ipynb with papermill in a temporary folder, with
COURSE_09_SMOOTHING=0 in its environment (the notebook's parameters cell reads it; nothing
else changes: same data, BPE, model, batches, schedule, seeds, early stopping) and its
results card and artifacts pointed at that folder, so nothing in the repository is touched
but the file below.

It writes --out (default book/results/search/09_smoothing.json): the ε = 0 run's results
card (its params and metrics, as chapter 9's card has them), its test translations (greedy
and beam: chapter 9 pairs them with its own in a bootstrap over sentences), the profile,
the SHA-256 of the notebook's code cells (chapter 9 compares it with its own: a changed
code cell means the ablation is stale and this script must run again), this script's
SHA-256, the CPU, threads and wall time. tests/tools/test_ablate_09_smoothing.py checks
the committed file against the notebook and this script, and runs it at smoke size.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NOTEBOOK = ROOT / "notebooks" / "09_translation.ipynb"
DEFAULT_OUT = ROOT / "book" / "results" / "search" / "09_smoothing.json"
SMOOTHING = 0.0


def file_sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", choices=("full", "smoke"), default="full")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"where to write the JSON (default {DEFAULT_OUT}; smoke: required)")
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel name (python3)")
    args = parser.parse_args(argv)
    if args.out is None:
        if args.profile != "full":
            parser.error("a smoke run must name --out: it must not replace the book's file")
        args.out = DEFAULT_OUT

    from course_lib.results import code_sha256  # after sys.path: the course's own package

    t0 = time.perf_counter()
    code_hash = code_sha256(NOTEBOOK)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, COURSE_PROFILE=args.profile, COURSE_PROGRESS="text",
                   COURSE_09_SMOOTHING=str(SMOOTHING), COURSE_RESULTS_DIR=str(tmp / "results"),
                   COURSE_ARTIFACTS_DIR=str(tmp / "artifacts"))
        cmd = [sys.executable, "-m", "papermill", str(NOTEBOOK), str(tmp / "run.ipynb"),
               "--cwd", str(NOTEBOOK.parent), "-k", args.kernel, "--log-output",
               "--no-progress-bar"]
        subprocess.run(cmd, check=True, env=env)
        # the notebook leaves its card and test translations there, in every profile
        card = json.loads(
            (tmp / "artifacts" / f"09_translation_run_{args.profile}.json").read_text())
        translations = card["test_translations"]
    if code_sha256(NOTEBOOK) != code_hash:
        raise SystemExit("notebooks/09_translation.ipynb's code changed during the run: "
                         "run this script again")
    if card["params"].get("smoothing") != SMOOTHING:
        raise SystemExit(f"the run's card records smoothing {card['params'].get('smoothing')!r},"
                         f" not {SMOOTHING}: the notebook did not read COURSE_09_SMOOTHING")
    out = {
        "script": "scripts/ablate_09_smoothing.py",
        "script_sha256": file_sha256(__file__),
        "notebook": "notebooks/09_translation.ipynb",
        "notebook_code_sha256": code_hash,
        "profile": args.profile,
        "smoothing": SMOOTHING,
        "params": card["params"],
        "metrics": card["metrics"],
        "test_translations": {k: translations[k] for k in ("beam", "greedy")},
        "card_wall_seconds": card.get("wall_seconds"),
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "cpu": card.get("cpu"),
        "threads": card.get("threads"),
        "precision": card.get("precision"),
        "torch": card.get("torch"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, default=str) + "\n")
    print(f"wrote {args.out}: ε = {SMOOTHING}, best epoch {card['params'].get('best_epoch')} of "
          f"{card['params'].get('epochs_run')}, test BLEU (beam) "
          f"{card['metrics'].get('bleu_beam', float('nan')):.2f}, in "
          f"{out['wall_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
