"""The Transformer blocks that chapter 4 writes on the page equal course_lib's blocks.

Chapter 4 shows the block as a reader should see it: two residual lines, in
``PreNormBlock`` and ``PostNormBlock``. The library's ``blocks.Block`` and
``blocks.PostNormBlock`` have the same submodules under the same names, and its models use
``blocks.AblationBlock``, which adds the ablation switches. This test takes the cell that
defines the page's two classes out of the committed notebook, runs it, loads each library
block's weights into it as they are (no renaming) and compares the outputs: the page's copy
and the library cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from notebook_cells import code_cell_defining
from torch import nn

from course_lib import attention, blocks

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "04_sequence_reversal.ipynb"


def _block_cell() -> str:
    return code_cell_defining(NOTEBOOK, "class PreNormBlock(")


@pytest.fixture(scope="module")
def page():
    namespace = {"nn": nn, "torch": torch, "attention": attention, "blocks": blocks}
    exec(compile(_block_cell(), f"{NOTEBOOK.name}: the block cell", "exec"), namespace)
    return namespace


LIBRARY = [("PreNormBlock", blocks.Block, {}),
           ("PostNormBlock", blocks.PostNormBlock, {}),
           ("PreNormBlock", blocks.AblationBlock, {}),
           ("PostNormBlock", blocks.AblationBlock, {"norm_first": False})]


@pytest.mark.parametrize("name, library_class, switches", LIBRARY)
@pytest.mark.parametrize("d_model, num_heads, d_ff", [(32, 1, 128), (16, 4, 48)])
def test_page_block_equals_the_library_block(page, name, library_class, switches, d_model,
                                             num_heads, d_ff):
    torch.manual_seed(0)
    library = library_class(d_model, num_heads, d_ff=d_ff, **switches).eval()
    with torch.no_grad():  # not the initial LayerNorm weights (1 and 0): every weight counts
        for p in library.parameters():
            p.add_(0.1 * torch.randn_like(p))
    plain = page[name](d_model, num_heads, d_ff).eval()
    plain.load_state_dict(library.state_dict())  # strict: same names, every weight in one place
    x = torch.randn(3, 7, d_model)
    with torch.no_grad():
        gap = (plain(x) - library(x)[0]).abs().max().item()
    assert gap < 1e-6, f"{name} on the page differs from {library_class.__name__}({switches})"


def test_page_block_reads_as_the_two_residual_lines():
    source = _block_cell()
    assert "x = x + self.self_attention(self.norm1(x))" in source
    assert "x = x + self.ffn(self.norm2(x))" in source
