"""Attention itself: a query over keys and values, the pipeline of scaled dot-product
attention, heads by reshaping, and the two boolean conventions of masks (chapters 1-2)."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Rectangle

from .style import (
    DATA,
    FONT,
    HEAD_COLORS,
    KEY,
    LEARNED,
    MASK_ALLOWED,
    MASK_BLOCKED,
    MUTED,
    QUERY,
    SHAPE_INK,
    SMALL,
    TITLE,
    VALUE,
    Box,
    arrow,
    canvas,
    dot,
    grid,
    lower_triangle,
    note,
    op,
    shape_text,
    tensor,
    text,
    text_on,
)


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
    fig, ax = canvas(10, 6.4, f"The query of hour {hours} looks at all {hours} hours")
    left, right = 2.55, 8.25
    step = (right - left) / hours
    xs = left + step * (np.arange(hours) + 0.5)  # centre of each hour
    label_x = left - 0.12

    # hourly inputs X [hours, n_features], drawn with hours along x
    n_feat = 4
    rng = np.random.default_rng(0)
    shade = 0.25 + 0.5 * rng.random((n_feat, hours))
    x_top = 5.75
    grid(ax, left, x_top, step, values=shade, cmap="Greys", vmin=0, vmax=2.5, lw=0.2,
         cell_h=0.14)
    x_box = Box((left + right) / 2, x_top - 0.28, right - left, 0.56)
    text(ax, label_x, x_box.y + 0.1, "hourly inputs", ha="right")
    shape_text(ax, label_x, x_box.y - 0.14, f"X [{hours}, n_feat]", ha="right")
    for h in sorted({1, 24, 48, hours}):
        if h <= hours:
            text(ax, xs[h - 1], x_top + 0.12, f"{h}", size=SMALL)
    text(ax, label_x, x_top + 0.12, "hour", size=SMALL, ha="right", color=SHAPE_INK)

    # keys: K = X W_K, one key per hour
    k_y = 4.3
    arrow(ax, x_box.bottom, (x_box.x, k_y + 0.12))
    op(ax, x_box.x, 4.82, "$W_K$", w=0.7, h=0.34, fill=LEARNED)
    grid(ax, left, k_y + 0.12, step, fill=[[KEY] * hours], lw=0.2, cell_h=0.24)
    text(ax, label_x, k_y + 0.08, "keys", ha="right")
    shape_text(ax, label_x, k_y - 0.14, f"K [{hours}, d_k]", ha="right")

    # the query of the last hour: q = x_last W_Q
    qx = 9.2
    ax.add_patch(Rectangle((right - step, x_top - n_feat * 0.14), step, n_feat * 0.14,
                           facecolor="none", edgecolor=QUERY, lw=2.0, zorder=5))
    arrow(ax, (right, x_box.y), (qx, x_box.y), (qx, 5.05))
    op(ax, qx, 4.82, "$W_Q$", w=0.7, h=0.34, fill=LEARNED)
    q = tensor(ax, qx, k_y, 0.5, 0.28, "q", fill=QUERY)
    shape_text(ax, qx, k_y - 0.3, "[1, d_k]")
    arrow(ax, (qx, 4.65), q.top)
    arrow(ax, q.left, (right + 0.04, k_y), lw=1.2)
    note(ax, (right + qx) / 2 - 0.12, k_y + 0.17, "q · k$_j$", size=SMALL)

    # the softmax row: one weight per hour
    w_y = 3.2
    weights = _illustrative_hour_weights(hours)
    arrow(ax, (x_box.x, k_y - 0.12), (x_box.x, w_y + 0.17))
    note(ax, x_box.x + 0.1, (k_y + w_y) / 2 + 0.02,
         "softmax over the hours of  q K$^\\top$ / $\\sqrt{d_k}$", ha="left")
    grid(ax, left, w_y + 0.15, step, values=weights[None, :] / weights.max(), lw=0.2,
         cell_h=0.3)
    text(ax, label_x, w_y + 0.08, "weights", ha="right")
    shape_text(ax, label_x, w_y - 0.15, f"[1, {hours}]", ha="right")
    for lag in (0, 24, 48):
        if lag < hours:
            j = hours - 1 - lag
            text(ax, xs[j], w_y - 0.28, f"{weights[j]:.2f}", size=SMALL)

    # values: V = X W_V, reached along the left margin
    v_y = 2.0
    lane = 0.45
    arrow(ax, (left, x_box.y), (lane, x_box.y), (lane, v_y), (left - 0.02, v_y))
    op(ax, lane, 3.75, "$W_V$", w=0.7, h=0.34, fill=LEARNED)
    grid(ax, left, v_y + 0.12, step, fill=[[VALUE] * hours], lw=0.2, cell_h=0.24)
    text(ax, label_x, v_y + 0.08, "values", ha="right")
    shape_text(ax, label_x, v_y - 0.14, f"V [{hours}, d_v]", ha="right")
    arrow(ax, (x_box.x, w_y - 0.42), (x_box.x, v_y + 0.14))

    # the output: the weighted sum of the values
    out = tensor(ax, x_box.x, 0.95, 1.3, 0.32, f"output, hour {hours}", fill=DATA, size=SMALL)
    shape_text(ax, out.right[0] + 0.1, out.y, "[1, d_v]", ha="left")
    arrow(ax, (x_box.x, v_y - 0.12), out.top)
    note(ax, x_box.x + 0.12, (v_y + out.y) / 2 + 0.08, "$\\sum_j$ weight$_j$ $v_j$",
         ha="left", size=FONT)
    pattern = ("the latest hours and the same hour one and two days earlier get the largest "
               "weights" if hours > 48 else "a few of the latest hours get the largest weights")
    note(ax, 5.0, 0.35, f"Illustrative weights (not from a trained model): {pattern}.",
         size=SMALL)
    return fig


def sdpa_pipeline():
    """Scaled dot-product attention as a pipeline of operations, with shapes."""
    fig, ax = canvas(9, 7.2, "Scaled dot-product attention")
    cx = 3.6
    q = tensor(ax, 2.2, 6.3, 0.9, 0.36, "Q", fill=QUERY, shape="[B, Lq, d_k]")
    k = tensor(ax, 5.0, 6.3, 0.9, 0.36, "K", fill=KEY, shape="[B, Lk, d_k]")
    v = tensor(ax, 7.6, 6.3, 0.9, 0.36, "V", fill=VALUE, shape="[B, Lk, d_v]")

    mm1 = op(ax, cx, 5.2, "MatMul  Q K$^\\top$", w=1.9)
    arrow(ax, (q.x, 5.95), (q.x, 5.55), (cx - 0.4, 5.55), (cx - 0.4, mm1.top[1]))
    arrow(ax, (k.x, 5.95), (k.x, 5.55), (cx + 0.4, 5.55), (cx + 0.4, mm1.top[1]))
    scale = op(ax, cx, 4.3, "Scale  $\\times\\, 1/\\sqrt{d_k}$", w=1.9)
    mask = op(ax, cx, 3.4, "Mask (optional)", w=1.9, ls="--")
    soft = op(ax, cx, 2.5, "Softmax over keys", w=1.9)
    mm2 = op(ax, cx, 1.35, "MatMul  with V", w=1.9)
    for a, b, s in ((mm1, scale, "scores [B, Lq, Lk]"), (scale, mask, "[B, Lq, Lk]"),
                    (mask, soft, "[B, Lq, Lk]")):
        arrow(ax, a.bottom, b.top)
        shape_text(ax, cx + 0.1, (a.bottom[1] + b.top[1]) / 2, s, ha="left")
    arrow(ax, soft.bottom, mm2.top)
    arrow(ax, (v.x, 5.95), (v.x, mm2.y), mm2.right)

    # the mask, beside its step
    key = grid(ax, 5.25, 3.78, 0.19, mask=lower_triangle(4))
    note(ax, key.right[0] + 0.12, 3.55, "True = may attend", ha="left")
    note(ax, key.right[0] + 0.12, 3.25, "blocked → −inf", ha="left")
    arrow(ax, key.left, mask.right, color=MUTED, lw=1.0)

    # the weights: a side output
    wts = np.array([[1, 0, 0, 0], [.4, .6, 0, 0], [.2, .3, .5, 0], [.1, .2, .3, .4]])
    ax_y = (soft.bottom[1] + mm2.top[1]) / 2
    dot(ax, cx, ax_y)
    wg = grid(ax, 0.55, ax_y + 0.38, 0.19, values=wts)
    arrow(ax, (cx, ax_y), (wg.right[0] + 0.03, ax_y))
    text(ax, wg.x, wg.top[1] + 0.35, "weights", ha="center")
    shape_text(ax, wg.x, wg.top[1] + 0.14, "[B, Lq, Lk]")

    out = tensor(ax, cx, 0.45, 1.4, 0.36, "output", fill=DATA, shape="[B, Lq, d_v]",
                 shape_at="right")
    arrow(ax, mm2.bottom, out.top)
    return fig


def split_heads(num_heads=3, length=3, d_k=2):
    """Multi-head attention by reshaping: heads are slices of the d_model axis."""
    h, L = num_heads, length
    d_model = h * d_k
    colors = [HEAD_COLORS[i % len(HEAD_COLORS)] for i in range(h)]
    fig, ax = canvas(10, 5.9, "Splitting d_model into heads: view and transpose")
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
                grid(ax, x0, y_top, c, fill=[[fill] * d_k])
                if not mixed and t == 0:
                    text(ax, x0 + d_k * c / 2, top + 0.14, f"h{i + 1}", size=SMALL)
            text(ax, left - 0.1, y_top - c / 2, f"t{t + 1}", size=SMALL, ha="right")
        width = h * d_k * c + (0 if mixed else (h - 1) * gap)
        height = L * c + (L - 1) * gap
        return Box(left + width / 2, top - height / 2, width, height)

    def head_blocks(left, top):
        """[h, L, d_k]: one small matrix per head, side by side."""
        for i in range(h):
            x0 = left + i * (d_k * c + block_gap)
            grid(ax, x0, top, c, fill=[[colors[i]] * d_k] * L)
            text(ax, x0 + d_k * c / 2, top + 0.14, f"head {i + 1}", size=SMALL)
        for t in range(L):
            text(ax, left - 0.1, top - (t + 0.5) * c, f"t{t + 1}", size=SMALL, ha="right")
        width = h * d_k * c + (h - 1) * block_gap
        return Box(left + width / 2, top - L * c / 2, width, L * c)

    def whole(left, top, label_heads=True):
        """[L, d_model] with the head slices coloured."""
        for t in range(L):
            grid(ax, left, top - t * c, c, fill=[sum(([col] * d_k for col in colors), [])])
            text(ax, left - 0.1, top - t * c - c / 2, f"t{t + 1}", size=SMALL, ha="right")
        if label_heads:
            for i in range(h):
                text(ax, left + (i + 0.5) * d_k * c, top + 0.14, f"h{i + 1}", size=SMALL)
        return Box(left + d_model * c / 2, top - L * c / 2, d_model * c, L * c)

    # top row: split
    # left edges: a (whole), b (per token), c (per head); c ends at the right margin
    a_left = 0.75
    c_left = 9.75 - (h * d_k * c + (h - 1) * block_gap)
    b_left = (a_left + d_model * c + c_left - (d_model * c + (h - 1) * gap)) / 2
    row1 = 4.75
    a = whole(a_left, row1 + L * c / 2)
    shape_text(ax, a.x, a.bottom[1] - 0.12, "[B, L, d_model]", va="top")
    note(ax, a.x, a.bottom[1] - 0.42, f"d_model = h · d_k = {h} · {d_k}", va="top")
    b = token_rows(b_left, row1 + (L * c + (L - 1) * gap) / 2)
    shape_text(ax, b.x, b.bottom[1] - 0.12, "[B, L, h, d_k]", va="top")
    cb = head_blocks(c_left, row1 + L * c / 2)
    shape_text(ax, cb.x, cb.bottom[1] - 0.12, "[B, h, L, d_k]", va="top")
    for p, r, s in ((a, b, "view"), (b, cb, "transpose(1, 2)")):
        arrow(ax, (p.right[0] + 0.2, row1), (r.left[0] - 0.3, row1))
        shape_text(ax, (p.right[0] + r.left[0]) / 2 - 0.05, row1 + 0.18, s)

    # attention, every head at once
    att = op(ax, min(cb.x, 8.4), 3.4, "attention per head (all h at once)", w=3.0)
    arrow(ax, (cb.x, cb.bottom[1] - 0.35), (cb.x, att.top[1]))

    # bottom row: merge, right to left
    row3 = 2.05
    cb2 = head_blocks(c_left, row3 + L * c / 2)
    arrow(ax, (cb2.x, att.bottom[1]), (cb2.x, cb2.top[1] + 0.3))
    shape_text(ax, cb2.x, cb2.bottom[1] - 0.12, "[B, h, L, d_k]", va="top")
    b2 = token_rows(b_left, row3 + (L * c + (L - 1) * gap) / 2)
    shape_text(ax, b2.x, b2.bottom[1] - 0.12, "[B, L, h, d_k]", va="top")
    a2 = whole(a_left, row3 + L * c / 2)
    shape_text(ax, a2.x, a2.bottom[1] - 0.12, "[B, L, d_model]", va="top")
    for p, r, s in ((cb2, b2, "transpose(1, 2)"), (b2, a2, "reshape\n(concat)")):
        arrow(ax, (p.left[0] - 0.3, row3), (r.right[0] + 0.2, row3))
        shape_text(ax, (p.left[0] + r.right[0]) / 2 - 0.05, row3 + 0.1, s, va="bottom")

    # output projection mixes the heads
    wy = 0.6
    wo = op(ax, a2.x + 1.0, wy, "$W_O$", w=0.7, h=0.36, fill=LEARNED)
    arrow(ax, (a2.x, a2.bottom[1] - 0.4), (a2.x, wy), wo.left)
    out_left = wo.right[0] + 0.5
    grid(ax, out_left, wy + L * c / 2, c, fill=[[DATA] * d_model] * L)
    arrow(ax, wo.right, (out_left - 0.03, wy))
    shape_text(ax, out_left + d_model * c + 0.12, wy, "[B, L, d_model]", ha="left")
    note(ax, out_left + d_model * c + 1.45, wy, "$W_O$ mixes the heads", ha="left")
    return fig


# --------------------------------------------------------------------------- chapter 2
def mask_conventions():
    """Two boolean conventions for the same mask, and padding x causal masks."""
    fig, ax = canvas(10, 7.0, "One mask, two conventions")
    n, c = 5, 0.3
    causal = lower_triangle(n)

    def labelled(left, top, mask, tf_mask, title, sub, keys=None, key_label=False):
        g = grid(ax, left, top, c, mask=mask)
        for i in range(n):
            for j in range(n):
                fill = MASK_ALLOWED if mask[i][j] else MASK_BLOCKED
                text(ax, left + (j + 0.5) * c, top - (i + 0.5) * c,
                     "T" if tf_mask[i][j] else "F", size=SMALL, color=text_on(fill), zorder=5)
        text(ax, g.x, g.top[1] + 0.62, title, weight="bold")
        note(ax, g.x, g.top[1] + 0.36, sub)
        for j in range(n):
            text(ax, left + (j + 0.5) * c, top + 0.12, keys[j] if keys else f"{j}", size=SMALL)
        for i in range(n):
            text(ax, left - 0.1, top - (i + 0.5) * c, keys[i] if keys else f"{i}", size=SMALL,
                 ha="right")
        if key_label:
            text(ax, left - 0.1, top + 0.12, "key j", size=SMALL, ha="right", color=SHAPE_INK)
        return g

    top = 5.55
    g1 = labelled(1.6, top, causal, causal, "True = may attend",
                  "F.scaled_dot_product_attention, course_lib", key_label=True)
    g2 = labelled(6.9, top, causal, ~causal, "True = blocked",
                  "nn.MultiheadAttention, nn.Transformer", key_label=True)
    text(ax, g1.left[0] - 0.45, g1.y, "query i", size=SMALL, rotation=90)
    note(ax, g2.x, g2.bottom[1] - 0.2, "attn_mask, key_padding_mask", va="top")
    note(ax, g1.x, g1.bottom[1] - 0.2, "mask, attn_mask", va="top")
    arrow(ax, (g1.right[0] + 0.45, g1.y), (g2.left[0] - 0.55, g1.y))
    shape_text(ax, (g1.right[0] + g2.left[0]) / 2 - 0.05, g1.y + 0.22, "blocked = ~mask")
    note(ax, (g1.right[0] + g2.left[0]) / 2 - 0.05, g1.y - 0.3,
         "same picture,\nopposite booleans")

    # padding and causal masks for one batch row with 2 padded positions
    tokens = ["the", "cat", "sat", "pad", "pad"]
    valid = np.array([True, True, True, False, False])
    pad = np.broadcast_to(valid[None, :], (n, n))
    both = pad & causal
    top = 2.35
    text(ax, 5.0, 3.0, "A batch row with 2 padded positions (True = may attend)",
         weight="bold")
    lefts = (1.0, 4.1, 7.2)
    g3 = labelled(lefts[0], top, pad, pad, "", "", keys=tokens)
    g4 = labelled(lefts[1], top, causal, causal, "", "", keys=tokens)
    g5 = labelled(lefts[2], top, both, both, "", "", keys=tokens)
    text(ax, (g3.right[0] + g4.left[0]) / 2, g3.y, "&", size=TITLE + 2, weight="bold")
    text(ax, (g4.right[0] + g5.left[0]) / 2, g3.y, "=", size=TITLE + 2, weight="bold")
    for g, name, shape in ((g3, "padding_mask(tokens, pad)", "[B, 1, 1, L]"),
                           (g4, "causal_mask(L)", "[L, L]"),
                           (g5, "padding & causal", "[B, 1, L, L]")):
        shape_text(ax, g.x, g.bottom[1] - 0.18, name, va="top")
        shape_text(ax, g.x, g.bottom[1] - 0.45, shape, va="top")
    return fig
