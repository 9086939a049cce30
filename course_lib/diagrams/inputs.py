"""How a task becomes model inputs and targets: a forecast window, a feature tokenizer,
the teacher-forcing shift (chapters 5, 6 and 9)."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Rectangle

from .style import (
    DATA,
    INK,
    LEARNED,
    MUTED,
    SHAPE_INK,
    SMALL,
    TARGET,
    arrow,
    canvas,
    grid,
    note,
    op,
    shape_text,
    tensor,
    text,
)


# --------------------------------------------------------------------------- chapter 5
def forecast_window(window=72):
    """Chapter 5: a window of hourly inputs, the target hour, and the next window."""
    shown = window + 2
    fig, ax = canvas(10, 4.4, f"Forecast hour {window + 1} from the {window} hours before it")
    names = ["temperature", "dew point", "pressure", "wind speed", "rain", "snow"]
    left, right = 1.55, 8.35
    step = (right - left) / shown
    cell_h = 0.22
    top = 3.45
    hours = np.arange(shown)
    shade = np.vstack([
        0.5 + 0.35 * np.sin(2 * np.pi * (hours - 9) / 24),
        0.45 + 0.2 * np.sin(2 * np.pi * (hours - 7) / 24),
        0.5 + 0.1 * np.cos(hours / 20),
        0.3 + 0.25 * np.abs(np.sin(hours / 7)),
        0.1 + 0.0 * hours,
        0.1 + 0.0 * hours,
    ])
    grid(ax, left, top, step, values=shade, cmap="Greys", vmin=0, vmax=2.2, lw=0.15,
         cell_h=cell_h)
    bottom = top - len(names) * cell_h
    for i, name in enumerate(names):
        text(ax, left - 0.1, top - (i + 0.5) * cell_h, name, size=SMALL, ha="right")
    for h in sorted({1, 24, 48, window} & set(range(1, window + 1))):
        text(ax, left + (h - 0.5) * step, top + 0.13, f"{h}", size=SMALL)
    text(ax, left - 0.1, top + 0.13, "hour", size=SMALL, ha="right", color=SHAPE_INK)
    # the input window, outlined, and the target cell
    ax.add_patch(Rectangle((left, bottom), window * step, top - bottom, facecolor="none",
                           edgecolor=INK, lw=1.8, zorder=5))
    tx = left + window * step
    ax.add_patch(Rectangle((tx, top - cell_h), step, cell_h, facecolor=TARGET, edgecolor=INK,
                           lw=1.0, zorder=5))
    arrow(ax, (right + 0.3, top - cell_h / 2), (tx + step + 0.02, top - cell_h / 2),
          color=TARGET, lw=1.2)
    text(ax, right + 0.35, top - cell_h / 2, "target", size=SMALL, ha="left", color=TARGET,
         weight="bold")
    text(ax, right + 0.35, top - cell_h / 2 - 0.25, "(temperature)", size=SMALL, ha="left",
         color=TARGET)

    def bracket(start, y, label, target_label):
        x0, x1 = left + start * step, left + (start + window) * step
        ax.plot([x0, x0, x1, x1], [y + 0.1, y, y, y + 0.1], color=INK, lw=1.3)
        text(ax, (x0 + x1) / 2 - 0.05, y - 0.2, label, size=SMALL, ha="right")
        shape_text(ax, (x0 + x1) / 2 + 0.05, y - 0.2, f"input [{window}, n_features]", ha="left")
        ax.add_patch(Rectangle((x1, y), step, 0.16, facecolor=TARGET, edgecolor=INK, lw=0.8))
        text(ax, right + 0.35, y + 0.08, target_label, size=SMALL, ha="left", color=TARGET)

    bracket(0, bottom - 0.3, f"window 1: hours 1-{window}",
            f"target: hour {window + 1}")
    bracket(1, bottom - 0.95, f"window 2: hours 2-{window + 1}", f"target: hour {window + 2}")
    note(ax, 5.0, 0.4, "Each example slides the window by one hour; its target is the "
         "temperature one hour after the window.", size=SMALL)
    return fig


# --------------------------------------------------------------------------- chapter 6
def feature_tokenizer():
    """Chapter 6: one token per column, a [CLS] token, an encoder, a head on [CLS]."""
    fig, ax = canvas(10, 6.3, "A feature tokenizer turns a table row into tokens")
    cols = [("Lot Area", "8450", "num"), ("Year Built", "2003", "num"),
            ("Gr Liv Area", "1710", "num"), ("Neighborhood", "CollgCr", "cat"),
            ("House Style", "2Story", "cat")]
    xs = [2.3 + 1.3 * j for j in range(len(cols))]
    cls_x, rx = 0.95, 8.15  # the [CLS] column; labels on the right
    # the row
    row_y = 5.3
    for x, (name, value, _) in zip(xs, cols):
        tensor(ax, x, row_y + 0.15, 1.2, 0.3, name, fill=DATA, size=SMALL)
        tensor(ax, x, row_y - 0.15, 1.2, 0.3, value, fill="white", size=SMALL)
    text(ax, (xs[0] + xs[2]) / 2, row_y + 0.5, "numeric columns", size=SMALL, color=SHAPE_INK)
    text(ax, (xs[3] + xs[4]) / 2, row_y + 0.5, "categorical columns", size=SMALL,
         color=SHAPE_INK)
    text(ax, rx, row_y, "one house (a table row)", ha="left", weight="bold", size=SMALL)
    # tokenizing
    op_y = 4.3
    for x, (_, _, kind) in zip(xs, cols):
        label = "$x_j w_j + b_j$" if kind == "num" else "$E_j[c] + e_j$"
        box = op(ax, x, op_y, label, w=1.2, h=0.4, fill=LEARNED)
        arrow(ax, (x, row_y - 0.3), box.top)
    text(ax, rx, op_y + 0.25, "tokenizer, per column:", ha="left", size=SMALL, weight="bold")
    note(ax, rx, op_y, "$w_j, b_j$: learned vectors", ha="left")
    note(ax, rx, op_y - 0.25, "$E_j$: its table, $e_j$: its", ha="left")
    note(ax, rx, op_y - 0.47, "column embedding", ha="left")
    # tokens
    ty = 3.2
    tensor(ax, cls_x, ty, 0.9, 0.45, "[CLS]", fill=LEARNED)
    note(ax, cls_x, ty + 0.45, "learned,\nprepended", size=SMALL)
    for x in xs:
        tensor(ax, x, ty, 0.8, 0.45, "token", fill=DATA, size=SMALL)
        arrow(ax, (x, op_y - 0.2), (x, ty + 0.225))
    text(ax, rx, ty + 0.12, "1 + n_features tokens", ha="left", size=SMALL, weight="bold")
    shape_text(ax, rx, ty - 0.13, "[B, 1 + n_features, d]", ha="left")
    # encoder
    enc = op(ax, (cls_x + xs[-1]) / 2, 2.2, "Transformer encoder  (N blocks, no mask, "
             "no positions)", w=xs[-1] - cls_x + 1.0, h=0.5)
    for x in [cls_x] + xs:
        arrow(ax, (x, ty - 0.225), (x, enc.top[1]))
    for x in xs:
        ax.plot([x, x], [enc.bottom[1], enc.bottom[1] - 0.25], color=MUTED, lw=1.0)
    note(ax, (xs[1] + xs[-1]) / 2, enc.bottom[1] - 0.45, "the other outputs are not used",
         size=SMALL)
    # head on [CLS]
    out_cls = tensor(ax, cls_x, 1.3, 0.9, 0.36, "[CLS] out", fill=DATA, size=SMALL)
    arrow(ax, (cls_x, enc.bottom[1]), out_cls.top)
    shape_text(ax, cls_x + 0.55, 1.3, "[B, d]", ha="left")
    head = op(ax, 3.0, 0.55, "Linear head", w=1.4, fill=LEARNED)
    arrow(ax, out_cls.bottom, (cls_x, 0.55), head.left)
    price = tensor(ax, 5.1, 0.55, 1.4, 0.36, "log price", fill=TARGET)
    arrow(ax, head.right, price.left)
    shape_text(ax, price.right[0] + 0.1, 0.55, "[B]", ha="left")
    return fig


# --------------------------------------------------------------------------- chapter 9
def teacher_forcing_shift(length=3):
    """Decoder input <bos> y1 .. yT and target y1 .. <eos>: the one-token shift."""
    T = length
    inputs = ["<bos>"] + [f"y{t}" for t in range(1, T + 1)]
    targets = [f"y{t}" for t in range(1, T + 1)] + ["<eos>"]
    n = len(inputs)
    fig, ax = canvas(9, 4.2, "Teacher forcing: the target is the input shifted by one")
    spacing = min(1.45, 5.5 / (n - 1))
    xs = 2.7 + spacing * np.arange(n)
    tok_w = min(0.9, spacing - 0.3)
    y_in, y_dec, y_out = 0.95, 2.1, 3.2
    dec = op(ax, (xs[0] + xs[-1]) / 2, y_dec, "decoder (causal: position t sees 1..t)",
             w=xs[-1] - xs[0] + 1.2, h=0.45)
    for t, x in enumerate(xs):
        i = tensor(ax, x, y_in, tok_w, 0.36, inputs[t], fill=DATA)
        o = tensor(ax, x, y_out, tok_w, 0.36, targets[t], fill=TARGET)
        arrow(ax, i.top, (x, dec.bottom[1]))
        arrow(ax, (x, dec.top[1]), o.bottom)
        shape_text(ax, x, y_in - 0.32, f"t={t + 1}")
        if t + 1 < n:  # the same token, one position later
            arrow(ax, (x + tok_w * 0.4, y_out - 0.19), (xs[t + 1] - tok_w / 3, y_in + 0.19),
                  color=MUTED,
                  lw=0.9, ls=(0, (3, 2)), zorder=1)
    text(ax, 1.95, y_out, "target", ha="right", weight="bold")
    shape_text(ax, 1.95, y_out - 0.25, "tgt[:, 1:]", ha="right")
    text(ax, 1.95, y_in, "decoder input", ha="right", weight="bold")
    shape_text(ax, 1.95, y_in - 0.25, "tgt[:, :-1]", ha="right")
    note(ax, 4.5, 0.3, "Position t predicts the token at position t + 1 of the sentence; "
         "dashed: the same token, one step later.", size=SMALL)
    return fig
