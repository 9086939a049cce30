"""pytest hooks for the whole repository (tests/conftest.py holds the tests' own settings).

At the end of a run that executed notebooks (nbval), print one line per notebook with the
time its cells took, so the smoke budget of each chapter is visible in CI's log.
"""

from __future__ import annotations

from collections import defaultdict

# The book's sources hold no tests; pyproject's norecursedirs cannot name this folder without
# also skipping tests/book (paths here are relative to this file, so tests/book is kept).
collect_ignore = ["book"]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    seconds: dict[str, float] = defaultdict(float)
    failed: set[str] = set()
    for reports in terminalreporter.stats.values():
        for rep in reports:
            nodeid = getattr(rep, "nodeid", "")
            path = nodeid.split("::", 1)[0]
            if not path.endswith(".ipynb"):
                continue
            seconds[path] += getattr(rep, "duration", 0.0) or 0.0
            if getattr(rep, "failed", False):
                failed.add(path)
    if not seconds:
        return
    terminalreporter.section("time per notebook (kernel start and every cell)")
    for path in sorted(seconds):
        mark = "  FAILED" if path in failed else ""
        terminalreporter.write_line(f"{seconds[path]:8.1f} s  {path}{mark}")
    terminalreporter.write_line(f"{sum(seconds.values()):8.1f} s  total (summed over workers)")
