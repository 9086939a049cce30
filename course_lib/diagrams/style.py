"""The visual language of the course's diagrams: the palette and the drawing primitives.

Every diagram of the course is drawn from the names below, so one colour or shape means one
thing in every chapter (``legend()`` draws this key):

- queries, keys and values always have the same colours (Okabe-Ito: readable in print and
  for colour-blind readers): ``QUERY`` orange, ``KEY`` sky blue, ``VALUE`` bluish green;
- plain rectangles are tensors (data, ``tensor``), rounded boxes are operations (``op``):
  reddish purple when the operation holds learned weights (W_Q, W_K, W_V, W_O, FFN,
  embeddings), yellow for norms, white for operations without weights (MatMul, softmax);
- a mask cell is dark (``MASK_ALLOWED``) when it is True = "may attend" and light
  (``MASK_BLOCKED``) when it is blocked: the colours that value 1 and value 0 get in a
  heatmap drawn with the "Blues" colour map, so a mask looks the same in a diagram and in a
  heatmap of the mask (``MASK_CMAP``, ``mask_handles()``);
- a residual path is a dashed dark line that goes around its sublayer (``residual``);
- positional information is dark blue, what a model must predict is vermillion, attention
  weights use one light-to-dark colour map (``ATTN_CMAP``);
- tensor shapes are written in a monospace font (``shape_text``).

Coordinates are inches: ``canvas(width, height)`` makes a figure whose data coordinates run
from (0, 0) at the bottom left to (width, height); every primitive draws on its ``ax`` and
returns the ``Box`` it covers, so the next arrow can start at ``box.bottom``.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import PatchCollection
from matplotlib.colors import ListedColormap
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Patch, Rectangle
from matplotlib.path import Path

# --------------------------------------------------------------------------- palette
QUERY = "#E69F00"  # orange
KEY = "#56B4E9"  # sky blue
VALUE = "#009E73"  # bluish green
LEARNED = "#CC79A7"  # reddish purple: operations with learned weights
NORM = "#F0E442"  # yellow: LayerNorm
POSITION = "#0072B2"  # blue: positional information (white text on it)
TARGET = "#D55E00"  # vermillion: what a model must predict
DATA = "#E8E8E8"  # light grey: data tensors
OPERATION = "#FFFFFF"  # white: operations without weights
# masks: the colours of 1 (True) and 0 (False) in a heatmap of the mask with cmap="Blues"
MASK_ALLOWED = "#08306B"  # dark: True = may attend
MASK_BLOCKED = "#F7FBFF"  # light: blocked (-inf before the softmax)
MASK_CMAP = ListedColormap([MASK_BLOCKED, MASK_ALLOWED], name="course_mask")  # 0, 1
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

# which fill goes with which text colour (dark fills take white text)
TEXT_ON = {POSITION: "white", MASK_ALLOWED: "white", TARGET: "white"}


def text_on(fill):
    """The colour of text written on a cell or box filled with ``fill``."""
    return TEXT_ON.get(fill, INK)


def mask_handles():
    """Legend entries for a mask, for ``ax.legend(handles=mask_handles())`` beside a heatmap."""
    return [Patch(facecolor=MASK_ALLOWED, edgecolor=INK, label="True: may attend"),
            Patch(facecolor=MASK_BLOCKED, edgecolor=INK, label="False: blocked")]


def lower_triangle(n):
    """The causal pattern, bool [n, n]: query i may attend to keys 0..i."""
    return np.tril(np.ones((n, n), dtype=bool))


# --------------------------------------------------------------------------- primitives
@dataclass(frozen=True)
class Box:
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


def canvas(width, height, title=None):
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


def text(ax, x, y, s, size=FONT, ha="center", va="center", color=INK, **kw):
    """A label, centred on (x, y) unless ha/va say otherwise."""
    return ax.text(x, y, s, fontsize=size, ha=ha, va=va, color=color, **kw)


def shape_text(ax, x, y, s, ha="center", va="center", size=SMALL, color=SHAPE_INK):
    """A tensor shape such as [B, L, d_model], in monospace."""
    return ax.text(x, y, s, fontsize=size, ha=ha, va=va, color=color, family=MONO)


def note(ax, x, y, s, ha="center", va="center", size=SMALL, **kw):
    """A remark beside the drawing, in italics."""
    return ax.text(x, y, s, fontsize=size, ha=ha, va=va, color=SHAPE_INK, style="italic", **kw)


def op(ax, x, y, label, w=1.6, h=0.42, fill=OPERATION, size=FONT, ls="-", lw=1.2):
    """A rounded box: an operation (learned when fill=LEARNED, a norm when fill=NORM)."""
    r = min(0.12, h / 3)
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h,
                                boxstyle=f"round,pad=0,rounding_size={r}", facecolor=fill,
                                edgecolor=INK, lw=lw, linestyle=ls, zorder=3))
    text(ax, x, y, label, size=size, color=text_on(fill), zorder=4)
    return Box(x, y, w, h)


def tensor(ax, x, y, w, h, label="", fill=DATA, shape=None, shape_at="below", size=FONT,
           lw=1.0, edge=INK, ls="-"):
    """A plain rectangle: a tensor, with its shape in monospace beside it."""
    ax.add_patch(Rectangle((x - w / 2, y - h / 2), w, h, facecolor=fill, edgecolor=edge, lw=lw,
                           linestyle=ls, zorder=3))
    if label:
        text(ax, x, y, label, size=size, color=text_on(fill), zorder=4)
    if shape:
        if shape_at == "below":
            shape_text(ax, x, y - h / 2 - 0.06, shape, va="top")
        elif shape_at == "above":
            shape_text(ax, x, y + h / 2 + 0.06, shape, va="bottom")
        elif shape_at == "right":
            shape_text(ax, x + w / 2 + 0.08, y, shape, ha="left")
        else:
            shape_text(ax, x - w / 2 - 0.08, y, shape, ha="right")
    return Box(x, y, w, h)


def add(ax, x, y, r=0.15):
    """The residual addition: a circle with a plus."""
    ax.add_patch(Circle((x, y), r, facecolor=OPERATION, edgecolor=INK, lw=1.2, zorder=3))
    text(ax, x, y, "+", size=FONT + 2, zorder=4)
    return Box(x, y, 2 * r, 2 * r)


def arrow(ax, *points, color=INK, lw=1.3, ls="-", head=True, zorder=2):
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


def residual(ax, start, end, side_x):
    """A residual path: out sideways from start, along x = side_x, into end."""
    return arrow(ax, start, (side_x, start[1]), (side_x, end[1]), end, color=RESIDUAL,
                 ls=RESIDUAL_STYLE, lw=1.4)


def dot(ax, x, y, color=INK):
    """A branch point: one value going to several places."""
    ax.add_patch(Circle((x, y), 0.035, facecolor=color, edgecolor=color, zorder=4))


def grid(ax, left, top, cell, mask=None, values=None, cmap=ATTN_CMAP, vmin=0.0, vmax=1.0,
         fill=None, tf=False, size=SMALL, lw=0.6, cell_h=None):
    """A grid of cells, top-left corner at (left, top).

    mask: bool [R, C], dark = True (may attend), light = blocked; tf writes T/F.
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
                text(ax, x0 + cell / 2, y0 + cell_h / 2, "T" if mask[i][j] else "F", size=size,
                     color=text_on(color), zorder=4)
    ax.add_collection(PatchCollection(cells, match_original=True, zorder=3))
    w, h = cols * cell, rows * cell_h
    return Box(left + w / 2, top - h / 2, w, h)


