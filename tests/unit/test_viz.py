"""Unit tests of course_lib.viz (headless: conftest selects matplotlib's Agg backend)."""

import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from course_lib.viz import attention_heads_grid, attention_heatmap, plot_history

pytestmark = pytest.mark.usefixtures("close_figures")


def weights(*shape):
    torch.manual_seed(0)
    return torch.softmax(torch.randn(*shape), dim=-1)


# --------------------------------------------------------------------------- heatmap
def test_heatmap_returns_axes_with_labels():
    ax = attention_heatmap(
        weights(3, 4), x_labels=list("abcd"), y_labels=["x", "y", "z"], title="one head"
    )
    assert isinstance(ax, Axes)
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcd")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "y", "z"]
    assert ax.get_xlabel() == "key (attended to)" and ax.get_ylabel() == "query"
    assert ax.get_title() == "one head"


def test_heatmap_shows_the_matrix():
    w = weights(3, 4)
    ax = attention_heatmap(w)
    mesh = ax.collections[0]
    assert np.allclose(np.asarray(mesh.get_array()).reshape(3, 4), w.numpy())


def test_heatmap_draws_on_a_given_axes_and_accepts_numpy_and_grad():
    fig, ax = plt.subplots()
    w = weights(2, 2).requires_grad_()
    assert attention_heatmap(w, ax=ax, annot=True, cbar=False) is ax
    assert attention_heatmap(np.eye(3), ax=ax) is ax
    assert attention_heatmap([[0.5, 0.5]]) is not None


def test_heatmap_label_length_mismatch():
    with pytest.raises(ValueError, match="x_labels has 3 labels for 4 columns"):
        attention_heatmap(weights(3, 4), x_labels=list("abc"))
    with pytest.raises(ValueError, match="y_labels has 4 labels for 3"):
        attention_heatmap(weights(3, 4), y_labels=list("abcd"))


@pytest.mark.parametrize("shape", [(4,), (2, 3, 4)])
def test_heatmap_wrong_ndim(shape):
    with pytest.raises(ValueError, match=r"2-D \[Lq, Lk\] matrix.*" + re.escape(str(shape))):
        attention_heatmap(torch.rand(*shape))


# --------------------------------------------------------------------------- grid of heads
def test_heads_grid_returns_a_figure_with_one_panel_per_head():
    fig = attention_heads_grid(
        weights(5, 3, 3), x_labels=list("abc"), y_labels=list("abc"), ncols=4, title="five heads"
    )
    assert isinstance(fig, Figure)
    axes = fig.axes
    visible = [ax for ax in axes if ax.axison]
    assert len(visible) == 5  # 2 x 4 grid, 3 panels switched off
    assert [ax.get_title() for ax in visible] == [f"head {i}" for i in range(1, 6)]
    assert fig._suptitle.get_text() == "five heads"


def test_heads_grid_names_and_few_heads():
    fig = attention_heads_grid(weights(2, 3, 4).numpy(), head_names=["near", "far"])
    assert [ax.get_title() for ax in fig.axes] == ["near", "far"]  # ncols shrinks to h


def test_heads_grid_wrong_ndim():
    with pytest.raises(ValueError, match=r"weights must be \[h, Lq, Lk\], got shape \(3, 3\)"):
        attention_heads_grid(weights(3, 3))
    with pytest.raises(ValueError, match=r"\(1, 2, 3, 3\)"):
        attention_heads_grid(weights(1, 2, 3, 3))


def test_heads_grid_label_mismatch():
    with pytest.raises(ValueError, match="x_labels has 2 labels for 3"):
        attention_heads_grid(weights(2, 3, 3), x_labels=["a", "b"])


# --------------------------------------------------------------------------- loss curves
def history():
    return pd.DataFrame(
        {
            "epoch": [1, 2, 3],
            "train_loss": [1.0, 0.5, 0.25],
            "val_loss": [1.1, 0.6, 0.4],
            "lr": [0.1] * 3,
            "seconds": [1.0] * 3,
        }
    )


def test_plot_history_draws_every_loss_column():
    ax = plot_history(history(), title="losses")
    assert isinstance(ax, Axes)
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["train loss", "val loss"]
    assert list(ax.get_lines()[1].get_ydata()) == [1.1, 0.6, 0.4]
    assert ax.get_yscale() == "linear" and ax.get_title() == "losses"


def test_plot_history_options():
    fig, ax = plt.subplots()
    assert plot_history(history(), ax=ax, logy=True, columns=["val_loss"]) is ax
    assert ax.get_yscale() == "log"
    assert [line.get_label() for line in ax.get_lines()] == ["val loss"]
