"""What both tables of the results page share: one number format, one row builder.

``results_table`` (every card) and ``results_claims`` (the claims against their baselines)
both take them from here. The dependencies run one way: ``results_table`` imports
``results_claims`` (its ``setup`` registers the claims directives too), and both import this
module, which imports neither.
"""

from __future__ import annotations

import math

from docutils import nodes


def fmt(value) -> str:
    """Numbers with four significant digits, integers with thousands separators."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}" if abs(value) >= 1000 else f"{value:g}"
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    return str(value)


def table_row(cells: list[nodes.Node]) -> nodes.row:
    """One table row, one entry per node."""
    row = nodes.row()
    for content in cells:
        entry = nodes.entry()
        entry += content
        row += entry
    return row
