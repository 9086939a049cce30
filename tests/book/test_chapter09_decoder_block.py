"""The decoder block that chapter 9 writes on the page equals course_lib's DecoderBlock.

Chapter 9 shows the decoder block as a reader should see it: masked self-attention,
cross-attention (queries from the decoder, keys and values from the encoder's memory) and
the feed-forward network, each a Pre-Norm residual line. The model itself uses
``blocks.DecoderBlock``, with the same submodules under the same names. This test takes the
cell that defines the page's class out of the committed notebook, runs it, loads a
``DecoderBlock``'s weights into it as they are (no renaming) and compares the outputs under
real masks: the page's copy and the library cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from notebook_cells import code_cell_defining
from torch import nn

from course_lib import attention, blocks, masks

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "09_translation.ipynb"


def _block_cell() -> str:
    return code_cell_defining(NOTEBOOK, "class DecoderBlock(")


@pytest.fixture(scope="module")
def page():
    namespace = {"nn": nn, "torch": torch, "attention": attention, "blocks": blocks}
    exec(compile(_block_cell(), f"{NOTEBOOK.name}: the decoder block cell", "exec"), namespace)
    return namespace["DecoderBlock"]


def _tokens(lengths, vocab=20, pad=0):
    out = torch.full((len(lengths), max(lengths)), pad)
    for i, n in enumerate(lengths):
        out[i, :n] = torch.randint(1, vocab, (n,))
    return out


@pytest.mark.parametrize("d_model, num_heads, d_ff", [(32, 1, 64), (16, 4, 48)])
def test_page_block_equals_decoder_block(page, d_model, num_heads, d_ff):
    torch.manual_seed(0)
    library = blocks.DecoderBlock(d_model, num_heads, d_ff, dropout=0.1).eval()
    with torch.no_grad():  # not the initial LayerNorm weights (1 and 0): every weight counts
        for p in library.parameters():
            p.add_(0.1 * torch.randn_like(p))
    plain = page(d_model, num_heads, d_ff, dropout=0.1).eval()
    plain.load_state_dict(library.state_dict())  # strict: same names, every weight in one place
    src, tgt = _tokens([7, 4, 5]), _tokens([6, 3, 6])
    src_mask = masks.padding_mask(src, 0)  # [B, 1, 1, Ls]
    tgt_mask = masks.padding_mask(tgt, 0) & masks.causal_mask(tgt.shape[1])  # [B, 1, Lt, Lt]
    x, memory = torch.randn(3, tgt.shape[1], d_model), torch.randn(3, src.shape[1], d_model)
    with torch.no_grad():
        ours = plain(x, memory, tgt_mask, src_mask)
        theirs = library(x, memory, self_mask=tgt_mask, memory_mask=src_mask)[0]
        moved = plain(x, memory + 1.0, tgt_mask, src_mask)
    real = tgt != 0
    assert (ours - theirs)[real].abs().max().item() < 1e-5
    assert (moved - ours).abs().max().item() > 1e-3  # the memory is read (cross-attention)


def test_page_block_reads_queries_from_the_decoder_and_keys_from_the_memory():
    source = _block_cell()
    assert "self.cross_attn(h, memory, memory, mask=src_mask)" in source
    assert "self.self_attn(h, h, h, mask=tgt_mask)" in source
