"""Did a hyperparameter search look far enough?

A search only tries values inside the ranges someone chose. When the winning value of a
setting is the smallest or the largest on offer, the best value may lie beyond the range,
and the comparison the search feeds may be unfair to that model. But one validation score
is noisy, so "on the edge" alone proves little: the edge value may have won by luck.
`edge_check` answers both questions, setting by setting:

1. where does the winner's value sit in the range that was searched? (an edge, or inside)
2. for a winner on an edge: is it better than the best configuration *off* that edge, or is
   the comparison inconclusive (its interval contains 0)? `compare` gives the interval (e.g.
   a paired bootstrap on validation rows).

Only "on an edge *and* better than everything off it" says: widen the range.

    from scipy.stats import loguniform
    from course_lib import stats, tuning

    space = {"lr": loguniform(1e-4, 1e-2), "width": [32, 64, 128]}   # as for ParameterSampler
    table = ...   # one row per configuration, best first, a column per setting
    check = tuning.edge_check(table, space, compare=lambda a, b: stats.bootstrap(...))
    check["widen"].any()   # True: a range is too narrow

A search that takes too long for a notebook runs in a committed script that writes its whole
table (a CSV) and a meta file beside it (a JSON with the same stem) holding the SHA-256 of
the script (``script_sha256``) and of the table (``table_sha256``). `read_search` reads both
back and refuses a table that no longer matches them:

    table, meta = tuning.read_search("book/results/search/search_06_tabular.csv",
                                     script="scripts/search_06_tabular.py")
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from course_lib.checks import file_sha256  # re-exported: the search tests call tuning.file_sha256
from course_lib.stats import Interval

__all__ = ["edge_check", "read_search", "file_sha256", "COLUMNS"]

COLUMNS = ["searched", "chosen", "position", "winner minus best off the edge", "widen"]


def edge_check(search: pd.DataFrame, space: dict, compare: Callable | None = None,
               limits: dict | None = None, margin: float = 0.1) -> pd.DataFrame:
    """One row per setting of `space`: where the search's winner sits in the searched range.

    search:  one row per configuration tried, **best first**, with a column per setting of
             `space`; its index labels the configurations (they are passed to `compare`).
    space:   setting -> the values on offer (a list), or a `scipy.stats` distribution with
             finite support (e.g. `loguniform(1e-4, 1e-2)`): the dict given to
             `ParameterSampler` works as it is.
    compare: optional; `compare(winner, other)` returns a `stats.Interval` for the winner's
             score minus the other configuration's, lower is better (e.g. a paired bootstrap
             of validation error). Called for a winner on an edge, against the best
             configuration whose value is not on that edge.
    limits:  setting -> a value that cannot be crossed (no dropout, one house per leaf); a
             winner there is reported as a hard limit and not compared.
    margin:  for a continuous range, a winner within this fraction of the range from an end
             (on the log scale for a log-uniform range) is on that edge.

    Returns a DataFrame indexed by setting with the columns `COLUMNS`. `position` reads
    "inside", "low edge" or "high edge", followed for an edge by what the comparison found;
    `widen` is True only for a winner on an edge that is better than the rest.
    """
    _check_arguments(search, space, limits, margin)
    winner = search.index[0]
    rows = []
    for name, offered in space.items():
        chosen = search[name].iloc[0]
        where = _where(offered, margin)  # value -> "low edge", "inside" or "high edge"
        row = {"searched": _describe(offered), "chosen": f"{chosen:.3g}",
               "position": where(chosen), "winner minus best off the edge": "", "widen": False}
        if _is_range(offered) and row["position"] == "inside":
            scale = "log range" if _is_log(offered) else "range"
            row["position"] += f" ({_fraction(offered, chosen):.0%} of the {scale})"
        if not _is_range(offered) and len(set(offered)) == 1:
            row["position"] = "not searched"
        elif row["position"].endswith("edge"):
            edge = row["position"]
            if (limits or {}).get(name) == chosen:
                row["position"] += ", a hard limit"
            else:
                off_edge = [c for c, v in search[name].items() if where(v) != edge]
                if not off_edge:
                    row["position"] += ", nothing off the edge was tried"
                elif compare is not None:
                    gap = compare(winner, off_edge[0])  # search is best first
                    row["winner minus best off the edge"] = str(gap)
                    row["position"] += _read_gap(gap, name, off_edge[0])
                    row["widen"] = gap.high < 0
        rows.append({"setting": name, **row})
    return pd.DataFrame(rows, columns=["setting", *COLUMNS]).set_index("setting")


def _where(offered, margin: float) -> Callable:
    """A function: value of the setting -> 'low edge', 'inside' or 'high edge'."""
    if _is_range(offered):
        def where(value):
            fraction = _fraction(offered, value)
            return ("low edge" if fraction < margin else
                    "high edge" if fraction > 1 - margin else "inside")
        return where
    low, high = min(offered), max(offered)
    return lambda value: ("low edge" if value == low else
                          "high edge" if value == high else "inside")


def _fraction(distribution, value) -> float:
    """Position of `value` in the distribution's support: 0 at the low end, 1 at the high."""
    low, high = (float(v) for v in distribution.support())
    if _is_log(distribution):
        return (math.log(value) - math.log(low)) / (math.log(high) - math.log(low))
    return (value - low) / (high - low)


