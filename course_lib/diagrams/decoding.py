"""Decoding: one step with and without a KV cache, and a beam search (chapter 8)."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Rectangle

from .style import (
    DATA,
    INK,
    KEY,
    LEARNED,
    MUTED,
    QUERY,
    SHAPE_INK,
    SMALL,
    TARGET,
    VALUE,
    Box,
    arrow,
    canvas,
    grid,
    lower_triangle,
    note,
    op,
    shape_text,
    tensor,
    text,
)


# --------------------------------------------------------------------------- chapter 8
def _stack(ax, x, top, rows, color, cell_w=0.9, cell_h=0.17, newest=True):
    """A stack of rows drawn from the top; with newest=True the top row is outlined thickly."""
    for r in range(rows):
        thick = newest and r == 0
        ax.add_patch(Rectangle((x - cell_w / 2, top - (r + 1) * cell_h), cell_w, cell_h,
                               facecolor=color, edgecolor=INK, lw=2.2 if thick else 0.6,
                               zorder=4 if thick else 3))
    return Box(x, top - rows * cell_h / 2, cell_w, rows * cell_h)


def kv_cache(step=5):
    """Chapter 8: one decoding step with a KV cache, against recomputing everything."""
    t = step
    fig, ax = canvas(10, 6.4, f"Decoding step t = {t}: with and without a KV cache")
    ax.plot([5.45, 5.45], [0.2, 5.9], color=MUTED, lw=0.8, linestyle=":")
    proj = (("$W_Q$", QUERY), ("$W_K$", KEY), ("$W_V$", VALUE))

    # left: with a cache, only the new token is projected
    text(ax, 2.7, 5.75, "with a KV cache", weight="bold")
    xs = [1.2, 2.7, 4.2]
    x_new = tensor(ax, 2.7, 5.25, 0.8, 0.3, "$x_t$")
    shape_text(ax, 3.2, 5.25, "[1, d]", ha="left")
    arrow(ax, x_new.bottom, (2.7, 4.92), head=False)
    vecs = []
    for x, (name, color), letter in zip(xs, proj, ("$q_t$", "$k_t$", "$v_t$")):
        w = op(ax, x, 4.55, name, w=0.7, h=0.34, fill=LEARNED)
        arrow(ax, (2.7, 4.92), (x, 4.92), w.top)
        vec = tensor(ax, x, 3.95, 0.6, 0.28, letter, fill=color)
        arrow(ax, w.bottom, vec.top)
        vecs.append(vec)
    top = 3.45
    kc = _stack(ax, xs[1], top, t, KEY)
    vc = _stack(ax, xs[2], top, t, VALUE)
    for vec, st in zip(vecs[1:], (kc, vc)):
        arrow(ax, vec.bottom, st.top)
        shape_text(ax, st.x, st.bottom[1] - 0.08, f"[{t}, d]", va="top")
    text(ax, kc.left[0] - 0.1, kc.y, "K cache", size=SMALL, ha="right")
    text(ax, vc.right[0] + 0.1, vc.y, "V cache", size=SMALL, ha="left")
    att = op(ax, 2.7, 1.75, "attention: 1 query over t keys", w=3.9)
    arrow(ax, vecs[0].bottom, (xs[0], att.top[1]), color=QUERY, lw=1.6)
    arrow(ax, (kc.x, kc.bottom[1] - 0.3), (kc.x, att.top[1]), color=KEY, lw=1.6)
    arrow(ax, (vc.x, vc.bottom[1] - 0.3), (vc.x, att.top[1]), color=VALUE, lw=1.6)
    w = np.exp(np.linspace(0.0, 1.5, t))[None, :] * (1 + 0.3 * np.cos(np.arange(t)))  # made up
    wrow = grid(ax, 2.7 - t * 0.17, 1.18, 0.34, values=w / w.max(), cell_h=0.26)
    arrow(ax, att.bottom, (att.x, wrow.top[1]))
    shape_text(ax, wrow.right[0] + 0.1, wrow.y, f"weights [1, {t}]", ha="left")
    note(ax, 2.7, 0.5, "thick rows: $k_t$, $v_t$ appended now;", size=SMALL)
    note(ax, 2.7, 0.27, "rows 1..t−1 are read from the cache", size=SMALL)

    # right: without a cache, every token is projected again
    text(ax, 7.7, 5.75, "without a cache", weight="bold")
    xr = [6.55, 7.7, 8.85]
    x_all = _stack(ax, 7.7, 5.52, t, DATA, cell_w=0.8, cell_h=0.11, newest=False)
    text(ax, x_all.left[0] - 0.1, x_all.y, "$x_1 \\ldots x_t$", size=SMALL, ha="right")
    shape_text(ax, x_all.right[0] + 0.1, x_all.y, f"[{t}, d]", ha="left")
    arrow(ax, x_all.bottom, (7.7, 4.92), head=False)
    for x, (name, color) in zip(xr, proj):
        w_op = op(ax, x, 4.55, name, w=0.7, h=0.34, fill=LEARNED)
        arrow(ax, (7.7, 4.92), (x, 4.92), w_op.top)
        st = _stack(ax, x, 4.1, t, color, cell_w=0.75, newest=False)
        arrow(ax, w_op.bottom, st.top)
        shape_text(ax, x, st.bottom[1] - 0.08, f"[{t}, d]", va="top")
        arrow(ax, (x, st.bottom[1] - 0.3), (x, 2.77), color=color, lw=1.6)
    att2 = op(ax, 7.7, 2.55, "attention: t queries, t keys", w=3.3)
    c = 0.17
    g = grid(ax, 7.7 - t * c / 2, 2.05, c, mask=lower_triangle(t))
    arrow(ax, att2.bottom, g.top)
    ax.add_patch(Rectangle((g.left[0], g.bottom[1]), t * c, c, facecolor="none",
                           edgecolor=TARGET, lw=2.2, zorder=5))
    note(ax, g.right[0] + 0.15, g.bottom[1] + c / 2, "only the last row\nis needed",
         ha="left")
    note(ax, 7.7, 0.5, "every step projects all t tokens again", size=SMALL)
    note(ax, 7.7, 0.27, "and scores t × t pairs", size=SMALL)
    return fig


def beam_tree():
    """A beam search of beam size 2 over 3 steps, scores are sums of log-probabilities."""
    fig, ax = canvas(10, 5.6, "Beam search, beam size 2 (illustrative log-probabilities)")
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
    tensor(ax, xs[0], root_y, 0.9, 0.4, "<bos>", fill=DATA)
    shape_text(ax, xs[0], root_y - 0.32, "0.0")
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
            arrow(ax, (px + 0.5, py), (x - 0.62, y), color=INK if keep else MUTED,
                  lw=1.3 if keep else 0.9, ls="-" if keep else (0, (3, 2)))
            mx, my = (px + 0.5 + x - 0.62) / 2, (py + y) / 2
            text(ax, mx, my, f"{lp:.1f}".replace("-", "−"), size=SMALL,
                 color=INK if keep else MUTED,
                 bbox=dict(boxstyle="round,pad=0.12", facecolor="white", edgecolor="none"),
                 zorder=5)
            fill = TARGET if done else DATA if keep else "white"
            tensor(ax, x, y, 1.2, 0.4, tok, fill=fill, edge=INK if keep else MUTED,
                   lw=1.6 if keep else 0.8, ls="-" if keep else (0, (3, 2)))
            shape_text(ax, x, y - 0.32, f"{score[name]:.1f}".replace("-", "−"),
                       color=INK if keep else MUTED)
            if keep:
                pos[name] = (x, y)
            if done:
                text(ax, x, y + 0.34, "finished", size=SMALL, color=TARGET, weight="bold")
    for x, s in zip(xs[1:], ("step 1", "step 2", "step 3")):
        text(ax, x, 5.05, s, size=SMALL, color=SHAPE_INK)
    note(ax, 5.0, 0.45, "Edges: log-probability of the next token.  Under each hypothesis: "
         "its score, the sum along its path.", size=SMALL)
    note(ax, 5.0, 0.2, "Solid: kept (best 2 per step).  Dashed grey: pruned.  Orange: "
         "finished (ends in <eos>).", size=SMALL)
    return fig
