"""Data-parallel training: one step of DistributedDataParallel over N processes (chapter 10)."""

from __future__ import annotations

from .style import FONT, LEARNED, SMALL, arrow, canvas, note, op, tensor, text


def ddp_step(world_size: int = 2):
    """One data-parallel step: shards in, forward and backward in every process, all-reduce,
    the same optimizer step (``course_lib.distributed.draw_ddp_step`` draws this too)."""
    n = int(world_size)
    if n < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    sub = str.maketrans("0123456789", "".join(chr(0x2080 + k) for k in range(10)))  # g₀ g₁
    box_w, spacing, left, right = 3.2, 3.9, 0.5, 1.0  # right: room for the shapes
    wide = (n - 1) * spacing + box_w
    width = left + wide + right
    fig, ax = canvas(width, 6.6, f"One step of data-parallel training, {n} processes")
    xs = [left + box_w / 2 + r * spacing for r in range(n)]

    middle = left + wide / 2
    note(ax, middle, 5.95, "the global batch: N·b rows, dealt out by DistributedSampler",
         size=FONT)
    mean = " + ".join(f"g{r}".translate(sub) for r in range(n))
    reduce = op(ax, middle, 2.05, f"all-reduce: every process receives g = ({mean}) / {n}",
                w=wide, h=0.5, lw=2.0)
    for r, x in enumerate(xs):
        shard = tensor(ax, x, 5.45, box_w, 0.4, f"shard {r}: its own b rows",
                       shape="[b, L+1]" if r == n - 1 else None, shape_at="right")
        text(ax, x, 4.82, f"process {r}  (rank {r})", weight="bold")
        step = op(ax, x, 4.05, "forward + backward\nwith the weights θ", w=box_w, h=0.7,
                  fill=LEARNED)
        grad = tensor(ax, x, 3.05, box_w, 0.4, f"local gradient g{r}".translate(sub),
                      shape="[P]", shape_at="right")
        update = op(ax, x, 0.95, "AdamW step with g", w=box_w, h=0.5, fill=LEARNED)
        arrow(ax, shard.bottom, (x, 4.97))
        arrow(ax, (x, 4.67), step.top)
        arrow(ax, step.bottom, grad.top)
        arrow(ax, grad.bottom, (x, reduce.top[1]))
        arrow(ax, (x, reduce.bottom[1]), update.top)
    note(ax, middle, 0.38, "the same new θ in every process: the copies never drift apart",
         size=FONT)
    note(ax, middle, 2.55, "communication", size=SMALL)
    return fig
