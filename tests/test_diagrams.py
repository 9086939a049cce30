"""The architecture diagrams: each draws a Figure cleanly, in the shared visual language."""

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from course_lib import diagrams
from course_lib.positional import alibi_bias

PUBLIC = [
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
]


def _face_colors(fig):
    """Face colours of every patch, and of every cell of the patch collections (grids)."""
    colors = [p.get_facecolor() for ax in fig.axes for p in ax.patches]
    colors += [c for ax in fig.axes for coll in ax.collections for c in coll.get_facecolor()]
    return {tuple(np.round(c, 3)) for c in colors}


def _has(fig, color):
    return tuple(np.round(to_rgba(color), 3)) in _face_colors(fig)


def test_every_public_function_is_listed():
    assert sorted(diagrams.__all__) == sorted(PUBLIC)


@pytest.mark.parametrize("name", PUBLIC)
def test_draws_a_figure_without_warnings(name, close_figures):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = getattr(diagrams, name)()
        fig.canvas.draw()  # lays out every text, arrow and patch
    assert isinstance(fig, Figure)
    assert len(fig.axes) >= 1
    width, height = fig.get_size_inches()
    assert 8 <= width <= 10, f"{name} is {width} inches wide, book width is 8-10"
    # every text is at least 9 pt and inside the canvas
    renderer = fig.canvas.get_renderer()
    for text in fig.findobj(plt.Text):
        if not (text.get_visible() and text.get_text().strip()):
            continue
        assert text.get_fontsize() >= 9, (name, text.get_text())
        box = text.get_window_extent(renderer)
        assert box.x0 >= -1 and box.y0 >= -1, (name, text.get_text())
        assert box.x1 <= fig.bbox.width + 1 and box.y1 <= fig.bbox.height + 1, (
            name,
            text.get_text(),
        )


def test_close_releases_the_figure(close_figures):
    fig = diagrams.sdpa_pipeline()
    assert plt.fignum_exists(fig.number)
    plt.close(fig)
    assert not plt.fignum_exists(fig.number)


def test_query_key_value_colours_are_the_palette(close_figures):
    for fig in (diagrams.sdpa_pipeline(), diagrams.query_over_hours()):
        for color in (diagrams.QUERY, diagrams.KEY, diagrams.VALUE):
            assert _has(fig, color)
    # learned weights, norms, positions and blocked mask cells keep their colours too
    fig = diagrams.decoder_only_stack()
    for color in (diagrams.LEARNED, diagrams.NORM, diagrams.POSITION, diagrams.MASK_BLOCKED):
        assert _has(fig, color)


def test_palette_colours_are_distinct():
    colors = [diagrams.QUERY, diagrams.KEY, diagrams.VALUE, diagrams.LEARNED, diagrams.NORM,
              diagrams.POSITION, diagrams.DATA, diagrams.MASK_BLOCKED]
    assert len({to_rgba(c) for c in colors}) == len(colors)


def test_alibi_bias_draws_the_real_values(close_figures):
    fig = diagrams.alibi_bias(num_heads=4, length=8)
    expected = alibi_bias(4, 8).numpy()
    images = [im for ax in fig.axes for im in ax.get_images()]
    assert len(images) == 4
    for h, im in enumerate(images):
        np.testing.assert_allclose(np.asarray(im.get_array()), expected[h], rtol=0, atol=1e-6)


def test_alibi_bias_causal_blocks_the_future(close_figures):
    fig = diagrams.alibi_bias(num_heads=2, length=5, causal=True)
    data = [ax.get_images()[0].get_array() for ax in fig.axes if ax.get_images()][0]
    blocked = np.ma.getmaskarray(data)
    np.testing.assert_array_equal(blocked, np.triu(np.ones((5, 5), dtype=bool), k=1))


def test_alibi_heatmaps_have_no_grid_under_a_grid_style(close_figures):
    """Chapter 5 sets seaborn's whitegrid style; its lines must not cross the heatmap cells."""
    import matplotlib.pyplot as plt

    with plt.style.context({"axes.grid": True}):
        fig = diagrams.alibi_bias(num_heads=2, length=4)
    for ax in fig.axes:
        assert not any(line.get_visible() for line in ax.get_xgridlines() + ax.get_ygridlines())
