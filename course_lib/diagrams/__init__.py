"""The course's architecture diagrams, drawn by code (no image files).

Every diagram speaks one visual language: its palette and its drawing primitives (boxes,
arrows, tensor grids, labels) live in ``style``, and ``legend()`` draws the key to it. Each
family of figures has its own module and draws only with the public names of ``style``:

=================  ==================================================================
``style``          palette (queries, keys, values, masks, residual paths) + primitives
``legend``         the key: what each colour and shape means
``attention``      a query over the hours, the SDPA pipeline, heads, mask conventions
``positions``      how a position enters attention; the ALiBi bias of each head
``blocks``         Transformer blocks, Post-/Pre-Norm, decoder-only, encoder-decoder
``inputs``         a forecast window, a feature tokenizer, the teacher-forcing shift
``decoding``       a KV-cache step, a beam search
``data_parallel``  one step of data-parallel training
``adaptation``     linear probe, full fine-tuning and LoRA on a pretrained model
=================  ==================================================================

Each figure function returns a matplotlib Figure and never calls ``plt.show()``::

    from course_lib import diagrams
    diagrams.sdpa_pipeline();
"""

from __future__ import annotations

from .adaptation import adaptation_ways
from .attention import mask_conventions, query_over_hours, sdpa_pipeline, split_heads
from .blocks import attention_only_vs_block, decoder_only_stack, encoder_decoder, post_vs_pre_norm
from .data_parallel import ddp_step
from .decoding import beam_tree, kv_cache
from .inputs import feature_tokenizer, forecast_window, teacher_forcing_shift
from .legend import legend
from .positions import alibi_bias, position_entry

# the palette, re-exported: diagrams.QUERY, diagrams.MASK_ALLOWED, ...
from .style import (  # noqa: F401
    ATTN_CMAP,
    DATA,
    FONT,
    HEAD_COLORS,
    HIGHLIGHT,
    INK,
    KEY,
    LEARNED,
    MASK_ALLOWED,
    MASK_BLOCKED,
    MASK_CMAP,
    MONO,
    MUTED,
    NORM,
    OPERATION,
    POSITION,
    QUERY,
    RESIDUAL,
    RESIDUAL_STYLE,
    SHAPE_INK,
    SMALL,
    TARGET,
    TITLE,
    VALUE,
    mask_handles,
)

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
    "ddp_step",
    "adaptation_ways",
]
