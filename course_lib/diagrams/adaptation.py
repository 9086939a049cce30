"""Adapting a pretrained model: linear probe, full fine-tuning, LoRA (chapter 12).

In this figure the reddish purple of learned weights marks the weights that an adaptation
trains; pretrained weights that stay as they are are grey and hatched, under a padlock.
"""

from __future__ import annotations

from matplotlib.patches import Arc, FancyBboxPatch, Rectangle

from .style import (
    DATA,
    LEARNED,
    MUTED,
    SHAPE_INK,
    SMALL,
    Box,
    add,
    arrow,
    canvas,
    frame,
    note,
    op,
    shape_text,
    tensor,
    text,
)

FROZEN = "#EFEFEF"  # pretrained weights that are not updated: light grey, hatched
FROZEN_HATCH = "#ABABAB"


def _weights(ax, x, y, label, trained, w=1.6, h=0.38, size=SMALL):
    """An operation with learned weights: purple when it trains, grey and hatched when frozen."""
    if trained:
        return op(ax, x, y, label, w=w, h=h, fill=LEARNED, size=size)
    r = min(0.12, h / 3)
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h,
                                boxstyle=f"round,pad=0,rounding_size={r}", facecolor=FROZEN,
                                edgecolor=FROZEN_HATCH, hatch="////", lw=0, zorder=3))
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h,
                                boxstyle=f"round,pad=0,rounding_size={r}", facecolor="none",
                                edgecolor=MUTED, lw=1.2, zorder=3.1))
    if label:  # on a patch of the fill, so the hatching does not cross the letters
        text(ax, x, y, label, size=size, zorder=4,
             bbox=dict(boxstyle="round,pad=0.12", facecolor=FROZEN, edgecolor="none"))
    return Box(x, y, w, h)


def _padlock(ax, x, y, s=0.16):
    """A small padlock centred at (x, y): the sign of frozen weights."""
    ax.add_patch(Rectangle((x - s / 2, y - s * 0.6), s, s * 0.75, facecolor=MUTED,
                           edgecolor=MUTED, zorder=5))
    ax.add_patch(Arc((x, y + s * 0.15), s * 0.62, s * 0.9, theta1=0, theta2=180, color=MUTED,
                     lw=1.6, zorder=5))


def _column(ax, cx, top, title, subtitle, how, trained_count, detail):
    """One way of adapting: tokens -> embedding -> N blocks -> pool -> head -> logits.

    how: "probe" (all frozen), "full" (all trained) or "lora" (frozen, W_Q and W_V adapted).
    Returns the badge of the adapted W_V (LoRA) or None.
    """
    trained = how == "full"
    text(ax, cx, top, title, weight="bold")
    note(ax, cx, top - 0.3, subtitle)
    tok = tensor(ax, cx, top - 0.78, 1.5, 0.32, "review tokens", size=SMALL, shape="[B, L]",
                 shape_at="right")
    emb = _weights(ax, cx, top - 1.33, "embedding", trained, w=1.5, h=0.34)
    arrow(ax, tok.bottom, emb.top)

    # the N pretrained blocks: self-attention's four maps, then the FFN
    fr = Box(cx, top - 2.72, 2.5, 1.95)
    frame(ax, fr, label="× N", label_side="left")
    if not trained:
        _padlock(ax, fr.x + fr.w / 2 - 0.95, fr.y + fr.h / 2 - 0.19)
        text(ax, fr.x + fr.w / 2 - 0.1, fr.y + fr.h / 2 - 0.19, "frozen", size=SMALL,
             ha="right", color=SHAPE_INK, weight="bold")
    arrow(ax, emb.bottom, fr.top)
    note(ax, cx, fr.y + fr.h / 2 - 0.5, "self-attention")
    row_y = fr.y + 0.13
    maps = {}
    for k, name in enumerate(("Q", "K", "V", "O")):
        maps[name] = _weights(ax, cx + (k - 1.5) * 0.57, row_y, f"$W_{name}$", trained, w=0.5,
                              h=0.36)
    badge = None
    if how == "lora":
        for name in ("Q", "V"):
            m = maps[name]
            badge = op(ax, m.x, m.y - 0.34, "+BA", w=0.5, h=0.3, fill=LEARNED, size=SMALL)
    ffn = _weights(ax, cx, fr.y - fr.h / 2 + 0.3, "FFN", trained, w=1.5, h=0.34)
    arrow(ax, (cx, row_y - (0.49 if how == "lora" else 0.18)), ffn.top)

    pool = op(ax, cx, fr.bottom[1] - 0.42, "pool", w=0.9, h=0.34, size=SMALL)
    arrow(ax, fr.bottom, pool.top)
    shape_text(ax, pool.right[0] + 0.08, pool.y, "[B, d]", ha="left")
    # scikit-learn's binary logistic regression has one logit; the trained head has two
    head_label = "logistic regression  d → 1" if how == "probe" else "linear head  d → 2"
    head = op(ax, cx, pool.y - 0.6, head_label, w=2.2, h=0.34, fill=LEARNED, size=SMALL)
    arrow(ax, pool.bottom, head.top)
    out = tensor(ax, cx, head.y - 0.6, 1.1, 0.3, "logit" if how == "probe" else "logits",
                 fill=DATA, size=SMALL, shape="[B, 1]" if how == "probe" else "[B, 2]",
                 shape_at="right")
    arrow(ax, head.bottom, out.top)
    text(ax, cx, out.y - 0.5, f"trained: {trained_count}", weight="bold")
    note(ax, cx, out.y - 0.78, detail)
    return badge


