"""Transformer blocks and the models built from them: attention only against the full
block, Post-Norm against Pre-Norm, the decoder-only stack, the encoder-decoder
(chapters 4, 7 and 9)."""

from __future__ import annotations

import numpy as np

from .style import (
    HIGHLIGHT,
    INK,
    KEY,
    LEARNED,
    MUTED,
    NORM,
    OPERATION,
    POSITION,
    QUERY,
    SHAPE_INK,
    SMALL,
    VALUE,
    Box,
    add,
    arrow,
    canvas,
    dot,
    frame,
    grid,
    lower_triangle,
    note,
    op,
    qkv_in,
    residual,
    shape_text,
    tensor,
    text,
)


# --------------------------------------------------------------------------- chapter 4
def _attention_box(ax, x, y, src_y, label="Multi-head attention", w=2.2):
    """An attention box fed by Q, K, V arrows that branch from (x, src_y)."""
    box = op(ax, x, y, label, w=w, h=0.42)
    qkv_in(ax, (x, src_y), box, labels=True)
    return box


def attention_only_vs_block():
    """Chapter 4: the attention-only model and the full Transformer block."""
    fig, ax = canvas(10, 7.6, "Attention only, and the full Transformer block")

    # left: attention only
    lx = 2.0
    text(ax, lx, 6.85, "attention only (chapter 4, first try)", weight="bold")
    tok = tensor(ax, lx, 6.3, 1.3, 0.34, "tokens", shape="[B, L]", shape_at="right")
    emb = op(ax, lx, 5.5, "Embedding", w=1.6, fill=LEARNED)
    arrow(ax, tok.bottom, emb.top)
    att = _attention_box(ax, lx, 4.1, 4.95, label="Self-attention", w=1.8)
    arrow(ax, emb.bottom, (lx, 4.95), head=False)
    lin = op(ax, lx, 3.0, "Linear", w=1.6, fill=LEARNED)
    arrow(ax, att.bottom, lin.top)
    out = tensor(ax, lx, 2.2, 1.3, 0.34, "logits", shape="[B, L, V]", shape_at="right")
    arrow(ax, lin.bottom, out.top)
    note(ax, lx, 1.3, "no positions, no residual,\nno feed-forward network")

    # right: the full block (Post-Norm, as in the 2017 paper)
    rx = 6.6
    text(ax, rx, 6.85, "full Transformer block", weight="bold")
    tok = tensor(ax, rx, 6.3, 1.3, 0.34, "tokens", shape="[B, L]", shape_at="left")
    emb = op(ax, rx, 5.72, "Embedding", w=1.6, fill=LEARNED)
    arrow(ax, tok.bottom, emb.top)
    plus0 = add(ax, rx, 5.12)
    arrow(ax, emb.bottom, plus0.top)
    pos = tensor(ax, rx + 1.75, 5.12, 1.55, 0.34, "positions", fill=POSITION)
    arrow(ax, pos.left, plus0.right)
    frame(ax, Box(rx + 0.25, 2.78, 3.7, 4.05), label="× N", label_side="left")
    branch1 = 4.55
    arrow(ax, plus0.bottom, (rx, branch1), head=False)
    att = _attention_box(ax, rx, 3.9, branch1 - 0.05)
    add1 = add(ax, rx, 3.3)
    arrow(ax, att.bottom, add1.top)
    residual(ax, (rx, branch1 - 0.05), add1.right, rx + 1.45)
    norm1 = op(ax, rx, 2.78, "LayerNorm", w=1.6, fill=NORM)
    arrow(ax, add1.bottom, norm1.top)
    branch2 = 2.4
    dot(ax, rx, branch2)
    ffn = op(ax, rx, 1.95, "FFN (position-wise)", w=2.0, fill=LEARNED)
    arrow(ax, norm1.bottom, ffn.top)
    add2 = add(ax, rx, 1.4)
    arrow(ax, ffn.bottom, add2.top)
    residual(ax, (rx, branch2), add2.right, rx + 1.45)
    norm2 = op(ax, rx, 0.95, "LayerNorm", w=1.6, fill=NORM)
    arrow(ax, add2.bottom, norm2.top)
    for node in (add1, add2):
        text(ax, rx - 0.3, node.y, "Add & Norm", size=SMALL, ha="right", color=SHAPE_INK)
    arrow(ax, norm2.bottom, (rx, 0.45))
    shape_text(ax, rx + 0.12, 0.42, "[B, L, d_model]", ha="left")
    note(ax, rx + 2.1, 3.35, "residual", ha="left")
    return fig


