"""The GPT that chapter 7 writes on the page is course_lib.gpt.GPT, weight for weight.

Chapter 7 shows its rungs' parts on the page as the source of ``course_lib.ladder``
(``CausalSelfAttention``, ``FeedForward``, ``Block``, printed with ``inspect.getsource``),
writes ``class GPT`` out of ``ladder.Block`` in a cell, and trains ``gpt.GPT``, whose
submodules have the page's names. This test takes the ``GPT`` class definition (only that:
the cells also train) out of the committed notebook, builds it, loads a library GPT's state
dict into it as it is, and back, and compares the logits: the page and the library cannot
drift apart.
"""

from __future__ import annotations

import ast
import inspect
import math
from pathlib import Path

import pytest
import torch
from notebook_cells import code_cell_defining
from torch import nn

from course_lib import gpt, ladder

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "07_gpt.ipynb"
CLASSES = ("GPT",)  # written in a cell; its parts are ladder's, shown by their source
V, D, H, LAYERS, D_FF, W = 40, 32, 4, 2, 64, 12


def _class_source(name: str) -> str:
    cell = code_cell_defining(NOTEBOOK, f"class {name}(")
    tree = ast.parse(cell)
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    assert len(found) == 1, f"{NOTEBOOK.name}: one class {name} expected"
    return ast.get_source_segment(cell, found[0])


@pytest.fixture(scope="module")
def page():
    # W: the page's max_len
    namespace = {"nn": nn, "torch": torch, "math": math, "W": W, "ladder": ladder}
    for name in CLASSES:
        exec(compile(_class_source(name), f"{NOTEBOOK.name}: class {name}", "exec"), namespace)
    return namespace


def _library(seed):
    torch.manual_seed(seed)
    config = gpt.GPTConfig(vocab_size=V, max_len=W, d_model=D, num_heads=H, num_layers=LAYERS,
                           d_ff=D_FF, dropout=0.0, pad_id=None)
    model = gpt.GPT(config).eval()
    with torch.no_grad():  # not the initial LayerNorm weights (1 and 0): every weight counts
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def test_page_gpt_and_library_gpt_load_each_others_state_dicts(page):
    library = _library(0)
    plain = page["GPT"](V, D, H, LAYERS, D_FF, W).eval()
    assert sorted(plain.state_dict()) == sorted(library.state_dict())
    plain.load_state_dict(library.state_dict())  # strict, no renaming
    tokens = torch.randint(0, V, (3, W))
    with torch.no_grad():
        gap = (plain.double()(tokens) - library.double()(tokens)).abs().max().item()
    assert gap < 1e-10, "the page's GPT and course_lib.gpt.GPT compute different things"
    back = _library(1).double()
    back.load_state_dict(plain.state_dict())  # and the other way
    with torch.no_grad():
        assert torch.equal(back(tokens), library(tokens))


def test_page_shows_the_ladders_parts_by_their_source():
    for name in ("LadderLM", "CausalSelfAttention", "FeedForward", "Block"):
        code_cell_defining(NOTEBOOK, f"inspect.getsource(ladder.{name})")


def test_page_block_reads_as_the_two_residual_lines():
    source = inspect.getsource(ladder.Block.forward)
    assert "x = x + self.attn(self.norm1(x))" in source
    assert "x = x + self.ffn(self.norm2(x))" in source
