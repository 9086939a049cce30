"""The key to the visual language: what each colour and shape of the diagrams means."""

from __future__ import annotations

import numpy as np

from .style import (
    DATA,
    FONT,
    KEY,
    LEARNED,
    NORM,
    POSITION,
    QUERY,
    RESIDUAL,
    RESIDUAL_STYLE,
    SHAPE_INK,
    SMALL,
    TARGET,
    VALUE,
    Box,
    add,
    arrow,
    canvas,
    frame,
    grid,
    note,
    op,
    shape_text,
    tensor,
    text,
)


def legend():
    """The visual language itself: what each colour and shape means."""
    fig, ax = canvas(10, 4.75, "How to read the diagrams of this course")
    rows = [3.95 - 0.5 * i for i in range(8)]
    gx, tx = 0.95, 1.75
    left = [("q", QUERY, "query (q, Q)"), ("k", KEY, "key (k, K)"), ("v", VALUE, "value (v, V)"),
            ("x", DATA, "data tensor (input, hidden state, output)"),
            ("p", POSITION, "positional information"),
            ("y", TARGET, "what the model must predict")]
    for y, (label, fill, meaning) in zip(rows, left):
        tensor(ax, gx, y, 0.9, 0.32, label, fill=fill)
        text(ax, tx, y, meaning, ha="left")
    shape_text(ax, gx, rows[6], "[B, L, d]")
    text(ax, tx, rows[6], "a tensor's shape (monospace)", ha="left")

    gx, tx = 5.55, 6.35
    op(ax, gx, rows[0], "$W_Q$", w=0.9, h=0.34, fill=LEARNED)
    text(ax, tx, rows[0], "learned weights ($W_Q$, $W_O$, FFN, E)", ha="left")
    op(ax, gx, rows[1], "LayerNorm", w=0.9, h=0.34, fill=NORM, size=SMALL)
    text(ax, tx, rows[1], "normalisation", ha="left")
    op(ax, gx, rows[2], "softmax", w=0.9, h=0.34)
    text(ax, tx, rows[2], "operation without weights", ha="left")
    add(ax, gx, rows[3])
    text(ax, tx, rows[3], "addition", ha="left")
    grid(ax, gx - 0.3, rows[4] + 0.15, 0.3, mask=np.array([[True, False]]), tf=True)
    text(ax, tx, rows[4], "mask: dark = may attend (True), light = blocked", ha="left")
    arrow(ax, (gx - 0.45, rows[5]), (gx + 0.45, rows[5]), color=RESIDUAL, ls=RESIDUAL_STYLE,
          lw=1.4)
    text(ax, tx, rows[5], "residual path (around a sublayer)", ha="left")
    grid(ax, gx - 0.45, rows[6] + 0.1, 0.18, values=np.linspace(0, 1, 5)[None, :],
         cell_h=0.2)
    text(ax, tx, rows[6], "attention weight, 0 to 1", ha="left")
    frame(ax, Box(gx, rows[7], 0.9, 0.36))
    text(ax, gx, rows[7], "× N", size=SMALL, weight="bold", color=SHAPE_INK)
    text(ax, tx, rows[7], "a block repeated N times", ha="left")
    note(ax, 0.45, rows[7], "Plain rectangles are tensors; rounded boxes are operations.",
         ha="left", size=FONT)
    return fig