def post_vs_pre_norm():
    """Post-Norm and Pre-Norm blocks: where the LayerNorm sits on the residual path."""
    fig, ax = canvas(9, 5.8, "Post-Norm and Pre-Norm")

    def column(cx, pre):
        text(ax, cx, 5.05, "Pre-Norm" if pre else "Post-Norm (2017 paper)", weight="bold")
        note(ax, cx, 4.75, "x + sublayer(LN(x))" if pre else "LN(x + sublayer(x))")
        x_in = tensor(ax, cx, 4.25, 0.6, 0.32, "x")
        branch = 3.8
        arrow(ax, x_in.bottom, (cx, branch), head=False)
        dot(ax, cx, branch)
        if pre:
            ln = op(ax, cx, 3.25, "LayerNorm", w=1.5, fill=NORM)
            arrow(ax, (cx, branch), ln.top)
            sub = op(ax, cx, 2.45, "sublayer", w=1.5)
            arrow(ax, ln.bottom, sub.top)
            plus = add(ax, cx, 1.7)
            arrow(ax, sub.bottom, plus.top)
            out_top = plus.bottom
        else:
            sub = op(ax, cx, 3.1, "sublayer", w=1.5)
            arrow(ax, (cx, branch), sub.top)
            plus = add(ax, cx, 2.35)
            arrow(ax, sub.bottom, plus.top)
            ln = op(ax, cx, 1.7, "LayerNorm", w=1.5, fill=NORM)
            arrow(ax, plus.bottom, ln.top)
            out_top = ln.bottom
        residual(ax, (cx, branch), plus.right, cx + 1.2)
        out = tensor(ax, cx, 0.95, 0.6, 0.32, "y")
        arrow(ax, out_top, out.top)
        # the identity path from x to y, highlighted behind the drawing
        ax.plot([cx, cx, cx + 1.2, cx + 1.2, cx, cx],
                [x_in.y, branch, branch, plus.y, plus.y, out.y], color=HIGHLIGHT, lw=9,
                solid_joinstyle="round", solid_capstyle="round", zorder=0.5)

    column(2.3, pre=False)
    column(6.5, pre=True)
    note(ax, 2.3 + 1.32, 2.95, "every path ends\nin a LayerNorm", ha="left")
    note(ax, 6.5 + 1.32, 2.95, "identity path:\nx reaches y\nun-normalised", ha="left")
    note(ax, 4.5, 0.35, "Shaded: the identity path from x to y.  sublayer = attention or FFN.  "
         "Pre-Norm adds one LayerNorm after the last block.", size=SMALL)
    return fig


# --------------------------------------------------------------------------- chapter 7
def decoder_only_stack():
    """Chapter 7: a decoder-only (GPT) stack with tied input and output embeddings."""
    fig, ax = canvas(9, 8.0, "A decoder-only Transformer (GPT)")
    cx = 4.3
    tok = tensor(ax, cx, 7.25, 1.5, 0.34, "token ids", shape="[B, L]", shape_at="right")
    emb = op(ax, cx, 6.6, "token embedding  E", w=2.2, fill=LEARNED)
    shape_text(ax, emb.right[0] + 0.1, 6.6, "E: [V, d]", ha="left")
    arrow(ax, tok.bottom, emb.top)
    plus0 = add(ax, cx, 6.0)
    arrow(ax, emb.bottom, plus0.top)
    pos = tensor(ax, cx + 2.1, 6.0, 1.9, 0.34, "learned positions", fill=POSITION, size=SMALL)
    arrow(ax, pos.left, plus0.right)

    frame(ax, Box(cx + 0.05, 3.67, 4.5, 3.95), label="× N", label_side="left")
    text(ax, cx - 2.0, 5.2, "Pre-Norm\nblock", size=SMALL, ha="left", color=SHAPE_INK,
         va="top")
    b1 = 5.45
    arrow(ax, plus0.bottom, (cx, b1), head=False)
    dot(ax, cx, b1)
    ln1 = op(ax, cx, 5.1, "LayerNorm", w=1.6, fill=NORM)
    arrow(ax, (cx, b1), ln1.top)
    att = op(ax, cx, 4.3, "causal self-attention", w=2.2)
    qkv_in(ax, (cx, ln1.bottom[1] - 0.08), att, labels=False, spread=0.5)
    arrow(ax, ln1.bottom, (cx, ln1.bottom[1] - 0.08), head=False)
    g = grid(ax, att.left[0] - 0.8, 4.62, 0.13, mask=lower_triangle(5))
    arrow(ax, g.right, att.left, color=MUTED, lw=1.0)
    note(ax, g.x, g.bottom[1] - 0.14, "causal mask", size=SMALL)
    add1 = add(ax, cx, 3.75)
    arrow(ax, att.bottom, add1.top)
    residual(ax, (cx, b1), add1.right, cx + 1.55)
    b2 = 3.35
    arrow(ax, add1.bottom, (cx, b2), head=False)
    dot(ax, cx, b2)
    ln2 = op(ax, cx, 3.0, "LayerNorm", w=1.6, fill=NORM)
    arrow(ax, (cx, b2), ln2.top)
    ffn = op(ax, cx, 2.4, "FFN", w=1.6, fill=LEARNED)
    arrow(ax, ln2.bottom, ffn.top)
    add2 = add(ax, cx, 1.95)
    arrow(ax, ffn.bottom, add2.top)
    residual(ax, (cx, b2), add2.right, cx + 1.55)

    lnf = op(ax, cx, 1.45, "final LayerNorm", w=1.8, fill=NORM)
    arrow(ax, add2.bottom, lnf.top)
    head = op(ax, cx, 0.85, "output projection  E$^\\top$", w=2.2, fill=LEARNED)
    arrow(ax, lnf.bottom, head.top)
    arrow(ax, head.bottom, (cx, 0.35))
    shape_text(ax, cx + 0.12, 0.3, "logits [B, L, V]", ha="left")
    # the tie: the same matrix E
    lx = 1.0
    arrow(ax, emb.left, (lx, emb.y), (lx, head.y), head.left, color=LEARNED, lw=1.6,
          ls=(0, (1, 1.5)), head=False)
    text(ax, lx - 0.45, 3.7, "tied:\nthe same\nmatrix E", size=SMALL, ha="center",
         color=INK)
    return fig


