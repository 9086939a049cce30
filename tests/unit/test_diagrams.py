"""The architecture diagrams: each draws a Figure cleanly, in the shared visual language."""

import ast
import inspect
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from course_lib import diagrams, distributed, finetune, viz
from course_lib.diagrams import adaptation, style
from course_lib.gpt import GPT, GPTConfig
from course_lib.masks import causal_mask
from course_lib.positional import alibi_bias

PACKAGE = Path(diagrams.__file__).parent

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
    "ddp_step",
    "adaptation_ways",
]

# what `course_lib.diagrams` exposed before it became a package (a module of 1,263 lines):
# its figures with their signatures (the notebooks call them), and its palette
SIGNATURES = {
    "legend": "()",
    "query_over_hours": "(hours=72)",
    "sdpa_pipeline": "()",
    "split_heads": "(num_heads=3, length=3, d_k=2)",
    "mask_conventions": "()",
    "position_entry": "()",
    "attention_only_vs_block": "()",
    "post_vs_pre_norm": "()",
    "forecast_window": "(window=72)",
    "alibi_bias": "(num_heads=4, length=8, causal=False)",
    "feature_tokenizer": "()",
    "decoder_only_stack": "()",
    "kv_cache": "(step=5)",
    "beam_tree": "()",
    "encoder_decoder": "()",
    "teacher_forcing_shift": "(length=3)",
}
PALETTE = ["QUERY", "KEY", "VALUE", "LEARNED", "NORM", "POSITION", "TARGET", "DATA", "OPERATION",
           "MASK_ALLOWED", "MASK_BLOCKED", "RESIDUAL", "RESIDUAL_STYLE", "INK", "MUTED",
           "SHAPE_INK", "HIGHLIGHT", "ATTN_CMAP", "HEAD_COLORS", "FONT", "SMALL", "TITLE", "MONO"]
# the figures whose drawing holds a mask grid
MASK_FIGURES = ["legend", "sdpa_pipeline", "mask_conventions", "decoder_only_stack", "kv_cache",
                "encoder_decoder"]


# matplotlib before 3.10.7 (pyproject.toml allows older) calls pyparsing's camelCase names,
# which pyparsing 3.3 deprecates ("'parseString' deprecated - use 'parse_string'", "'endQuoteChar'
# argument is deprecated, use 'end_quote_char'") when a text is laid out. Only that warning is
# let through, attributed to matplotlib or, for an old argument name passed through an old
# method name (`parseString(s, parseAll=True)`), to pyparsing's own wrapper; the course does
# not call pyparsing.
MATPLOTLIB_CALLS_OLD_PYPARSING_NAMES = dict(
    message=r"'\w+' (argument is )?deprecated(, | - )use '\w+'",
    category=DeprecationWarning,
    module=r"(matplotlib|pyparsing)\.",
)


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
        warnings.filterwarnings("ignore", **MATPLOTLIB_CALLS_OLD_PYPARSING_NAMES)
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
    assert to_rgba(diagrams.MASK_ALLOWED) not in {to_rgba(c) for c in colors}


# --------------------------------------------------------------------------- masks
def _cells(collection):
    return [tuple(np.round(c, 3)) for c in collection.get_facecolor()]


def _rgba(color):
    return tuple(np.round(to_rgba(color), 3))


def test_mask_convention_is_the_heatmaps():
    """'May attend' is dark and 'blocked' light, in the colours a heatmap of the mask gets."""
    blues = plt.get_cmap("Blues")
    assert _rgba(diagrams.MASK_ALLOWED) == _rgba(blues(1.0))  # True = 1: the dark end
    assert _rgba(diagrams.MASK_BLOCKED) == _rgba(blues(0.0))
    assert _rgba(diagrams.MASK_CMAP(1.0)) == _rgba(diagrams.MASK_ALLOWED)
    assert _rgba(diagrams.MASK_CMAP(0.0)) == _rgba(diagrams.MASK_BLOCKED)
    allowed = causal_mask(4).numpy()
    expected = [_rgba(diagrams.MASK_ALLOWED if a else diagrams.MASK_BLOCKED) for a in
                allowed.ravel()]
    for cmap in ("Blues", diagrams.MASK_CMAP):  # chapter 7's heatmap, and the palette's map
        ax = viz.attention_heatmap(causal_mask(4).float(), cmap=cmap, cbar=False)
        assert _cells(ax.collections[0]) == expected
        plt.close(ax.figure)
    handles = diagrams.mask_handles()
    assert [_rgba(h.get_facecolor()) for h in handles] == [_rgba(diagrams.MASK_ALLOWED),
                                                           _rgba(diagrams.MASK_BLOCKED)]
    assert "may attend" in handles[0].get_label()


def test_mask_grid_draws_may_attend_in_the_palette_colour(close_figures):
    fig, ax = style.canvas(8, 2)
    style.grid(ax, 1, 1.5, 0.3, mask=np.array([[True, False], [False, True]]), tf=True)
    allowed, blocked = _rgba(diagrams.MASK_ALLOWED), _rgba(diagrams.MASK_BLOCKED)
    assert _cells(ax.collections[0]) == [allowed, blocked, blocked, allowed]
    letters = {t.get_text(): t.get_color() for t in ax.texts}  # readable on their cells
    assert letters == {"T": style.text_on(diagrams.MASK_ALLOWED), "F": diagrams.INK}
    assert style.text_on(diagrams.MASK_ALLOWED) == "white"