def _lora_detail(ax, cx, top, bottom, d, r, alpha):
    """One adapted map, W_Q or W_V: the frozen W beside the trainable path A then B."""
    w_box = 1.75
    ax.add_patch(FancyBboxPatch((cx - w_box / 2, bottom), w_box, top - bottom,
                                boxstyle="round,pad=0,rounding_size=0.15", facecolor="white",
                                edgecolor=MUTED, lw=1.0, zorder=0))
    left, right = cx - 0.5, cx + 0.45
    text(ax, cx, top - 0.3, "one adapted map\n($W_Q$ or $W_V$)", size=SMALL, weight="bold")
    x_in = tensor(ax, cx, top - 0.9, 0.45, 0.28, "x", size=SMALL, shape="[d]",
                  shape_at="right")
    split = top - 1.22
    arrow(ax, x_in.bottom, (cx, split), head=False)
    arrow(ax, (left, split), (right, split), head=False)
    a = op(ax, right, top - 1.6, "A", w=0.5, h=0.32, fill=LEARNED, size=SMALL)
    arrow(ax, (right, split), a.top)
    shape_text(ax, a.left[0] - 0.06, a.y, "[r, d]", ha="right")
    b = op(ax, right, top - 2.25, "B", w=0.5, h=0.32, fill=LEARNED, size=SMALL)
    arrow(ax, a.bottom, b.top)
    shape_text(ax, b.left[0] - 0.06, b.y, "[d, r]", ha="right")
    note(ax, right - 0.05, b.y - 0.3, "starts at 0")
    scale = op(ax, right, top - 3.0, "× α/r", w=0.6, h=0.3, size=SMALL)
    arrow(ax, b.bottom, scale.top)
    w = _weights(ax, left, scale.y, "W", False, w=0.45, h=0.34)
    arrow(ax, (left, split), w.top)
    plus = add(ax, cx, top - 3.55, r=0.13)
    arrow(ax, w.bottom, (left, plus.y), plus.left)
    arrow(ax, scale.bottom, (right, plus.y), plus.right)
    y_out = tensor(ax, cx, top - 4.05, 0.45, 0.28, "y", size=SMALL, shape="[d]",
                   shape_at="right")
    arrow(ax, plus.bottom, y_out.top)
    text(ax, cx, top - 4.55, r"$y = Wx + (\alpha/r)\,BAx$", size=SMALL)
    note(ax, cx, top - 4.85, f"d = {d}, r = {r}, α = {alpha:g}")
    return Box(cx, (top + bottom) / 2, w_box, top - bottom)


def adaptation_ways(d_model: int = 128, num_layers: int = 4, r: int = 8, alpha: float = 16,
                    backbone_params: int | None = None):
    """Chapter 12: three ways of turning a pretrained model into a sentiment classifier.

    A linear probe trains only a logistic regression (standardised inputs, one logit: d + 1
    weights) on frozen, pooled features; full
    fine-tuning trains every weight and the head; LoRA freezes the backbone and trains, in
    every block, a low-rank update B A (rank ``r``) beside the query and value maps W_Q and
    W_V: y = W x + (alpha/r) B A x, B starting at zero; the head trains too. Each panel ends
    with how many parameters it trains: the probe d + 1, the head 2 d + 2; LoRA adds 2 r d
    per adapted map, two maps in each of ``num_layers`` blocks; full fine-tuning adds the
    backbone's own (``backbone_params``, written when given).
    """
    d = int(d_model)
    head = 2 * d + 2
    probe = d + 1
    lora = num_layers * 2 * 2 * r * d
    fig, ax = canvas(10, 8.1, "Three ways to adapt a pretrained Transformer")

    # the key: trained, frozen, no weights
    ky = 7.45
    op(ax, 1.0, ky, "", w=0.5, h=0.28, fill=LEARNED)
    text(ax, 1.35, ky, "trained: the optimizer updates it", ha="left")
    _weights(ax, 4.55, ky, "", False, w=0.5, h=0.28)
    _padlock(ax, 4.99, ky + 0.02)
    text(ax, 5.2, ky, "frozen: pretrained, not updated", ha="left")
    op(ax, 8.0, ky, "", w=0.5, h=0.28)
    text(ax, 8.35, ky, "no weights", ha="left")

    top = 6.8
    if backbone_params:
        full = (f"{backbone_params + head:,}", f"{backbone_params:,} + {head} in the head")
    else:
        full = ("every weight", f"the backbone's + {head} in the head")
    cols = [(1.4, "1. linear probe", "features from a frozen model", "probe",
             (f"{probe}", "logistic regression: d + 1")),
            (4.1, "2. full fine-tuning", "every weight trains", "full", full),
            (6.8, "3. LoRA", "frozen model, low-rank updates", "lora",
             (f"{lora + head:,}", f"{lora:,} in A, B + {head} in the head"))]
    badges = {how: _column(ax, cx, top, title, subtitle, how, count, detail)
              for cx, title, subtitle, how, (count, detail) in cols}
    for x in (2.75, 5.45):
        ax.plot([x, x], [0.75, 7.0], color=MUTED, lw=0.8, linestyle=(0, (1, 2)))

    # inside LoRA: one adapted map, pointed at from the W_V badge
    zoom = _lora_detail(ax, 9.075, 6.45, 1.3, d, r, alpha)
    badge = badges["lora"]
    arrow(ax, badge.right, (zoom.left[0], badge.y), color=MUTED, lw=1.0, ls=(0, (2, 2)),
          head=False)
    note(ax, 5.0, 0.35, "pool: the last real token's hidden state (GPT: the only position that "
         "has read the whole row), or the mean over the real tokens (encoder)")
    return fig