# --------------------------------------------------------------------------- chapter 9
_SUB_H = 1.62  # height of one Pre-Norm sublayer (LN -> sublayer -> add) in encoder_decoder


def _pre_norm_sublayer(ax, cx, top_y, label, fill, qkv=True, side=1.3, width=2.1):
    """Dot -> LayerNorm -> sublayer -> add, with the residual around it (Pre-Norm).

    qkv: True draws Q, K, V arrows into the sublayer; "q" draws only Q (cross-attention).
    Returns the sublayer's box; the next sublayer starts _SUB_H below top_y.
    """
    dot(ax, cx, top_y)
    ln = op(ax, cx, top_y - 0.38, "LayerNorm", w=1.4, h=0.34, fill=NORM, size=SMALL)
    arrow(ax, (cx, top_y), ln.top)
    sub = op(ax, cx, top_y - 0.98, label, w=width, h=0.4, fill=fill, size=SMALL)
    if qkv is True:
        qkv_in(ax, (cx, ln.bottom[1] - 0.03), sub, labels=False, spread=0.4)
        arrow(ax, ln.bottom, (cx, ln.bottom[1] - 0.03), head=False)
    elif qkv == "q":
        arrow(ax, ln.bottom, sub.top, color=QUERY, lw=1.6)
        text(ax, cx + 0.1, (ln.bottom[1] + sub.top[1]) / 2, "Q", size=SMALL, ha="left",
             weight="bold")
    else:
        arrow(ax, ln.bottom, sub.top)
    plus = add(ax, cx, top_y - 1.42, r=0.12)
    arrow(ax, sub.bottom, plus.top)
    residual(ax, (cx, top_y), plus.right, cx + side)
    arrow(ax, plus.bottom, (cx, top_y - _SUB_H), head=False)
    return sub


def _mask_beside(ax, sub, mask, caption, left):
    """A small mask grid at x = left, level with the sublayer, pointing at it."""
    cell = 0.12
    g = grid(ax, left, sub.y + mask.shape[0] * cell / 2, cell, mask=mask)
    if left < sub.x:
        arrow(ax, g.right, sub.left, color=MUTED, lw=1.0)
    else:
        arrow(ax, g.left, sub.right, color=MUTED, lw=1.0)
    note(ax, g.x, g.bottom[1] - 0.08, caption, size=SMALL, va="top")
    return g