@pytest.mark.parametrize("name", MASK_FIGURES)
def test_every_mask_in_the_diagrams_uses_the_convention(name, close_figures):
    fig = getattr(diagrams, name)()
    allowed, blocked = _rgba(diagrams.MASK_ALLOWED), _rgba(diagrams.MASK_BLOCKED)
    masks = [coll for ax in fig.axes for coll in ax.collections
             if set(_cells(coll)) == {allowed, blocked}]
    assert masks, f"{name} draws no mask in the palette's colours"
    old_blocked = _rgba("#4D4D4D")  # the dark grey blocked cells had before
    assert old_blocked not in _face_colors(fig)


def test_causal_mask_of_the_gpt_diagram_is_dark_where_it_may_attend(close_figures):
    fig = diagrams.decoder_only_stack()
    allowed = _rgba(diagrams.MASK_ALLOWED)
    [grid] = [c for c in fig.axes[0].collections if len(c.get_facecolor()) == 25]
    drawn = np.array([c == allowed for c in _cells(grid)]).reshape(5, 5)
    np.testing.assert_array_equal(drawn, causal_mask(5).numpy())


# --------------------------------------------------------------------------- the package
def test_exposes_every_name_it_exposed_before_the_split():
    for name, signature in SIGNATURES.items():
        assert str(inspect.signature(getattr(diagrams, name))) == signature, name
    for name in PALETTE:
        assert getattr(diagrams, name) is getattr(style, name), name


def _family_modules():
    return sorted(p for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "style"))


def test_there_are_family_modules():
    names = {p.stem for p in _family_modules()}
    assert {"attention", "blocks", "positions", "decoding", "inputs", "legend",
            "data_parallel", "adaptation"} <= names


@pytest.mark.parametrize("path", _family_modules(), ids=lambda p: p.stem)
def test_family_modules_use_only_public_names_of_the_style(path):
    """A family draws with the style module's public names; it imports no other family and
    nothing private from anywhere in the package."""
    families = {p.stem for p in _family_modules()}
    style_names = {n for n in vars(style) if not n.startswith("_")}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported_style = False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            assert node.module not in families, f"{path.stem} imports the family {node.module}"
            if node.module == "style":
                imported_style = True
                for alias in node.names:
                    assert not alias.name.startswith("_"), (path.stem, alias.name)
                    assert alias.name in style_names, (path.stem, alias.name)
            assert node.module is not None, f"{path.stem}: `from . import ...`"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in ("style", "diagrams"):
                assert not node.attr.startswith("_"), (path.stem, node.attr)
    assert imported_style, f"{path.stem} does not draw with the style module"


def test_distributed_draws_through_the_diagrams_package(close_figures):
    source = inspect.getsource(distributed)
    assert "diagrams._" not in source and "dg._" not in source
    texts = [[t.get_text() for t in fig.axes[0].texts]
             for fig in (distributed.draw_ddp_step(world_size=3), diagrams.ddp_step(3))]
    assert texts[0] == texts[1]


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
    assert _has(fig, diagrams.MASK_BLOCKED)  # blocked cells light, as every mask


def test_alibi_heatmaps_have_no_grid_under_a_grid_style(close_figures):
    """Chapter 5 sets seaborn's whitegrid style; its lines must not cross the heatmap cells."""
    import matplotlib.pyplot as plt

    with plt.style.context({"axes.grid": True}):
        fig = diagrams.alibi_bias(num_heads=2, length=4)
    for ax in fig.axes:
        assert not any(line.get_visible() for line in ax.get_xgridlines() + ax.get_ygridlines())


# --------------------------------------------------------------------------- chapter 12
def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_adaptation_ways_counts_what_the_library_trains(close_figures):
    """Each panel's "trained: n" is what ``finetune`` leaves trainable, on a small GPT."""
    config = GPTConfig(vocab_size=40, max_len=8, d_model=16, num_heads=2, num_layers=3, d_ff=32)
    gpt = GPT(config)
    lora = finetune.trainable_parameters(finetune.adapt(gpt, "lora", pad_id=0, r=2, alpha=4))
    full = finetune.trainable_parameters(finetune.adapt(gpt, "full", pad_id=0))
    head = finetune.SequenceClassifier(gpt, num_classes=2, pad_id=0).head
    from sklearn.linear_model import LogisticRegression  # the chapter's probe

    fitted = LogisticRegression().fit(np.random.default_rng(0).normal(size=(8, config.d_model)),
                                      [0, 1] * 4)
    probe = fitted.coef_.size + fitted.intercept_.size  # binary: d weights and one bias
    backbone = sum(p.numel() for p in gpt.parameters())
    fig = diagrams.adaptation_ways(d_model=16, num_layers=3, r=2, alpha=4,
                                   backbone_params=backbone)
    texts = _texts(fig)
    assert finetune.trainable_parameters(head) == 2 * config.d_model + 2
    for n in (probe, full, lora):
        assert f"trained: {n:,}" in texts, (n, [t for t in texts if t.startswith("trained")])
    assert "trained: 129" in _texts(diagrams.adaptation_ways())  # d + 1 for d = 128


def test_adaptation_ways_marks_trained_and_frozen(close_figures):
    fig = diagrams.adaptation_ways()
    hatched = [p for p in fig.axes[0].patches if p.get_hatch()]
    assert hatched and all(_rgba(p.get_facecolor()) == _rgba(adaptation.FROZEN)
                           for p in hatched)
    assert _has(fig, diagrams.LEARNED)  # trained: the colour of learned weights
    assert _rgba(adaptation.FROZEN) not in {_rgba(diagrams.LEARNED), _rgba(diagrams.DATA)}
    texts = _texts(fig)
    assert texts.count("+BA") == 2  # LoRA on W_Q and W_V only
    assert any("alpha/r" in t and "BAx" in t for t in texts)  # y = W x + (alpha/r) B A x
    assert any("last real token" in t and "mean" in t for t in texts)  # the pooling