def _describe(offered) -> str:
    if _is_range(offered):
        low, high = offered.support()
        return f"{low:g} to {high:g}, {'log-' if _is_log(offered) else ''}uniform"
    values = sorted(set(offered))
    if len(values) <= 5:
        return ", ".join(f"{v:g}" for v in values)
    return f"{values[0]:g} .. {values[-1]:g} ({len(values)} values)"


def _read_gap(gap: Interval, name: str, other) -> str:
    if gap.contains(0.0):
        return ", inconclusive against the rest"  # an interval containing 0: no winner
    if gap.high < 0:
        return ", better than the rest: widen"
    raise ValueError(
        f"edge_check: for {name!r}, the winner scores worse than configuration {other!r} "
        f"({gap}). `search` must be sorted best first by the same score that `compare` "
        "measures, and `compare(a, b)` must return a's score minus b's, lower is better.")


def _is_range(offered) -> bool:
    return hasattr(offered, "support") and hasattr(offered, "rvs")


def _is_log(distribution) -> bool:
    return getattr(getattr(distribution, "dist", None), "name", "") in ("loguniform",
                                                                         "reciprocal")


def _check_arguments(search, space, limits, margin) -> None:
    if not isinstance(search, pd.DataFrame) or search.empty:
        raise ValueError("edge_check needs the search as a non-empty DataFrame: one row per "
                         "configuration, best first, a column per setting")
    if not isinstance(space, dict) or not space:
        raise ValueError("space must be a dict: setting -> the values on offer (a list) or a "
                         "scipy.stats distribution, as given to ParameterSampler")
    if not 0.0 < margin < 0.5:
        raise ValueError(f"margin is a fraction of the range, between 0 and 0.5; got {margin}")
    missing = [name for name in space if name not in search.columns]
    if missing:
        raise ValueError(f"the search table has no column for {missing}; its columns are "
                         f"{list(search.columns)}. Add one column per searched setting.")
    unknown = [name for name in (limits or {}) if name not in space]
    if unknown:
        raise ValueError(f"limits names settings that are not in space: {unknown}")
    for name, offered in space.items():
        chosen = search[name].iloc[0]
        if _is_range(offered):
            low, high = (float(v) for v in offered.support())
            if not (math.isfinite(low) and math.isfinite(high)):
                raise ValueError(f"{name!r}: the distribution's support ({low}, {high}) is not "
                                 "finite, so it has no edges; use a bounded one "
                                 "(uniform, loguniform)")
            if not low <= chosen <= high:
                raise ValueError(f"{name!r}: the winner's value {chosen} lies outside the "
                                 f"searched range [{low:g}, {high:g}]")
        elif isinstance(offered, (list, tuple)) and offered:
            if not all(isinstance(v, numbers.Real) for v in offered):
                raise TypeError(f"{name!r}: edges need ordered values (numbers); got "
                                f"{offered}. Leave unordered choices out of `space`.")
            if chosen not in offered:
                raise ValueError(f"{name!r}: the winner's value {chosen} is not among the "
                                 f"values on offer {list(offered)}; is `space` the one "
                                 "the search drew from?")
        else:
            raise TypeError(f"{name!r}: expected a non-empty list of values or a scipy.stats "
                            f"distribution, got {type(offered).__name__}")


# --------------------------------------------------------------------------- committed searches
# Wording an older version of edge_check wrote into committed search files, and what the
# course says now: an interval containing 0 is inconclusive, not a tie.
SUPERSEDED_LABELS = {", ties with the rest": ", inconclusive against the rest"}


def read_search(table, script=None) -> tuple[pd.DataFrame, dict]:
    """A committed search's table and meta (``<table stem>.json``), checked by their hashes.

    Raises ``FileNotFoundError`` naming the missing file, and ``ValueError`` when the table's
    bytes are not the ones the meta file records (the table was edited by hand) or, with
    ``script``, when the script is not the one that wrote the table (it changed since: run it
    again). Returns ``(table as a DataFrame, meta as a dict)``.
    """
    table = Path(table)
    meta_path = table.with_suffix(".json")
    for path in (table, meta_path):
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: restore it from git or run the "
                                    "search script again")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    for key in ("script_sha256", "table_sha256"):
        if key not in meta:
            raise ValueError(f"{meta_path} has no {key!r}: it was not written by a search "
                             "script of this course")
    if file_sha256(table) != meta["table_sha256"]:
        raise ValueError(f"{table} is not the table its script wrote (its SHA-256 differs "
                         f"from the one in {meta_path.name}): restore it or run the script "
                         "again")
    if script is not None and file_sha256(script) != meta["script_sha256"]:
        raise ValueError(f"{Path(script).name} changed after it wrote {table.name} (its SHA-256 "
                         f"is not the one in {meta_path.name}): run it again to rewrite the "
                         "table")
    for rows in meta.get("edge_checks", {}).values():  # labels of searches written earlier
        for row in rows:
            for before, now in SUPERSEDED_LABELS.items():
                row["position"] = row.get("position", "").replace(before, now)
    return pd.read_csv(table), meta
