"""The Transformer block that chapter 4 writes on the page equals course_lib's block.

Chapter 4 shows the block as a reader should see it: two residual lines, in
``PreNormBlock`` and ``PostNormBlock``. Its models then use ``blocks.EncoderBlock``, which
has the ablation switches. This test takes the cell that defines the two classes out of
the committed notebook, runs it, loads an ``EncoderBlock``'s weights into each and
compares the outputs: the page's copy and the library cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from notebook_cells import code_cell_defining
from torch import nn

from course_lib import attention, blocks

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "04_sequence_reversal.ipynb"
RENAME = {"attn_sub.norm.": "norm1.", "ffn_sub.norm.": "norm2.",
          "ffn.net.0.": "ffn.0.", "ffn.net.3.": "ffn.2."}


def _block_cell() -> str:
    return code_cell_defining(NOTEBOOK, "class PreNormBlock(")


@pytest.fixture(scope="module")
def page():
    namespace = {"nn": nn, "torch": torch, "attention": attention}
    exec(compile(_block_cell(), f"{NOTEBOOK.name}: the block cell", "exec"), namespace)
    return namespace


def _renamed(state):
    out = {}
    for key, value in state.items():
        for old, new in RENAME.items():
            if key.startswith(old):
                key = new + key[len(old):]
        out[key] = value
    return out


@pytest.mark.parametrize("name, norm_first", [("PreNormBlock", True), ("PostNormBlock", False)])
@pytest.mark.parametrize("d_model, num_heads, d_ff", [(32, 1, 128), (16, 4, 48)])
def test_page_block_equals_encoder_block(page, name, norm_first, d_model, num_heads, d_ff):
    torch.manual_seed(0)
    library = blocks.EncoderBlock(d_model, num_heads, d_ff=d_ff, norm_first=norm_first)
    with torch.no_grad():  # not the initial LayerNorm weights (1 and 0): every weight counts
        for p in library.parameters():
            p.add_(0.1 * torch.randn_like(p))
    plain = page[name](d_model, num_heads, d_ff)
    plain.load_state_dict(_renamed(library.state_dict()))  # strict: same weights, one place each
    x = torch.randn(3, 7, d_model)
    with torch.no_grad():
        gap = (plain(x) - library(x)[0]).abs().max().item()
    assert gap < 1e-6, f"{name} on the page differs from EncoderBlock(norm_first={norm_first})"


def test_page_block_reads_as_the_two_residual_lines():
    source = _block_cell()
    assert "x = x + self.self_attention(self.norm1(x))" in source
    assert "x = x + self.ffn(self.norm2(x))" in source
