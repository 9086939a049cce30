"""Chapter 1's sqrt(d_k) experiment measures the gradient that reaches the query.

Section 1.4 says what it measures: for a query q against keys k_j, the loss
L = sum_j g_j p_j (a random gradient g arriving at the softmax weights p), and the norm of
dL/dq, which the prose writes out as sum_j p_j (g_j - sum_i p_i g_i) k_j, divided by
sqrt(d_k) when the scores are. This test takes the chapter's own ``softmax_stats`` out of
the committed notebook, runs it on one query, redraws the same random numbers in the same
order, and compares its measured gradient with that formula: the number on the page is
dL/dq, not the gradient at the scores.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from notebook_cells import code_cell_defining

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "01_attention.ipynb"


@pytest.fixture(scope="module")
def softmax_stats():
    source = code_cell_defining(NOTEBOOK, "def softmax_stats(")
    (function,) = [node for node in ast.parse(source).body
                   if isinstance(node, ast.FunctionDef) and node.name == "softmax_stats"]
    namespace = {"torch": torch, "np": np}
    module = ast.Module(body=[function], type_ignores=[])
    exec(compile(module, f"{NOTEBOOK.name}: softmax_stats", "exec"), namespace)
    return namespace["softmax_stats"]


def _formula(d_k, length, scale, seed):
    """|dL/dq| from the prose's formula, on the draws softmax_stats makes, in its order."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 1, d_k, generator=g)[0, 0]  # [d_k]
    k = torch.randn(1, length, d_k, generator=g)[0]  # [L, d_k]
    s = k @ q / (math.sqrt(d_k) if scale else 1.0)  # [L]
    p = torch.softmax(s, dim=-1)
    upstream = torch.randn(1, length, generator=g)[0]  # g_j
    at_scores = p * (upstream - (p * upstream).sum())  # p_j (g_j - sum_i p_i g_i)
    grad_q = (at_scores[:, None] * k).sum(0) / (math.sqrt(d_k) if scale else 1.0)
    return grad_q.norm().item(), at_scores.norm().item()


@pytest.mark.parametrize("scale", [False, True])
@pytest.mark.parametrize("d_k", [4, 64])
def test_measures_the_gradient_that_reaches_the_query(softmax_stats, d_k, scale):
    seed, length = 3, 9
    stats = softmax_stats(d_k, 1, scale, length=length,
                          generator=torch.Generator().manual_seed(seed))
    at_query, at_scores = _formula(d_k, length, scale, seed)
    # one query: its median and its mean are its own |dL/dq|
    assert stats["grad_q_median"] == pytest.approx(at_query, rel=1e-4)
    assert stats["grad_q_mean"] == pytest.approx(at_query, rel=1e-4)
    assert stats["grad_q_median"] != pytest.approx(at_scores, rel=1e-2)  # not the scores'


def test_top_share_is_the_largest_tenths_part_of_the_total(softmax_stats):
    stats = softmax_stats(16, 40, False, generator=torch.Generator().manual_seed(0))
    assert 0.1 <= stats["grad_q_top10_share"] <= 1.0  # 4 of 40 queries: at least their tenth
