"""The course's architecture diagrams, drawn by code (no image files).

Every diagram speaks one visual language, fixed by the constants below and shown by
``legend()``:

- queries, keys and values always have the same colours (Okabe-Ito: readable in print and
  for colour-blind readers): ``QUERY`` orange, ``KEY`` sky blue, ``VALUE`` bluish green;
- plain rectangles are tensors (data), rounded boxes are operations: reddish purple when the
  operation holds learned weights (W_Q, W_K, W_V, W_O, FFN, embeddings), yellow for norms,
  white for operations without weights (MatMul, softmax, attention);
- a mask cell is white when it is True = "may attend" and dark grey when it is blocked;
- a residual path is a dashed dark line that goes around its sublayer;
- positional information is dark blue, what a model must predict is vermillion, attention
  weights use one light-to-dark colour map (``ATTN_CMAP``);
- tensor shapes are written in a monospace font.

Each public function returns a matplotlib Figure and never calls ``plt.show()``::

    from course_lib import diagrams
    diagrams.sdpa_pipeline();
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import PatchCollection
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle
from matplotlib.path import Path

__all__ = [
    "legend",
    "query_over_hours",
    "sdpa_pipeline",
    "split_heads",
    "mask_conventions",
    "position_entry",
    "attention_only_vs_block",
    "post_vs_pre_norm",
    "forecast_window",
    "alibi_bias",
    "feature_tokenizer",
    "decoder_only_stack",
    "kv_cache",
    "beam_tree",
    "encoder_decoder",
    "teacher_forcing_shift",
]

# --------------------------------------------------------------------------- visual language
QUERY = "#E69F00"  # orange
KEY = "#56B4E9"  # sky blue
VALUE = "#009E73"  # bluish green
LEARNED = "#CC79A7"  # reddish purple: operations with learned weights
NORM = "#F0E442"  # yellow: LayerNorm
POSITION = "#0072B2"  # blue: positional information (white text on it)
TARGET = "#D55E00"  # vermillion: what a model must predict
DATA = "#E8E8E8"  # light grey: data tensors
OPERATION = "#FFFFFF"  # white: operations without weights
MASK_ALLOWED = "#FFFFFF"  # True = may attend
MASK_BLOCKED = "#4D4D4D"  # blocked (-inf before the softmax)
RESIDUAL = "#333333"  # residual paths: dashed
RESIDUAL_STYLE = (0, (4, 2.5))
INK = "#222222"  # edges, arrows and text
MUTED = "#8C8C8C"  # pruned / inactive things
SHAPE_INK = "#3B3B3B"
HIGHLIGHT = "#DCDCDC"  # a path to look at, shaded behind the drawing
ATTN_CMAP = "YlGnBu"  # attention weights, 0 (light) -> 1 (dark)
# heads (Paul Tol's "light" scheme, ordered away from the Q/K/V hues; labels carry it too)
HEAD_COLORS = ("#BBCC33", "#FFAABB", "#99DDFF", "#AAAA00", "#EEDD88", "#44BB99", "#77AADD")

FONT = 10  # points; nothing smaller than SMALL
SMALL = 9
TITLE = 12
MONO = "DejaVu Sans Mono"

# which fill goes with which text colour
_TEXT_ON = {POSITION: "white", MASK_BLOCKED: "white", TARGET: "white"}


# --------------------------------------------------------------------------- primitives
@dataclass(frozen=True)
class _Box:
    """Where a drawn thing sits: centre (x, y), width w, height h (inches)."""

    x: float
    y: float
    w: float
    h: float

    @property
    def top(self):
        return (self.x, self.y + self.h / 2)

    @property
    def bottom(self):
        return (self.x, self.y - self.h / 2)

    @property
    def left(self):
        return (self.x - self.w / 2, self.y)

    @property
    def right(self):
        return (self.x + self.w / 2, self.y)


def _canvas(width, height, title=None):
    """A figure whose data coordinates are inches: (0, 0) bottom left."""
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    if title:
        ax.text(width / 2, height - 0.28, title, ha="center", va="center", fontsize=TITLE,
                weight="bold", color=INK)
    return fig, ax


def _text(ax, x, y, s, size=FONT, ha="center", va="center", color=INK, **kw):
    return ax.text(x, y, s, fontsize=size, ha=ha, va=va, color=color, **kw)


def _shape(ax, x, y, s, ha="center", va="center", size=SMALL, color=SHAPE_INK):
    """A tensor shape such as [B, L, d_model], in monospace."""
    return ax.text(x, y, s, fontsize=size, ha=ha, va=va, color=color, family=MONO)


def _note(ax, x, y, s, ha="center", va="center", size=SMALL, **kw):
    return ax.text(x, y, s, fontsize=size, ha=ha, va=va, color=SHAPE_INK, style="italic", **kw)


def _op(ax, x, y, label, w=1.6, h=0.42, fill=OPERATION, size=FONT, ls="-", lw=1.2):
    """A rounded box: an operation (learned when fill=LEARNED, a norm when fill=NORM)."""
    r = min(0.12, h / 3)
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h,
                                boxstyle=f"round,pad=0,rounding_size={r}", facecolor=fill,
                                edgecolor=INK, lw=lw, linestyle=ls, zorder=3))
    _text(ax, x, y, label, size=size, color=_TEXT_ON.get(fill, INK), zorder=4)
    return _Box(x, y, w, h)


def _tensor(ax, x, y, w, h, label="", fill=DATA, shape=None, shape_at="below", size=FONT,
            lw=1.0, edge=INK, ls="-"):
    """A plain rectangle: a tensor, with its shape in monospace beside it."""
    ax.add_patch(Rectangle((x - w / 2, y - h / 2), w, h, facecolor=fill, edgecolor=edge, lw=lw,
                           linestyle=ls, zorder=3))
    if label:
        _text(ax, x, y, label, size=size, color=_TEXT_ON.get(fill, INK), zorder=4)
    if shape:
        if shape_at == "below":
            _shape(ax, x, y - h / 2 - 0.06, shape, va="top")
        elif shape_at == "above":
            _shape(ax, x, y + h / 2 + 0.06, shape, va="bottom")
        elif shape_at == "right":
            _shape(ax, x + w / 2 + 0.08, y, shape, ha="left")
        else:
            _shape(ax, x - w / 2 - 0.08, y, shape, ha="right")
    return _Box(x, y, w, h)


def _add(ax, x, y, r=0.15):
    """The residual addition: a circle with a plus."""
    ax.add_patch(Circle((x, y), r, facecolor=OPERATION, edgecolor=INK, lw=1.2, zorder=3))
    _text(ax, x, y, "+", size=FONT + 2, zorder=4)
    return _Box(x, y, 2 * r, 2 * r)


def _arrow(ax, *points, color=INK, lw=1.3, ls="-", head=True, zorder=2):
    """An arrow along straight segments through the given points."""
    style = "-|>" if head else "-"
    if len(points) == 2:
        patch = FancyArrowPatch(points[0], points[1], arrowstyle=style, mutation_scale=11,
                                color=color, lw=lw, linestyle=ls, shrinkA=0, shrinkB=0,
                                zorder=zorder)
    else:
        codes = [Path.MOVETO] + [Path.LINETO] * (len(points) - 1)
        patch = FancyArrowPatch(path=Path(points, codes), arrowstyle=style, mutation_scale=11,
                                color=color, lw=lw, linestyle=ls, shrinkA=0, shrinkB=0,
                                zorder=zorder)
    ax.add_patch(patch)
    return patch


def _residual(ax, start, end, side_x):
    """A residual path: out sideways from start, along x = side_x, into end."""
    return _arrow(ax, start, (side_x, start[1]), (side_x, end[1]), end, color=RESIDUAL,
                  ls=RESIDUAL_STYLE, lw=1.4)


def _dot(ax, x, y, color=INK):
    ax.add_patch(Circle((x, y), 0.035, facecolor=color, edgecolor=color, zorder=4))


def _grid(ax, left, top, cell, mask=None, values=None, cmap=ATTN_CMAP, vmin=0.0, vmax=1.0,
          fill=None, tf=False, size=SMALL, lw=0.6, cell_h=None):
    """A grid of cells, top-left corner at (left, top).

    mask: bool [R, C], white = True (may attend), dark = blocked; tf writes T/F in the cells.
    values: float [R, C], coloured with cmap. fill: one colour (or [R][C] colours) per cell.
    """
    cell_h = cell if cell_h is None else cell_h
    arr = mask if mask is not None else values if values is not None else fill
    arr = np.asarray(arr) if not isinstance(arr, str) else None
    rows, cols = (arr.shape[0], arr.shape[1]) if arr is not None else (1, 1)
    colormap = plt.get_cmap(cmap)
    cells = []
    for i in range(rows):
        for j in range(cols):
            if mask is not None:
                color = MASK_ALLOWED if mask[i][j] else MASK_BLOCKED
            elif values is not None:
                color = colormap((values[i][j] - vmin) / (vmax - vmin))
            else:
                color = fill if isinstance(fill, str) else fill[i][j]
            x0, y0 = left + j * cell, top - (i + 1) * cell_h
            cells.append(Rectangle((x0, y0), cell, cell_h, facecolor=color, edgecolor=INK,
                                   lw=lw))
            if tf and mask is not None:
                _text(ax, x0 + cell / 2, y0 + cell_h / 2, "T" if mask[i][j] else "F", size=size,
                      color=INK if mask[i][j] else "white", zorder=4)
    ax.add_collection(PatchCollection(cells, match_original=True, zorder=3))
    w, h = cols * cell, rows * cell_h
    return _Box(left + w / 2, top - h / 2, w, h)


def _frame(ax, box, label=None, label_side="left"):
    """A dashed rounded frame around a repeated block ("x N")."""
    ax.add_patch(FancyBboxPatch((box.x - box.w / 2, box.y - box.h / 2), box.w, box.h,
                                boxstyle="round,pad=0,rounding_size=0.15", facecolor="#F7F7F7",
                                edgecolor=MUTED, lw=1.0, linestyle=(0, (2, 2)), zorder=0))
    if label:
        x = box.x - box.w / 2 + 0.1 if label_side == "left" else box.x + box.w / 2 - 0.1
        _text(ax, x, box.y + box.h / 2 - 0.18, label, size=FONT, ha=label_side, weight="bold",
              color=SHAPE_INK)


def _qkv_in(ax, src, box, labels=True, spread=0.45):
    """Three coloured arrows (Q, K, V) from one point into the top of an attention box."""
    _dot(ax, *src)
    mid_y = (src[1] + box.y + box.h / 2) / 2
    _arrow(ax, src, (src[0], mid_y), head=False)
    for dx, color, name in ((-spread, QUERY, "Q"), (0.0, KEY, "K"), (spread, VALUE, "V")):
        end = (box.x + dx, box.y + box.h / 2)
        _arrow(ax, (src[0], mid_y), (end[0], mid_y), end, color=color, lw=1.6)
        if labels:
            _text(ax, end[0] + 0.09, end[1] + 0.09, name, size=SMALL, ha="left", color=INK,
                  weight="bold")


def _causal(n):
    return np.tril(np.ones((n, n), dtype=bool))


# --------------------------------------------------------------------------- legend
def legend():
    """The visual language itself: what each colour and shape means."""
    fig, ax = _canvas(10, 4.75, "How to read the diagrams of this course")
    rows = [3.95 - 0.5 * i for i in range(8)]
    gx, tx = 0.95, 1.75
    left = [("q", QUERY, "query (q, Q)"), ("k", KEY, "key (k, K)"), ("v", VALUE, "value (v, V)"),
            ("x", DATA, "data tensor (input, hidden state, output)"),
            ("p", POSITION, "positional information"),
            ("y", TARGET, "what the model must predict")]
    for y, (label, fill, meaning) in zip(rows, left):
        _tensor(ax, gx, y, 0.9, 0.32, label, fill=fill)
        _text(ax, tx, y, meaning, ha="left")
    _shape(ax, gx, rows[6], "[B, L, d]")
    _text(ax, tx, rows[6], "a tensor's shape (monospace)", ha="left")

    gx, tx = 5.55, 6.35
    _op(ax, gx, rows[0], "$W_Q$", w=0.9, h=0.34, fill=LEARNED)
    _text(ax, tx, rows[0], "learned weights ($W_Q$, $W_O$, FFN, E)", ha="left")
    _op(ax, gx, rows[1], "LayerNorm", w=0.9, h=0.34, fill=NORM, size=SMALL)
    _text(ax, tx, rows[1], "normalisation", ha="left")
    _op(ax, gx, rows[2], "softmax", w=0.9, h=0.34)
    _text(ax, tx, rows[2], "operation without weights", ha="left")
    _add(ax, gx, rows[3])
    _text(ax, tx, rows[3], "addition", ha="left")
    _grid(ax, gx - 0.3, rows[4] + 0.15, 0.3, mask=np.array([[True, False]]), tf=True)
    _text(ax, tx, rows[4], "mask: True = may attend; dark = blocked", ha="left")
    _arrow(ax, (gx - 0.45, rows[5]), (gx + 0.45, rows[5]), color=RESIDUAL, ls=RESIDUAL_STYLE,
           lw=1.4)
    _text(ax, tx, rows[5], "residual path (around a sublayer)", ha="left")
    _grid(ax, gx - 0.45, rows[6] + 0.1, 0.18, values=np.linspace(0, 1, 5)[None, :],
          cell_h=0.2)
    _text(ax, tx, rows[6], "attention weight, 0 to 1", ha="left")
    _frame(ax, _Box(gx, rows[7], 0.9, 0.36))
    _text(ax, gx, rows[7], "× N", size=SMALL, weight="bold", color=SHAPE_INK)
    _text(ax, tx, rows[7], "a block repeated N times", ha="left")
    _note(ax, 0.45, rows[7], "Plain rectangles are tensors; rounded boxes are operations.",
          ha="left", size=FONT)
    return fig


# --------------------------------------------------------------------------- chapter 1
def _illustrative_hour_weights(hours):
    """A made-up softmax row: the latest hours and the same hour 1 and 2 days earlier."""
    scores = np.zeros(hours)
    for lag, s in ((0, 3.3), (1, 2.6), (2, 1.6), (24, 2.4), (48, 1.7), (23, 1.0), (25, 1.0)):
        if lag < hours:
            scores[hours - 1 - lag] = s
    w = np.exp(scores)
    return w / w.sum()


def query_over_hours(hours=72):
    """Chapter 1: the query of the last hour compared with the keys of all hours."""
    fig, ax = _canvas(10, 6.4, f"The query of hour {hours} looks at all {hours} hours")
    left, right = 2.55, 8.25
    step = (right - left) / hours
    xs = left + step * (np.arange(hours) + 0.5)  # centre of each hour
    label_x = left - 0.12

    # hourly inputs X [hours, n_features], drawn with hours along x
    n_feat = 4
    rng = np.random.default_rng(0)
    shade = 0.25 + 0.5 * rng.random((n_feat, hours))
    x_top = 5.75
    _grid(ax, left, x_top, step, values=shade, cmap="Greys", vmin=0, vmax=2.5, lw=0.2,
          cell_h=0.14)
    x_box = _Box((left + right) / 2, x_top - 0.28, right - left, 0.56)
    _text(ax, label_x, x_box.y + 0.1, "hourly inputs", ha="right")
    _shape(ax, label_x, x_box.y - 0.14, f"X [{hours}, n_feat]", ha="right")
    for h in sorted({1, 24, 48, hours}):
        if h <= hours:
            _text(ax, xs[h - 1], x_top + 0.12, f"{h}", size=SMALL)
    _text(ax, label_x, x_top + 0.12, "hour", size=SMALL, ha="right", color=SHAPE_INK)

    # keys: K = X W_K, one key per hour
    k_y = 4.3
    _arrow(ax, x_box.bottom, (x_box.x, k_y + 0.12))
    _op(ax, x_box.x, 4.82, "$W_K$", w=0.7, h=0.34, fill=LEARNED)
    _grid(ax, left, k_y + 0.12, step, fill=[[KEY] * hours], lw=0.2, cell_h=0.24)
    _text(ax, label_x, k_y + 0.08, "keys", ha="right")
    _shape(ax, label_x, k_y - 0.14, f"K [{hours}, d_k]", ha="right")

    # the query of the last hour: q = x_last W_Q
    qx = 9.2
    ax.add_patch(Rectangle((right - step, x_top - n_feat * 0.14), step, n_feat * 0.14,
                           facecolor="none", edgecolor=QUERY, lw=2.0, zorder=5))
    _arrow(ax, (right, x_box.y), (qx, x_box.y), (qx, 5.05))
    _op(ax, qx, 4.82, "$W_Q$", w=0.7, h=0.34, fill=LEARNED)
    q = _tensor(ax, qx, k_y, 0.5, 0.28, "q", fill=QUERY)
    _shape(ax, qx, k_y - 0.3, "[1, d_k]")
    _arrow(ax, (qx, 4.65), q.top)
    _arrow(ax, q.left, (right + 0.04, k_y), lw=1.2)
    _note(ax, (right + qx) / 2 - 0.12, k_y + 0.17, "q · k$_j$", size=SMALL)

    # the softmax row: one weight per hour
    w_y = 3.2
    weights = _illustrative_hour_weights(hours)
    _arrow(ax, (x_box.x, k_y - 0.12), (x_box.x, w_y + 0.17))
    _note(ax, x_box.x + 0.1, (k_y + w_y) / 2 + 0.02,
          "softmax over the hours of  q K$^\\top$ / $\\sqrt{d_k}$", ha="left")
    _grid(ax, left, w_y + 0.15, step, values=weights[None, :] / weights.max(), lw=0.2,
          cell_h=0.3)
    _text(ax, label_x, w_y + 0.08, "weights", ha="right")
    _shape(ax, label_x, w_y - 0.15, f"[1, {hours}]", ha="right")
    for lag in (0, 24, 48):
        if lag < hours:
            j = hours - 1 - lag
            _text(ax, xs[j], w_y - 0.28, f"{weights[j]:.2f}", size=SMALL)

    # values: V = X W_V, reached along the left margin
    v_y = 2.0
    lane = 0.45
    _arrow(ax, (left, x_box.y), (lane, x_box.y), (lane, v_y), (left - 0.02, v_y))
    _op(ax, lane, 3.75, "$W_V$", w=0.7, h=0.34, fill=LEARNED)
    _grid(ax, left, v_y + 0.12, step, fill=[[VALUE] * hours], lw=0.2, cell_h=0.24)
    _text(ax, label_x, v_y + 0.08, "values", ha="right")
    _shape(ax, label_x, v_y - 0.14, f"V [{hours}, d_v]", ha="right")
    _arrow(ax, (x_box.x, w_y - 0.42), (x_box.x, v_y + 0.14))

    # the output: the weighted sum of the values
    out = _tensor(ax, x_box.x, 0.95, 1.3, 0.32, f"output, hour {hours}", fill=DATA, size=SMALL)
    _shape(ax, out.right[0] + 0.1, out.y, "[1, d_v]", ha="left")
    _arrow(ax, (x_box.x, v_y - 0.12), out.top)
    _note(ax, x_box.x + 0.12, (v_y + out.y) / 2 + 0.08, "$\\sum_j$ weight$_j$ $v_j$",
          ha="left", size=FONT)
    pattern = ("the latest hours and the same hour one and two days earlier get most of "
               "the weight" if hours > 48 else "a few of the latest hours get most of the weight")
    _note(ax, 5.0, 0.35, f"Illustrative weights (not from a trained model): {pattern}.",
          size=SMALL)
    return fig


def sdpa_pipeline():
    """Scaled dot-product attention as a pipeline of operations, with shapes."""
    fig, ax = _canvas(9, 7.2, "Scaled dot-product attention")
    cx = 3.6
    q = _tensor(ax, 2.2, 6.3, 0.9, 0.36, "Q", fill=QUERY, shape="[B, Lq, d_k]")
    k = _tensor(ax, 5.0, 6.3, 0.9, 0.36, "K", fill=KEY, shape="[B, Lk, d_k]")
    v = _tensor(ax, 7.6, 6.3, 0.9, 0.36, "V", fill=VALUE, shape="[B, Lk, d_v]")

    mm1 = _op(ax, cx, 5.2, "MatMul  Q K$^\\top$", w=1.9)
    _arrow(ax, (q.x, 5.95), (q.x, 5.55), (cx - 0.4, 5.55), (cx - 0.4, mm1.top[1]))
    _arrow(ax, (k.x, 5.95), (k.x, 5.55), (cx + 0.4, 5.55), (cx + 0.4, mm1.top[1]))
    scale = _op(ax, cx, 4.3, "Scale  $\\times\\, 1/\\sqrt{d_k}$", w=1.9)
    mask = _op(ax, cx, 3.4, "Mask (optional)", w=1.9, ls="--")
    soft = _op(ax, cx, 2.5, "Softmax over keys", w=1.9)
    mm2 = _op(ax, cx, 1.35, "MatMul  with V", w=1.9)
    for a, b, s in ((mm1, scale, "scores [B, Lq, Lk]"), (scale, mask, "[B, Lq, Lk]"),
                    (mask, soft, "[B, Lq, Lk]")):
        _arrow(ax, a.bottom, b.top)
        _shape(ax, cx + 0.1, (a.bottom[1] + b.top[1]) / 2, s, ha="left")
    _arrow(ax, soft.bottom, mm2.top)
    _arrow(ax, (v.x, 5.95), (v.x, mm2.y), mm2.right)

    # the mask, beside its step
    grid = _grid(ax, 5.25, 3.78, 0.19, mask=_causal(4))
    _note(ax, grid.right[0] + 0.12, 3.55, "True = may attend", ha="left")
    _note(ax, grid.right[0] + 0.12, 3.25, "blocked → −inf", ha="left")
    _arrow(ax, grid.left, mask.right, color=MUTED, lw=1.0)

    # the weights: a side output
    wts = np.array([[1, 0, 0, 0], [.4, .6, 0, 0], [.2, .3, .5, 0], [.1, .2, .3, .4]])
    ax_y = (soft.bottom[1] + mm2.top[1]) / 2
    _dot(ax, cx, ax_y)
    wg = _grid(ax, 0.55, ax_y + 0.38, 0.19, values=wts)
    _arrow(ax, (cx, ax_y), (wg.right[0] + 0.03, ax_y))
    _text(ax, wg.x, wg.top[1] + 0.35, "weights", ha="center")
    _shape(ax, wg.x, wg.top[1] + 0.14, "[B, Lq, Lk]")

    out = _tensor(ax, cx, 0.45, 1.4, 0.36, "output", fill=DATA, shape="[B, Lq, d_v]",
                  shape_at="right")
    _arrow(ax, mm2.bottom, out.top)
    return fig


def split_heads(num_heads=3, length=3, d_k=2):
    """Multi-head attention by reshaping: heads are slices of the d_model axis."""
    h, L = num_heads, length
    d_model = h * d_k
    colors = [HEAD_COLORS[i % len(HEAD_COLORS)] for i in range(h)]
    fig, ax = _canvas(10, 5.9, "Splitting d_model into heads: view and transpose")
    c = min(0.2, 1.6 / d_model)  # cell size
    gap = 0.07  # between the heads of one token
    block_gap = 0.28 if h <= 3 else 0.2  # between the heads after the transpose

    def token_rows(left, top, mixed=False):
        """[L, h, d_k]: one strip per token, split into coloured head slices."""
        for t in range(L):
            y_top = top - t * (c + gap)
            for i in range(h):
                x0 = left + i * (d_k * c + (gap if not mixed else 0))
                fill = DATA if mixed else colors[i]
                _grid(ax, x0, y_top, c, fill=[[fill] * d_k])
                if not mixed and t == 0:
                    _text(ax, x0 + d_k * c / 2, top + 0.14, f"h{i + 1}", size=SMALL)
            _text(ax, left - 0.1, y_top - c / 2, f"t{t + 1}", size=SMALL, ha="right")
        width = h * d_k * c + (0 if mixed else (h - 1) * gap)
        height = L * c + (L - 1) * gap
        return _Box(left + width / 2, top - height / 2, width, height)

    def head_blocks(left, top):
        """[h, L, d_k]: one small matrix per head, side by side."""
        for i in range(h):
            x0 = left + i * (d_k * c + block_gap)
            _grid(ax, x0, top, c, fill=[[colors[i]] * d_k] * L)
            _text(ax, x0 + d_k * c / 2, top + 0.14, f"head {i + 1}", size=SMALL)
        for t in range(L):
            _text(ax, left - 0.1, top - (t + 0.5) * c, f"t{t + 1}", size=SMALL, ha="right")
        width = h * d_k * c + (h - 1) * block_gap
        return _Box(left + width / 2, top - L * c / 2, width, L * c)

    def whole(left, top, label_heads=True):
        """[L, d_model] with the head slices coloured."""
        for t in range(L):
            _grid(ax, left, top - t * c, c, fill=[sum(([col] * d_k for col in colors), [])])
            _text(ax, left - 0.1, top - t * c - c / 2, f"t{t + 1}", size=SMALL, ha="right")
        if label_heads:
            for i in range(h):
                _text(ax, left + (i + 0.5) * d_k * c, top + 0.14, f"h{i + 1}", size=SMALL)
        return _Box(left + d_model * c / 2, top - L * c / 2, d_model * c, L * c)

    # top row: split
    # left edges: a (whole), b (per token), c (per head); c ends at the right margin
    a_left = 0.75
    c_left = 9.75 - (h * d_k * c + (h - 1) * block_gap)
    b_left = (a_left + d_model * c + c_left - (d_model * c + (h - 1) * gap)) / 2
    row1 = 4.75
    a = whole(a_left, row1 + L * c / 2)
    _shape(ax, a.x, a.bottom[1] - 0.12, "[B, L, d_model]", va="top")
    _note(ax, a.x, a.bottom[1] - 0.42, f"d_model = h · d_k = {h} · {d_k}", va="top")
    b = token_rows(b_left, row1 + (L * c + (L - 1) * gap) / 2)
    _shape(ax, b.x, b.bottom[1] - 0.12, "[B, L, h, d_k]", va="top")
    cb = head_blocks(c_left, row1 + L * c / 2)
    _shape(ax, cb.x, cb.bottom[1] - 0.12, "[B, h, L, d_k]", va="top")
    for p, r, s in ((a, b, "view"), (b, cb, "transpose(1, 2)")):
        _arrow(ax, (p.right[0] + 0.2, row1), (r.left[0] - 0.3, row1))
        _shape(ax, (p.right[0] + r.left[0]) / 2 - 0.05, row1 + 0.18, s)

    # attention, every head at once
    att = _op(ax, min(cb.x, 8.4), 3.4, "attention per head (all h at once)", w=3.0)
    _arrow(ax, (cb.x, cb.bottom[1] - 0.35), (cb.x, att.top[1]))

    # bottom row: merge, right to left
    row3 = 2.05
    cb2 = head_blocks(c_left, row3 + L * c / 2)
    _arrow(ax, (cb2.x, att.bottom[1]), (cb2.x, cb2.top[1] + 0.3))
    _shape(ax, cb2.x, cb2.bottom[1] - 0.12, "[B, h, L, d_k]", va="top")
    b2 = token_rows(b_left, row3 + (L * c + (L - 1) * gap) / 2)
    _shape(ax, b2.x, b2.bottom[1] - 0.12, "[B, L, h, d_k]", va="top")
    a2 = whole(a_left, row3 + L * c / 2)
    _shape(ax, a2.x, a2.bottom[1] - 0.12, "[B, L, d_model]", va="top")
    for p, r, s in ((cb2, b2, "transpose(1, 2)"), (b2, a2, "reshape\n(concat)")):
        _arrow(ax, (p.left[0] - 0.3, row3), (r.right[0] + 0.2, row3))
        _shape(ax, (p.left[0] + r.right[0]) / 2 - 0.05, row3 + 0.1, s, va="bottom")

    # output projection mixes the heads
    wy = 0.6
    wo = _op(ax, a2.x + 1.0, wy, "$W_O$", w=0.7, h=0.36, fill=LEARNED)
    _arrow(ax, (a2.x, a2.bottom[1] - 0.4), (a2.x, wy), wo.left)
    out_left = wo.right[0] + 0.5
    _grid(ax, out_left, wy + L * c / 2, c, fill=[[DATA] * d_model] * L)
    _arrow(ax, wo.right, (out_left - 0.03, wy))
    _shape(ax, out_left + d_model * c + 0.12, wy, "[B, L, d_model]", ha="left")
    _note(ax, out_left + d_model * c + 1.45, wy, "$W_O$ mixes the heads", ha="left")
    return fig


# --------------------------------------------------------------------------- chapter 2
def mask_conventions():
    """Two boolean conventions for the same mask, and padding x causal masks."""
    fig, ax = _canvas(10, 7.0, "One mask, two conventions")
    n, c = 5, 0.3
    causal = _causal(n)

    def labelled(left, top, mask, tf_mask, title, sub, keys=None, key_label=False):
        g = _grid(ax, left, top, c, mask=mask)
        for i in range(n):
            for j in range(n):
                on_dark = not mask[i][j]
                _text(ax, left + (j + 0.5) * c, top - (i + 0.5) * c,
                      "T" if tf_mask[i][j] else "F", size=SMALL,
                      color="white" if on_dark else INK, zorder=5)
        _text(ax, g.x, g.top[1] + 0.62, title, weight="bold")
        _note(ax, g.x, g.top[1] + 0.36, sub)
        for j in range(n):
            _text(ax, left + (j + 0.5) * c, top + 0.12, keys[j] if keys else f"{j}", size=SMALL)
        for i in range(n):
            _text(ax, left - 0.1, top - (i + 0.5) * c, keys[i] if keys else f"{i}", size=SMALL,
                  ha="right")
        if key_label:
            _text(ax, left - 0.1, top + 0.12, "key j", size=SMALL, ha="right", color=SHAPE_INK)
        return g

    top = 5.55
    g1 = labelled(1.6, top, causal, causal, "True = may attend",
                  "F.scaled_dot_product_attention, course_lib", key_label=True)
    g2 = labelled(6.9, top, causal, ~causal, "True = blocked",
                  "nn.MultiheadAttention, nn.Transformer", key_label=True)
    _text(ax, g1.left[0] - 0.45, g1.y, "query i", size=SMALL, rotation=90)
    _note(ax, g2.x, g2.bottom[1] - 0.2, "attn_mask, key_padding_mask", va="top")
    _note(ax, g1.x, g1.bottom[1] - 0.2, "mask, attn_mask", va="top")
    _arrow(ax, (g1.right[0] + 0.45, g1.y), (g2.left[0] - 0.55, g1.y))
    _shape(ax, (g1.right[0] + g2.left[0]) / 2 - 0.05, g1.y + 0.22, "blocked = ~mask")
    _note(ax, (g1.right[0] + g2.left[0]) / 2 - 0.05, g1.y - 0.3,
          "same picture,\nopposite booleans")

    # padding and causal masks for one batch row with 2 padded positions
    tokens = ["the", "cat", "sat", "pad", "pad"]
    valid = np.array([True, True, True, False, False])
    pad = np.broadcast_to(valid[None, :], (n, n))
    both = pad & causal
    top = 2.35
    _text(ax, 5.0, 3.0, "A batch row with 2 padded positions (True = may attend)",
          weight="bold")
    lefts = (1.0, 4.1, 7.2)
    g3 = labelled(lefts[0], top, pad, pad, "", "", keys=tokens)
    g4 = labelled(lefts[1], top, causal, causal, "", "", keys=tokens)
    g5 = labelled(lefts[2], top, both, both, "", "", keys=tokens)
    _text(ax, (g3.right[0] + g4.left[0]) / 2, g3.y, "&", size=TITLE + 2, weight="bold")
    _text(ax, (g4.right[0] + g5.left[0]) / 2, g3.y, "=", size=TITLE + 2, weight="bold")
    for g, name, shape in ((g3, "padding_mask(tokens, pad)", "[B, 1, 1, L]"),
                           (g4, "causal_mask(L)", "[L, L]"),
                           (g5, "padding & causal", "[B, 1, L, L]")):
        _shape(ax, g.x, g.bottom[1] - 0.18, name, va="top")
        _shape(ax, g.x, g.bottom[1] - 0.45, shape, va="top")
    return fig


def position_entry():
    """Three ways a position enters attention: added vector, score bias, rotation."""
    fig, ax = _canvas(10, 5.0, "Three ways a position enters attention")

    # (a) an added vector before the projections
    x = _tensor(ax, 0.85, 3.9, 0.75, 0.36, "$x_i$", fill=DATA)
    p = _tensor(ax, 2.35, 3.9, 0.75, 0.36, "$p_i$", fill=POSITION)
    plus = _add(ax, 1.6, 3.1)
    _arrow(ax, x.bottom, (x.x, plus.y), plus.left)
    _arrow(ax, p.bottom, (p.x, plus.y), plus.right)
    ws = []
    for i, (name, color, letter) in enumerate((("$W_Q$", QUERY, "q"), ("$W_K$", KEY, "k"),
                                               ("$W_V$", VALUE, "v"))):
        wx = 0.85 + 0.75 * i
        w = _op(ax, wx, 2.2, name, w=0.62, h=0.34, fill=LEARNED)
        t = _tensor(ax, wx, 1.45, 0.45, 0.3, letter, fill=color)
        _arrow(ax, w.bottom, t.top)
        ws.append(w)
    _dot(ax, plus.x, 2.62)
    _arrow(ax, plus.bottom, (plus.x, 2.62), head=False)
    for w in ws:
        _arrow(ax, (plus.x, 2.62), (w.x, 2.62), w.top)
    _text(ax, 1.6, 0.85, "(a) an added vector", weight="bold")
    _note(ax, 1.6, 0.5, "$x_i + p_i$ before the projections\nsinusoidal or learned",
          va="center")

    # (b) a bias added to the scores (ALiBi)
    n, c, top = 4, 0.38, 4.05
    left = 5.05 - (2 * n * c + 0.44) / 2
    scores = _grid(ax, left, top, c, fill=[[DATA] * n] * n)
    _text(ax, scores.x, top + 0.2, "scores $q_i \\cdot k_j / \\sqrt{d_k}$", size=SMALL)
    _text(ax, scores.right[0] + 0.22, scores.y, "+", size=TITLE + 2)
    dist = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    bias = _grid(ax, scores.right[0] + 0.44, top, c, values=-dist, cmap="Blues_r", vmin=-7,
                 vmax=0)
    for i in range(n):
        for j in range(n):
            d = dist[i, j]
            s = "0" if d == 0 else "−m" if d == 1 else f"−{d}m"
            _text(ax, bias.left[0] + (j + 0.5) * c, top - (i + 0.5) * c, s, size=SMALL,
                  zorder=5)
    _text(ax, bias.x, top + 0.2, "bias $-m\\,|i - j|$", size=SMALL)
    soft = _op(ax, 5.05, 1.95, "softmax", w=1.2, h=0.36)
    _arrow(ax, (5.05, scores.y - 0.25), soft.top)
    _text(ax, 5.05, 0.85, "(b) a bias on the scores", weight="bold")
    _note(ax, 5.05, 0.5, "ALiBi: far keys lose score,\none slope m per head")
    _note(ax, 5.05, 1.4, "no vector is added", size=SMALL)

    # (c) a rotation of q and k (RoPE)
    ox, oy, r = 7.45, 1.8, 1.3
    _arrow(ax, (ox - 0.2, oy), (ox + r + 0.3, oy), color=MUTED, lw=0.8)
    _arrow(ax, (ox, oy - 0.6), (ox, oy + r + 0.35), color=MUTED, lw=0.8)
    base_q, base_k = np.deg2rad(20), np.deg2rad(-25)
    rot_q, rot_k = np.deg2rad(45), np.deg2rad(35)  # angles for positions m and n
    for ang, color in ((base_q, QUERY), (base_k, KEY)):
        _arrow(ax, (ox, oy), (ox + r * np.cos(ang), oy + r * np.sin(ang)), color=color,
               lw=1.3, ls=(0, (2, 2)))
    for ang, color, name in ((base_q + rot_q, QUERY, "$q$ at position $m$"),
                             (base_k + rot_k, KEY, "$k$ at position $n$")):
        end = (ox + r * np.cos(ang), oy + r * np.sin(ang))
        _arrow(ax, (ox, oy), end, color=color, lw=2.4)
        _text(ax, end[0] + 0.08, end[1] + 0.05, name, size=SMALL, ha="left")
    for a0, a1, rr, lab in ((base_q, base_q + rot_q, 0.6, "$m\\theta$"),
                            (base_k, base_k + rot_k, 1.0, "$n\\theta$")):
        t = np.linspace(a0, a1, 30)
        ax.plot(ox + rr * np.cos(t), oy + rr * np.sin(t), color=INK, lw=0.9)
        mid = (a0 + a1) / 2
        _text(ax, ox + (rr + 0.17) * np.cos(mid), oy + (rr + 0.17) * np.sin(mid), lab,
              size=SMALL)
    _note(ax, ox + 0.1, oy - 0.78, "dashed: before rotation", size=SMALL, ha="left")
    _text(ax, 8.35, 0.85, "(c) a rotation of q and k", weight="bold")
    _note(ax, 8.35, 0.5, "RoPE: angle ∝ position;\n$q \\cdot k$ depends on $m - n$ only")
    return fig


# --------------------------------------------------------------------------- chapter 4
def _attention_box(ax, x, y, src_y, label="Multi-head attention", w=2.2):
    """An attention box fed by Q, K, V arrows that branch from (x, src_y)."""
    box = _op(ax, x, y, label, w=w, h=0.42)
    _qkv_in(ax, (x, src_y), box, labels=True)
    return box


def attention_only_vs_block():
    """Chapter 4: the attention-only model and the full Transformer block."""
    fig, ax = _canvas(10, 7.6, "Attention only, and the full Transformer block")

    # left: attention only
    lx = 2.0
    _text(ax, lx, 6.85, "attention only (chapter 4, first try)", weight="bold")
    tok = _tensor(ax, lx, 6.3, 1.3, 0.34, "tokens", shape="[B, L]", shape_at="right")
    emb = _op(ax, lx, 5.5, "Embedding", w=1.6, fill=LEARNED)
    _arrow(ax, tok.bottom, emb.top)
    att = _attention_box(ax, lx, 4.1, 4.95, label="Self-attention", w=1.8)
    _arrow(ax, emb.bottom, (lx, 4.95), head=False)
    lin = _op(ax, lx, 3.0, "Linear", w=1.6, fill=LEARNED)
    _arrow(ax, att.bottom, lin.top)
    out = _tensor(ax, lx, 2.2, 1.3, 0.34, "logits", shape="[B, L, V]", shape_at="right")
    _arrow(ax, lin.bottom, out.top)
    _note(ax, lx, 1.3, "no positions, no residual,\nno feed-forward network")

    # right: the full block (Post-Norm, as in the 2017 paper)
    rx = 6.6
    _text(ax, rx, 6.85, "full Transformer block", weight="bold")
    tok = _tensor(ax, rx, 6.3, 1.3, 0.34, "tokens", shape="[B, L]", shape_at="left")
    emb = _op(ax, rx, 5.72, "Embedding", w=1.6, fill=LEARNED)
    _arrow(ax, tok.bottom, emb.top)
    plus0 = _add(ax, rx, 5.12)
    _arrow(ax, emb.bottom, plus0.top)
    pos = _tensor(ax, rx + 1.75, 5.12, 1.55, 0.34, "positions", fill=POSITION)
    _arrow(ax, pos.left, plus0.right)
    _frame(ax, _Box(rx + 0.25, 2.78, 3.7, 4.05), label="× N", label_side="left")
    branch1 = 4.55
    _arrow(ax, plus0.bottom, (rx, branch1), head=False)
    att = _attention_box(ax, rx, 3.9, branch1 - 0.05)
    add1 = _add(ax, rx, 3.3)
    _arrow(ax, att.bottom, add1.top)
    _residual(ax, (rx, branch1 - 0.05), add1.right, rx + 1.45)
    norm1 = _op(ax, rx, 2.78, "LayerNorm", w=1.6, fill=NORM)
    _arrow(ax, add1.bottom, norm1.top)
    branch2 = 2.4
    _dot(ax, rx, branch2)
    ffn = _op(ax, rx, 1.95, "FFN (position-wise)", w=2.0, fill=LEARNED)
    _arrow(ax, norm1.bottom, ffn.top)
    add2 = _add(ax, rx, 1.4)
    _arrow(ax, ffn.bottom, add2.top)
    _residual(ax, (rx, branch2), add2.right, rx + 1.45)
    norm2 = _op(ax, rx, 0.95, "LayerNorm", w=1.6, fill=NORM)
    _arrow(ax, add2.bottom, norm2.top)
    for add in (add1, add2):
        _text(ax, rx - 0.3, add.y, "Add & Norm", size=SMALL, ha="right", color=SHAPE_INK)
    _arrow(ax, norm2.bottom, (rx, 0.45))
    _shape(ax, rx + 0.12, 0.42, "[B, L, d_model]", ha="left")
    _note(ax, rx + 2.1, 3.35, "residual", ha="left")
    return fig


def post_vs_pre_norm():
    """Post-Norm and Pre-Norm blocks: where the LayerNorm sits on the residual path."""
    fig, ax = _canvas(9, 5.8, "Post-Norm and Pre-Norm")

    def column(cx, pre):
        _text(ax, cx, 5.05, "Pre-Norm" if pre else "Post-Norm (2017 paper)", weight="bold")
        _note(ax, cx, 4.75, "x + sublayer(LN(x))" if pre else "LN(x + sublayer(x))")
        x_in = _tensor(ax, cx, 4.25, 0.6, 0.32, "x")
        branch = 3.8
        _arrow(ax, x_in.bottom, (cx, branch), head=False)
        _dot(ax, cx, branch)
        if pre:
            ln = _op(ax, cx, 3.25, "LayerNorm", w=1.5, fill=NORM)
            _arrow(ax, (cx, branch), ln.top)
            sub = _op(ax, cx, 2.45, "sublayer", w=1.5)
            _arrow(ax, ln.bottom, sub.top)
            add = _add(ax, cx, 1.7)
            _arrow(ax, sub.bottom, add.top)
            out_top = add.bottom
        else:
            sub = _op(ax, cx, 3.1, "sublayer", w=1.5)
            _arrow(ax, (cx, branch), sub.top)
            add = _add(ax, cx, 2.35)
            _arrow(ax, sub.bottom, add.top)
            ln = _op(ax, cx, 1.7, "LayerNorm", w=1.5, fill=NORM)
            _arrow(ax, add.bottom, ln.top)
            out_top = ln.bottom
        _residual(ax, (cx, branch), add.right, cx + 1.2)
        out = _tensor(ax, cx, 0.95, 0.6, 0.32, "y")
        _arrow(ax, out_top, out.top)
        # the identity path from x to y, highlighted behind the drawing
        ax.plot([cx, cx, cx + 1.2, cx + 1.2, cx, cx],
                [x_in.y, branch, branch, add.y, add.y, out.y], color=HIGHLIGHT, lw=9,
                solid_joinstyle="round", solid_capstyle="round", zorder=0.5)

    column(2.3, pre=False)
    column(6.5, pre=True)
    _note(ax, 2.3 + 1.32, 2.95, "every path ends\nin a LayerNorm", ha="left")
    _note(ax, 6.5 + 1.32, 2.95, "identity path:\nx reaches y\nun-normalised", ha="left")
    _note(ax, 4.5, 0.35, "Shaded: the identity path from x to y.  sublayer = attention or FFN.  "
          "Pre-Norm adds one LayerNorm after the last block.", size=SMALL)
    return fig


# --------------------------------------------------------------------------- chapter 5
def forecast_window(window=72):
    """Chapter 5: a window of hourly inputs, the target hour, and the next window."""
    shown = window + 2
    fig, ax = _canvas(10, 4.4, f"Forecast hour {window + 1} from the {window} hours before it")
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
    _grid(ax, left, top, step, values=shade, cmap="Greys", vmin=0, vmax=2.2, lw=0.15,
          cell_h=cell_h)
    bottom = top - len(names) * cell_h
    for i, name in enumerate(names):
        _text(ax, left - 0.1, top - (i + 0.5) * cell_h, name, size=SMALL, ha="right")
    for h in sorted({1, 24, 48, window} & set(range(1, window + 1))):
        _text(ax, left + (h - 0.5) * step, top + 0.13, f"{h}", size=SMALL)
    _text(ax, left - 0.1, top + 0.13, "hour", size=SMALL, ha="right", color=SHAPE_INK)
    # the input window, outlined, and the target cell
    ax.add_patch(Rectangle((left, bottom), window * step, top - bottom, facecolor="none",
                           edgecolor=INK, lw=1.8, zorder=5))
    tx = left + window * step
    ax.add_patch(Rectangle((tx, top - cell_h), step, cell_h, facecolor=TARGET, edgecolor=INK,
                           lw=1.0, zorder=5))
    _arrow(ax, (right + 0.3, top - cell_h / 2), (tx + step + 0.02, top - cell_h / 2),
           color=TARGET, lw=1.2)
    _text(ax, right + 0.35, top - cell_h / 2, "target", size=SMALL, ha="left", color=TARGET,
          weight="bold")
    _text(ax, right + 0.35, top - cell_h / 2 - 0.25, "(temperature)", size=SMALL, ha="left",
          color=TARGET)

    def bracket(start, y, label, target_label):
        x0, x1 = left + start * step, left + (start + window) * step
        ax.plot([x0, x0, x1, x1], [y + 0.1, y, y, y + 0.1], color=INK, lw=1.3)
        _text(ax, (x0 + x1) / 2 - 0.05, y - 0.2, label, size=SMALL, ha="right")
        _shape(ax, (x0 + x1) / 2 + 0.05, y - 0.2, f"input [{window}, n_features]", ha="left")
        ax.add_patch(Rectangle((x1, y), step, 0.16, facecolor=TARGET, edgecolor=INK, lw=0.8))
        _text(ax, right + 0.35, y + 0.08, target_label, size=SMALL, ha="left", color=TARGET)

    bracket(0, bottom - 0.3, f"window 1: hours 1-{window}",
            f"target: hour {window + 1}")
    bracket(1, bottom - 0.95, f"window 2: hours 2-{window + 1}", f"target: hour {window + 2}")
    _note(ax, 5.0, 0.4, "Each example slides the window by one hour; its target is the "
          "temperature one hour after the window.", size=SMALL)
    return fig


def alibi_bias(num_heads=4, length=8, causal=False):
    """The ALiBi bias -m_h |i - j| of each head, drawn from course_lib.positional.

    All heads share one colour scale: head 1 (steepest slope) penalises distance most, the
    last heads are almost flat over a short window, i.e. they look far. causal=True blocks
    the keys after the query (dark, as every mask in the course).
    """
    from .masks import causal_mask
    from .positional import alibi_bias as _alibi_bias
    from .positional import alibi_slopes

    bias = _alibi_bias(num_heads, length).numpy()  # [h, L, L]
    slopes = alibi_slopes(num_heads).numpy()
    allowed = causal_mask(length).numpy()
    cols = min(num_heads, 4)
    rows = -(-num_heads // cols)
    width, panel_h, top_pad = 10.0, 2.62, 0.4
    height = top_pad + panel_h * rows
    fig = plt.figure(figsize=(width, height))
    cmap = plt.get_cmap("Blues_r").with_extremes(bad=MASK_BLOCKED)
    vmin = float(bias.min())
    panel_w = (width - 1.4) / cols
    side = min(1.8, panel_w - 0.55)
    im = None
    for hd in range(num_heads):
        r, c = divmod(hd, cols)
        x0 = 0.75 + c * panel_w
        y0 = height - top_pad - (r + 1) * panel_h + 0.5
        ax = fig.add_axes((x0 / width, y0 / height, side / width, side / height))
        data = np.ma.masked_where(~allowed, bias[hd]) if causal else bias[hd]
        im = ax.imshow(data, cmap=cmap, vmin=vmin, vmax=0.0)
        ax.grid(False)  # a style such as seaborn's whitegrid would draw lines over the cells
        exponent = -8 * (hd + 1) / num_heads
        ax.set_title(f"head {hd + 1}:  $m = 2^{{{exponent:g}}}$ = {slopes[hd]:.3g}\n"
                     f"farthest key: {bias[hd].min():.3g}", fontsize=SMALL)
        ticks = list(range(0, length, max(1, length // 4)))
        ax.set_xticks(ticks)
        ax.set_yticks(ticks)
        ax.tick_params(labelsize=SMALL, length=2)
        ax.set_xlabel("key j", fontsize=SMALL, labelpad=1)
        if c == 0:
            ax.set_ylabel("query i", fontsize=SMALL, labelpad=1)
    y_bar = height - top_pad - rows * panel_h + 0.5
    cax = fig.add_axes(((width - 0.95) / width, y_bar / height, 0.12 / width,
                        (rows * panel_h - panel_h + side) / height))
    cb = fig.colorbar(im, cax=cax)
    cb.ax.tick_params(labelsize=SMALL, length=2)
    cb.ax.grid(False)
    fig.suptitle("ALiBi bias $-m_h\\,|i - j|$ added to the scores, one slope per head"
                 + ("  (causal: dark = blocked)" if causal else ""), fontsize=FONT,
                 y=1 - 0.2 / height)
    return fig


# --------------------------------------------------------------------------- chapter 6
def feature_tokenizer():
    """Chapter 6: one token per column, a [CLS] token, an encoder, a head on [CLS]."""
    fig, ax = _canvas(10, 6.3, "A feature tokenizer turns a table row into tokens")
    cols = [("Lot Area", "8450", "num"), ("Year Built", "2003", "num"),
            ("Gr Liv Area", "1710", "num"), ("Neighborhood", "CollgCr", "cat"),
            ("House Style", "2Story", "cat")]
    xs = [2.3 + 1.3 * j for j in range(len(cols))]
    cls_x, rx = 0.95, 8.15  # the [CLS] column; labels on the right
    # the row
    row_y = 5.3
    for x, (name, value, _) in zip(xs, cols):
        _tensor(ax, x, row_y + 0.15, 1.2, 0.3, name, fill=DATA, size=SMALL)
        _tensor(ax, x, row_y - 0.15, 1.2, 0.3, value, fill="white", size=SMALL)
    _text(ax, (xs[0] + xs[2]) / 2, row_y + 0.5, "numeric columns", size=SMALL, color=SHAPE_INK)
    _text(ax, (xs[3] + xs[4]) / 2, row_y + 0.5, "categorical columns", size=SMALL,
          color=SHAPE_INK)
    _text(ax, rx, row_y, "one house (a table row)", ha="left", weight="bold", size=SMALL)
    # tokenizing
    op_y = 4.3
    for x, (_, _, kind) in zip(xs, cols):
        label = "$x_j w_j + b_j$" if kind == "num" else "$E_j[c] + e_j$"
        op = _op(ax, x, op_y, label, w=1.2, h=0.4, fill=LEARNED)
        _arrow(ax, (x, row_y - 0.3), op.top)
    _text(ax, rx, op_y + 0.25, "tokenizer, per column:", ha="left", size=SMALL, weight="bold")
    _note(ax, rx, op_y, "$w_j, b_j$: learned vectors", ha="left")
    _note(ax, rx, op_y - 0.25, "$E_j$: its table, $e_j$: its", ha="left")
    _note(ax, rx, op_y - 0.47, "column embedding", ha="left")
    # tokens
    ty = 3.2
    _tensor(ax, cls_x, ty, 0.9, 0.45, "[CLS]", fill=LEARNED)
    _note(ax, cls_x, ty + 0.45, "learned,\nprepended", size=SMALL)
    for x in xs:
        _tensor(ax, x, ty, 0.8, 0.45, "token", fill=DATA, size=SMALL)
        _arrow(ax, (x, op_y - 0.2), (x, ty + 0.225))
    _text(ax, rx, ty + 0.12, "1 + n_features tokens", ha="left", size=SMALL, weight="bold")
    _shape(ax, rx, ty - 0.13, "[B, 1 + n_features, d]", ha="left")
    # encoder
    enc = _op(ax, (cls_x + xs[-1]) / 2, 2.2, "Transformer encoder  (N blocks, no mask, "
              "no positions)", w=xs[-1] - cls_x + 1.0, h=0.5)
    for x in [cls_x] + xs:
        _arrow(ax, (x, ty - 0.225), (x, enc.top[1]))
    for x in xs:
        ax.plot([x, x], [enc.bottom[1], enc.bottom[1] - 0.25], color=MUTED, lw=1.0)
    _note(ax, (xs[1] + xs[-1]) / 2, enc.bottom[1] - 0.45, "the other outputs are not used",
          size=SMALL)
    # head on [CLS]
    out_cls = _tensor(ax, cls_x, 1.3, 0.9, 0.36, "[CLS] out", fill=DATA, size=SMALL)
    _arrow(ax, (cls_x, enc.bottom[1]), out_cls.top)
    _shape(ax, cls_x + 0.55, 1.3, "[B, d]", ha="left")
    head = _op(ax, 3.0, 0.55, "Linear head", w=1.4, fill=LEARNED)
    _arrow(ax, out_cls.bottom, (cls_x, 0.55), head.left)
    price = _tensor(ax, 5.1, 0.55, 1.4, 0.36, "log price", fill=TARGET)
    _arrow(ax, head.right, price.left)
    _shape(ax, price.right[0] + 0.1, 0.55, "[B, 1]", ha="left")
    return fig


# --------------------------------------------------------------------------- chapter 7
def decoder_only_stack():
    """Chapter 7: a decoder-only (GPT) stack with tied input and output embeddings."""
    fig, ax = _canvas(9, 8.0, "A decoder-only Transformer (GPT)")
    cx = 4.3
    tok = _tensor(ax, cx, 7.25, 1.5, 0.34, "token ids", shape="[B, L]", shape_at="right")
    emb = _op(ax, cx, 6.6, "token embedding  E", w=2.2, fill=LEARNED)
    _shape(ax, emb.right[0] + 0.1, 6.6, "E: [V, d]", ha="left")
    _arrow(ax, tok.bottom, emb.top)
    plus0 = _add(ax, cx, 6.0)
    _arrow(ax, emb.bottom, plus0.top)
    pos = _tensor(ax, cx + 2.1, 6.0, 1.9, 0.34, "learned positions", fill=POSITION, size=SMALL)
    _arrow(ax, pos.left, plus0.right)

    _frame(ax, _Box(cx + 0.05, 3.67, 4.5, 3.95), label="× N", label_side="left")
    _text(ax, cx - 2.0, 5.2, "Pre-Norm\nblock", size=SMALL, ha="left", color=SHAPE_INK,
          va="top")
    b1 = 5.45
    _arrow(ax, plus0.bottom, (cx, b1), head=False)
    _dot(ax, cx, b1)
    ln1 = _op(ax, cx, 5.1, "LayerNorm", w=1.6, fill=NORM)
    _arrow(ax, (cx, b1), ln1.top)
    att = _op(ax, cx, 4.3, "causal self-attention", w=2.2)
    _qkv_in(ax, (cx, ln1.bottom[1] - 0.08), att, labels=False, spread=0.5)
    _arrow(ax, ln1.bottom, (cx, ln1.bottom[1] - 0.08), head=False)
    g = _grid(ax, att.left[0] - 0.8, 4.62, 0.13, mask=_causal(5))
    _arrow(ax, g.right, att.left, color=MUTED, lw=1.0)
    _note(ax, g.x, g.bottom[1] - 0.14, "causal mask", size=SMALL)
    add1 = _add(ax, cx, 3.75)
    _arrow(ax, att.bottom, add1.top)
    _residual(ax, (cx, b1), add1.right, cx + 1.55)
    b2 = 3.35
    _arrow(ax, add1.bottom, (cx, b2), head=False)
    _dot(ax, cx, b2)
    ln2 = _op(ax, cx, 3.0, "LayerNorm", w=1.6, fill=NORM)
    _arrow(ax, (cx, b2), ln2.top)
    ffn = _op(ax, cx, 2.4, "FFN", w=1.6, fill=LEARNED)
    _arrow(ax, ln2.bottom, ffn.top)
    add2 = _add(ax, cx, 1.95)
    _arrow(ax, ffn.bottom, add2.top)
    _residual(ax, (cx, b2), add2.right, cx + 1.55)

    lnf = _op(ax, cx, 1.45, "final LayerNorm", w=1.8, fill=NORM)
    _arrow(ax, add2.bottom, lnf.top)
    head = _op(ax, cx, 0.85, "output projection  E$^\\top$", w=2.2, fill=LEARNED)
    _arrow(ax, lnf.bottom, head.top)
    _arrow(ax, head.bottom, (cx, 0.35))
    _shape(ax, cx + 0.12, 0.3, "logits [B, L, V]", ha="left")
    # the tie: the same matrix E
    lx = 1.0
    _arrow(ax, emb.left, (lx, emb.y), (lx, head.y), head.left, color=LEARNED, lw=1.6,
           ls=(0, (1, 1.5)), head=False)
    _text(ax, lx - 0.45, 3.7, "tied:\nthe same\nmatrix E", size=SMALL, ha="center",
          color=INK)
    return fig


# --------------------------------------------------------------------------- chapter 8
def _stack(ax, x, top, rows, color, cell_w=0.9, cell_h=0.17, newest=True):
    """A stack of rows drawn from the top; with newest=True the top row is outlined thickly."""
    for r in range(rows):
        thick = newest and r == 0
        ax.add_patch(Rectangle((x - cell_w / 2, top - (r + 1) * cell_h), cell_w, cell_h,
                               facecolor=color, edgecolor=INK, lw=2.2 if thick else 0.6,
                               zorder=4 if thick else 3))
    return _Box(x, top - rows * cell_h / 2, cell_w, rows * cell_h)


def kv_cache(step=5):
    """Chapter 8: one decoding step with a KV cache, against recomputing everything."""
    t = step
    fig, ax = _canvas(10, 6.4, f"Decoding step t = {t}: with and without a KV cache")
    ax.plot([5.45, 5.45], [0.2, 5.9], color=MUTED, lw=0.8, linestyle=":")
    proj = (("$W_Q$", QUERY), ("$W_K$", KEY), ("$W_V$", VALUE))

    # left: with a cache, only the new token is projected
    _text(ax, 2.7, 5.75, "with a KV cache", weight="bold")
    xs = [1.2, 2.7, 4.2]
    x_new = _tensor(ax, 2.7, 5.25, 0.8, 0.3, "$x_t$")
    _shape(ax, 3.2, 5.25, "[1, d]", ha="left")
    _arrow(ax, x_new.bottom, (2.7, 4.92), head=False)
    vecs = []
    for x, (name, color), letter in zip(xs, proj, ("$q_t$", "$k_t$", "$v_t$")):
        w = _op(ax, x, 4.55, name, w=0.7, h=0.34, fill=LEARNED)
        _arrow(ax, (2.7, 4.92), (x, 4.92), w.top)
        vec = _tensor(ax, x, 3.95, 0.6, 0.28, letter, fill=color)
        _arrow(ax, w.bottom, vec.top)
        vecs.append(vec)
    top = 3.45
    kc = _stack(ax, xs[1], top, t, KEY)
    vc = _stack(ax, xs[2], top, t, VALUE)
    for vec, st in zip(vecs[1:], (kc, vc)):
        _arrow(ax, vec.bottom, st.top)
        _shape(ax, st.x, st.bottom[1] - 0.08, f"[{t}, d]", va="top")
    _text(ax, kc.left[0] - 0.1, kc.y, "K cache", size=SMALL, ha="right")
    _text(ax, vc.right[0] + 0.1, vc.y, "V cache", size=SMALL, ha="left")
    att = _op(ax, 2.7, 1.75, "attention: 1 query over t keys", w=3.9)
    _arrow(ax, vecs[0].bottom, (xs[0], att.top[1]), color=QUERY, lw=1.6)
    _arrow(ax, (kc.x, kc.bottom[1] - 0.3), (kc.x, att.top[1]), color=KEY, lw=1.6)
    _arrow(ax, (vc.x, vc.bottom[1] - 0.3), (vc.x, att.top[1]), color=VALUE, lw=1.6)
    w = np.exp(np.linspace(0.0, 1.5, t))[None, :] * (1 + 0.3 * np.cos(np.arange(t)))  # made up
    wrow = _grid(ax, 2.7 - t * 0.17, 1.18, 0.34, values=w / w.max(), cell_h=0.26)
    _arrow(ax, att.bottom, (att.x, wrow.top[1]))
    _shape(ax, wrow.right[0] + 0.1, wrow.y, f"weights [1, {t}]", ha="left")
    _note(ax, 2.7, 0.5, "thick rows: $k_t$, $v_t$ appended now;", size=SMALL)
    _note(ax, 2.7, 0.27, "rows 1..t−1 are read from the cache", size=SMALL)

    # right: without a cache, every token is projected again
    _text(ax, 7.7, 5.75, "without a cache", weight="bold")
    xr = [6.55, 7.7, 8.85]
    x_all = _stack(ax, 7.7, 5.52, t, DATA, cell_w=0.8, cell_h=0.11, newest=False)
    _text(ax, x_all.left[0] - 0.1, x_all.y, "$x_1 \\ldots x_t$", size=SMALL, ha="right")
    _shape(ax, x_all.right[0] + 0.1, x_all.y, f"[{t}, d]", ha="left")
    _arrow(ax, x_all.bottom, (7.7, 4.92), head=False)
    for x, (name, color) in zip(xr, proj):
        w_op = _op(ax, x, 4.55, name, w=0.7, h=0.34, fill=LEARNED)
        _arrow(ax, (7.7, 4.92), (x, 4.92), w_op.top)
        st = _stack(ax, x, 4.1, t, color, cell_w=0.75, newest=False)
        _arrow(ax, w_op.bottom, st.top)
        _shape(ax, x, st.bottom[1] - 0.08, f"[{t}, d]", va="top")
        _arrow(ax, (x, st.bottom[1] - 0.3), (x, 2.77), color=color, lw=1.6)
    att2 = _op(ax, 7.7, 2.55, "attention: t queries, t keys", w=3.3)
    c = 0.17
    g = _grid(ax, 7.7 - t * c / 2, 2.05, c, mask=_causal(t))
    _arrow(ax, att2.bottom, g.top)
    ax.add_patch(Rectangle((g.left[0], g.bottom[1]), t * c, c, facecolor="none",
                           edgecolor=TARGET, lw=2.2, zorder=5))
    _note(ax, g.right[0] + 0.15, g.bottom[1] + c / 2, "only the last row\nis needed",
          ha="left")
    _note(ax, 7.7, 0.5, "every step projects all t tokens again", size=SMALL)
    _note(ax, 7.7, 0.27, "and scores t × t pairs", size=SMALL)
    return fig


def beam_tree():
    """A beam search of beam size 2 over 3 steps, scores are sums of log-probabilities."""
    fig, ax = _canvas(10, 5.6, "Beam search, beam size 2 (illustrative log-probabilities)")
    # (parent, token, log-prob); cumulative scores follow
    steps = [
        [("root", "the", -0.4), ("root", "a", -1.2), ("root", "an", -2.3)],
        [("the", "cat", -0.9), ("the", "dog", -1.1), ("a", "cat", -0.7), ("a", "dog", -1.6)],
        [("the cat", "<eos>", -0.5), ("the cat", "sat", -0.8), ("the dog", "ran", -0.9),
         ("the dog", "<eos>", -1.2)],
    ]
    xs = [0.9, 3.3, 5.9, 8.55]
    root_y = 2.85
    pos = {"root": (xs[0], root_y)}
    score = {"root": 0.0}
    _tensor(ax, xs[0], root_y, 0.9, 0.4, "<bos>", fill=DATA)
    _shape(ax, xs[0], root_y - 0.32, "0.0")
    for s, cands in enumerate(steps):
        n = len(cands)
        ys = np.linspace(4.5, 1.2, n) if n > 3 else np.array([4.1, root_y, 1.6])
        full = []
        for (parent, tok, lp), y in zip(cands, ys):
            name = tok if parent == "root" else f"{parent} {tok}"
            score[name] = score[parent] + lp
            full.append((name, parent, tok, lp, y))
        kept = sorted(full, key=lambda f: -score[f[0]])[:2]
        kept_names = {f[0] for f in kept}
        for name, parent, tok, lp, y in full:
            keep = name in kept_names
            done = keep and tok == "<eos>"
            px, py = pos[parent]
            x = xs[s + 1]
            _arrow(ax, (px + 0.5, py), (x - 0.62, y), color=INK if keep else MUTED,
                   lw=1.3 if keep else 0.9, ls="-" if keep else (0, (3, 2)))
            mx, my = (px + 0.5 + x - 0.62) / 2, (py + y) / 2
            _text(ax, mx, my, f"{lp:.1f}".replace("-", "−"), size=SMALL,
                  color=INK if keep else MUTED,
                  bbox=dict(boxstyle="round,pad=0.12", facecolor="white", edgecolor="none"),
                  zorder=5)
            fill = TARGET if done else DATA if keep else "white"
            _tensor(ax, x, y, 1.2, 0.4, tok, fill=fill, edge=INK if keep else MUTED,
                    lw=1.6 if keep else 0.8, ls="-" if keep else (0, (3, 2)))
            _shape(ax, x, y - 0.32, f"{score[name]:.1f}".replace("-", "−"),
                   color=INK if keep else MUTED)
            if keep:
                pos[name] = (x, y)
            if done:
                _text(ax, x, y + 0.34, "finished", size=SMALL, color=TARGET, weight="bold")
    for x, s in zip(xs[1:], ("step 1", "step 2", "step 3")):
        _text(ax, x, 5.05, s, size=SMALL, color=SHAPE_INK)
    _note(ax, 5.0, 0.45, "Edges: log-probability of the next token.  Under each hypothesis: "
          "its score, the sum along its path.", size=SMALL)
    _note(ax, 5.0, 0.2, "Solid: kept (best 2 per step).  Dashed grey: pruned.  Orange: "
          "finished (ends in <eos>).", size=SMALL)
    return fig


# --------------------------------------------------------------------------- chapter 9
_SUB_H = 1.62  # height of one Pre-Norm sublayer (LN -> sublayer -> add) in encoder_decoder


def _pre_norm_sublayer(ax, cx, top_y, label, fill, qkv=True, side=1.3, width=2.1):
    """Dot -> LayerNorm -> sublayer -> add, with the residual around it (Pre-Norm).

    qkv: True draws Q, K, V arrows into the sublayer; "q" draws only Q (cross-attention).
    Returns the sublayer's box; the next sublayer starts _SUB_H below top_y.
    """
    _dot(ax, cx, top_y)
    ln = _op(ax, cx, top_y - 0.38, "LayerNorm", w=1.4, h=0.34, fill=NORM, size=SMALL)
    _arrow(ax, (cx, top_y), ln.top)
    sub = _op(ax, cx, top_y - 0.98, label, w=width, h=0.4, fill=fill, size=SMALL)
    if qkv is True:
        _qkv_in(ax, (cx, ln.bottom[1] - 0.03), sub, labels=False, spread=0.4)
        _arrow(ax, ln.bottom, (cx, ln.bottom[1] - 0.03), head=False)
    elif qkv == "q":
        _arrow(ax, ln.bottom, sub.top, color=QUERY, lw=1.6)
        _text(ax, cx + 0.1, (ln.bottom[1] + sub.top[1]) / 2, "Q", size=SMALL, ha="left",
              weight="bold")
    else:
        _arrow(ax, ln.bottom, sub.top)
    add = _add(ax, cx, top_y - 1.42, r=0.12)
    _arrow(ax, sub.bottom, add.top)
    _residual(ax, (cx, top_y), add.right, cx + side)
    _arrow(ax, add.bottom, (cx, top_y - _SUB_H), head=False)
    return sub


def _mask_beside(ax, sub, mask, note, left):
    """A small mask grid at x = left, level with the sublayer, pointing at it."""
    cell = 0.12
    g = _grid(ax, left, sub.y + mask.shape[0] * cell / 2, cell, mask=mask)
    if left < sub.x:
        _arrow(ax, g.right, sub.left, color=MUTED, lw=1.0)
    else:
        _arrow(ax, g.left, sub.right, color=MUTED, lw=1.0)
    _note(ax, g.x, g.bottom[1] - 0.08, note, size=SMALL, va="top")
    return g


def encoder_decoder():
    """Chapter 9: the encoder-decoder Transformer and the mask each attention uses."""
    fig, ax = _canvas(10, 9.0, "Encoder-decoder Transformer (Pre-Norm) and its masks")
    src_valid = np.array([True, True, True, False])  # one padded source position
    tgt_valid = np.array([True, True, True, True, False])
    src_pad = np.broadcast_to(src_valid[None, :], (4, 4))
    tgt_self = np.broadcast_to(tgt_valid[None, :], (5, 5)) & _causal(5)
    cross = np.broadcast_to(src_valid[None, :], (5, 4))

    ex, dx = 2.35, 7.0
    _text(ax, ex, 8.35, "encoder", weight="bold")
    _text(ax, dx, 8.35, "decoder", weight="bold")
    src = _tensor(ax, ex, 7.95, 1.6, 0.32, "source tokens", size=SMALL, shape="[B, Ls]",
                  shape_at="left")
    tgt = _tensor(ax, dx, 7.95, 1.9, 0.32, "<bos> y1 ... y(T-1)", size=SMALL,
                  shape="[B, Lt]", shape_at="right")
    embs = []
    for cx, tok in ((ex, src), (dx, tgt)):
        e = _op(ax, cx, 7.4, "embedding E  · √d", w=1.8, h=0.36, fill=LEARNED, size=SMALL)
        _arrow(ax, tok.bottom, e.top)
        plus = _add(ax, cx, 6.9, r=0.12)
        _arrow(ax, e.bottom, plus.top)
        p = _tensor(ax, cx - 0.95, 6.9, 0.95, 0.28, "sin/cos", fill=POSITION, size=SMALL)
        _arrow(ax, p.right, plus.left)
        _arrow(ax, plus.bottom, (cx, 6.5), head=False)
        embs.append(e)
    ax.plot([embs[0].right[0], embs[1].left[0]], [7.4, 7.4], color=LEARNED, lw=1.8,
            linestyle=(0, (1, 1.5)))
    _text(ax, (ex + dx) / 2, 7.55, "one shared table E", size=SMALL)

    # encoder: N x (self-attention, FFN), then a final LayerNorm
    top = 6.5
    _frame(ax, _Box(2.2, top - _SUB_H + 0.05, 3.7, 2 * _SUB_H + 0.3), label="× N")
    sa = _pre_norm_sublayer(ax, ex, top, "self-attention", OPERATION)
    _mask_beside(ax, sa, src_pad, "source\npadding", left=0.55)
    _pre_norm_sublayer(ax, ex, top - _SUB_H, "FFN", LEARNED, qkv=False, width=1.4)
    enc_bottom = top - 2 * _SUB_H
    lnf = _op(ax, ex, enc_bottom - 0.4, "final LayerNorm", w=1.6, h=0.34, fill=NORM, size=SMALL)
    _arrow(ax, (ex, enc_bottom), lnf.top)
    mem = _tensor(ax, ex, enc_bottom - 1.05, 1.5, 0.34, "memory", size=SMALL,
                  shape="[B, Ls, d]", shape_at="below")
    _arrow(ax, lnf.bottom, mem.top)

    # decoder: N x (masked self-attention, cross-attention, FFN), final LayerNorm, E^T
    _frame(ax, _Box(7.5, top - 1.5 * _SUB_H + 0.05, 3.8, 3 * _SUB_H + 0.3), label="× N")
    msa = _pre_norm_sublayer(ax, dx, top, "masked self-attention", OPERATION)
    _mask_beside(ax, msa, tgt_self, "padding\n& causal", left=dx + 1.5)
    ca = _pre_norm_sublayer(ax, dx, top - _SUB_H, "cross-attention", OPERATION, qkv="q")
    _mask_beside(ax, ca, cross, "source\npadding", left=dx + 1.5)
    _pre_norm_sublayer(ax, dx, top - 2 * _SUB_H, "FFN", LEARNED, qkv=False, width=1.4)
    # K and V of the cross-attention come from the memory
    for lane, dy, color in ((4.7, 0.08, KEY), (4.85, -0.08, VALUE)):
        y0 = mem.y + (0.06 if color == KEY else -0.06)
        _arrow(ax, (mem.right[0], y0), (lane, y0), (lane, ca.y + dy), (ca.left[0], ca.y + dy),
               color=color, lw=1.6)
    _text(ax, 4.95, ca.y + 0.3, "K, V from memory", size=SMALL, ha="left")
    dec_bottom = top - 3 * _SUB_H
    lnd = _op(ax, dx, dec_bottom - 0.4, "final LayerNorm", w=1.6, h=0.34, fill=NORM, size=SMALL)
    _arrow(ax, (dx, dec_bottom), lnd.top)
    out = _op(ax, dx, dec_bottom - 1.0, "output projection  E$^\\top$ (tied)", w=2.6, h=0.36,
              fill=LEARNED, size=SMALL)
    _arrow(ax, lnd.bottom, out.top)
    _shape(ax, out.right[0] + 0.1, out.y, "[B, Lt, V]", ha="left")
    return fig


def teacher_forcing_shift(length=3):
    """Decoder input <bos> y1 .. yT and target y1 .. <eos>: the one-token shift."""
    T = length
    inputs = ["<bos>"] + [f"y{t}" for t in range(1, T + 1)]
    targets = [f"y{t}" for t in range(1, T + 1)] + ["<eos>"]
    n = len(inputs)
    fig, ax = _canvas(9, 4.2, "Teacher forcing: the target is the input shifted by one")
    spacing = min(1.45, 5.5 / (n - 1))
    xs = 2.7 + spacing * np.arange(n)
    tok_w = min(0.9, spacing - 0.3)
    y_in, y_dec, y_out = 0.95, 2.1, 3.2
    dec = _op(ax, (xs[0] + xs[-1]) / 2, y_dec, "decoder (causal: position t sees 1..t)",
              w=xs[-1] - xs[0] + 1.2, h=0.45)
    for t, x in enumerate(xs):
        i = _tensor(ax, x, y_in, tok_w, 0.36, inputs[t], fill=DATA)
        o = _tensor(ax, x, y_out, tok_w, 0.36, targets[t], fill=TARGET)
        _arrow(ax, i.top, (x, dec.bottom[1]))
        _arrow(ax, (x, dec.top[1]), o.bottom)
        _shape(ax, x, y_in - 0.32, f"t={t + 1}")
        if t + 1 < n:  # the same token, one position later
            _arrow(ax, (x + tok_w * 0.4, y_out - 0.19), (xs[t + 1] - tok_w / 3, y_in + 0.19),
                   color=MUTED,
                   lw=0.9, ls=(0, (3, 2)), zorder=1)
    _text(ax, 1.95, y_out, "target", ha="right", weight="bold")
    _shape(ax, 1.95, y_out - 0.25, "tgt[:, 1:]", ha="right")
    _text(ax, 1.95, y_in, "decoder input", ha="right", weight="bold")
    _shape(ax, 1.95, y_in - 0.25, "tgt[:, :-1]", ha="right")
    _note(ax, 4.5, 0.3, "Position t predicts the token at position t + 1 of the sentence; "
          "dashed: the same token, one step later.", size=SMALL)
    return fig
