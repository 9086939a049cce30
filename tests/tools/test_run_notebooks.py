"""tools/run_notebooks.py: the full profile runs on every core unless told otherwise."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools import run_notebooks  # noqa: E402


def test_full_profile_pins_every_core():
    env = {}
    run_notebooks.pin_threads("full", env)
    assert env["COURSE_THREADS"] == str(os.cpu_count() or 1)


def test_a_chosen_thread_count_wins():
    env = {"COURSE_THREADS": "1"}
    run_notebooks.pin_threads("full", env)
    assert env["COURSE_THREADS"] == "1"


def test_other_profiles_keep_the_load_aware_choice():
    for profile in ("smoke", "gpu"):
        env = {}
        run_notebooks.pin_threads(profile, env)
        assert "COURSE_THREADS" not in env
