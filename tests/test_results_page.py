"""The results page: claims bound to the results cards, computed verdicts, no typed numbers.

Tests the Sphinx extension in book/_ext/ (``results_claims``) as plain Python, the committed
``book/claims.yml`` against the committed cards (a renamed metric fails here, before the
book is built), and one small Sphinx build that uses the directives the way the book does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import results_claims as rc  # noqa: E402
from test_prose_numbers import quoted_numbers  # noqa: E402

CLAIMS = ROOT / "book" / "claims.yml"
RESULTS = ROOT / "book" / "results"

CARD = {"notebook": "05_demo", "profile": "full", "seed": 0, "device": "cpu",
        "torch": "2.13.0", "wall_seconds": 10.0, "params": {"seeds": 3},
        "metrics": {"mae_model": 0.79, "mae_base": 0.84, "std_mae_model": 0.01,
                    "gap_low": -0.07, "gap_high": -0.03, "speedup": 2.5,
                    "ablation": {"LS 0.1": {"val_bleu": 4.2}}}}


def claim(**changes) -> dict:
    entry = {"notebook": "05_demo", "claim": "The model against the baseline.",
             "metric": "test MAE", "better": "lower",
             "ours": {"label": "model", "key": "metrics.mae_model",
                      "spread": "metrics.std_mae_model", "seeds": "params.seeds"},
             "baseline": {"label": "baseline", "key": "metrics.mae_base"},
             "interval": {"low": "metrics.gap_low", "high": "metrics.gap_high"}}
    entry.update(changes)
    return {k: v for k, v in entry.items() if v is not None}


def row(low=None, high=None, ours=0.79, base=0.84, better="lower", seeds=None) -> rc.Row:
    return rc.Row("05_demo", "c", "m", better, rc.Side("ours", ours, "k", seeds=seeds),
                  rc.Side("base", base, "k"), low, high)


# --------------------------------------------------------------------------- the committed page
def test_committed_claims_bind_to_the_committed_cards():
    rows = rc.bind_all(CLAIMS, RESULTS)
    assert rows, "book/claims.yml lists no claim"
    cards = rc.load_cards(RESULTS)
    for r in rows:
        assert r.notebook in cards
        assert r.verdict in {"ahead", "behind", "tie", "better", "worse", "equal"}


def test_no_number_is_typed_on_the_results_page():
    """The page's numbers all come from the cards: its sources quote none (the level of
    the intervals excepted)."""
    allowed = {"95%"}
    for path in (ROOT / "book" / "results.md", CLAIMS):
        typed = [q for q, _ in quoted_numbers(path.read_text(encoding="utf-8"))
                 if q not in allowed]
        assert typed == [], f"{path.name} types numbers by hand: {typed}"


def test_seed_sentence_names_every_card_with_several_seeds():
    cards = rc.load_cards(RESULTS)
    sentence = rc.seeds_sentence(cards)
    several = [name for name, card in cards.items()
               for key, value in card.get("params", {}).items()
               if key.endswith("seeds") and isinstance(value, int) and value > 1]
    assert {"05_time_series", "06_tabular"} <= set(several), several
    for name in several:
        assert name in sentence
    assert "seed 0" in sentence


# --------------------------------------------------------------------------- binding
def test_bind_reads_every_number_from_the_card():
    r = rc.bind(claim(), {"05_demo": CARD})
    assert (r.ours.value, r.baseline.value, r.ours.spread, r.ours.seeds) == (0.79, 0.84, 0.01, 3)
    assert (r.low, r.high) == (-0.07, -0.03)
    assert r.gap == pytest.approx(-0.05)


def test_name_key_adds_the_cards_choice_to_the_label():
    card = {**CARD, "params": {**CARD["params"], "chosen": "MLP", "count": 3}}
    ours = {"label": "chosen on validation", "name": "params.chosen", "key": "metrics.mae_model"}
    r = rc.bind(claim(ours=ours), {"05_demo": card})
    assert r.ours.label == "chosen on validation: MLP"
    with pytest.raises(rc.ClaimError, match="name key 'params.gone' is not in its results card"):
        rc.bind(claim(ours={**ours, "name": "params.gone"}), {"05_demo": card})
    with pytest.raises(rc.ClaimError, match="holds 3, not a name"):
        rc.bind(claim(ours={**ours, "name": "params.count"}), {"05_demo": card})


def test_missing_key_names_the_chapter_and_the_key():
    bad = claim(baseline={"label": "baseline", "key": "metrics.mae_renamed"})
    with pytest.raises(rc.ClaimError, match=r"chapter 05_demo: baseline number key "
                       r"'metrics.mae_renamed' is not in its results card"):
        rc.bind(bad, {"05_demo": CARD})
    with pytest.raises(rc.ClaimError, match="interval low key 'metrics.nope'"):
        rc.bind(claim(interval={"low": "metrics.nope", "high": "metrics.gap_high"}),
                {"05_demo": CARD})
    with pytest.raises(rc.ClaimError, match="chapter 99_gone: there is no results card"):
        rc.bind(claim(notebook="99_gone"), {"05_demo": CARD})


def test_non_numbers_and_inverted_intervals_are_refused():
    card = {**CARD, "metrics": {**CARD["metrics"], "text": "fp32", "gap_high": -0.09}}
    with pytest.raises(rc.ClaimError, match="holds 'fp32', not a finite number"):
        rc.bind(claim(ours={"label": "m", "key": "metrics.text"}), {"05_demo": card})
    with pytest.raises(rc.ClaimError, match="interval low -0.07 is above high -0.09"):
        rc.bind(claim(), {"05_demo": card})


def test_lookup_walks_nested_names_with_dots():
    assert rc.lookup(CARD, "metrics.ablation.LS 0.1.val_bleu") == 4.2
    assert rc.lookup(CARD, "params.seeds") == 3
    with pytest.raises(KeyError):
        rc.lookup(CARD, "metrics.ablation.LS 0.2.val_bleu")


@pytest.mark.parametrize("entry, message", [
    (claim(better="smaller"), "better must be 'lower' or 'higher'"),
    (claim(metric=None), r"missing fields \['metric'\]"),
    (claim(verdict="ahead"), r"unknown fields \['verdict'\]"),  # a verdict is never typed
    (claim(ours={"label": "m"}), "ours needs exactly one of key or ratio"),
    (claim(ours={"label": "m", "ratio": True}), "only the baseline can be"),
    (claim(interval={"low": "metrics.gap_low"}), "interval needs exactly the keys low and high"),
])
def test_claims_file_is_checked(tmp_path, entry, message):
    import yaml

    path = tmp_path / "claims.yml"
    path.write_text(yaml.safe_dump([entry]), encoding="utf-8")
    with pytest.raises(rc.ClaimError, match=message):
        rc.load_claims(path)


# --------------------------------------------------------------------------- verdicts
@pytest.mark.parametrize("low, high, better, verdict", [
    (-0.07, -0.03, "lower", "ahead"),
    (0.03, 0.07, "lower", "behind"),
    (-0.02, 0.03, "lower", "tie"),
    (0.0, 0.03, "lower", "tie"),  # an end at 0 is inside
    (0.03, 0.07, "higher", "ahead"),
    (-0.07, -0.03, "higher", "behind"),
])
def test_verdict_with_an_interval(low, high, better, verdict):
    r = row(low, high, better=better)
    assert r.verdict == verdict
    assert ("contains 0" in r.basis) == (verdict == "tie")


def test_verdict_without_an_interval_only_compares_and_says_so():
    assert row().verdict == "better" and row(ours=0.9).verdict == "worse"
    assert row(better="higher").verdict == "worse"
    assert row(ours=0.84).verdict == "equal"
    assert row().basis == "no interval: single run"
    assert row(seeds=3).basis == "no interval for the gap: means over 3 seeds"


def test_ratio_baseline_is_one_by_definition():
    entry = claim(ours={"label": "cache", "key": "metrics.speedup"}, better="higher",
                  baseline={"label": "no cache", "ratio": True}, interval=None)
    r = rc.bind(entry, {"05_demo": CARD})
    assert (r.baseline.value, r.baseline.key, r.verdict) == (1.0, None, "better")
    assert rc.side_value(r.baseline) == "1 (by definition)"


# --------------------------------------------------------------------------- the figure
def test_figure_rows_are_times_better():
    items = rc.figure_rows([row(-0.07, -0.03), row(better="higher", ours=2.0, base=1.0),
                            row(ours=-1.8, base=-1.7)])
    lower, higher, negative = items
    assert lower["ratio"] == pytest.approx(0.84 / 0.79)  # lower is better: base / ours
    # the interval of the gap, as where ours could lie: base + [low, high]
    assert lower["interval"] == pytest.approx((0.84 / 0.81, 0.84 / 0.77))
    assert lower["verdict"] == "ahead"
    assert higher["ratio"] == 2.0 and higher["verdict"] == "better (no interval)"
    assert negative["ratio"] is None  # a ratio of log-probabilities means nothing


def test_draw_makes_an_svg_with_every_claim(close_figures):
    rows = [row(-0.07, -0.03), row(-0.02, 0.03), row(ours=1e-4, base=0.9),
            row(better="higher", ours=0.5, base=1.0), row(ours=-1.8, base=-1.7)]
    svg = rc.draw(rows).decode("utf-8")
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    assert "tie" in svg and "ahead" in svg and "values not positive" in svg
    assert "9,000" in svg  # a ratio beyond the axis is written out
    assert rc.draw(rows) == rc.draw(rows)  # the same bytes at every build (fixed hash salt)


# --------------------------------------------------------------------------- in Sphinx
def _site(tmp_path: Path, claims: list[dict], cards: list[dict]) -> Path:
    import yaml

    src = tmp_path / "src"
    (src / "book" / "results").mkdir(parents=True)
    (src / "book" / "claims.yml").write_text(yaml.safe_dump(claims), encoding="utf-8")
    for card in cards:
        (src / "book" / "results" / f"{card['notebook']}.json").write_text(json.dumps(card))
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'book' / '_ext')!r})\n"
        "extensions = ['results_table']\n")
    (src / "index.rst").write_text("Results\n=======\n\n.. results-claims::\n\n"
                                   ".. results-seeds::\n\n.. results-table::\n")
    return src


def _build(src: Path, tmp_path: Path) -> str:
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace

    out = tmp_path / "html"
    with docutils_namespace():  # each build registers its nodes and directives afresh
        app = Sphinx(str(src), str(src), str(out), str(tmp_path / "doctrees"), "html",
                     status=None, warning=None, freshenv=True, warningiserror=True)
        app.build()
    return (out / "index.html").read_text(encoding="utf-8")


def test_directives_build_a_page_with_table_and_figure(tmp_path, close_figures):
    page = _build(_site(tmp_path, [claim()], [CARD]), tmp_path)
    assert 'class="results-table results-claims' in page
    assert "data:image/svg+xml;base64," in page
    assert "ahead" in page and "0.79" in page and "0.84" in page
    assert "05_demo (seeds = 3)" in page


def test_a_renamed_metric_stops_the_build(tmp_path):
    bad = claim(ours={"label": "model", "key": "metrics.mae_old_name"})
    with pytest.raises(rc.ClaimError, match=r"chapter 05_demo: our number key "
                       r"'metrics.mae_old_name'"):
        _build(_site(tmp_path, [bad], [CARD]), tmp_path)
