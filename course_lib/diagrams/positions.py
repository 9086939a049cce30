"""How a position enters attention: added vectors, score biases (ALiBi), rotations
(chapters 3 and 5)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import PatchCollection
from matplotlib.patches import Rectangle

from .style import (
    DATA,
    FONT,
    INK,
    KEY,
    LEARNED,
    MASK_BLOCKED,
    MUTED,
    POSITION,
    QUERY,
    SMALL,
    TITLE,
    VALUE,
    add,
    arrow,
    canvas,
    dot,
    grid,
    note,
    op,
    tensor,
    text,
)


# --------------------------------------------------------------------------- chapter 3
def position_entry():
    """Three ways a position enters attention: added vector, score bias, rotation."""
    fig, ax = canvas(10, 5.0, "Three ways a position enters attention")

    # (a) an added vector before the projections
    x = tensor(ax, 0.85, 3.9, 0.75, 0.36, "$x_i$", fill=DATA)
    p = tensor(ax, 2.35, 3.9, 0.75, 0.36, "$p_i$", fill=POSITION)
    plus = add(ax, 1.6, 3.1)
    arrow(ax, x.bottom, (x.x, plus.y), plus.left)
    arrow(ax, p.bottom, (p.x, plus.y), plus.right)
    ws = []
    for i, (name, color, letter) in enumerate((("$W_Q$", QUERY, "q"), ("$W_K$", KEY, "k"),
                                               ("$W_V$", VALUE, "v"))):
        wx = 0.85 + 0.75 * i
        w = op(ax, wx, 2.2, name, w=0.62, h=0.34, fill=LEARNED)
        t = tensor(ax, wx, 1.45, 0.45, 0.3, letter, fill=color)
        arrow(ax, w.bottom, t.top)
        ws.append(w)
    dot(ax, plus.x, 2.62)
    arrow(ax, plus.bottom, (plus.x, 2.62), head=False)
    for w in ws:
        arrow(ax, (plus.x, 2.62), (w.x, 2.62), w.top)
    text(ax, 1.6, 0.85, "(a) an added vector", weight="bold")
    note(ax, 1.6, 0.5, "$x_i + p_i$ before the projections\nsinusoidal or learned",
         va="center")

    # (b) a bias added to the scores (ALiBi)
    n, c, top = 4, 0.38, 4.05
    left = 5.05 - (2 * n * c + 0.44) / 2
    scores = grid(ax, left, top, c, fill=[[DATA] * n] * n)
    text(ax, scores.x, top + 0.2, "scores $q_i \\cdot k_j / \\sqrt{d_k}$", size=SMALL)
    text(ax, scores.right[0] + 0.22, scores.y, "+", size=TITLE + 2)
    dist = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    bias = grid(ax, scores.right[0] + 0.44, top, c, values=-dist, cmap="Blues_r", vmin=-7,
                vmax=0)
    for i in range(n):
        for j in range(n):
            d = dist[i, j]
            s = "0" if d == 0 else "−m" if d == 1 else f"−{d}m"
            text(ax, bias.left[0] + (j + 0.5) * c, top - (i + 0.5) * c, s, size=SMALL,
                 zorder=5)
    text(ax, bias.x, top + 0.2, "bias $-m\\,|i - j|$", size=SMALL)
    soft = op(ax, 5.05, 1.95, "softmax", w=1.2, h=0.36)
    arrow(ax, (5.05, scores.y - 0.25), soft.top)
    text(ax, 5.05, 0.85, "(b) a bias on the scores", weight="bold")
    note(ax, 5.05, 0.5, "ALiBi: far keys lose score,\none slope m per head")
    note(ax, 5.05, 1.4, "no vector is added", size=SMALL)

    # (c) a rotation of q and k (RoPE)
    ox, oy, r = 7.45, 1.8, 1.3
    arrow(ax, (ox - 0.2, oy), (ox + r + 0.3, oy), color=MUTED, lw=0.8)
    arrow(ax, (ox, oy - 0.6), (ox, oy + r + 0.35), color=MUTED, lw=0.8)
    base_q, base_k = np.deg2rad(20), np.deg2rad(-25)
    rot_q, rot_k = np.deg2rad(45), np.deg2rad(35)  # angles for positions m and n
    for ang, color in ((base_q, QUERY), (base_k, KEY)):
        arrow(ax, (ox, oy), (ox + r * np.cos(ang), oy + r * np.sin(ang)), color=color,
              lw=1.3, ls=(0, (2, 2)))
    for ang, color, name in ((base_q + rot_q, QUERY, "$q$ at position $m$"),
                             (base_k + rot_k, KEY, "$k$ at position $n$")):
        end = (ox + r * np.cos(ang), oy + r * np.sin(ang))
        arrow(ax, (ox, oy), end, color=color, lw=2.4)
        text(ax, end[0] + 0.08, end[1] + 0.05, name, size=SMALL, ha="left")
    for a0, a1, rr, lab in ((base_q, base_q + rot_q, 0.6, "$m\\theta$"),
                            (base_k, base_k + rot_k, 1.0, "$n\\theta$")):
        t = np.linspace(a0, a1, 30)
        ax.plot(ox + rr * np.cos(t), oy + rr * np.sin(t), color=INK, lw=0.9)
        mid = (a0 + a1) / 2
        text(ax, ox + (rr + 0.17) * np.cos(mid), oy + (rr + 0.17) * np.sin(mid), lab,
             size=SMALL)
    note(ax, ox + 0.1, oy - 0.78, "dashed: before rotation", size=SMALL, ha="left")
    text(ax, 8.35, 0.85, "(c) a rotation of q and k", weight="bold")
    note(ax, 8.35, 0.5, "RoPE: angle ∝ position;\n$q \\cdot k$ depends on $m - n$ only")
    return fig


# --------------------------------------------------------------------------- chapter 5
def alibi_bias(num_heads=4, length=8, causal=False):
    """The ALiBi bias -m_h |i - j| of each head, drawn from course_lib.positional.

    All heads share one colour scale: head 1 (steepest slope) penalises distance most, the
    last heads are almost flat over a short window, i.e. they look far. causal=True blocks
    the keys after the query: light and hatched (light = blocked, as every mask in the
    course; the hatching tells it from the faintest bias).
    """
    from ..masks import causal_mask
    from ..positional import alibi_bias as _alibi_bias
    from ..positional import alibi_slopes

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
        if causal:
            blocked = [Rectangle((j - 0.5, i - 0.5), 1, 1) for i, j in zip(*np.nonzero(~allowed))]
            ax.add_collection(PatchCollection(blocked, facecolor=MASK_BLOCKED, edgecolor=MUTED,
                                              hatch="///", lw=0))
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
                 + ("  (causal: hatched = blocked)" if causal else ""), fontsize=FONT,
                 y=1 - 0.2 / height)
    return fig