def frame(ax, box, label=None, label_side="left"):
    """A dashed rounded frame around a repeated block ("x N")."""
    ax.add_patch(FancyBboxPatch((box.x - box.w / 2, box.y - box.h / 2), box.w, box.h,
                                boxstyle="round,pad=0,rounding_size=0.15", facecolor="#F7F7F7",
                                edgecolor=MUTED, lw=1.0, linestyle=(0, (2, 2)), zorder=0))
    if label:
        x = box.x - box.w / 2 + 0.1 if label_side == "left" else box.x + box.w / 2 - 0.1
        text(ax, x, box.y + box.h / 2 - 0.18, label, size=FONT, ha=label_side, weight="bold",
             color=SHAPE_INK)


def qkv_in(ax, src, box, labels=True, spread=0.45):
    """Three coloured arrows (Q, K, V) from one point into the top of an attention box."""
    dot(ax, *src)
    mid_y = (src[1] + box.y + box.h / 2) / 2
    arrow(ax, src, (src[0], mid_y), head=False)
    for dx, color, name in ((-spread, QUERY, "Q"), (0.0, KEY, "K"), (spread, VALUE, "V")):
        end = (box.x + dx, box.y + box.h / 2)
        arrow(ax, (src[0], mid_y), (end[0], mid_y), end, color=color, lw=1.6)
        if labels:
            text(ax, end[0] + 0.09, end[1] + 0.09, name, size=SMALL, ha="left", color=INK,
                 weight="bold")