def encoder_decoder():
    """Chapter 9: the encoder-decoder Transformer and the mask each attention uses."""
    fig, ax = canvas(10, 9.0, "Encoder-decoder Transformer (Pre-Norm) and its masks")
    src_valid = np.array([True, True, True, False])  # one padded source position
    tgt_valid = np.array([True, True, True, True, False])
    src_pad = np.broadcast_to(src_valid[None, :], (4, 4))
    tgt_self = np.broadcast_to(tgt_valid[None, :], (5, 5)) & lower_triangle(5)
    cross = np.broadcast_to(src_valid[None, :], (5, 4))

    ex, dx = 2.35, 7.0
    text(ax, ex, 8.35, "encoder", weight="bold")
    text(ax, dx, 8.35, "decoder", weight="bold")
    src = tensor(ax, ex, 7.95, 1.6, 0.32, "source tokens", size=SMALL, shape="[B, Ls]",
                 shape_at="left")
    tgt = tensor(ax, dx, 7.95, 1.9, 0.32, "<bos> y1 ... yT", size=SMALL,
                 shape="[B, Lt]", shape_at="right")
    embs = []
    for cx, tok in ((ex, src), (dx, tgt)):
        e = op(ax, cx, 7.4, "embedding E  · √d", w=1.8, h=0.36, fill=LEARNED, size=SMALL)
        arrow(ax, tok.bottom, e.top)
        plus = add(ax, cx, 6.9, r=0.12)
        arrow(ax, e.bottom, plus.top)
        p = tensor(ax, cx - 0.95, 6.9, 0.95, 0.28, "sin/cos", fill=POSITION, size=SMALL)
        arrow(ax, p.right, plus.left)
        arrow(ax, plus.bottom, (cx, 6.5), head=False)
        embs.append(e)
    ax.plot([embs[0].right[0], embs[1].left[0]], [7.4, 7.4], color=LEARNED, lw=1.8,
            linestyle=(0, (1, 1.5)))
    text(ax, (ex + dx) / 2, 7.55, "one shared table E", size=SMALL)

    # encoder: N x (self-attention, FFN), then a final LayerNorm
    top = 6.5
    frame(ax, Box(2.2, top - _SUB_H + 0.05, 3.7, 2 * _SUB_H + 0.3), label="× N")
    sa = _pre_norm_sublayer(ax, ex, top, "self-attention", OPERATION)
    _mask_beside(ax, sa, src_pad, "source\npadding", left=0.55)
    _pre_norm_sublayer(ax, ex, top - _SUB_H, "FFN", LEARNED, qkv=False, width=1.4)
    enc_bottom = top - 2 * _SUB_H
    lnf = op(ax, ex, enc_bottom - 0.4, "final LayerNorm", w=1.6, h=0.34, fill=NORM, size=SMALL)
    arrow(ax, (ex, enc_bottom), lnf.top)
    mem = tensor(ax, ex, enc_bottom - 1.05, 1.5, 0.34, "memory", size=SMALL,
                 shape="[B, Ls, d]", shape_at="below")
    arrow(ax, lnf.bottom, mem.top)

    # decoder: N x (masked self-attention, cross-attention, FFN), final LayerNorm, E^T
    frame(ax, Box(7.5, top - 1.5 * _SUB_H + 0.05, 3.8, 3 * _SUB_H + 0.3), label="× N")
    msa = _pre_norm_sublayer(ax, dx, top, "masked self-attention", OPERATION)
    _mask_beside(ax, msa, tgt_self, "padding\n& causal", left=dx + 1.5)
    ca = _pre_norm_sublayer(ax, dx, top - _SUB_H, "cross-attention", OPERATION, qkv="q")
    _mask_beside(ax, ca, cross, "source\npadding", left=dx + 1.5)
    _pre_norm_sublayer(ax, dx, top - 2 * _SUB_H, "FFN", LEARNED, qkv=False, width=1.4)
    # K and V of the cross-attention come from the memory
    for lane, dy, color in ((4.7, 0.08, KEY), (4.85, -0.08, VALUE)):
        y0 = mem.y + (0.06 if color == KEY else -0.06)
        arrow(ax, (mem.right[0], y0), (lane, y0), (lane, ca.y + dy), (ca.left[0], ca.y + dy),
              color=color, lw=1.6)
    text(ax, 4.95, ca.y + 0.3, "K, V from memory", size=SMALL, ha="left")
    dec_bottom = top - 3 * _SUB_H
    lnd = op(ax, dx, dec_bottom - 0.4, "final LayerNorm", w=1.6, h=0.34, fill=NORM, size=SMALL)
    arrow(ax, (dx, dec_bottom), lnd.top)
    out = op(ax, dx, dec_bottom - 1.0, "output projection  E$^\\top$ (tied)", w=2.6, h=0.36,
             fill=LEARNED, size=SMALL)
    arrow(ax, lnd.bottom, out.top)
    shape_text(ax, out.right[0] + 0.1, out.y, "[B, Lt, V]", ha="left")
    return fig
